//! The grant half of the store: [`ApprovalStore`] on PostgreSQL. Every
//! change is one fenced statement; when it changes nothing, the row read
//! back and the library's rules say why.

use async_trait::async_trait;
use countersign_approval_core::{
    AbandonOutcome, ActorId, Approval, ApprovalId, ApprovalStore, AttemptId, Binding,
    ConsumeOutcome, GrantState, IssueError, NotificationEvent, ResumeOutcome, RevokeOutcome, RunId,
    StaleReason, StopOutcome, StoreError, StoredGrant, Timestamp, decide_abandon, decide_consume,
    decide_revoke,
};
use tokio_postgres::types::ToSql;

use crate::pool::Shared;
use crate::record::{self, NewRow, ReadGrant, clamp_millis, state};
use crate::statements::InsertReply;
use crate::store::PostgresApprovalStore;

/// How often consume and revoke re-run their statement when the row reads
/// as changeable right after the statement did not change it (a grant
/// issued in between) before the row is taken as corrupt; and how often
/// issue and propose re-run their statement when it saw a fence created
/// concurrently by another insert, which its snapshot could not show yet.
const RECHECKS: usize = 3;
/// How often abandon reads the row again after its guarded write found the
/// row changed since it was read (a consume, revoke or abandon in between),
/// before the call gives up with a retryable [`StoreError`].
const ABANDON_REREADS: usize = 12;

/// What a fenced insert (issue, propose) came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fenced {
    /// The row is stored.
    Inserted,
    /// The id was already present, stopped or not.
    Taken,
    /// The run or the actor is stopped.
    Stopped,
}

/// Runs the fenced insert `sql` with `params` until it sees both fences,
/// and reads its answer as issue and propose do.
pub(crate) async fn insert_fenced(
    shared: &Shared,
    what: &str,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Fenced, StoreError> {
    for _ in 0..RECHECKS {
        let rows = shared.query(what, sql, params).await?;
        let reply = InsertReply::read(what, &rows)?;
        if reply.inserted {
            return Ok(Fenced::Inserted);
        }
        // An id already present is refused as such, stopped or not.
        if reply.taken {
            return Ok(Fenced::Taken);
        }
        if reply.stopped {
            return Ok(Fenced::Stopped);
        }
        if reply.fences_seen {
            // The insert met a row committed after the snapshot.
            return Ok(Fenced::Taken);
        }
        // A fence another insert created after this statement's snapshot:
        // the next run of the statement sees it.
    }
    Err(StoreError::unavailable(format!(
        "{what}: the run's and actor's fences stayed out of sight in {RECHECKS} tries"
    )))
}

impl PostgresApprovalStore {
    /// Reads grant `id` for `what`: `None` when there is no such row.
    async fn read(&self, what: &str, id: &ApprovalId) -> Result<Option<ReadGrant>, StoreError> {
        let rows = self
            .shared
            .query(what, &self.shared.statements.get, &[&id.as_str()])
            .await?;
        match rows.as_slice() {
            [] => Ok(None),
            [row] => record::decode(id, row).map(Some),
            _ => Err(StoreError::corrupt(
                id.as_str(),
                "more than one row has this id",
            )),
        }
    }

    /// Stops a run (`Some`) or an actor: one READ COMMITTED transaction
    /// that takes the exclusive lock, moves the fence and counts the grants
    /// that were usable.
    async fn stop(
        &self,
        actor: &ActorId,
        run: Option<&RunId>,
        now: Timestamp,
    ) -> Result<StopOutcome, StoreError> {
        let now_ms = clamp_millis(now);
        let statements = &self.shared.statements;
        // The `run.stopped` event, recorded by the same statement.
        let event_id = self.shared.outbox.then(|| {
            NotificationEvent::run_stopped(actor, run, now)
                .id
                .as_str()
                .to_owned()
        });
        let rows = match run {
            Some(run) => {
                self.shared
                    .locked_transaction(
                        "stopping a run",
                        &statements.lock_run,
                        &[&actor.as_str(), &run.as_str()],
                        &statements.stop_run,
                        &[&actor.as_str(), &run.as_str(), &now_ms, &event_id],
                    )
                    .await?
            }
            None => {
                self.shared
                    .locked_transaction(
                        "stopping an actor",
                        &statements.lock_actor,
                        &[&actor.as_str()],
                        &statements.stop_actor,
                        &[&actor.as_str(), &now_ms, &event_id],
                    )
                    .await?
            }
        };
        let unexpected = || StoreError::unavailable("stopping: unexpected reply from postgres");
        let row = rows.first().ok_or_else(unexpected)?;
        let was_stopped: bool = row.try_get(0).map_err(|_| unexpected())?;
        let counted: i64 = row.try_get(1).map_err(|_| unexpected())?;
        let moved: i64 = row.try_get(2).map_err(|_| unexpected())?;
        let counted_standing: i64 = row.try_get(3).map_err(|_| unexpected())?;
        if moved != 1 {
            return Err(unexpected());
        }
        let outcome = StopOutcome {
            stopped_grants: u64::try_from(counted).map_err(|_| unexpected())?,
            stopped_standing: u64::try_from(counted_standing).map_err(|_| unexpected())?,
            was_stopped,
        };
        tracing::info!(
            target: "countersign_store_postgres",
            actor_id = %actor,
            run_id = run.map(RunId::as_str),
            stopped_grants = outcome.stopped_grants,
            stopped_standing = outcome.stopped_standing,
            was_stopped = outcome.was_stopped,
            "{}",
            if run.is_some() { "stopped a run" } else { "stopped an actor" }
        );
        Ok(outcome)
    }

    /// Clears the stopped flag of a run (`Some`) or an actor.
    async fn resume(
        &self,
        actor: &ActorId,
        run: Option<&RunId>,
    ) -> Result<ResumeOutcome, StoreError> {
        let statements = &self.shared.statements;
        let rows = match run {
            Some(run) => {
                self.shared
                    .query(
                        "resuming a run",
                        &statements.resume_run,
                        &[&actor.as_str(), &run.as_str()],
                    )
                    .await?
            }
            None => {
                self.shared
                    .query(
                        "resuming an actor",
                        &statements.resume_actor,
                        &[&actor.as_str()],
                    )
                    .await?
            }
        };
        if rows.is_empty() {
            return Ok(ResumeOutcome::NotStopped);
        }
        tracing::info!(
            target: "countersign_store_postgres",
            actor_id = %actor,
            run_id = run.map(RunId::as_str),
            "{}",
            if run.is_some() { "resumed a run" } else { "resumed an actor" }
        );
        Ok(ResumeOutcome::Resumed)
    }
}

#[async_trait]
impl ApprovalStore for PostgresApprovalStore {
    async fn issue(&self, approval: Approval) -> Result<(), IssueError> {
        let args = IssueArgs::new(&approval)?;
        let statement = &self.shared.statements.issue;
        match insert_fenced(&self.shared, "issuing a grant", statement, &args.params()).await? {
            Fenced::Inserted => Ok(()),
            Fenced::Taken => Err(IssueError::AlreadyExists(approval.id)),
            Fenced::Stopped => Err(IssueError::Stopped),
        }
    }

    async fn revoke(&self, id: &ApprovalId) -> Result<RevokeOutcome, StoreError> {
        for _ in 0..RECHECKS {
            let rows = self
                .shared
                .query(
                    "revoking a grant",
                    &self.shared.statements.revoke,
                    &[&id.as_str()],
                )
                .await?;
            if !rows.is_empty() {
                return Ok(RevokeOutcome::Revoked);
            }
            let Some(read) = self.read("revoking a grant", id).await? else {
                return Ok(RevokeOutcome::Unknown);
            };
            let (outcome, change) = decide_revoke(&read.grant.state);
            if change.is_none() {
                return Ok(outcome);
            }
        }
        Err(StoreError::corrupt(
            id.as_str(),
            "the row reads as revocable but the revoke statement does not accept it",
        ))
    }

    async fn get(&self, id: &ApprovalId) -> Result<Option<StoredGrant>, StoreError> {
        Ok(self
            .read("reading a grant", id)
            .await?
            .map(|read| read.grant))
    }

    async fn consume_once(
        &self,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<ConsumeOutcome, StoreError> {
        let what = "consuming a grant";
        let now_ms = clamp_millis(now);
        let digest = binding.action_digest.to_hex();
        for _ in 0..RECHECKS {
            let rows = self
                .shared
                .query(
                    what,
                    &self.shared.statements.consume,
                    &[
                        &id.as_str(),
                        &now_ms,
                        &attempt.as_str(),
                        &binding.actor_id.as_str(),
                        &binding.run_id.as_str(),
                        &binding.url,
                        &digest,
                    ],
                )
                .await?;
            if let Some(row) = rows.first() {
                // The statement changed the grant; its new state says how.
                let new_state: String = row
                    .try_get(0)
                    .map_err(|_| StoreError::unavailable(format!("{what}: unexpected reply")))?;
                return match new_state.as_str() {
                    state::CONSUMED => Ok(ConsumeOutcome::Consumed { replay: false }),
                    state::LOCKED => Ok(ConsumeOutcome::Stale(StaleReason::Locked)),
                    state::ACTIVE => Ok(ConsumeOutcome::Stale(StaleReason::Mismatch)),
                    _ => Err(StoreError::unavailable(format!(
                        "{what}: unexpected state in the reply"
                    ))),
                };
            }
            // Not changed: read why, by the same rules every store applies.
            let Some(read) = self.read(what, id).await? else {
                return Ok(ConsumeOutcome::Unknown);
            };
            let decision = decide_consume(
                &read.grant,
                &read.abandoned,
                read.stopped,
                binding,
                now,
                attempt,
            );
            if decision.state.is_none() && decision.failed_attempts.is_none() {
                return Ok(decision.outcome);
            }
        }
        Err(StoreError::corrupt(
            id.as_str(),
            "the row reads as changeable but the consume statement does not accept it",
        ))
    }

    async fn abandon(
        &self,
        id: &ApprovalId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        let what = "abandoning an attempt";
        for _ in 0..ABANDON_REREADS {
            let Some(read) = self.read(what, id).await? else {
                return Ok(AbandonOutcome::Unknown);
            };
            let decision = decide_abandon(&read.grant, &read.abandoned, read.stopped, now, attempt);
            if decision.state.is_none() && !decision.remember {
                return Ok(decision.outcome);
            }
            let (old_state, old_at, old_by) = state_columns(&read.stored_state)?;
            let new = decision.state.as_ref().unwrap_or(&read.stored_state);
            let (new_state, new_at, new_by) = state_columns(new)?;
            let old_list: Vec<&str> = read.abandoned.iter().map(AttemptId::as_str).collect();
            let mut new_list = old_list.clone();
            if decision.remember {
                new_list.push(attempt.as_str());
            }
            let rows = self
                .shared
                .query(
                    what,
                    &self.shared.statements.abandon,
                    &[
                        &id.as_str(),
                        &new_state,
                        &new_at,
                        &new_by,
                        &new_list,
                        &old_state,
                        &old_at,
                        &old_by,
                        &old_list,
                    ],
                )
                .await?;
            if !rows.is_empty() {
                return Ok(decision.outcome);
            }
            // The row changed since it was read: rule again on the new row.
        }
        Err(StoreError::unavailable(format!(
            "{what}: grant `{id}` changed under every one of {ABANDON_REREADS} tries; \
             abandon is idempotent, retry it"
        )))
    }

    async fn stop_run(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<StopOutcome, StoreError> {
        self.stop(actor, Some(run), now).await
    }

    async fn stop_actor(&self, actor: &ActorId, now: Timestamp) -> Result<StopOutcome, StoreError> {
        self.stop(actor, None, now).await
    }

    async fn resume_run(&self, actor: &ActorId, run: &RunId) -> Result<ResumeOutcome, StoreError> {
        self.resume(actor, Some(run)).await
    }

    async fn resume_actor(&self, actor: &ActorId) -> Result<ResumeOutcome, StoreError> {
        self.resume(actor, None).await
    }
}

/// A grant's parameters for the issue statement, in its order.
pub(crate) struct IssueArgs<'a> {
    /// The grant, whose id an approval that finds it taken names.
    pub(crate) approval: &'a Approval,
    id: &'a str,
    actor: &'a str,
    run: &'a str,
    row: NewRow,
}

impl<'a> IssueArgs<'a> {
    /// The parameters of `approval`, or [`StoreError::Rejected`] for a
    /// timestamp a `bigint` does not hold.
    pub(crate) fn new(approval: &'a Approval) -> Result<IssueArgs<'a>, StoreError> {
        let row = record::encode_new(approval).ok_or_else(|| StoreError::Rejected {
            message: "a timestamp is past what postgres bigint holds".to_owned(),
        })?;
        Ok(IssueArgs {
            approval,
            id: approval.id.as_str(),
            actor: approval.actor_id.as_str(),
            run: approval.run_id.as_str(),
            row,
        })
    }

    /// The parameters, in the issue statement's order.
    pub(crate) fn params(&self) -> [&(dyn ToSql + Sync); 16] {
        [
            &self.id,
            &self.actor,
            &self.run,
            &self.approval.url,
            &self.row.action,
            &self.row.action_digest,
            &self.row.issued_at,
            &self.row.expires_at,
            &self.approval.approver_note,
            &self.approval.page_revision,
            &self.approval.operation_id,
            &self.approval.session_id,
            &self.row.approver_id,
            &self.row.approved_at,
            &self.row.attempt_limit,
            &self.row.element,
        ]
    }
}

/// A stored grant state as its columns: state name, consumed_at,
/// consumed_by. `Stopped` is never stored (it is derived from the fences).
fn state_columns(
    state: &GrantState,
) -> Result<(&'static str, Option<i64>, Option<&str>), StoreError> {
    Ok(match state {
        GrantState::Active => (state::ACTIVE, None, None),
        GrantState::Revoked => (state::REVOKED, None, None),
        GrantState::Locked => (state::LOCKED, None, None),
        GrantState::Consumed { at, by } => (
            state::CONSUMED,
            Some(record::millis(*at).ok_or_else(|| {
                StoreError::unavailable("a consume time is past what postgres bigint holds")
            })?),
            Some(by.as_str()),
        ),
        GrantState::Stopped => {
            return Err(StoreError::unavailable(
                "a stopped state is derived from the fences and never stored",
            ));
        }
    })
}
