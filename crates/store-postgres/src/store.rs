//! The store: connecting, schema setup, the start-up probe, the grant
//! operations and the stops.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use countersign_approval_core::{
    AbandonOutcome, ActorId, Approval, ApprovalId, ApprovalStore, ApproveError, ApproverId,
    AttemptId, Binding, ConsumeOutcome, Decision, DecisionOutcome, GrantState, IssueError,
    MAX_ABANDONED_ATTEMPTS, MAX_LISTED_PROPOSALS, Proposal, ProposalId, ProposalStore,
    ProposeError, ResumeOutcome, RevokeOutcome, RunId, StaleReason, StopOutcome, StoreError,
    StoredGrant, StoredProposal, Timestamp, decide_abandon, decide_consume, decide_proposal,
    decide_revoke,
};
use deadpool::managed::QueueMode;
use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime, Transaction,
};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::types::ToSql;
use tokio_postgres::{IsolationLevel, NoTls, Row, Socket};

use crate::error::{ends_connection, is_conflict, pg_error, pool_error};
use crate::operations::{OPERATION_COLUMNS, PostgresOperationLog};
use crate::options::{ConnectError, InvalidOptions, PostgresStoreOptions, SchemaSetup};
use crate::proposal_record;
use crate::record::{self, FORMAT, NewRow, ReadGrant, state};
use crate::schema::{Names, SCHEMA_VERSION};

/// How often one statement is repeated after a serialization failure or a
/// deadlock before the call gives up with a retryable [`StoreError`].
pub(crate) const CONFLICT_RETRIES: u32 = 12;
/// How often consume and revoke re-run their statement when the row reads
/// as changeable right after the statement did not change it (a grant
/// issued in between) before the row is taken as corrupt; and how often
/// issue re-runs its statement when it saw a fence created concurrently
/// by another issue, which its snapshot could not show yet.
const RECHECKS: usize = 3;
/// How often abandon reads the row again after its guarded write found the
/// row changed since it was read (a consume, revoke or abandon in between),
/// before the call gives up with a retryable [`StoreError`].
const ABANDON_REREADS: usize = 12;
/// Rows deleted per purge statement.
pub(crate) const PURGE_BATCH: i64 = 10_000;
/// How many statement limits a decision's transaction gets on the client
/// side: it runs three statements (lock and read, issue, decide), each
/// bounded by the server's `statement_timeout`.
const DECISION_STATEMENTS: u32 = 3;
/// The oldest server the schema runs on (`sha256()` came in 11).
const MIN_SERVER_VERSION_NUM: i32 = 110_000;

/// What every attempt id looks like (`AttemptId::parse`), as a POSIX regex.
const ATTEMPT_ID_PATTERN: &str = "^[A-Za-z0-9_-]{1,128}$";

/// The advisory-lock key of `run` of `actor` (SQL text expressions), in
/// this store's lock namespace `ns`.
fn run_lock_key(ns: &str, actor: &str, run: &str) -> String {
    format!(
        "hashtextextended('{ns} run ' || octet_length({actor}) || ':' || {actor} || ':' || {run}, 0)"
    )
}

/// The advisory-lock key of `actor` (an SQL text expression).
fn actor_lock_key(ns: &str, actor: &str) -> String {
    format!("hashtextextended('{ns} actor ' || {actor}, 0)")
}

/// A statement that inserts one row (`insert`, reading the values `v`
/// from `values` and the fences `r` and `a`) for a run of an actor, only
/// if neither is stopped: it takes the shared advisory locks of the run and
/// the actor, reads their fences with `FOR SHARE` (creating them at
/// generation 0 when missing), and inserts unless `table` has the id `$1`.
/// Its one row answers: inserted, run fences seen, actor fences seen,
/// stopped, and whether the id was already taken in its snapshot. Issue and
/// propose are this statement.
fn fenced_insert(
    ns: &str,
    runs: &str,
    actors: &str,
    table: &str,
    values: &str,
    insert: &str,
) -> String {
    format!(
        "WITH v AS ({values}), \
         l AS (SELECT pg_advisory_xact_lock_shared({run_key}) AS run_lock, \
         pg_advisory_xact_lock_shared({actor_key}) AS actor_lock FROM v), \
         rf AS (SELECT f.gen, f.stopped FROM {runs} f JOIN v ON f.actor_id = v.actor_id \
         AND f.run_id = v.run_id WHERE (SELECT count(*) FROM l) = 1 FOR SHARE OF f), \
         af AS (SELECT f.gen, f.stopped FROM {actors} f JOIN v ON f.actor_id = v.actor_id \
         WHERE (SELECT count(*) FROM l) = 1 FOR SHARE OF f), \
         rn AS (INSERT INTO {runs} (actor_id, run_id, gen, stopped) \
         SELECT v.actor_id, v.run_id, 0, false FROM v \
         WHERE (SELECT count(*) FROM l) = 1 AND NOT EXISTS (SELECT 1 FROM rf) \
         ON CONFLICT DO NOTHING RETURNING gen, stopped), \
         an AS (INSERT INTO {actors} (actor_id, gen, stopped) \
         SELECT v.actor_id, 0, false FROM v \
         WHERE (SELECT count(*) FROM l) = 1 AND NOT EXISTS (SELECT 1 FROM af) \
         ON CONFLICT DO NOTHING RETURNING gen, stopped), \
         r AS (SELECT gen, stopped FROM rf UNION ALL SELECT gen, stopped FROM rn), \
         a AS (SELECT gen, stopped FROM af UNION ALL SELECT gen, stopped FROM an), \
         ins AS ({insert} ON CONFLICT (id) DO NOTHING RETURNING 1) \
         SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM r), \
         (SELECT count(*) FROM a), \
         coalesce((SELECT bool_or(stopped) FROM r), false) \
         OR coalesce((SELECT bool_or(stopped) FROM a), false), \
         EXISTS (SELECT 1 FROM {table} WHERE id = $1)",
        run_key = run_lock_key(ns, "v.actor_id", "v.run_id"),
        actor_key = actor_lock_key(ns, "v.actor_id"),
    )
}

/// The one row a [`fenced_insert`] statement answers.
struct InsertReply {
    inserted: bool,
    /// Both fences were seen (read or created) by the statement.
    fences_seen: bool,
    stopped: bool,
    /// The id was taken in the statement's snapshot.
    taken: bool,
}

impl InsertReply {
    fn read(what: &str, rows: &[Row]) -> Result<InsertReply, StoreError> {
        let unexpected = || StoreError::unavailable(format!("{what}: unexpected reply"));
        let reply = rows.first().ok_or_else(unexpected)?;
        let count = |i: usize| reply.try_get::<_, i64>(i).map_err(|_| unexpected());
        let (inserted, run_fences, actor_fences) = (count(0)?, count(1)?, count(2)?);
        Ok(InsertReply {
            inserted: inserted == 1,
            fences_seen: run_fences == 1 && actor_fences == 1,
            stopped: reply.try_get(3).map_err(|_| unexpected())?,
            taken: reply.try_get(4).map_err(|_| unexpected())?,
        })
    }
}

/// The statements, rendered once for the configured names.
pub(crate) struct Statements {
    issue: String,
    propose: String,
    get_proposal: String,
    pending_proposals: String,
    lock_proposal: String,
    decide_proposal: String,
    purge_proposals: String,
    consume: String,
    revoke: String,
    abandon: String,
    get: String,
    purge: String,
    lock_run: String,
    stop_run: String,
    lock_actor: String,
    stop_actor: String,
    resume_run: String,
    resume_actor: String,
    pub(crate) record_operation: String,
    pub(crate) get_operation: String,
    pub(crate) records_for_run: String,
    pub(crate) purge_operations: String,
    pub(crate) purge_operations_beyond_bound: String,
}

impl Statements {
    fn new(names: &Names) -> Statements {
        let g = &names.grants;
        let o = &names.operations;
        let runs = &names.run_fences;
        let actors = &names.actor_fences;
        let p = &names.proposals;
        let ns = names.lock_namespace();
        let seal = record::seal_sql();
        let columns = record::select_columns();
        let u32_max = record::U32_MAX_SQL;
        // The lowest `seq` among the newest `$2` operation records (`$2`
        // null: no bound, every record counts).
        let newest = format!(
            "(CASE WHEN $2::bigint IS NULL THEN 0 ELSE (SELECT coalesce(min(seq), 0) FROM \
             (SELECT seq FROM {o} ORDER BY seq DESC LIMIT $2) AS newest) END)"
        );
        // A row is changeable only if it is format 2, its seal matches, its
        // count of failed attempts is in range (exactly the attempt limit
        // when locked, below it otherwise) and its abandoned list holds at
        // most the bound of distinct attempt ids: a row altered by hand is
        // never changed, whatever else it holds.
        let sound = format!(
            "format = {FORMAT} AND seal = {seal} \
             AND failed_attempts BETWEEN 0 AND {u32_max} \
             AND CASE WHEN state = '{locked}' THEN failed_attempts = attempt_limit \
             ELSE failed_attempts < attempt_limit END \
             AND cardinality(abandoned_attempts) <= {MAX_ABANDONED_ATTEMPTS} \
             AND NOT EXISTS (SELECT 1 FROM unnest(abandoned_attempts) AS a(attempt) \
             WHERE a.attempt IS NULL OR a.attempt !~ '{ATTEMPT_ID_PATTERN}') \
             AND (SELECT count(DISTINCT a.attempt) FROM unnest(abandoned_attempts) AS a(attempt)) \
             = cardinality(abandoned_attempts)",
            locked = state::LOCKED
        );
        // Consume and revoke change only a sound row that is active without
        // consumed columns.
        let intact = format!(
            "{sound} AND state = '{active}' AND consumed_at IS NULL AND consumed_by IS NULL",
            active = state::ACTIVE
        );
        // Every statement that changes grant `$1` first takes the shared
        // advisory locks of its run and its actor (a stop or a resume takes
        // the exclusive one: it waits for the changes in flight, and the
        // changes that come after it queue behind it), then reads the
        // fences' generations with `FOR SHARE`, which sees the fence as a
        // stop committed it (READ COMMITTED re-reads a locked row that
        // changed; REPEATABLE READ and SERIALIZABLE fail with a
        // serialization error, and the statement is repeated). It changes
        // the grant only if the generations it recorded are still the
        // fences': a stopped grant is never changed.
        let fenced = format!(
            "WITH g AS (SELECT actor_id, run_id FROM {g} WHERE id = $1), \
             l AS (SELECT pg_advisory_xact_lock_shared({run_key}) AS run_lock, \
             pg_advisory_xact_lock_shared({actor_key}) AS actor_lock FROM g), \
             rf AS (SELECT f.gen FROM {runs} f JOIN g ON f.actor_id = g.actor_id \
             AND f.run_id = g.run_id WHERE (SELECT count(*) FROM l) = 1 FOR SHARE OF f), \
             af AS (SELECT f.gen FROM {actors} f JOIN g ON f.actor_id = g.actor_id \
             WHERE (SELECT count(*) FROM l) = 1 FOR SHARE OF f) ",
            run_key = run_lock_key(&ns, "g.actor_id", "g.run_id"),
            actor_key = actor_lock_key(&ns, "g.actor_id"),
        );
        let unstopped = "run_gen = (SELECT gen FROM rf) AND actor_gen = (SELECT gen FROM af)";
        let bound = "actor_id = $4 AND run_id = $5 AND url = $6 AND action_digest = $7";
        // The seal of the grant being issued: over its values (`v`) and the
        // fence generations it records (`r`, `a`).
        let issue_seal = {
            let values: Vec<String> = record::SEALED_SQL
                .iter()
                .map(|column| match *column {
                    "format::text" => format!("'{FORMAT}'::text"),
                    "run_gen::text" => "r.gen::text".to_owned(),
                    "actor_gen::text" => "a.gen::text".to_owned(),
                    other => format!("v.{other}"),
                })
                .collect();
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            record::seal_sql_with_element(&values, Some("v.element"))
        };
        // The seal of the proposal being proposed, likewise.
        let propose_seal = {
            let values = proposal_record::insert_seal_values();
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            record::seal_sql_with_element(&values, Some("v.element"))
        };
        let proposal_columns = proposal_record::columns("p");
        Statements {
            // Issue: the shared locks of the run and the actor, their fences
            // (created at generation 0 when missing) read with `FOR SHARE`,
            // and the insert only if neither is stopped. Answers: inserted,
            // run fences seen, actor fences seen, stopped, and whether the
            // id was already taken in the statement's snapshot.
            issue: fenced_insert(
                &ns,
                runs,
                actors,
                g,
                "SELECT $1::text AS id, $2::text AS actor_id, $3::text AS run_id, \
                 $4::text AS url, $5::text AS action, $6::text AS action_digest, \
                 $7::bigint AS issued_at, $8::bigint AS expires_at, $9::text AS approver_note, \
                 $10::text AS page_revision, $11::text AS operation_id, $12::text AS session_id, \
                 $13::text AS approver_id, $14::bigint AS approved_at, \
                 $15::bigint AS attempt_limit, $16::text AS element",
                &format!(
                    "INSERT INTO {g} (id, format, seal, actor_id, run_id, url, action, \
                     action_digest, issued_at, expires_at, approver_note, page_revision, \
                     operation_id, session_id, approver_id, approved_at, attempt_limit, run_gen, \
                     actor_gen, state, failed_attempts, element) \
                     SELECT v.id, {FORMAT}, {issue_seal}, v.actor_id, v.run_id, v.url, v.action, \
                     v.action_digest, v.issued_at, v.expires_at, v.approver_note, v.page_revision, \
                     v.operation_id, v.session_id, v.approver_id, v.approved_at, v.attempt_limit, \
                     r.gen, a.gen, '{active}', 0, v.element FROM v, r, a \
                     WHERE NOT r.stopped AND NOT a.stopped",
                    active = state::ACTIVE
                ),
            ),
            // Propose: the same shape as issue (the fences' shared locks,
            // the fences read `FOR SHARE` or created, the insert only if
            // neither is stopped), recording the fences' generations so
            // that a later stop ends the proposal for good.
            propose: fenced_insert(
                &ns,
                runs,
                actors,
                p,
                "SELECT $1::text AS id, $2::text AS actor_id, $3::text AS run_id, \
                 $4::text AS url, $5::text AS action, $6::text AS action_digest, \
                 $7::bigint AS proposed_at, $8::bigint AS expires_at, \
                 $9::text AS page_session_id, $10::text AS page_target_id, \
                 $11::text AS page_revision, $12::bytea AS screenshot_png, \
                 $13::boolean AS target_found, $14::text AS element",
                &format!(
                    "INSERT INTO {p} (id, format, seal, actor_id, run_id, url, action, \
                     action_digest, proposed_at, expires_at, page_session_id, page_target_id, \
                     page_revision, screenshot_png, target_found, run_gen, actor_gen, state, \
                     element) \
                     SELECT v.id, {proposal_format}, {propose_seal}, v.actor_id, v.run_id, v.url, \
                     v.action, v.action_digest, v.proposed_at, v.expires_at, v.page_session_id, \
                     v.page_target_id, v.page_revision, v.screenshot_png, v.target_found, \
                     r.gen, a.gen, '{pending}', v.element FROM v, r, a \
                     WHERE NOT r.stopped AND NOT a.stopped",
                    proposal_format = proposal_record::FORMAT,
                    pending = proposal_record::state::PENDING
                ),
            ),
            get_proposal: format!(
                "SELECT {proposal_columns}, rf.gen, af.gen FROM {p} p \
                 LEFT JOIN {runs} rf ON rf.actor_id = p.actor_id AND rf.run_id = p.run_id \
                 LEFT JOIN {actors} af ON af.actor_id = p.actor_id WHERE p.id = $1"
            ),
            // The pending, unexpired proposals of one run not stopped since
            // they were made, walking the partial index of pending
            // proposals in (proposed_at, id) order. A fence behind the
            // generation a proposal recorded, or missing, is not filtered
            // out: the reader refuses that row as corrupt.
            pending_proposals: format!(
                "SELECT {proposal_columns}, rf.gen, af.gen FROM {p} p \
                 LEFT JOIN {runs} rf ON rf.actor_id = p.actor_id AND rf.run_id = p.run_id \
                 LEFT JOIN {actors} af ON af.actor_id = p.actor_id \
                 WHERE p.actor_id = $1 AND p.run_id = $2 AND p.state = '{pending}' \
                 AND p.expires_at > $3 AND (rf.gen IS NULL OR rf.gen <= p.run_gen) \
                 AND (af.gen IS NULL OR af.gen <= p.actor_gen) \
                 ORDER BY p.proposed_at, p.id LIMIT $4",
                pending = proposal_record::state::PENDING
            ),
            // The first statement of a decision's transaction: the shared
            // locks of the proposal's run and actor (so a stop is ordered
            // entirely before or after the decision), then the proposal's
            // row locked `FOR UPDATE` (concurrent decisions on it queue
            // here, and at READ COMMITTED each re-reads the row as the one
            // before it left it), then its fences read `FOR SHARE` (as a
            // stop committed them, also one that committed while this
            // statement waited for the locks).
            lock_proposal: format!(
                "WITH p0 AS (SELECT actor_id, run_id FROM {p} WHERE id = $1), \
                 l AS (SELECT pg_advisory_xact_lock_shared({run_key}) AS run_lock, \
                 pg_advisory_xact_lock_shared({actor_key}) AS actor_lock FROM p0), \
                 p AS (SELECT * FROM {p} WHERE id = $1 AND (SELECT count(*) FROM l) = 1 \
                 FOR UPDATE), \
                 rf AS (SELECT f.gen FROM {runs} f JOIN p ON f.actor_id = p.actor_id \
                 AND f.run_id = p.run_id FOR SHARE OF f), \
                 af AS (SELECT f.gen FROM {actors} f JOIN p ON f.actor_id = p.actor_id \
                 FOR SHARE OF f) \
                 SELECT {proposal_columns}, (SELECT gen FROM rf), (SELECT gen FROM af) FROM p",
                run_key = run_lock_key(&ns, "p0.actor_id", "p0.run_id"),
                actor_key = actor_lock_key(&ns, "p0.actor_id"),
            ),
            // The decision itself, on the row the transaction holds locked
            // and found pending.
            decide_proposal: format!(
                "UPDATE {p} SET state = $2, approval_id = $3, decided_by = $4, decided_at = $5 \
                 WHERE id = $1 AND state = '{pending}' RETURNING 1",
                pending = proposal_record::state::PENDING
            ),
            // A proposal stops mattering once it expired, and an approved
            // one only once its grant is gone too (purged first).
            purge_proposals: format!(
                "WITH gone AS (DELETE FROM {p} WHERE id IN (SELECT p.id FROM {p} p \
                 WHERE p.expires_at <= $1 AND (p.approval_id IS NULL \
                 OR NOT EXISTS (SELECT 1 FROM {g} g WHERE g.id = p.approval_id)) \
                 LIMIT $2) RETURNING 1) SELECT count(*) FROM gone"
            ),
            // Consume: marks the grant consumed when the binding matches, or
            // counts a mismatch (locking the grant at its limit), in one
            // statement; answers the new state.
            consume: format!(
                "{fenced}UPDATE {g} SET \
                 state = CASE WHEN {bound} THEN '{consumed}' \
                 WHEN failed_attempts + 1 >= attempt_limit THEN '{locked}' ELSE state END, \
                 consumed_at = CASE WHEN {bound} THEN $2 ELSE consumed_at END, \
                 consumed_by = CASE WHEN {bound} THEN $3 ELSE consumed_by END, \
                 failed_attempts = CASE WHEN {bound} THEN failed_attempts \
                 ELSE least(failed_attempts + 1, {u32_max}) END \
                 WHERE id = $1 AND expires_at > $2 AND NOT ($3 = ANY(abandoned_attempts)) \
                 AND {unstopped} AND {intact} RETURNING state",
                consumed = state::CONSUMED,
                locked = state::LOCKED
            ),
            revoke: format!(
                "{fenced}UPDATE {g} SET state = '{revoked}' WHERE id = $1 AND {unstopped} \
                 AND {intact} RETURNING 1",
                revoked = state::REVOKED
            ),
            // The write of an abandon that `decide_abandon` ruled on the row
            // as read: applied only if the row is still exactly that row
            // ($6..$9: state, consumed_at, consumed_by, abandoned list as
            // read) and still not stopped, so the decision and the write are
            // one atomic step.
            abandon: format!(
                "{fenced}UPDATE {g} SET state = $2, consumed_at = $3, consumed_by = $4, \
                 abandoned_attempts = $5 WHERE id = $1 AND state = $6 \
                 AND consumed_at IS NOT DISTINCT FROM $7 AND consumed_by IS NOT DISTINCT FROM $8 \
                 AND abandoned_attempts = $9 AND {unstopped} AND {sound} RETURNING 1"
            ),
            get: format!(
                "SELECT {columns} FROM {g} g \
                 LEFT JOIN {runs} rf ON rf.actor_id = g.actor_id AND rf.run_id = g.run_id \
                 LEFT JOIN {actors} af ON af.actor_id = g.actor_id WHERE g.id = $1"
            ),
            purge: format!(
                "WITH gone AS (DELETE FROM {g} WHERE id IN (SELECT id FROM {g} \
                 WHERE expires_at <= $1 AND (consumed_at IS NULL OR consumed_at <= $1) \
                 LIMIT $2) RETURNING 1) SELECT count(*) FROM gone"
            ),
            // A stop is one READ COMMITTED transaction of two statements:
            // the locks, then (with a snapshot taken once every change in
            // flight has committed) the fence moved and the usable grants
            // counted. Stopping a run takes its actor's lock shared, so a
            // stop of the actor counts each grant once with it.
            lock_run: format!(
                "SELECT pg_advisory_xact_lock({run_key}) AS run_lock, \
                 pg_advisory_xact_lock_shared({actor_key}) AS actor_lock",
                run_key = run_lock_key(&ns, "$1::text", "$2::text"),
                actor_key = actor_lock_key(&ns, "$1::text"),
            ),
            stop_run: format!(
                "WITH old AS (SELECT gen, stopped FROM {runs} WHERE actor_id = $1 AND run_id = $2), \
                 a AS (SELECT gen FROM {actors} WHERE actor_id = $1), \
                 ins AS (INSERT INTO {runs} (actor_id, run_id, gen, stopped) \
                 SELECT $1, $2, 1, true WHERE NOT EXISTS (SELECT 1 FROM old) RETURNING 1), \
                 up AS (UPDATE {runs} SET gen = gen + 1, stopped = true \
                 WHERE actor_id = $1 AND run_id = $2 RETURNING 1), \
                 n AS (SELECT count(*) AS n FROM {g} WHERE actor_id = $1 AND run_id = $2 \
                 AND state = '{active}' AND expires_at > $3 \
                 AND run_gen = (SELECT gen FROM old) AND actor_gen = (SELECT gen FROM a)) \
                 SELECT coalesce((SELECT stopped FROM old), false), (SELECT n FROM n), \
                 (SELECT count(*) FROM ins) + (SELECT count(*) FROM up)",
                active = state::ACTIVE
            ),
            lock_actor: format!(
                "SELECT pg_advisory_xact_lock({actor_key}) AS actor_lock",
                actor_key = actor_lock_key(&ns, "$1::text"),
            ),
            stop_actor: format!(
                "WITH old AS (SELECT gen, stopped FROM {actors} WHERE actor_id = $1), \
                 ins AS (INSERT INTO {actors} (actor_id, gen, stopped) \
                 SELECT $1, 1, true WHERE NOT EXISTS (SELECT 1 FROM old) RETURNING 1), \
                 up AS (UPDATE {actors} SET gen = gen + 1, stopped = true \
                 WHERE actor_id = $1 RETURNING 1), \
                 n AS (SELECT count(*) AS n FROM {g} gr JOIN {runs} f \
                 ON f.actor_id = gr.actor_id AND f.run_id = gr.run_id \
                 WHERE gr.actor_id = $1 AND gr.state = '{active}' AND gr.expires_at > $2 \
                 AND gr.actor_gen = (SELECT gen FROM old) AND gr.run_gen = f.gen) \
                 SELECT coalesce((SELECT stopped FROM old), false), (SELECT n FROM n), \
                 (SELECT count(*) FROM ins) + (SELECT count(*) FROM up)",
                active = state::ACTIVE
            ),
            // A resume takes the exclusive lock too (so consumes in flight
            // cannot hold it off), then clears the flag.
            resume_run: format!(
                "WITH l AS (SELECT pg_advisory_xact_lock({run_key}) AS run_lock) \
                 UPDATE {runs} SET stopped = false WHERE actor_id = $1 AND run_id = $2 \
                 AND stopped AND (SELECT count(*) FROM l) = 1 RETURNING 1",
                run_key = run_lock_key(&ns, "$1::text", "$2::text"),
            ),
            resume_actor: format!(
                "WITH l AS (SELECT pg_advisory_xact_lock({actor_key}) AS actor_lock) \
                 UPDATE {actors} SET stopped = false WHERE actor_id = $1 \
                 AND stopped AND (SELECT count(*) FROM l) = 1 RETURNING 1",
                actor_key = actor_lock_key(&ns, "$1::text"),
            ),
            record_operation: format!(
                "INSERT INTO {o} (operation_id, actor_id, run_id, approval_id, approval_id_bytes, \
                 approval_id_prefix, approval_id_json_type, url, action_digest, outcome, reason, \
                 started_at, finished_at, approver_id) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
                 ON CONFLICT (operation_id) DO NOTHING RETURNING 1"
            ),
            get_operation: format!(
                "SELECT {OPERATION_COLUMNS} FROM {o} WHERE operation_id = $1 AND seq >= {newest}"
            ),
            records_for_run: format!(
                "SELECT {OPERATION_COLUMNS} FROM {o} WHERE run_id = $1 AND seq >= {newest} \
                 ORDER BY seq"
            ),
            purge_operations: format!(
                "WITH gone AS (DELETE FROM {o} WHERE seq IN (SELECT seq FROM {o} \
                 WHERE finished_at <= $1 LIMIT $2) RETURNING 1) SELECT count(*) FROM gone"
            ),
            purge_operations_beyond_bound: format!(
                "WITH gone AS (DELETE FROM {o} WHERE seq IN (SELECT seq FROM {o} \
                 WHERE seq < {newest} LIMIT $1) RETURNING 1) SELECT count(*) FROM gone"
            ),
        }
    }
}

/// What the grant store and the operation log share: the pool, the names
/// and the statements.
pub(crate) struct Shared {
    pool: Pool,
    pub(crate) names: Names,
    pub(crate) statements: Statements,
    statement_limit: Duration,
}

impl Shared {
    /// Runs one statement on a pooled connection and returns its rows,
    /// repeating it after a serialization failure or deadlock (it was rolled
    /// back, so repeating is safe).
    pub(crate) async fn query(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let mut backoff = Duration::from_millis(1);
        let mut conflicts = 0;
        loop {
            let client = self.pool.get().await.map_err(pool_error)?;
            let run = async {
                let statement = client.prepare_cached(sql).await?;
                client.query(&statement, params).await
            };
            let answered = tokio::time::timeout(self.statement_limit, run).await;
            match settle(what, self.statement_limit, client, answered, conflicts)? {
                Some(rows) => return Ok(rows),
                None => {
                    conflicts += 1;
                    tokio::time::sleep(jitter(backoff)).await;
                    backoff = (backoff * 2).min(Duration::from_millis(50));
                }
            }
        }
    }
}

impl Shared {
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
        let mut backoff = Duration::from_millis(1);
        let mut conflicts = 0;
        let limit = self.statement_limit * 2;
        loop {
            let client = self.pool.get().await.map_err(pool_error)?;
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
            match settle(what, limit, client, answered, conflicts)? {
                Some(rows) => return Ok(rows),
                None => {
                    conflicts += 1;
                    tokio::time::sleep(jitter(backoff)).await;
                    backoff = (backoff * 2).min(Duration::from_millis(50));
                }
            }
        }
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

/// A timestamp as a `bigint`, saturating at `i64::MAX` (no stored time is
/// later, so comparisons stay right).
fn clamp_millis(at: Timestamp) -> i64 {
    record::millis(at).unwrap_or(i64::MAX)
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

/// Grants and proposals in PostgreSQL: one sealed row per grant and per
/// proposal, every atomic step one statement (a stop and a decision on a
/// proposal one short transaction). See the [crate docs](crate) for the
/// layout and guarantees.
///
/// Cheap to clone: clones share the pool.
#[derive(Clone)]
pub struct PostgresApprovalStore {
    shared: Arc<Shared>,
    startup_warnings: Arc<Vec<String>>,
}

impl fmt::Debug for PostgresApprovalStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresApprovalStore")
            .field("grants", &self.shared.names.grants)
            .field("operations", &self.shared.names.operations)
            .field("statement_limit", &self.shared.statement_limit)
            .finish_non_exhaustive()
    }
}

impl PostgresApprovalStore {
    /// Connects without TLS (loopback or a trusted network), then sets up or
    /// checks the schema and probes the server; see
    /// [`connect_with_tls`](Self::connect_with_tls).
    pub async fn connect(options: PostgresStoreOptions) -> Result<Self, ConnectError> {
        Self::connect_with_tls(options, NoTls).await
    }

    /// Connects through the host's TLS connector, the `tokio-postgres`
    /// connector type of the host's choice (for example
    /// `postgres_native_tls::MakeTlsConnector` or
    /// `tokio_postgres_rustls::MakeRustlsConnect`); `sslmode` in the
    /// connection string says whether TLS is required. This bound is the
    /// only `tokio-postgres` type in this crate's API.
    ///
    /// Before answering it opens one connection and refuses a server that
    /// is a standby or not UTF-8 encoded ([`StoreError::Unsupported`]);
    /// creates or upgrades the schema ([`SchemaSetup::Apply`], under an
    /// advisory lock so concurrent starts apply it once) or checks its
    /// version ([`SchemaSetup::Verify`]); and warns through `tracing` (and
    /// [`startup_warnings`](Self::startup_warnings)) when `fsync`,
    /// `synchronous_commit` or `full_page_writes` can lose commits.
    pub async fn connect_with_tls<T>(
        options: PostgresStoreOptions,
        tls: T,
    ) -> Result<Self, ConnectError>
    where
        T: MakeTlsConnect<Socket> + Clone + Sync + Send + 'static,
        T::Stream: Sync + Send,
        T::TlsConnect: Sync + Send,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        options.validate()?;
        let names = Names::new(&options)?;
        let manager = Manager::from_config(
            options.pg_config()?,
            tls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size)
            // The connection used last is the next one out: a single caller
            // keeps one warm server process instead of cycling through all
            // of them, and idle connections stay idle.
            .queue_mode(QueueMode::Lifo)
            .wait_timeout(Some(options.pool_wait_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| InvalidOptions::new(format!("cannot build the connection pool: {e}")))?;
        let statements = Statements::new(&names);
        let shared = Shared {
            pool,
            names,
            statements,
            statement_limit: options.statement_timeout + Duration::from_secs(1),
        };
        let setup_limit = options.connect_timeout + options.statement_timeout;
        let warnings = tokio::time::timeout(setup_limit, probe_and_setup(&shared, &options))
            .await
            .map_err(|_| StoreError::Timeout {
                message: format!(
                    "start-up probe and schema setup: no answer within {} ms",
                    setup_limit.as_millis()
                ),
            })??;
        for warning in &warnings {
            tracing::warn!(target: "countersign_store_postgres", "{warning}");
        }
        Ok(PostgresApprovalStore {
            shared: Arc::new(shared),
            startup_warnings: Arc::new(warnings),
        })
    }

    /// What the start-up probe found risky (weak durability settings), in
    /// words; empty when nothing was.
    pub fn startup_warnings(&self) -> &[String] {
        &self.startup_warnings
    }

    /// The operation log in the same schema, sharing this store's pool.
    pub fn operation_log(&self) -> PostgresOperationLog {
        PostgresOperationLog::new(self.shared.clone())
    }

    /// The exact SQL of the consume statement (parameters: id, now in ms,
    /// attempt id, actor, run, URL, action digest), for operators to
    /// `EXPLAIN` or to replay with `pgbench -f`.
    pub fn consume_statement(&self) -> &str {
        &self.shared.statements.consume
    }

    /// The grants table, schema-qualified and quoted (`"countersign"."grants"`).
    pub fn grants_table(&self) -> &str {
        &self.shared.names.grants
    }

    /// The operations table, schema-qualified and quoted.
    pub fn operations_table(&self) -> &str {
        &self.shared.names.operations
    }

    /// The run fences table (one row per run of an actor: its stop
    /// generation and flag), schema-qualified and quoted.
    pub fn run_fences_table(&self) -> &str {
        &self.shared.names.run_fences
    }

    /// The actor fences table (one row per actor), schema-qualified and
    /// quoted.
    pub fn actor_fences_table(&self) -> &str {
        &self.shared.names.actor_fences
    }

    /// The proposals table (one row per proposal and its decision),
    /// schema-qualified and quoted.
    pub fn proposals_table(&self) -> &str {
        &self.shared.names.proposals
    }

    /// The exact SQL of the statement that opens a decision's transaction
    /// (parameter: the proposal id): the shared locks of its run and actor,
    /// the proposal's row `FOR UPDATE`, its fences `FOR SHARE`. For
    /// operators to `EXPLAIN`.
    pub fn lock_proposal_statement(&self) -> &str {
        &self.shared.statements.lock_proposal
    }

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
        let limit = self.shared.statement_limit * DECISION_STATEMENTS;
        let statements = &self.shared.statements;
        let mut backoff = Duration::from_millis(1);
        let mut conflicts = 0;
        loop {
            let mut client = self.shared.pool.get().await.map_err(pool_error)?;
            let run = async {
                let tx = client
                    .build_transaction()
                    .isolation_level(IsolationLevel::ReadCommitted)
                    .start()
                    .await?;
                let (answer, write) =
                    decide_in(&tx, statements, id, decision, grant.as_ref(), now).await?;
                if write {
                    tx.commit().await?;
                } else {
                    tx.rollback().await?;
                }
                Ok::<_, tokio_postgres::Error>(answer)
            };
            let answered = tokio::time::timeout(limit, run).await;
            match settle(what, limit, client, answered, conflicts)? {
                Some(answer) => return answer,
                None => {
                    conflicts += 1;
                    tokio::time::sleep(jitter(backoff)).await;
                    backoff = (backoff * 2).min(Duration::from_millis(50));
                }
            }
        }
    }

    /// Deletes every grant and every proposal that stopped mattering more
    /// than `retention` before `now`, in batches of 10 000 rows, each its
    /// own statement: first the grants for which `max(expires_at, consumed
    /// at) + retention` is at or before `now`, then the proposals for which
    /// `expires_at + retention` is, except an approved proposal whose grant
    /// is still kept (so a proposal is kept at least until it expires, and
    /// a decided one as long as its grant). Returns how many rows were
    /// deleted, grants and proposals together. Meant for a scheduled job
    /// (see `docs/postgres.md`); safe to run from several hosts at once.
    ///
    /// A purged id is unknown afterwards, so keep `retention` at least as
    /// long as anyone may still present the grant or decide the proposal;
    /// past its expiry a grant can never be consumed, nor a proposal
    /// decided, anyway.
    pub async fn purge(&self, now: Timestamp, retention: Duration) -> Result<u64, StoreError> {
        let grants = purge_batches(
            &self.shared,
            "purging grants",
            &self.shared.statements.purge,
            now,
            retention,
        )
        .await?;
        let proposals = purge_batches(
            &self.shared,
            "purging proposals",
            &self.shared.statements.purge_proposals,
            now,
            retention,
        )
        .await?;
        Ok(grants + proposals)
    }

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
        let rows = match run {
            Some(run) => {
                self.shared
                    .locked_transaction(
                        "stopping a run",
                        &statements.lock_run,
                        &[&actor.as_str(), &run.as_str()],
                        &statements.stop_run,
                        &[&actor.as_str(), &run.as_str(), &now_ms],
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
                        &[&actor.as_str(), &now_ms],
                    )
                    .await?
            }
        };
        let unexpected = || StoreError::unavailable("stopping: unexpected reply from postgres");
        let row = rows.first().ok_or_else(unexpected)?;
        let was_stopped: bool = row.try_get(0).map_err(|_| unexpected())?;
        let counted: i64 = row.try_get(1).map_err(|_| unexpected())?;
        let moved: i64 = row.try_get(2).map_err(|_| unexpected())?;
        if moved != 1 {
            return Err(unexpected());
        }
        let outcome = StopOutcome {
            stopped_grants: u64::try_from(counted).map_err(|_| unexpected())?,
            was_stopped,
        };
        tracing::info!(
            target: "countersign_store_postgres",
            actor_id = %actor,
            run_id = run.map(RunId::as_str),
            stopped_grants = outcome.stopped_grants,
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

/// Opens a first connection, checks the server, and sets up or checks the schema.
async fn probe_and_setup(
    shared: &Shared,
    options: &PostgresStoreOptions,
) -> Result<Vec<String>, StoreError> {
    let mut client = shared.pool.get().await.map_err(pool_error)?;
    let what = "start-up probe";
    let row = client
        .query_one(
            "SELECT current_setting('server_encoding'), pg_is_in_recovery(), \
             current_setting('server_version_num')::int, current_setting('fsync'), \
             current_setting('synchronous_commit'), current_setting('full_page_writes')",
            &[],
        )
        .await
        .map_err(|e| pg_error(what, &e))?;
    let setting = |i: usize| row.try_get::<_, String>(i).unwrap_or_default();
    let encoding = setting(0);
    if encoding != "UTF8" {
        return Err(StoreError::Unsupported {
            message: format!("the database encoding is `{encoding}`; the store needs UTF8"),
        });
    }
    if row.try_get::<_, bool>(1).unwrap_or(true) {
        return Err(StoreError::Unsupported {
            message: "the server is a standby in recovery; grants must go to the primary"
                .to_owned(),
        });
    }
    let version: i32 = row.try_get(2).unwrap_or(0);
    if version < MIN_SERVER_VERSION_NUM {
        return Err(StoreError::Unsupported {
            message: format!("postgresql {version} is too old; the store needs 11 or later"),
        });
    }
    let mut warnings = Vec::new();
    if setting(3) != "on" {
        warnings.push(
            "fsync is off: a crash of the server host can lose or corrupt committed writes, and \
             a grant consumed before it may become usable again"
                .to_owned(),
        );
    }
    let synchronous_commit = setting(4);
    if synchronous_commit == "off" {
        warnings.push(
            "synchronous_commit is off: a crash of the server may lose the last commits (up to \
             three times wal_writer_delay), and a grant consumed in them becomes usable again"
                .to_owned(),
        );
    }
    if setting(5) != "on" {
        warnings.push(
            "full_page_writes is off: a crash during a page write can corrupt the grants table"
                .to_owned(),
        );
    }

    let names = &shared.names;
    let version_table = names.schema_version.clone();
    match options.schema_setup {
        SchemaSetup::Apply => {
            let tx = client
                .transaction()
                .await
                .map_err(|e| pg_error("schema setup", &e))?;
            tx.query(
                "SELECT pg_advisory_xact_lock($1)",
                &[&names.setup_lock_key()],
            )
            .await
            .map_err(|e| pg_error("schema setup: taking the setup lock", &e))?;
            let current = schema_version(&tx, &version_table).await?.unwrap_or(0);
            if current > SCHEMA_VERSION {
                return Err(newer_schema(Some(current)));
            }
            if current < SCHEMA_VERSION {
                tx.batch_execute(&names.setup_sql(current))
                    .await
                    .map_err(|e| pg_error("schema setup: applying the schema", &e))?;
            }
            tx.commit()
                .await
                .map_err(|e| pg_error("schema setup: committing", &e))?;
        }
        SchemaSetup::Verify => {
            let current = schema_version(&client, &version_table).await?;
            match current {
                Some(v) if v == SCHEMA_VERSION => {}
                Some(v) if v > SCHEMA_VERSION => return Err(newer_schema(Some(v))),
                other => {
                    return Err(StoreError::Unsupported {
                        message: format!(
                            "the schema is at version {} but this library needs {SCHEMA_VERSION}: \
                             apply the sql from `schema_sql` first",
                            other.unwrap_or(0)
                        ),
                    });
                }
            }
        }
    }
    Ok(warnings)
}

fn newer_schema(current: Option<i32>) -> StoreError {
    StoreError::Unsupported {
        message: format!(
            "the schema is at version {} but this library knows only up to {SCHEMA_VERSION}: \
             upgrade the library",
            current.unwrap_or(0)
        ),
    }
}

/// The highest applied version, or `None` when there is no version table.
async fn schema_version<C: deadpool_postgres::GenericClient>(
    client: &C,
    version_table: &str,
) -> Result<Option<i32>, StoreError> {
    let what = "reading the schema version";
    let exists = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&version_table])
        .await
        .map_err(|e| pg_error(what, &e))?
        .try_get::<_, bool>(0)
        .unwrap_or(false);
    if !exists {
        return Ok(None);
    }
    let row = client
        .query_one(
            &format!("SELECT coalesce(max(version), 0) FROM {version_table}"),
            &[],
        )
        .await
        .map_err(|e| pg_error(what, &e))?;
    row.try_get::<_, i32>(0)
        .map(Some)
        .map_err(|e| StoreError::unavailable(format!("{what}: {e}")))
}

#[async_trait]
impl ApprovalStore for PostgresApprovalStore {
    async fn issue(&self, approval: Approval) -> Result<(), IssueError> {
        let args = IssueArgs::new(&approval)?;
        let what = "issuing a grant";
        for _ in 0..RECHECKS {
            let rows = self
                .shared
                .query(what, &self.shared.statements.issue, &args.params())
                .await?;
            let reply = InsertReply::read(what, &rows)?;
            if reply.inserted {
                return Ok(());
            }
            // An id already present is refused as such, stopped or not.
            if reply.taken {
                return Err(IssueError::AlreadyExists(approval.id));
            }
            if reply.stopped {
                return Err(IssueError::Stopped);
            }
            if reply.fences_seen {
                // The insert met a grant committed after the snapshot.
                return Err(IssueError::AlreadyExists(approval.id));
            }
            // A fence another issue created after this statement's snapshot:
            // the next run of the statement sees it.
        }
        Err(IssueError::Store(StoreError::unavailable(format!(
            "{what}: the run's and actor's fences stayed out of sight in {RECHECKS} tries"
        ))))
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
struct IssueArgs<'a> {
    approval: &'a Approval,
    id: &'a str,
    actor: &'a str,
    run: &'a str,
    row: NewRow,
}

impl<'a> IssueArgs<'a> {
    /// The parameters of `approval`, or [`StoreError::Rejected`] for a
    /// timestamp a `bigint` does not hold.
    fn new(approval: &'a Approval) -> Result<IssueArgs<'a>, StoreError> {
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

    fn params(&self) -> [&(dyn ToSql + Sync); 16] {
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

/// The body of a decision's transaction `tx` (see
/// [`PostgresApprovalStore::decide`]): the answer, and whether the
/// transaction wrote the decision and must commit (otherwise it changed
/// nothing and rolls back). Driver errors come back as errors, for the
/// caller to judge; a refusal or a corrupt row is an answer.
async fn decide_in(
    tx: &Transaction<'_>,
    statements: &Statements,
    id: &ProposalId,
    decision: Decision<'_>,
    grant: Option<&IssueArgs<'_>>,
    now: Timestamp,
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
    Ok((Ok(ruled.outcome), true))
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
        let params: [&(dyn ToSql + Sync); 14] = [
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
        ];
        for _ in 0..RECHECKS {
            let rows = self
                .shared
                .query(what, &self.shared.statements.propose, &params)
                .await?;
            let reply = InsertReply::read(what, &rows)?;
            if reply.inserted {
                return Ok(());
            }
            // As for issue: an id already present is refused as such,
            // stopped or not.
            if reply.taken {
                return Err(ProposeError::AlreadyExists(proposal.id));
            }
            if reply.stopped {
                return Err(ProposeError::Stopped);
            }
            if reply.fences_seen {
                return Err(ProposeError::AlreadyExists(proposal.id));
            }
        }
        Err(ProposeError::Store(StoreError::unavailable(format!(
            "{what}: the run's and actor's fences stayed out of sight in {RECHECKS} tries"
        ))))
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
}
