//! The Redis approval store for countersign: grants shared by many worker
//! processes or hosts, consumed exactly once.
//!
//! ```no_run
//! use std::time::Duration;
//! use countersign_approval_core::{
//!     ActorId, Approval, ApprovalStore, AttemptId, ConsumeOutcome, RunId, SystemClock, Clock,
//! };
//! use countersign_approval_core::policy::{Policy, StaticResolver};
//! use countersign_store_redis::{RedisApprovalStore, RedisStoreOptions};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // A single server; use `RedisStoreOptions::cluster([...])` for Redis Cluster.
//! let options = RedisStoreOptions::single("redis://127.0.0.1:6380/")
//!     .key_prefix("myapp:countersign")
//!     .command_timeout(Duration::from_millis(500));
//! // Connecting probes the server: it must run the store's Lua scripts, and
//! // by default it must have `appendonly yes` (a restart must never bring a
//! // consumed grant back; see `allow_non_durable_persistence`).
//! let store = RedisApprovalStore::connect(options).await?;
//! for warning in store.startup_warnings() {
//!     eprintln!("redis: {warning}");
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
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Layout
//!
//! Every key of a grant lives in its actor's cluster slot: the hash tag is
//! `{a<tag>}`, the tag being the first 32 lower-case hex characters of the
//! SHA-256 of the actor id (which may itself hold braces). In that slot:
//!
//! ```text
//! {prefix}:{a<tag>}:grant:<id>      string: the grant, one record (format v=4)
//! {prefix}:{a<tag>}:actor           hash: the actor's stop fence (gen, stopped)
//! {prefix}:{a<tag>}:run:<run id>    hash: the run's stop fence (gen, stopped)
//! {prefix}:{a<tag>}:live:<run id>   zset: the run's grants a stop may find usable
//! {prefix}:{a<tag>}:runs            set:  the actor's runs with a live set
//! {prefix}:id:{<id>}                string: the actor tag of grant <id>, 16 raw bytes (its own slot)
//! ```
//!
//! Proposals and standing grants (counted grants: "up to N uses until T")
//! live in the same slot, beside the fences their scripts read, each with
//! a pointer of its own (`{prefix}:pid:{<id>}`, `{prefix}:sid:{<id>}`):
//!
//! ```text
//! {prefix}:{a<tag>}:proposal:<id>       string: a proposal, one record
//! {prefix}:{a<tag>}:pending:<run id>    zset: the run's undecided proposals, oldest first
//! {prefix}:{a<tag>}:standing:<id>       string: a standing grant, one record
//! {prefix}:{a<tag>}:standings:<run id>  zset: the run's standing grants, by issued_at, then id
//! ```
//!
//! A standing grant records its run's and actor's fence generations as a
//! grant does, so a stop ends it for good; each use, give-back and revoke
//! of one is one script, so among any number of concurrent uses of a
//! standing grant with N uses at most N attempts ever take one.
//!
//! A grant records its run's and its actor's fence generations at issue; a
//! stop moves the fence's generation on, so every grant issued before it is
//! stopped for good, and the consume script compares generations in the
//! same slot: a stop is one script, atomic with every consume of that run
//! or actor, on a single server and on Redis Cluster alike. Issue, get,
//! revoke, consume, abandon, stop and resume are each one Lua script in that
//! one slot, sent with `EVALSHA` and resent with `EVAL` when the server
//! answers `NOSCRIPT` (after a restart, a failover or `SCRIPT FLUSH`). The
//! grant record is one string — a format byte `4`, then length-prefixed
//! fields ([`RECORD_FIELDS`]) — holding every field of the
//! [`Approval`](countersign_approval_core::Approval) (approver, attempt
//! limit and the bound element's canonical JSON included), its state, its
//! count of failed attempts and the recorded generations, so that a
//! typical grant takes under 400 bytes
//! whatever the server's hash encoding limits. The previous version's v=3
//! records (the same fields without the element) are read as grants with
//! no element bound, which is what they were issued with; any other record
//! that is not exactly such a record (an earlier version's v=2 hash
//! included) is
//! [`StoreError::Corrupt`](countersign_approval_core::StoreError), never an
//! outcome. The consume and revoke scripts write only if the record's fixed
//! fields still have the fingerprint of fields the library validated (and
//! check the fields writes change as strictly as the library reads them),
//! so a record the store cannot read back is refused and never written: a
//! store that issued or read the grant knows that fingerprint and consumes
//! in one round trip, any other reads and validates the record first. The
//! pointer `{prefix}:id:{<id>}`, written first (and never overwritten) by
//! `issue`, keeps ids unique over all actors and lets `get`, `revoke` and
//! `abandon`, which know only the id, find the slot. Records expire at
//! `max(expires_at, now) + retention` (default [`DEFAULT_RETENTION`], 15
//! minutes),
//! never earlier than `retention` after the server's own clock, and a later
//! write only ever moves the expiry forward; fences live at least as long
//! as their grants, and a stopped fence never expires.
//!
//! # Connections
//!
//! [`RedisStoreOptions::single`] uses one multiplexed connection that
//! reconnects by itself; [`RedisStoreOptions::cluster`] uses an async
//! cluster connection whose redirects the store follows itself. Both send
//! every grant command to the primary that holds the key; grants are never
//! read from replicas. Neither resends a command whose reply was lost: the
//! caller retries with the same attempt id and gets a replay (only a read,
//! which changes nothing, is sent again when its connection failed under
//! it, and so waits for a failover as every call does). A client whose
//! calls time out with no reply arriving on their connection, or whose
//! connection dies, is replaced by a fresh one.
//!
//! # Operation log
//!
//! [`RedisOperationLog`] keeps the Act tool's operation records for every
//! worker, over the store's connection:
//!
//! ```text
//! {prefix}:oplog:{log}                   stream: one entry per record, oldest first
//! {prefix}:oplog:{log}:run:<run id>      stream: the entry ids of one run's records
//! {prefix}:oplog:{log}:op:<operation id> string: the entry id of one operation's record
//! ```
//!
//! `{log}` is a literal hash tag, so one script writes all three keys
//! atomically (one record per operation id, a resend adds nothing). Each
//! write trims the streams to [`OperationLogRetention`]'s `max_records`
//! (`XADD … MAXLEN`) and to its `max_age` (`XTRIM … MINID`, by the server's
//! clock), and sets the keys to expire after `max_age`. It needs Redis 6.2.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use countersign_approval_core::{OperationLog, RunId};
//! use countersign_store_redis::{
//!     OperationLogRetention, RedisApprovalStore, RedisOperationLog, RedisStoreOptions,
//! };
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let store = RedisApprovalStore::connect(RedisStoreOptions::single("redis://127.0.0.1:6380/")).await?;
//! let retention = OperationLogRetention::new(100_000, Duration::from_secs(7 * 24 * 3600))?;
//! let log = Arc::new(RedisOperationLog::for_store(&store, retention).await?);
//! // Give `log.clone()` to `Context::builder().operation_store(...)`; later:
//! for record in log.records_for_run(&RunId::new("run-1")?).await? {
//!     println!("{} {} {}", record.operation_id, record.outcome, record.reason);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! `docs/redis.md` in the repository covers persistence settings, failover
//! and what each error means for a host.

mod cache;
mod conn;
mod error;
mod grants;
mod keys;
mod oplog;
mod options;
mod outbox;
mod outbox_state;
mod pointer;
mod probe;
mod proposal_record;
mod proposals;
mod record;
mod reply;
mod scripts;
mod standing;
mod standing_record;
mod store;

pub use oplog::{
    DEFAULT_MAX_AGE, DEFAULT_MAX_RECORDS, MAX_RECORDS_LIMIT, OperationLogRetention,
    RedisOperationLog,
};
pub use options::{
    ConnectError, DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_FAILOVER_TIMEOUT,
    DEFAULT_KEY_PREFIX, DEFAULT_RETENTION, Durability, InvalidOptions, MAX_FAILOVER_TIMEOUT,
    MAX_KEY_PREFIX_BYTES, MAX_RETENTION, RedisStoreOptions,
};
pub use outbox::OUTBOX_SWEEP_INTERVAL;
pub use record::{RECORD_FIELDS, RecordField, record_fields, record_from_fields};
pub use scripts::GrantScript;
pub use store::RedisApprovalStore;

/// The code blocks of `docs/redis.md`, compiled as doc tests so the
/// operators' guide keeps matching the API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/redis.md")]
pub struct OperatorsGuide;
