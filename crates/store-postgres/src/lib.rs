//! The PostgreSQL approval store and operation log for countersign: grants
//! shared by every worker of a host that already runs PostgreSQL, consumed
//! exactly once.
//!
//! ```no_run
//! use std::time::Duration;
//! use countersign_approval_core::{
//!     ActorId, Approval, ApprovalStore, AttemptId, Clock, ConsumeOutcome, RunId, SystemClock,
//! };
//! use countersign_approval_core::policy::{Policy, StaticResolver};
//! use countersign_store_postgres::{DEFAULT_RETENTION, PostgresApprovalStore, PostgresStoreOptions};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let options = PostgresStoreOptions::new("host=127.0.0.1 port=5433 user=app dbname=app")
//!     .schema("countersign")
//!     .statement_timeout(Duration::from_millis(500));
//! // Connecting creates or upgrades the schema and probes the server.
//! let store = PostgresApprovalStore::connect(options).await?;
//! for warning in store.startup_warnings() {
//!     eprintln!("postgres: {warning}");
//! }
//!
//! let policy = Policy::builder()
//!     .allow_host("docs.example.com")
//!     .resolver(StaticResolver::answering_all(["93.184.216.34".parse().unwrap()]))
//!     .build()?;
//! let url = policy.authorize_destination("https://docs.example.com/").await?;
//! let action = policy.authorize_action(&serde_json::json!({"method": "click", "selector": "a#docs"}))?;
//! let (actor, run) = (ActorId::new("demo-actor")?, RunId::new("demo-run")?);
//! let now = SystemClock.now();
//!
//! let approval = Approval::for_action(actor, run, &url, &action, Duration::from_secs(60), now)?;
//! let (id, binding) = (approval.id.clone(), approval.binding());
//! store.issue(approval).await?;
//!
//! let attempt = AttemptId::generate()?;
//! let outcome = store.consume_once(&id, &binding, now, &attempt).await?;
//! assert_eq!(outcome, ConsumeOutcome::Consumed { replay: false });
//!
//! // The operation log lives in the same schema and shares the pool.
//! let _log = store.operation_log();
//! // A scheduled job drops what stopped mattering 15 minutes ago.
//! let purged = store.purge(SystemClock.now(), DEFAULT_RETENTION).await?;
//! # let _ = purged;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Layout
//!
//! Everything lives in one schema (default `countersign`), created by the
//! store from the SQL files in this crate ([`SchemaSetup::Apply`]) or by the
//! host from [`schema_sql`] ([`SchemaSetup::Verify`]), with its version in
//! `{prefix}schema_version`. Each grant is one row of `{prefix}grants`,
//! keyed by id, with every field of the
//! [`Approval`](countersign_approval_core::Approval), its state, a format
//! number and a *seal*: sha-256 over every column written at issue (the
//! approver, the attempt limit and the generations of the run's and actor's
//! stop fences included). A row whose seal or fields do not check out is
//! [`StoreError::Corrupt`](countersign_approval_core::StoreError), never an
//! outcome, and is never changed. Each run and each actor has a fence row
//! in `{prefix}run_fences` / `{prefix}actor_fences`: a generation that every
//! stop moves on, and a stopped flag; a grant whose recorded generations are
//! no longer its fences' is stopped. Each proposal is one row of
//! `{prefix}proposals`, sealed the same way (its screenshot by its
//! sha-256), with the generations of its fences when it was proposed. Each
//! standing grant is one row of `{prefix}standing_grants`, sealed the same
//! way, with the generations of its fences when it was issued, its state,
//! its failed attempts, the attempts holding a use (oldest first) and the
//! attempts given back. With
//! [`PostgresStoreOptions::notification_outbox`] on, each notification
//! event waits in `{prefix}notifications`, written in the same statement or
//! transaction as the step it tells of, and workers claim it `FOR UPDATE
//! SKIP LOCKED`.
//!
//! # Atomic steps
//!
//! Every statement that changes a grant first takes the shared advisory
//! locks of the grant's run and actor and reads their fences `FOR SHARE`,
//! and changes the grant only if it is not stopped. Consume is then one
//! `UPDATE … WHERE id = $1 AND state = 'active' AND expires_at > now AND
//! <not stopped> AND <seal holds> RETURNING state` that marks the grant
//! consumed when the binding matches, or counts the mismatch and locks the
//! grant at its attempt limit: a returned row is the one winning consume or
//! a counted mismatch. When no row comes back, the
//! store reads the row and answers with
//! [`decide_consume`](countersign_approval_core::decide_consume), the rules
//! every store shares (replay, stale, unknown); the statement itself refuses
//! an attempt in the grant's abandoned list (`Stale(Abandoned)`). Revoke is
//! the same shape. Abandon reads the row, rules on it with
//! [`decide_abandon`](countersign_approval_core::decide_abandon), and writes
//! with one `UPDATE` that applies only if the row's state columns and
//! abandoned list are still those it read (a compare-and-set; it reads and
//! rules again when the row changed in between). Issue is one statement
//! that refuses a stopped run or actor under the same locks. The operation
//! log answers `records_for_run` from the `(run_id, seq)` index and
//! `record_for_operation` by operation id, optionally bounded to the newest
//! records ([`PostgresOperationLog::with_max_records`]).
//! Propose is the issue statement's shape, inserting a proposal.
//! Approving or denying a proposal is one READ COMMITTED transaction: a
//! statement that takes the shared locks of its run and actor, locks the
//! proposal's row `FOR UPDATE` and reads its fences `FOR SHARE`; the rules of
//! [`decide_proposal`](countersign_approval_core::decide_proposal) on that
//! row; for an approval the issue statement itself; then the decision's
//! `UPDATE` — committed together or rolled back together.
//! Issuing a standing grant is the issue statement's shape. Using one,
//! giving a use back and revoking one are each a transaction of that same
//! shape: a statement that takes the shared locks of its run and actor,
//! locks its row `FOR UPDATE` and reads its fences `FOR SHARE`; the rules
//! of [`decide_use`](countersign_approval_core::decide_use) or
//! [`decide_give_back`](countersign_approval_core::decide_give_back) on
//! that row; then one `UPDATE` of its state columns, committed before the
//! answer. Concurrent uses of one standing grant queue on its row, so no
//! more attempts than its uses ever hold one.
//! Each of the other statements runs alone (autocommit), so it is correct at READ
//! COMMITTED, REPEATABLE READ and SERIALIZABLE; a serialization failure or
//! deadlock rolls the statement back and the store repeats it (up to 12
//! times), then answers a retryable
//! [`StoreError::Unavailable`](countersign_approval_core::StoreError).
//!
//! A stop is the one step of two statements: a `READ COMMITTED` transaction
//! that takes the run's (or actor's) advisory lock exclusively — waiting for
//! the changes in flight, while changes that begin later queue behind it —
//! then, with a snapshot taken after that wait, moves the fence and counts
//! the grants still usable (standing grants are stopped by the same move of
//! the fence, and not counted, as in every store). A consume, or a use of a
//! standing grant, is thus ordered entirely before a stop or after it, and
//! after it answers `Stale(Stopped)`.
//!
//! # Connections and TLS
//!
//! Connections come from a `deadpool-postgres` pool over `tokio-postgres`.
//! [`PostgresApprovalStore::connect`] uses no TLS;
//! [`PostgresApprovalStore::connect_with_tls`] takes the host's own
//! `tokio-postgres` TLS connector. Grants are only ever sent to the primary:
//! a standby is refused at connect.
//!
//! `docs/postgres.md` in the repository covers the schema and its migrations
//! to versions 2 and 3, a decision's transaction, isolation and how a stop is ordered against consumes,
//! durability settings, purge and vacuum, pool sizing and what each error
//! means for a host.

mod error;
mod grants;
mod oplog;
mod options;
mod outbox;
mod pool;
mod proposal_record;
mod proposals;
mod record;
mod schema;
mod setup;
mod standing;
mod standing_record;
mod statements;
mod store;

pub use oplog::PostgresOperationLog;
pub use options::{
    ConnectError, DEFAULT_CONNECT_TIMEOUT, DEFAULT_POOL_SIZE, DEFAULT_POOL_WAIT_TIMEOUT,
    DEFAULT_RETENTION, DEFAULT_SCHEMA, DEFAULT_STATEMENT_TIMEOUT, InvalidOptions,
    MAX_IDENTIFIER_BYTES, MAX_TABLE_PREFIX_BYTES, PostgresStoreOptions, SchemaSetup,
};
pub use schema::{SCHEMA_VERSION, schema_sql, schema_upgrade_sql};
pub use store::PostgresApprovalStore;

/// The code blocks of `docs/postgres.md`, compiled as doc tests so the
/// operators' guide keeps matching the API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/postgres.md")]
pub struct OperatorsGuide;
