//! The notification outbox on PostgreSQL: one row per event in
//! `{prefix}notifications`. Propose and a stop record their event in their
//! own statement, a decision in its transaction; a claim is one short READ
//! COMMITTED transaction that locks the due rows `FOR UPDATE SKIP LOCKED`,
//! so concurrent workers never hand out one event twice nor wait on each
//! other.

use std::time::Duration;

use async_trait::async_trait;
use countersign_approval_core::{
    ClaimedNotification, FINISHED_EVENT_RETENTION, NotificationEvent, NotificationOutbox,
    ProposalId, RunId, StoreError, Timestamp,
};
use deadpool_postgres::Transaction;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::pool::TransactionBody;
use crate::record::clamp_millis;
use crate::statements::Statements;
use crate::store::PostgresApprovalStore;

/// Finished events forgotten per claim, at most: a claim stays short even
/// when a day of deliveries falls out of the retention at once.
const FORGET_BATCH: i64 = 1_000;

/// The columns of one event as the store writes them.
pub(crate) struct EventRow<'a> {
    id: &'a str,
    kind: &'static str,
    actor: &'a str,
    run: Option<&'a str>,
    proposal: Option<&'a str>,
    occurred_at: i64,
    due: i64,
}

impl<'a> EventRow<'a> {
    /// The row of `event`, due at `due_at`.
    pub(crate) fn of(event: &'a NotificationEvent, due_at: Timestamp) -> EventRow<'a> {
        EventRow {
            id: event.id.as_str(),
            kind: event.kind.as_str(),
            actor: event.actor_id.as_str(),
            run: event.run_id.as_ref().map(RunId::as_str),
            proposal: event.proposal_id.as_ref().map(ProposalId::as_str),
            occurred_at: clamp_millis(event.occurred_at),
            due: clamp_millis(due_at),
        }
    }

    /// The parameters of the schedule statement.
    pub(crate) fn params(&self) -> [&(dyn ToSql + Sync); 7] {
        [
            &self.id,
            &self.kind,
            &self.actor,
            &self.run,
            &self.proposal,
            &self.occurred_at,
            &self.due,
        ]
    }
}

impl PostgresApprovalStore {
    /// Refuses every outbox call of a store built without one.
    fn outbox_on(&self) -> Result<(), StoreError> {
        if self.shared.outbox {
            Ok(())
        } else {
            Err(StoreError::Unsupported {
                message: "this store records no notifications: connect it with \
                          `notification_outbox(true)`"
                    .to_owned(),
            })
        }
    }

    /// Runs `statement` (finish or retry: id, attempt, time) on the event
    /// of `claim`; `true` when `claim` was still its latest and it changed.
    async fn change_claimed(
        &self,
        what: &str,
        statement: &str,
        claim: &ClaimedNotification,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.outbox_on()?;
        let (id, attempt, at) = (
            claim.event.id.as_str(),
            i64::from(claim.attempt),
            clamp_millis(at),
        );
        let rows = self
            .shared
            .query(what, statement, &[&id, &attempt, &at])
            .await?;
        changed_one(what, &rows)
    }
}

/// Reads one claimed row: the event, its attempt, and the order it was
/// claimable in (when, then recording order).
fn decode_claim(
    row: &Row,
    claimed_until: Timestamp,
) -> Result<((i64, i64), ClaimedNotification), StoreError> {
    let key: String = row.try_get(0).unwrap_or_default();
    let corrupt = |what: &str| StoreError::corrupt(key.clone(), format!("notification {what}"));
    let text = |i: usize, what: &str| row.try_get::<_, String>(i).map_err(|_| corrupt(what));
    let optional = |i: usize, what: &str| {
        row.try_get::<_, Option<String>>(i)
            .map_err(|_| corrupt(what))
    };
    let number = |i: usize, what: &str| row.try_get::<_, i64>(i).map_err(|_| corrupt(what));
    let (kind, actor) = (
        text(1, "kind is unreadable")?,
        text(2, "actor is unreadable")?,
    );
    let (run, proposal) = (
        optional(3, "run is unreadable")?,
        optional(4, "proposal is unreadable")?,
    );
    let occurred_at = u64::try_from(number(5, "time is unreadable")?)
        .map_err(|_| corrupt("time is before 1970"))?;
    let event = NotificationEvent::from_stored(
        &key,
        &kind,
        &actor,
        run.as_deref(),
        proposal.as_deref(),
        occurred_at,
    )
    .map_err(|reason| corrupt(&reason))?;
    let attempt = u32::try_from(number(6, "attempt is unreadable")?)
        .ok()
        .filter(|attempt| *attempt >= 1)
        .ok_or_else(|| corrupt("attempt is out of range"))?;
    let order = (
        number(7, "claim time is unreadable")?,
        number(8, "order is unreadable")?,
    );
    Ok((
        order,
        ClaimedNotification {
            event,
            attempt,
            claimed_until,
        },
    ))
}

/// A claim of up to `limit` events due at `now`, until `claimed_until`:
/// the body of its transaction.
struct Claiming {
    now: Timestamp,
    claimed_until: Timestamp,
    limit: i64,
}

#[async_trait]
impl TransactionBody for Claiming {
    type Answer = Result<Vec<ClaimedNotification>, StoreError>;

    async fn run(
        &self,
        tx: &Transaction<'_>,
        statements: &Statements,
    ) -> Result<(Self::Answer, bool), tokio_postgres::Error> {
        let horizon = clamp_millis(self.now.saturating_sub(FINISHED_EVENT_RETENTION));
        let forget = tx
            .prepare_cached(&statements.forget_finished_events)
            .await?;
        tx.execute(&forget, &[&horizon, &FORGET_BATCH]).await?;
        let claim = tx.prepare_cached(&statements.claim_events).await?;
        let (now, until) = (clamp_millis(self.now), clamp_millis(self.claimed_until));
        let rows = tx.query(&claim, &[&now, &until, &self.limit]).await?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            match decode_claim(row, self.claimed_until) {
                Ok(claim) => claimed.push(claim),
                // Nothing is claimed when one row is not the store's own.
                Err(error) => return Ok((Err(error), false)),
            }
        }
        claimed.sort_by_key(|(order, _)| *order);
        Ok((Ok(claimed.into_iter().map(|(_, c)| c).collect()), true))
    }
}

/// What `what` answered when it should change one row or none.
fn changed_one(what: &str, rows: &[Row]) -> Result<bool, StoreError> {
    match rows.len() {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(StoreError::unavailable(format!(
            "{what}: more than one event has this id"
        ))),
    }
}

#[async_trait]
impl NotificationOutbox for PostgresApprovalStore {
    async fn schedule(
        &self,
        event: NotificationEvent,
        due_at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.outbox_on()?;
        let what = "scheduling a notification";
        let row = EventRow::of(&event, due_at);
        let rows = self
            .shared
            .query(what, &self.shared.statements.schedule_event, &row.params())
            .await?;
        changed_one(what, &rows)
    }

    async fn claim_due(
        &self,
        now: Timestamp,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ClaimedNotification>, StoreError> {
        self.outbox_on()?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let body = Claiming {
            now,
            claimed_until: now.saturating_add(lease),
            limit: i64::try_from(limit).unwrap_or(i64::MAX),
        };
        self.shared
            .read_committed("claiming notifications", 2, &body)
            .await?
    }

    async fn finish(
        &self,
        claim: &ClaimedNotification,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let statement = &self.shared.statements.finish_event;
        self.change_claimed("finishing a notification", statement, claim, now)
            .await
    }

    async fn retry_at(
        &self,
        claim: &ClaimedNotification,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let statement = &self.shared.statements.retry_event;
        self.change_claimed("retrying a notification", statement, claim, at)
            .await
    }
}
