//! The proposal half of the store: [`ProposalStore`] on PostgreSQL.
//! Propose is one fenced statement, as issue is; a decision is one short
//! transaction that locks the proposal, rules on it and, for an approval,
//! issues its grant, so that both are written or neither. The standing
//! grant methods hand over to `standing.rs`.

use async_trait::async_trait;
use countersign_approval_core::{
    AbandonOutcome, ActorId, Approval, ApproveError, ApproverId, AttemptId, Decision,
    DecisionOutcome, IssueError, MAX_LISTED_PROPOSALS, NotificationEvent, Proposal, ProposalId,
    ProposalStore, ProposeError, RunId, StandingGrant, StandingId, StandingKey,
    StandingRevokeOutcome, StoreError, StoredProposal, StoredStanding, Timestamp, UseOutcome,
    decide_proposal,
};
use deadpool_postgres::Transaction;
use tokio_postgres::types::ToSql;

use crate::grants::{Fenced, IssueArgs, insert_fenced};
use crate::outbox::EventRow;
use crate::pool::TransactionBody;
use crate::proposal_record;
use crate::record::clamp_millis;
use crate::standing::{GiveBack, Revoke, Use};
use crate::statements::{InsertReply, Statements};
use crate::store::PostgresApprovalStore;

/// How many statement limits a decision's transaction gets on the client
/// side: it runs four statements (lock and read, issue, decide, record its
/// event), each
/// bounded by the server's `statement_timeout`.
const DECISION_STATEMENTS: u32 = 4;

impl PostgresApprovalStore {
    /// Decides proposal `id` in one READ COMMITTED transaction (whatever
    /// the session's default level, as a stop does) on one pooled
    /// connection: the locked read, [`decide_proposal`], and, when it
    /// decides, for an approval the issue statement and then the decision
    /// written; committed only when both were, rolled back otherwise. A
    /// deadlock repeats the whole transaction.
    async fn decide(
        &self,
        id: &ProposalId,
        decision: Decision<'_>,
        now: Timestamp,
    ) -> Result<DecisionOutcome, ApproveError> {
        let what = match decision {
            Decision::Approve(_) => "approving a proposal",
            Decision::Deny(_) => "denying a proposal",
        };
        // Refused before anything is sent: a grant this store cannot hold.
        let grant = match decision {
            Decision::Approve(approval) => Some(IssueArgs::new(approval)?),
            Decision::Deny(_) => None,
        };
        let body = Deciding {
            id,
            decision,
            grant,
            now,
            outbox: self.shared.outbox,
        };
        self.shared
            .read_committed(what, DECISION_STATEMENTS, &body)
            .await?
    }
}

/// A decision on proposal `id` at `now`, with the issue parameters of the
/// grant an approval issues: the body of the decision's transaction.
struct Deciding<'a> {
    id: &'a ProposalId,
    decision: Decision<'a>,
    grant: Option<IssueArgs<'a>>,
    now: Timestamp,
    /// Whether the decision records its `proposal.decided` event.
    outbox: bool,
}

#[async_trait]
impl TransactionBody for Deciding<'_> {
    type Answer = Result<DecisionOutcome, ApproveError>;

    async fn run(
        &self,
        tx: &Transaction<'_>,
        statements: &Statements,
    ) -> Result<(Self::Answer, bool), tokio_postgres::Error> {
        decide_in(
            tx,
            statements,
            self.id,
            self.decision,
            self.grant.as_ref(),
            self.now,
            self.outbox,
        )
        .await
    }
}

/// The body of a decision's transaction `tx` (see
/// [`PostgresApprovalStore::decide`]): the answer, and whether the
/// transaction wrote the decision and must commit (otherwise it changed
/// nothing and rolls back). Driver errors come back as errors, for the
/// caller to judge; a refusal or a corrupt row is an answer. When
/// `outbox`, the decision's `proposal.decided` event is recorded in the
/// same transaction.
async fn decide_in(
    tx: &Transaction<'_>,
    statements: &Statements,
    id: &ProposalId,
    decision: Decision<'_>,
    grant: Option<&IssueArgs<'_>>,
    now: Timestamp,
    outbox: bool,
) -> Result<(Result<DecisionOutcome, ApproveError>, bool), tokio_postgres::Error> {
    let refuse = |error: ApproveError| Ok((Err(error), false));
    let lock = tx.prepare_cached(&statements.lock_proposal).await?;
    let rows = tx.query(&lock, &[&id.as_str()]).await?;
    let row = match rows.as_slice() {
        [] => return Ok((Ok(DecisionOutcome::Unknown), false)),
        [row] => row,
        _ => {
            return refuse(
                StoreError::corrupt(id.as_str(), "more than one proposal has this id").into(),
            );
        }
    };
    let read = match proposal_record::decode(Some(id), row) {
        Ok(read) => read,
        Err(error) => return refuse(error.into()),
    };
    // The proposal's fields never change once written (the seal holds), so
    // checking the grant against the row just read is checking it against
    // the proposal.
    if let Decision::Approve(approval) = decision
        && !read.stored.proposal.is_approved_by(approval)
    {
        return refuse(ApproveError::NotForProposal);
    }
    let ruled = decide_proposal(&read.stored, decision, read.stopped, now);
    let Some(next) = ruled.state else {
        return Ok((Ok(ruled.outcome), false));
    };
    if let Some(grant) = grant {
        let what = "approving a proposal: issuing its grant";
        let issue = tx.prepare_cached(&statements.issue).await?;
        let rows = tx.query(&issue, &grant.params()).await?;
        let reply = match InsertReply::read(what, &rows) {
            Ok(reply) => reply,
            Err(error) => return refuse(error.into()),
        };
        // Read as issue reads it; the transaction rolls back unless the
        // grant was inserted.
        if reply.taken {
            return refuse(ApproveError::GrantExists(grant.approval.id.clone()));
        }
        if !reply.inserted && reply.stopped {
            // Not reached while this transaction holds the locks: a stop
            // since the proposal was made moved the fences, and the locked
            // read answered `Stopped` above.
            return Ok((Ok(DecisionOutcome::Stopped), false));
        }
        if !reply.inserted && reply.fences_seen {
            // A grant with this id committed after the statement's snapshot.
            return refuse(ApproveError::GrantExists(grant.approval.id.clone()));
        }
        if !reply.inserted {
            return refuse(
                StoreError::unavailable(format!("{what}: the proposal's fences are gone")).into(),
            );
        }
    }
    let (state_name, approval_id, by, at) = proposal_record::state_columns(&next);
    let Some(at) = at else {
        return refuse(
            StoreError::Rejected {
                message: "a decision time is past what postgres bigint holds".to_owned(),
            }
            .into(),
        );
    };
    let write = tx.prepare_cached(&statements.decide_proposal).await?;
    let written = tx
        .query(&write, &[&id.as_str(), &state_name, &approval_id, &by, &at])
        .await?;
    if written.len() != 1 {
        return refuse(
            StoreError::unavailable(
                "deciding a proposal: the locked pending row did not take the decision",
            )
            .into(),
        );
    }
    if outbox {
        let event = NotificationEvent::decided(&read.stored.proposal, now);
        let record = tx.prepare_cached(&statements.schedule_event).await?;
        let row = EventRow::of(&event, event.occurred_at);
        tx.query(&record, &row.params()).await?;
    }
    Ok((Ok(ruled.outcome), true))
}

#[async_trait]
impl ProposalStore for PostgresApprovalStore {
    async fn propose(&self, proposal: Proposal) -> Result<(), ProposeError> {
        let row = proposal_record::encode_new(&proposal)?;
        let what = "proposing an action";
        let (id, actor, run) = (
            proposal.id.as_str(),
            proposal.actor_id.as_str(),
            proposal.run_id.as_str(),
        );
        // The `proposal.created` event, recorded by the same statement.
        let event_id = self
            .shared
            .outbox
            .then(|| NotificationEvent::created(&proposal).id.as_str().to_owned());
        let params: [&(dyn ToSql + Sync); 15] = [
            &id,
            &actor,
            &run,
            &proposal.url,
            &row.action,
            &row.action_digest,
            &row.proposed_at,
            &row.expires_at,
            &row.page_session_id,
            &row.page_target_id,
            &row.page_revision,
            &row.screenshot_png,
            &row.target_found,
            &row.element,
            &event_id,
        ];
        let statement = &self.shared.statements.propose;
        match insert_fenced(&self.shared, what, statement, &params).await? {
            Fenced::Inserted => Ok(()),
            Fenced::Taken => Err(ProposeError::AlreadyExists(proposal.id)),
            Fenced::Stopped => Err(ProposeError::Stopped),
        }
    }

    async fn get_proposal(&self, id: &ProposalId) -> Result<Option<StoredProposal>, StoreError> {
        let rows = self
            .shared
            .query(
                "reading a proposal",
                &self.shared.statements.get_proposal,
                &[&id.as_str()],
            )
            .await?;
        match rows.as_slice() {
            [] => Ok(None),
            [row] => proposal_record::decode(Some(id), row).map(|read| Some(read.stored)),
            _ => Err(StoreError::corrupt(
                id.as_str(),
                "more than one proposal has this id",
            )),
        }
    }

    async fn pending_proposals(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredProposal>, StoreError> {
        let now_ms = clamp_millis(now);
        let limit = i64::try_from(MAX_LISTED_PROPOSALS).unwrap_or(i64::MAX);
        let rows = self
            .shared
            .query(
                "listing pending proposals",
                &self.shared.statements.pending_proposals,
                &[&actor.as_str(), &run.as_str(), &now_ms, &limit],
            )
            .await?;
        let mut pending = Vec::with_capacity(rows.len());
        for row in &rows {
            let read = proposal_record::decode(None, row)?;
            // The statement already left out the stopped ones; this keeps
            // the list right even if it did not.
            if !read.stopped {
                pending.push(read.stored);
            }
        }
        Ok(pending)
    }

    async fn approve_proposal(
        &self,
        id: &ProposalId,
        approval: Approval,
        now: Timestamp,
    ) -> Result<DecisionOutcome, ApproveError> {
        self.decide(id, Decision::Approve(&approval), now).await
    }

    async fn deny_proposal(
        &self,
        id: &ProposalId,
        by: Option<&ApproverId>,
        now: Timestamp,
    ) -> Result<DecisionOutcome, StoreError> {
        self.decide(id, Decision::Deny(by), now)
            .await
            .map_err(|error| match error {
                ApproveError::Store(error) => error,
                // A denial issues no grant, so no other refusal can come
                // back; should one, it is no decision.
                other => StoreError::unavailable(format!("denying a proposal: {other}")),
            })
    }

    async fn issue_standing(&self, grant: StandingGrant) -> Result<(), IssueError> {
        self.insert_standing(grant).await
    }

    async fn get_standing(&self, id: &StandingId) -> Result<Option<StoredStanding>, StoreError> {
        self.read_standing(id).await
    }

    async fn standing_grants(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredStanding>, StoreError> {
        self.usable_standing(actor, run, now).await
    }

    async fn use_standing(
        &self,
        id: &StandingId,
        key: &StandingKey,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<UseOutcome, StoreError> {
        let rule = Use { key, now, attempt };
        self.change_standing("using a standing grant", id, rule)
            .await
    }

    async fn give_back_use(
        &self,
        id: &StandingId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        let rule = GiveBack { attempt, now };
        self.change_standing("giving back a use", id, rule).await
    }

    async fn revoke_standing(&self, id: &StandingId) -> Result<StandingRevokeOutcome, StoreError> {
        self.change_standing("revoking a standing grant", id, Revoke)
            .await
    }
}
