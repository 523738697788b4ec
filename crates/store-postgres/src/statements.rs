//! The SQL text: every statement the store and the operation log run,
//! rendered once for the configured names, and the reply of the fenced
//! insert that issue, propose and an approval share.

use countersign_approval_core::{MAX_ABANDONED_ATTEMPTS, NotificationKind, StoreError};
use tokio_postgres::Row;

use crate::proposal_record;
use crate::record::{self, FORMAT, state};
use crate::schema::Names;
use crate::standing_record;

/// Every column of an operation row, in the order the operation log's
/// reader takes them.
pub(crate) const OPERATION_COLUMNS: &str = "operation_id, actor_id, run_id, approval_id, \
     approval_id_bytes, approval_id_prefix, approval_id_json_type, url, action_digest, outcome, \
     reason, started_at, finished_at, approver_id";

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
/// propose are this statement. `also` is more common table expressions
/// (each starting with a comma) run in the same statement, which may read
/// `ins`, the rows inserted.
fn fenced_insert(
    ns: &str,
    runs: &str,
    actors: &str,
    table: &str,
    values: &str,
    insert: &str,
    also: &str,
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
         ins AS ({insert} ON CONFLICT (id) DO NOTHING RETURNING 1){also} \
         SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM r), \
         (SELECT count(*) FROM a), \
         coalesce((SELECT bool_or(stopped) FROM r), false) \
         OR coalesce((SELECT bool_or(stopped) FROM a), false), \
         EXISTS (SELECT 1 FROM {table} WHERE id = $1)",
        run_key = run_lock_key(ns, "v.actor_id", "v.run_id"),
        actor_key = actor_lock_key(ns, "v.actor_id"),
    )
}

/// The statement that opens a transaction which rules on row `$1` of
/// `table` (a proposal, a standing grant) and may change it: the shared
/// locks of the row's run and actor (so a stop is ordered entirely before
/// or after the transaction), then the row locked `FOR UPDATE` (concurrent
/// changes of it queue here, and at READ COMMITTED each re-reads the row as
/// the one before it left it), then its fences read `FOR SHARE` (as a stop
/// committed them, also one that committed while this statement waited for
/// the locks). It answers `columns` of the row as `p`, then the run's and
/// the actor's fence generation; no row when there is none with that id.
fn locked_read(ns: &str, runs: &str, actors: &str, table: &str, columns: &str) -> String {
    format!(
        "WITH p0 AS (SELECT actor_id, run_id FROM {table} WHERE id = $1), \
         l AS (SELECT pg_advisory_xact_lock_shared({run_key}) AS run_lock, \
         pg_advisory_xact_lock_shared({actor_key}) AS actor_lock FROM p0), \
         p AS (SELECT * FROM {table} WHERE id = $1 AND (SELECT count(*) FROM l) = 1 \
         FOR UPDATE), \
         rf AS (SELECT f.gen FROM {runs} f JOIN p ON f.actor_id = p.actor_id \
         AND f.run_id = p.run_id FOR SHARE OF f), \
         af AS (SELECT f.gen FROM {actors} f JOIN p ON f.actor_id = p.actor_id \
         FOR SHARE OF f) \
         SELECT {columns}, (SELECT gen FROM rf), (SELECT gen FROM af) FROM p",
        run_key = run_lock_key(ns, "p0.actor_id", "p0.run_id"),
        actor_key = actor_lock_key(ns, "p0.actor_id"),
    )
}

/// A select of `columns` of the rows of `table` as `p` for which `filter`
/// holds, each with its run's and its actor's current fence generation
/// (null when the fence row is missing, which the readers refuse).
/// The condition that the standing grant row `row` (a table alias with its
/// dot, or empty) is usable at the parameter `now`: active, unexpired, a
/// use left. Whether it was stopped since it was issued each statement
/// reads from its own fences.
fn usable_standing_row(row: &str, now: &str) -> String {
    format!(
        "{row}state = '{active}' AND {row}expires_at > {now} \
         AND cardinality({row}used_by) < {row}uses",
        active = state::ACTIVE
    )
}

fn fenced_select(runs: &str, actors: &str, table: &str, columns: &str, filter: &str) -> String {
    format!(
        "SELECT {columns}, rf.gen, af.gen FROM {table} p \
         LEFT JOIN {runs} rf ON rf.actor_id = p.actor_id AND rf.run_id = p.run_id \
         LEFT JOIN {actors} af ON af.actor_id = p.actor_id WHERE {filter}"
    )
}

/// The one row a [`fenced_insert`] statement answers.
pub(crate) struct InsertReply {
    /// The row was inserted.
    pub(crate) inserted: bool,
    /// Both fences were seen (read or created) by the statement.
    pub(crate) fences_seen: bool,
    /// The run or the actor is stopped.
    pub(crate) stopped: bool,
    /// The id was taken in the statement's snapshot.
    pub(crate) taken: bool,
}

impl InsertReply {
    /// Reads the answer `rows` of the statement run for `what`, strictly.
    pub(crate) fn read(what: &str, rows: &[Row]) -> Result<InsertReply, StoreError> {
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
    pub(crate) issue: String,
    pub(crate) propose: String,
    pub(crate) get_proposal: String,
    pub(crate) pending_proposals: String,
    pub(crate) lock_proposal: String,
    pub(crate) decide_proposal: String,
    pub(crate) purge_proposals: String,
    pub(crate) issue_standing: String,
    pub(crate) get_standing: String,
    pub(crate) usable_standing: String,
    pub(crate) lock_standing: String,
    pub(crate) change_standing: String,
    pub(crate) purge_standing: String,
    pub(crate) consume: String,
    pub(crate) revoke: String,
    pub(crate) abandon: String,
    pub(crate) get: String,
    pub(crate) purge: String,
    pub(crate) lock_run: String,
    pub(crate) stop_run: String,
    pub(crate) lock_actor: String,
    pub(crate) stop_actor: String,
    pub(crate) resume_run: String,
    pub(crate) resume_actor: String,
    pub(crate) record_operation: String,
    pub(crate) get_operation: String,
    pub(crate) records_for_run: String,
    pub(crate) purge_operations: String,
    pub(crate) purge_operations_beyond_bound: String,
    pub(crate) schedule_event: String,
    pub(crate) claim_events: String,
    pub(crate) forget_finished_events: String,
    pub(crate) finish_event: String,
    pub(crate) retry_event: String,
}

impl Statements {
    /// Renders every statement for the schema and tables `names` name.
    pub(crate) fn new(names: &Names) -> Statements {
        let g = &names.grants;
        let o = &names.operations;
        let runs = &names.run_fences;
        let actors = &names.actor_fences;
        let p = &names.proposals;
        let st = &names.standing_grants;
        let n = &names.notifications;
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
        let issue_seal = record::insert_seal_sql(&record::SEALED_SQL, FORMAT, Some("v.element"));
        // The seal of the proposal being proposed, likewise.
        let propose_seal = {
            let values = proposal_record::insert_seal_values();
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            record::seal_sql_with_element(&values, Some("v.element"))
        };
        let proposal_columns = proposal_record::columns("p");
        let standing_columns = standing_record::columns("p");
        // A row `p` (a proposal, a standing grant) not stopped since it was
        // written: its fences are still at the generations it recorded. A
        // fence behind them, or missing, is not filtered out: the reader
        // refuses that row as corrupt.
        let unstopped_or_corrupt = "(rf.gen IS NULL OR rf.gen <= p.run_gen) \
             AND (af.gen IS NULL OR af.gen <= p.actor_gen)";
        let standing_seal =
            record::insert_seal_sql(&standing_record::SEALED_SQL, standing_record::FORMAT, None);
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
                "",
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
                // The proposal's `proposal.created` event (`$15`, its id;
                // null when the outbox is off), only when it was inserted.
                &format!(
                    ", ob AS (INSERT INTO {n} (event_id, kind, actor_id, run_id, proposal_id, \
                     occurred_at, claimable_at, attempt) SELECT $15::text, '{created}', \
                     v.actor_id, v.run_id, v.id, v.proposed_at, v.proposed_at, 0 FROM v \
                     WHERE $15::text IS NOT NULL AND EXISTS (SELECT 1 FROM ins) \
                     ON CONFLICT (event_id) DO NOTHING)",
                    created = NotificationKind::Created.as_str()
                ),
            ),
            get_proposal: fenced_select(runs, actors, p, &proposal_columns, "p.id = $1"),
            // The pending, unexpired proposals of one run not stopped since
            // they were made, walking the partial index of pending
            // proposals in (proposed_at, id) order. A fence behind the
            // generation a proposal recorded, or missing, is not filtered
            // out: the reader refuses that row as corrupt.
            pending_proposals: fenced_select(
                runs,
                actors,
                p,
                &proposal_columns,
                &format!(
                    "p.actor_id = $1 AND p.run_id = $2 AND p.state = '{pending}' \
                     AND p.expires_at > $3 AND {unstopped_or_corrupt} \
                     ORDER BY p.proposed_at, p.id LIMIT $4",
                    pending = proposal_record::state::PENDING
                ),
            ),
            // The first statement of a decision's transaction: concurrent
            // decisions on one proposal queue on its row, and a stop is
            // ordered entirely before or after each.
            lock_proposal: locked_read(&ns, runs, actors, p, &proposal_columns),
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
            // Issue a standing grant: the shape of issue (the fences'
            // shared locks, the fences read `FOR SHARE` or created, the
            // insert only if neither is stopped), recording the fences'
            // generations so that a later stop ends it for good.
            issue_standing: fenced_insert(
                &ns,
                runs,
                actors,
                st,
                "SELECT $1::text AS id, $2::text AS actor_id, $3::text AS run_id, \
                 $4::text AS scope, $5::bigint AS uses, $6::bigint AS issued_at, \
                 $7::bigint AS expires_at, $8::text AS approver_id, $9::bigint AS approved_at, \
                 $10::bigint AS attempt_limit",
                &format!(
                    "INSERT INTO {st} (id, format, seal, actor_id, run_id, scope, uses, \
                     issued_at, expires_at, approver_id, approved_at, attempt_limit, run_gen, \
                     actor_gen, state, failed_attempts, used_by, given_back) \
                     SELECT v.id, {standing_format}, {standing_seal}, v.actor_id, v.run_id, \
                     v.scope, v.uses, v.issued_at, v.expires_at, v.approver_id, v.approved_at, \
                     v.attempt_limit, r.gen, a.gen, '{active}', 0, ARRAY[]::text[], \
                     ARRAY[]::text[] FROM v, r, a WHERE NOT r.stopped AND NOT a.stopped",
                    standing_format = standing_record::FORMAT,
                    active = state::ACTIVE
                ),
                "",
            ),
            get_standing: fenced_select(runs, actors, st, &standing_columns, "p.id = $1"),
            // The usable standing grants of one run (active, unexpired,
            // uses left, not stopped since issued), walking the partial
            // index of active ones in (issued_at, id) order, ids compared
            // byte by byte as the library orders them.
            usable_standing: fenced_select(
                runs,
                actors,
                st,
                &standing_columns,
                &format!(
                    "p.actor_id = $1 AND p.run_id = $2 AND {usable} \
                     AND {unstopped_or_corrupt} \
                     ORDER BY p.issued_at, p.id COLLATE \"C\" LIMIT $4",
                    usable = usable_standing_row("p.", "$3"),
                ),
            ),
            // The first statement of a use's, a give-back's or a revoke's
            // transaction: concurrent changes of one standing grant queue
            // on its row, and a stop is ordered entirely before or after
            // each.
            lock_standing: locked_read(&ns, runs, actors, st, &standing_columns),
            // The change `decide_use`, `decide_give_back` or the revoke
            // ruled on the row the transaction holds locked: its state
            // columns, all at once.
            change_standing: format!(
                "UPDATE {st} SET state = $2, failed_attempts = $3, used_by = $4, \
                 given_back = $5 WHERE id = $1 RETURNING 1"
            ),
            // A standing grant is used only before it expires, so that is
            // the last instant it matters.
            purge_standing: format!(
                "WITH gone AS (DELETE FROM {st} WHERE id IN (SELECT id FROM {st} \
                 WHERE expires_at <= $1 LIMIT $2) RETURNING 1) SELECT count(*) FROM gone"
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
                 AND run_gen = (SELECT gen FROM old) AND actor_gen = (SELECT gen FROM a)), \
                 s AS (SELECT count(*) AS n FROM {st} WHERE actor_id = $1 AND run_id = $2 \
                 AND {usable} \
                 AND run_gen = (SELECT gen FROM old) AND actor_gen = (SELECT gen FROM a)), \
                 ob AS (INSERT INTO {n} (event_id, kind, actor_id, run_id, proposal_id, \
                 occurred_at, claimable_at, attempt) SELECT $4::text, '{stopped}', $1, $2, NULL, \
                 $3, $3, 0 WHERE $4::text IS NOT NULL ON CONFLICT (event_id) DO NOTHING) \
                 SELECT coalesce((SELECT stopped FROM old), false), (SELECT n FROM n), \
                 (SELECT count(*) FROM ins) + (SELECT count(*) FROM up), (SELECT n FROM s)",
                active = state::ACTIVE,
                usable = usable_standing_row("", "$3"),
                stopped = NotificationKind::RunStopped.as_str(),
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
                 AND gr.actor_gen = (SELECT gen FROM old) AND gr.run_gen = f.gen), \
                 s AS (SELECT count(*) AS n FROM {st} sg JOIN {runs} f \
                 ON f.actor_id = sg.actor_id AND f.run_id = sg.run_id \
                 WHERE sg.actor_id = $1 AND {usable} \
                 AND sg.actor_gen = (SELECT gen FROM old) AND sg.run_gen = f.gen), \
                 ob AS (INSERT INTO {n} (event_id, kind, actor_id, run_id, proposal_id, \
                 occurred_at, claimable_at, attempt) SELECT $3::text, '{stopped}', $1, NULL, NULL, \
                 $2, $2, 0 WHERE $3::text IS NOT NULL ON CONFLICT (event_id) DO NOTHING) \
                 SELECT coalesce((SELECT stopped FROM old), false), (SELECT n FROM n), \
                 (SELECT count(*) FROM ins) + (SELECT count(*) FROM up), (SELECT n FROM s)",
                active = state::ACTIVE,
                usable = usable_standing_row("sg.", "$2"),
                stopped = NotificationKind::RunStopped.as_str(),
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
            // An event due at `$7`, unless one with its id is waiting or
            // finished and not yet forgotten; also a decision's event, in
            // the decision's transaction.
            schedule_event: format!(
                "INSERT INTO {n} (event_id, kind, actor_id, run_id, proposal_id, occurred_at, \
                 claimable_at, attempt) VALUES ($1, $2, $3, $4, $5, $6, $7, 0) \
                 ON CONFLICT (event_id) DO NOTHING RETURNING 1"
            ),
            // Up to `$3` events claimable at `$1`, in the order they became
            // claimable then were recorded, each claimed until `$2` as its
            // next attempt. Rows another claim holds locked are skipped,
            // so concurrent claims never wait on, nor hand out, the same
            // event. Answers each event with when it was claimable and its
            // order, to sort by (`RETURNING` keeps no order).
            claim_events: format!(
                "WITH c AS (SELECT event_id, claimable_at, seq FROM {n} \
                 WHERE finished_at IS NULL AND claimable_at <= $1 \
                 ORDER BY claimable_at, seq LIMIT $3 FOR UPDATE SKIP LOCKED) \
                 UPDATE {n} o SET attempt = least(o.attempt + 1, {u32_max}), claimable_at = $2 \
                 FROM c WHERE o.event_id = c.event_id \
                 RETURNING o.event_id, o.kind, o.actor_id, o.run_id, o.proposal_id, \
                 o.occurred_at, o.attempt, c.claimable_at, c.seq"
            ),
            forget_finished_events: format!(
                "DELETE FROM {n} WHERE event_id IN (SELECT event_id FROM {n} \
                 WHERE finished_at <= $1 LIMIT $2)"
            ),
            finish_event: format!(
                "UPDATE {n} SET finished_at = $3 WHERE event_id = $1 AND attempt = $2 \
                 AND finished_at IS NULL RETURNING 1"
            ),
            retry_event: format!(
                "UPDATE {n} SET claimable_at = $3 WHERE event_id = $1 AND attempt = $2 \
                 AND finished_at IS NULL RETURNING 1"
            ),
        }
    }
}
