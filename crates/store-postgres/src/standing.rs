//! Standing grants on PostgreSQL: rules 8 to 14 of the proposal-store
//! contract. Issue is one fenced statement, as a grant's issue is; a use, a
//! give-back and a revoke are each one short READ COMMITTED transaction
//! that locks the row and reads its fences as a decision on a proposal
//! does, rules on the row with the library's rules ([`decide_use`],
//! [`decide_give_back`]) and writes the ruling before it commits, so that
//! concurrent changes of one standing grant queue on its row and never lose
//! one another, and a stop is ordered entirely before or after each.

use async_trait::async_trait;
use countersign_approval_core::{
    AbandonOutcome, ActorId, AttemptId, IssueError, MAX_LISTED_PROPOSALS, RunId, StandingGrant,
    StandingId, StandingKey, StandingRevokeOutcome, StandingState, StoreError, StoredStanding,
    Timestamp, UseOutcome, decide_give_back, decide_use,
};
use deadpool_postgres::Transaction;

use crate::grants::{Fenced, insert_fenced};
use crate::pool::TransactionBody;
use crate::record::clamp_millis;
use crate::standing_record::{self, NewStanding, ReadStanding};
use crate::statements::Statements;
use crate::store::PostgresApprovalStore;

/// How many statement limits a change's transaction gets on the client
/// side: it runs two statements (the locked read and the write), each
/// bounded by the server's `statement_timeout`.
const CHANGE_STATEMENTS: u32 = 2;

/// The state columns of a standing grant as a change leaves them.
pub(crate) struct Next {
    state: StandingState,
    failed_attempts: u32,
    used_by: Vec<AttemptId>,
    given_back: Vec<AttemptId>,
}

impl Next {
    /// The state columns of `read`, as stored.
    fn of(read: &ReadStanding) -> Next {
        Next {
            state: read.stored_state,
            failed_attempts: read.stored.failed_attempts,
            used_by: read.stored.used_by.clone(),
            given_back: read.given_back.clone(),
        }
    }
}

/// One kind of change of a standing grant, ruled on its row as locked.
pub(crate) trait Rule: Sync {
    /// What the change answers.
    type Outcome: Copy + Send + Sync;
    /// The answer when no standing grant has the id.
    const UNKNOWN: Self::Outcome;
    /// The answer on `read`, and the state columns after it when it changes
    /// them.
    fn rule(&self, read: &ReadStanding) -> (Self::Outcome, Option<Next>);
}

/// A use by `attempt` presenting `key` at `now` (rule 11).
pub(crate) struct Use<'a> {
    pub(crate) key: &'a StandingKey,
    pub(crate) now: Timestamp,
    pub(crate) attempt: &'a AttemptId,
}

impl Rule for Use<'_> {
    type Outcome = UseOutcome;
    const UNKNOWN: UseOutcome = UseOutcome::Unknown;

    fn rule(&self, read: &ReadStanding) -> (UseOutcome, Option<Next>) {
        let decision = decide_use(
            &read.stored,
            &read.given_back,
            read.stopped,
            self.key,
            self.now,
            self.attempt,
        );
        if !decision.record_use && decision.state.is_none() && decision.failed_attempts.is_none() {
            return (decision.outcome, None);
        }
        let mut next = Next::of(read);
        if decision.record_use {
            next.used_by.push(self.attempt.clone());
        }
        if let Some(state) = decision.state {
            next.state = state;
        }
        if let Some(failed) = decision.failed_attempts {
            next.failed_attempts = failed;
        }
        (decision.outcome, Some(next))
    }
}

/// Giving back the use of `attempt` at `now` (rule 12).
pub(crate) struct GiveBack<'a> {
    pub(crate) attempt: &'a AttemptId,
    pub(crate) now: Timestamp,
}

impl Rule for GiveBack<'_> {
    type Outcome = AbandonOutcome;
    const UNKNOWN: AbandonOutcome = AbandonOutcome::Unknown;

    fn rule(&self, read: &ReadStanding) -> (AbandonOutcome, Option<Next>) {
        let decision = decide_give_back(
            &read.stored,
            &read.given_back,
            read.stopped,
            self.now,
            self.attempt,
        );
        if !decision.release_use && !decision.remember && decision.state.is_none() {
            return (decision.outcome, None);
        }
        let mut next = Next::of(read);
        if decision.release_use {
            next.used_by.retain(|used| used != self.attempt);
        }
        if decision.remember {
            next.given_back.push(self.attempt.clone());
        }
        if let Some(state) = decision.state {
            next.state = state;
        }
        (decision.outcome, Some(next))
    }
}

/// Revoking (rule 13): only an active standing grant, spent, expired or
/// not; a stopped one reads `Stopped`, so it has ended already.
pub(crate) struct Revoke;

impl Rule for Revoke {
    type Outcome = StandingRevokeOutcome;
    const UNKNOWN: StandingRevokeOutcome = StandingRevokeOutcome::Unknown;

    fn rule(&self, read: &ReadStanding) -> (StandingRevokeOutcome, Option<Next>) {
        if read.stored.state != StandingState::Active {
            return (StandingRevokeOutcome::AlreadyEnded, None);
        }
        let mut next = Next::of(read);
        next.state = StandingState::Revoked;
        (StandingRevokeOutcome::Revoked, Some(next))
    }
}

/// A change `rule` of standing grant `id`: the body of its transaction.
struct Changing<'a, R> {
    id: &'a StandingId,
    rule: R,
}

#[async_trait]
impl<R: Rule> TransactionBody for Changing<'_, R> {
    type Answer = Result<R::Outcome, StoreError>;

    async fn run(
        &self,
        tx: &Transaction<'_>,
        statements: &Statements,
    ) -> Result<(Self::Answer, bool), tokio_postgres::Error> {
        let refuse = |error: StoreError| Ok((Err(error), false));
        let lock = tx.prepare_cached(&statements.lock_standing).await?;
        let rows = tx.query(&lock, &[&self.id.as_str()]).await?;
        let row = match rows.as_slice() {
            [] => return Ok((Ok(R::UNKNOWN), false)),
            [row] => row,
            _ => {
                return refuse(StoreError::corrupt(
                    format!("standing grant {}", self.id),
                    "more than one standing grant has this id",
                ));
            }
        };
        let read = match standing_record::decode(Some(self.id), row) {
            Ok(read) => read,
            Err(error) => return refuse(error),
        };
        let (outcome, next) = self.rule.rule(&read);
        let Some(next) = next else {
            return Ok((Ok(outcome), false));
        };
        let Some(state) = standing_record::state_name(next.state) else {
            // The rules change only a grant that is not stopped, and never
            // into stopped: a stop is the fences' to record.
            return refuse(StoreError::unavailable(
                "changing a standing grant: a stopped state is derived from the fences and never stored",
            ));
        };
        let used_by: Vec<&str> = next.used_by.iter().map(AttemptId::as_str).collect();
        let given_back: Vec<&str> = next.given_back.iter().map(AttemptId::as_str).collect();
        let write = tx.prepare_cached(&statements.change_standing).await?;
        let written = tx
            .query(
                &write,
                &[
                    &self.id.as_str(),
                    &state,
                    &i64::from(next.failed_attempts),
                    &used_by,
                    &given_back,
                ],
            )
            .await?;
        if written.len() != 1 {
            return refuse(StoreError::unavailable(
                "changing a standing grant: the locked row did not take the change",
            ));
        }
        Ok((Ok(outcome), true))
    }
}

impl PostgresApprovalStore {
    /// Applies `rule` to standing grant `id` for `what` in one transaction
    /// (see [`Changing`]): the answer once the change, if any, committed.
    /// Uses (rule 11), give-backs (rule 12) and revokes (rule 13) are this.
    pub(crate) async fn change_standing<R: Rule>(
        &self,
        what: &str,
        id: &StandingId,
        rule: R,
    ) -> Result<R::Outcome, StoreError> {
        let body = Changing { id, rule };
        self.shared
            .read_committed(what, CHANGE_STATEMENTS, &body)
            .await?
    }

    /// Rule 8: stores a new standing grant, active, no use taken, with the
    /// generations of its run's and actor's fences, in one fenced statement
    /// that refuses a stopped run or actor and never overwrites.
    pub(crate) async fn insert_standing(&self, grant: StandingGrant) -> Result<(), IssueError> {
        let args = NewStanding::new(&grant)?;
        let statement = &self.shared.statements.issue_standing;
        let what = "issuing a standing grant";
        match insert_fenced(&self.shared, what, statement, &args.params()).await? {
            Fenced::Inserted => Ok(()),
            Fenced::Taken => Err(IssueError::StandingExists(grant.id)),
            Fenced::Stopped => Err(IssueError::Stopped),
        }
    }

    /// Rule 9: reads a standing grant, `Stopped` when its fences moved on
    /// since it was issued.
    pub(crate) async fn read_standing(
        &self,
        id: &StandingId,
    ) -> Result<Option<StoredStanding>, StoreError> {
        let rows = self
            .shared
            .query(
                "reading a standing grant",
                &self.shared.statements.get_standing,
                &[&id.as_str()],
            )
            .await?;
        match rows.as_slice() {
            [] => Ok(None),
            [row] => standing_record::decode(Some(id), row).map(|read| Some(read.stored)),
            _ => Err(StoreError::corrupt(
                format!("standing grant {id}"),
                "more than one standing grant has this id",
            )),
        }
    }

    /// Rule 10: the usable standing grants of one run, oldest first.
    pub(crate) async fn usable_standing(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredStanding>, StoreError> {
        let now_ms = clamp_millis(now);
        let limit = i64::try_from(MAX_LISTED_PROPOSALS).unwrap_or(i64::MAX);
        let rows = self
            .shared
            .query(
                "listing standing grants",
                &self.shared.statements.usable_standing,
                &[&actor.as_str(), &run.as_str(), &now_ms, &limit],
            )
            .await?;
        let mut usable = Vec::with_capacity(rows.len());
        for row in &rows {
            let read = standing_record::decode(None, row)?;
            // The statement already left out the others; this keeps the
            // list right even if it did not.
            if read.stored.is_usable_at(now) {
                usable.push(read.stored);
            }
        }
        Ok(usable)
    }
}
