//! The pool wrapper the grant store and the operation log share: every
//! statement runs on a pooled connection within the client-side limit,
//! repeated after a serialization failure or a deadlock, and a connection
//! that ended or hung never goes back to the pool.

use std::time::Duration;

use async_trait::async_trait;
use countersign_approval_core::{StoreError, Timestamp};
use deadpool_postgres::{Object, Pool, Transaction};
use tokio_postgres::types::ToSql;
use tokio_postgres::{IsolationLevel, Row};

use crate::error::{ends_connection, is_conflict, pg_error, pool_error};
use crate::record::clamp_millis;
use crate::schema::Names;
use crate::statements::Statements;

/// How often one statement is repeated after a serialization failure or a
/// deadlock before the call gives up with a retryable [`StoreError`].
pub(crate) const CONFLICT_RETRIES: u32 = 12;
/// Rows deleted per purge statement.
pub(crate) const PURGE_BATCH: i64 = 10_000;

/// What the grant store and the operation log share: the pool, the names
/// and the statements.
pub(crate) struct Shared {
    pool: Pool,
    pub(crate) names: Names,
    pub(crate) statements: Statements,
    statement_limit: Duration,
    /// Whether steps record notification events in the outbox.
    pub(crate) outbox: bool,
}

impl Shared {
    /// Shares `pool` for the schema `names` names, each statement bounded
    /// on the client side by `statement_limit`, recording notification
    /// events when `outbox`.
    pub(crate) fn new(pool: Pool, names: Names, statement_limit: Duration, outbox: bool) -> Shared {
        let statements = Statements::new(&names);
        Shared {
            pool,
            names,
            statements,
            statement_limit,
            outbox,
        }
    }

    /// How long one statement may take before the client gives up on its
    /// connection.
    pub(crate) fn statement_limit(&self) -> Duration {
        self.statement_limit
    }

    /// A connection from the pool.
    pub(crate) async fn client(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(pool_error)
    }

    /// Runs one statement on a pooled connection and returns its rows,
    /// repeating it after a serialization failure or deadlock (it was rolled
    /// back, so repeating is safe).
    pub(crate) async fn query(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let mut repeats = Repeats::new();
        loop {
            let client = self.client().await?;
            let run = async {
                let statement = client.prepare_cached(sql).await?;
                client.query(&statement, params).await
            };
            let answered = tokio::time::timeout(self.statement_limit, run).await;
            if let Some(rows) = repeats
                .settle(what, self.statement_limit, client, answered)
                .await?
            {
                return Ok(rows);
            }
        }
    }

    /// Runs `lock` then `sql` in one READ COMMITTED transaction (whatever
    /// the session's default level) on a pooled connection and returns the
    /// rows of `sql`, repeating the whole transaction after a deadlock or a
    /// serialization failure. `sql` takes its snapshot after `lock`
    /// returned: it sees every change committed while `lock` waited.
    ///
    /// The four messages (`BEGIN`, `lock`, `sql`, `COMMIT`) are sent at once
    /// (pipelined) and the server runs them in order, so a stop costs one
    /// round trip, plus one to prepare the two statements the first time a
    /// connection runs them. When `lock` or `sql` fails, the transaction is
    /// aborted and the `COMMIT` rolls it back.
    pub(crate) async fn locked_transaction(
        &self,
        what: &str,
        lock: &str,
        lock_params: &[&(dyn ToSql + Sync)],
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let mut repeats = Repeats::new();
        let limit = self.statement_limit * 2;
        loop {
            let client = self.client().await?;
            let run = async {
                let (locking, statement) =
                    tokio::try_join!(client.prepare_cached(lock), client.prepare_cached(sql))?;
                let (begun, locked, rows, committed) = tokio::join!(
                    client.batch_execute("BEGIN ISOLATION LEVEL READ COMMITTED"),
                    client.query(&locking, lock_params),
                    client.query(&statement, params),
                    client.batch_execute("COMMIT"),
                );
                begun?;
                locked?;
                let rows = rows?;
                committed?;
                Ok::<_, tokio_postgres::Error>(rows)
            };
            let answered = tokio::time::timeout(limit, run).await;
            if let Some(rows) = repeats.settle(what, limit, client, answered).await? {
                return Ok(rows);
            }
        }
    }
}

/// The body of one short READ COMMITTED transaction that rules on a row in
/// Rust and writes the ruling (a decision on a proposal, a change of a
/// standing grant); see [`Shared::read_committed`].
#[async_trait]
pub(crate) trait TransactionBody: Sync {
    /// What the transaction answers: an outcome, or a refusal the body
    /// found (a corrupt row), which it rolls back.
    type Answer: Send;

    /// Runs the statements of the body in `tx` and answers, and says
    /// whether it wrote and the transaction must commit (otherwise it
    /// changed nothing and rolls back). Driver errors come back as errors,
    /// for the caller to judge.
    async fn run(
        &self,
        tx: &Transaction<'_>,
        statements: &Statements,
    ) -> Result<(Self::Answer, bool), tokio_postgres::Error>;
}

impl Shared {
    /// Runs `body` in one READ COMMITTED transaction (whatever the
    /// session's default level) on one pooled connection, within
    /// `statement_count` statement limits on the client side, and commits
    /// only when the body wrote. A deadlock or a serialization failure
    /// repeats the whole transaction.
    ///
    /// READ COMMITTED is what makes the body's locked read right: a row
    /// locked `FOR UPDATE` or `FOR SHARE` after a wait is read as the
    /// transaction before it committed it, where the stricter levels would
    /// fail with a serialization error.
    pub(crate) async fn read_committed<B: TransactionBody>(
        &self,
        what: &str,
        statement_count: u32,
        body: &B,
    ) -> Result<B::Answer, StoreError> {
        let limit = self.statement_limit * statement_count;
        let mut repeats = Repeats::new();
        loop {
            let mut client = self.client().await?;
            let run = async {
                let tx = client
                    .build_transaction()
                    .isolation_level(IsolationLevel::ReadCommitted)
                    .start()
                    .await?;
                let (answer, write) = body.run(&tx, &self.statements).await?;
                if write {
                    tx.commit().await?;
                } else {
                    tx.rollback().await?;
                }
                Ok::<_, tokio_postgres::Error>(answer)
            };
            let answered = tokio::time::timeout(limit, run).await;
            if let Some(answer) = repeats.settle(what, limit, client, answered).await? {
                return Ok(answer);
            }
        }
    }
}

/// The repeats of one statement or transaction after conflicts: how many
/// came so far, and the pause before the next.
pub(crate) struct Repeats {
    conflicts: u32,
    backoff: Duration,
}

impl Repeats {
    /// None yet.
    pub(crate) fn new() -> Repeats {
        Repeats {
            conflicts: 0,
            backoff: Duration::from_millis(1),
        }
    }

    /// Judges one answer with [`settle`]; on a conflict that may be
    /// repeated, pauses (a growing, jittered backoff) and answers `None`:
    /// run it again.
    pub(crate) async fn settle<T>(
        &mut self,
        what: &str,
        limit: Duration,
        client: Object,
        answered: Result<Result<T, tokio_postgres::Error>, tokio::time::error::Elapsed>,
    ) -> Result<Option<T>, StoreError> {
        let answer = settle(what, limit, client, answered, self.conflicts)?;
        if answer.is_none() {
            self.conflicts += 1;
            tokio::time::sleep(jitter(self.backoff)).await;
            self.backoff = (self.backoff * 2).min(Duration::from_millis(50));
        }
        Ok(answer)
    }
}

/// Judges one answer of a statement (or a transaction) run on `client`
/// within `limit`: its rows (or the transaction's answer); `None` when it lost a serialization or
/// deadlock conflict and may be repeated (it was rolled back), at most
/// [`CONFLICT_RETRIES`] times after `conflicts` earlier ones; otherwise the
/// error. A connection that ended, or that did not answer in time (it may be
/// stuck), leaves the pool for good.
fn settle<T>(
    what: &str,
    limit: Duration,
    client: Object,
    answered: Result<Result<T, tokio_postgres::Error>, tokio::time::error::Elapsed>,
    conflicts: u32,
) -> Result<Option<T>, StoreError> {
    match answered {
        Ok(Ok(answer)) => Ok(Some(answer)),
        Ok(Err(err)) if is_conflict(&err) && conflicts < CONFLICT_RETRIES => Ok(None),
        Ok(Err(err)) if is_conflict(&err) => Err(StoreError::unavailable(format!(
            "{what}: still conflicting with concurrent transactions after \
             {CONFLICT_RETRIES} repeats: {err}"
        ))),
        Ok(Err(err)) => {
            if ends_connection(&err) || client.is_closed() {
                // Never hand this connection out again, even if the pool has
                // not noticed yet that it is gone.
                drop(Object::take(client));
            }
            Err(pg_error(what, &err))
        }
        Err(_) => {
            drop(Object::take(client));
            Err(StoreError::Timeout {
                message: format!(
                    "{what}: no answer from postgres within {} ms",
                    limit.as_millis()
                ),
            })
        }
    }
}

/// A short random-ish spread of `base`, so repeated conflicts do not line up.
fn jitter(base: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    base + Duration::from_micros(u64::from(nanos % 1000))
}

/// The `count(*)` row of a purge statement.
pub(crate) fn count_of(what: &str, rows: &[Row]) -> Result<u64, StoreError> {
    rows.first()
        .and_then(|row| row.try_get::<_, i64>(0).ok())
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| StoreError::unavailable(format!("{what}: unexpected reply")))
}

/// Deletes in batches with `sql` (cutoff, batch size) until a batch comes
/// back short; returns how many rows went.
pub(crate) async fn purge_batches(
    shared: &Shared,
    what: &str,
    sql: &str,
    now: Timestamp,
    retention: Duration,
) -> Result<u64, StoreError> {
    let retention_ms = u64::try_from(retention.as_millis()).unwrap_or(u64::MAX);
    let Some(cutoff) = now.as_millis().checked_sub(retention_ms) else {
        return Ok(0);
    };
    let cutoff = clamp_millis(Timestamp::from_millis(cutoff));
    let mut total = 0;
    loop {
        let rows = shared.query(what, sql, &[&cutoff, &PURGE_BATCH]).await?;
        let gone = count_of(what, &rows)?;
        total += gone;
        if gone < PURGE_BATCH as u64 {
            return Ok(total);
        }
    }
}
