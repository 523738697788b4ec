//! The store: connecting, the start-up probe, and the grant operations.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use countersign_approval_core::{
    AbandonOutcome, ActorId, Approval, ApprovalId, ApprovalStore, AttemptId, Binding,
    ConsumeDecision, ConsumeOutcome, GrantState, IssueError, MAX_ATTEMPT_LIMIT, ResumeOutcome,
    RevokeOutcome, RunId, StaleReason, StopOutcome, StoreError, StoredGrant, Timestamp,
    decide_abandon, decide_consume, decide_revoke,
};
use redis::{ErrorKind, RedisError, ServerErrorKind, Value};
use sha2::{Digest, Sha256};

use crate::conn::Connection;
use crate::options::{
    ConnectError, Durability, InvalidOptions, RedisStoreOptions, Topology, redact,
};
use crate::record::{self, Head, ISSUE_TOKEN_BYTES, text};
use crate::scripts::{GrantScript, Scripts};

/// The oldest server major version whose scripts replicate by effect, which
/// the scripts need (they read `TIME` before writing).
const MIN_SERVER_MAJOR: u32 = 5;

/// Grants in Redis: one record (a string) per grant in its actor's cluster
/// slot, beside the actor's and its runs' stop fences; every operation one
/// Lua script in that one slot. See the [crate docs](crate) for the layout
/// and guarantees.
///
/// Cheap to share behind an `Arc`; all clones of the inner connection
/// multiplex over the same sockets.
pub struct RedisApprovalStore {
    conn: Connection,
    prefix: String,
    pub(crate) retention_ms: String,
    command_timeout: Duration,
    /// How long a call may wait on top of its round trip for a failover
    /// (the failover timeout on a cluster, zero on a single server).
    failover_wait: Duration,
    durability: Option<Durability>,
    scripts: Scripts,
    startup_warnings: Vec<String>,
    allow_non_durable: bool,
    allow_unverified: bool,
    /// What this store learnt lately of grants, by id: their slots, and
    /// the fingerprints of fixed fields it validated.
    slots: Mutex<HashMap<ApprovalId, Known>>,
}

impl fmt::Debug for RedisApprovalStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisApprovalStore")
            .field(
                "topology",
                &if self.conn.is_cluster() {
                    "cluster"
                } else {
                    "single"
                },
            )
            .field("client_replacements", &self.conn.replacements())
            .field("prefix", &self.prefix)
            .field("retention_ms", &self.retention_ms)
            .field("command_timeout", &self.command_timeout)
            .field("failover_wait", &self.failover_wait)
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

/// Whether `err` is the server refusing a write because `maxmemory` is
/// reached (`-OOM`). Such an answer proves that the call wrote nothing:
/// Redis refuses a plain command before it runs, and a script only at its
/// first write that may grow memory and only while the script has written
/// nothing yet (past its first write a script runs to its end). The
/// consume and abandon scripts write first with `SET` or `ZADD`, which
/// Redis refuses there, so under `maxmemory` they are refused whole.
pub(crate) fn is_out_of_memory(err: &RedisError) -> bool {
    err.code() == Some("OOM")
}

/// A failed call as the trait reports it.
pub(crate) fn redis_error(what: &str, err: &RedisError) -> StoreError {
    if is_out_of_memory(err) {
        // Not retryable: a server at its memory limit refuses the same
        // write again until memory is freed, which outlasts any retry
        // budget; and since nothing was written, there is nothing to give
        // back, so a caller's give-back (refused the same way) ends at once.
        return StoreError::Rejected {
            message: format!(
                "{what}: redis is out of memory (`maxmemory` reached) and refused the write, \
                 so nothing was written; free memory or raise `maxmemory`"
            ),
        };
    }
    if err.is_timeout() {
        return StoreError::Timeout {
            message: format!("{what}: {err}"),
        };
    }
    let unknown_command = err.kind() == ErrorKind::Server(ServerErrorKind::ResponseError)
        && err
            .detail()
            .is_some_and(|d| d.to_ascii_lowercase().contains("unknown command"));
    if unknown_command || err.kind() == ErrorKind::Server(ServerErrorKind::NoPerm) {
        return StoreError::Unsupported {
            message: format!("{what}: server refused the command: {err}"),
        };
    }
    StoreError::unavailable(format!("{what}: {err}"))
}

pub(crate) fn is_noscript(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// Awaits `fut` for at most `limit`.
pub(crate) async fn timed<T>(
    what: &str,
    limit: Duration,
    fut: impl Future<Output = redis::RedisResult<T>>,
) -> Result<redis::RedisResult<T>, StoreError> {
    tokio::time::timeout(limit, fut)
        .await
        .map_err(|_| StoreError::Timeout {
            message: format!("{what}: no reply within {} ms", limit.as_millis()),
        })
}

/// 128 bits from the OS random source.
pub(crate) fn issue_token() -> Result<[u8; ISSUE_TOKEN_BYTES], StoreError> {
    let mut bytes = [0u8; ISSUE_TOKEN_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError::unavailable(format!("os random source failed: {e}")))?;
    Ok(bytes)
}

/// A script's reply: a status word, then up to three items (a record, a
/// fingerprint, what the script saw), read strictly by the caller.
pub(crate) struct Reply {
    pub(crate) status: String,
    pub(crate) items: Vec<Value>,
}

fn parse_reply(script: GrantScript, key: &str, value: Value) -> Result<Reply, StoreError> {
    let unexpected = || unexpected_reply(script, key);
    let Value::Array(items) = value else {
        return Err(unexpected());
    };
    let mut items = items.into_iter();
    let status = items
        .next()
        .as_ref()
        .and_then(text)
        .ok_or_else(unexpected)?
        .to_owned();
    let items: Vec<Value> = items.collect();
    if items.len() > 3 {
        return Err(unexpected());
    }
    Ok(Reply { status, items })
}

pub(crate) fn unexpected_reply(script: GrantScript, key: &str) -> StoreError {
    StoreError::corrupt(
        key,
        format!("unexpected reply from the {} script", script.name()),
    )
}

impl Reply {
    /// Whether the reply is the status alone.
    fn bare(&self) -> bool {
        self.items.is_empty()
    }
}

/// What a script saw besides the record: whether the grant's run or actor
/// was stopped since it was issued, and the grant's new expiry when the
/// call moved it (its pointer follows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    stopped: bool,
    moved: Option<u64>,
}

fn parse_seen(script: GrantScript, key: &str, value: Option<&Value>) -> Result<Seen, StoreError> {
    let unexpected = || unexpected_reply(script, key);
    let Some(Value::Array(items)) = value else {
        return Err(unexpected());
    };
    let words: Vec<&str> = items
        .iter()
        .map(|item| text(item).ok_or_else(unexpected))
        .collect::<Result<_, _>>()?;
    match words.as_slice() {
        ["stopped", stopped] => Ok(Seen {
            stopped: parse_flag(stopped).ok_or_else(unexpected)?,
            moved: None,
        }),
        ["stopped", stopped, "moved", at] => Ok(Seen {
            stopped: parse_flag(stopped).ok_or_else(unexpected)?,
            moved: Some(at.parse().map_err(|_| unexpected())?),
        }),
        _ => Err(unexpected()),
    }
}

fn parse_flag(word: &str) -> Option<bool> {
    match word {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// How many times consume and revoke read a record again when its fixed
/// fields changed between their read and their write.
const MAX_READS: usize = 4;

/// The record a reply carries (as it was before the call), the attempts
/// abandoned on it and what the script saw, read strictly.
fn reply_record(
    script: GrantScript,
    id: &ApprovalId,
    key: &str,
    reply: &Reply,
) -> Result<(StoredGrant, Vec<AttemptId>, Seen), StoreError> {
    reply_record_after(script, id, key, reply, None)
}

/// [`reply_record`], reading only what follows `head` when the record
/// starts with it (see [`record::decode_after_head`]).
fn reply_record_after(
    script: GrantScript,
    id: &ApprovalId,
    key: &str,
    reply: &Reply,
    head: Option<&Head>,
) -> Result<(StoredGrant, Vec<AttemptId>, Seen), StoreError> {
    match reply.items.as_slice() {
        [Value::BulkString(raw), seen] => {
            let decoded = match head.and_then(|head| record::decode_after_head(key, raw, head)) {
                Some(decoded) => decoded,
                None => record::decode(id, key, raw)?,
            };
            Ok((
                decoded.grant,
                decoded.abandoned,
                parse_seen(script, key, Some(seen))?,
            ))
        }
        _ => Err(StoreError::corrupt(
            key,
            format!("the {} script replied without the record", script.name()),
        )),
    }
}

/// The error a `corrupt` reply carries: its reason, about the key it names
/// (a fence) or else `key`.
pub(crate) fn corrupt_reply(key: &str, reply: &Reply) -> StoreError {
    let reason = reply
        .items
        .first()
        .and_then(text)
        .unwrap_or("record is not one of this store's")
        .to_owned();
    let key = reply.items.get(1).and_then(text).unwrap_or(key);
    StoreError::corrupt(key, reason)
}

/// A record whose fixed fields changed between every read and write of one call.
fn kept_changing(key: &str) -> StoreError {
    StoreError::unavailable(format!(
        "{key}: the record changed between each read and write; try again"
    ))
}

fn disagreement(key: &str, script: GrantScript) -> StoreError {
    StoreError::corrupt(
        key,
        format!(
            "the {} script's outcome disagrees with the record it read",
            script.name()
        ),
    )
}

/// The tag of an actor's slot: the first 32 lower-case hex characters of
/// the SHA-256 of the actor id's text (which may hold `{` and `}`, so it
/// cannot be the hash tag itself).
fn actor_tag(actor: &ActorId) -> String {
    let digest = Sha256::digest(actor.as_str().as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// One actor's cluster slot: its tag and the prefix of its keys,
/// `{prefix}:{a<tag>}`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Slot {
    tag: String,
    prefix: String,
}

impl Slot {
    fn grant_key(&self, id: &ApprovalId) -> String {
        format!("{}:grant:{}", self.prefix, id.as_str())
    }

    fn actor_fence_key(&self) -> String {
        format!("{}:actor", self.prefix)
    }

    fn run_fence_key(&self, run: &RunId) -> String {
        format!("{}:run:{}", self.prefix, run.as_str())
    }

    fn live_key(&self, run: &RunId) -> String {
        format!("{}:live:{}", self.prefix, run.as_str())
    }

    fn runs_key(&self) -> String {
        format!("{}:runs", self.prefix)
    }
}

/// How many grant ids a store remembers the slot (and fingerprint) of: an
/// abandon after a consume goes straight to the grant's slot, and a
/// consume or revoke of a grant this store issued or read goes out in one
/// round trip. Past it the memory starts afresh.
const SLOT_CACHE_ENTRIES: usize = 16_384;

/// What a store remembers of one grant.
#[derive(Debug, Clone)]
struct Known {
    /// The tag of its actor's slot.
    tag: String,
    /// The fingerprint of its fixed fields as this store validated them
    /// (it wrote them at issue, or read them with the strict reader).
    fingerprint: Option<String>,
    /// The head of the record as this store encoded it at issue, with its
    /// grant: a consume's reply that starts with it is read past it only.
    head: Option<Arc<Head>>,
}

/// A grant as the get script read it and the library validated it.
struct Read {
    /// The grant, in its stored state.
    grant: StoredGrant,
    fingerprint: String,
    stopped: bool,
}

/// Reads a `CONFIG GET <name>` reply (RESP2 array or RESP3 map).
fn config_value(value: &Value) -> Option<String> {
    match value {
        Value::Array(items) if items.len() == 2 => text(&items[1]).map(str::to_owned),
        Value::Map(entries) if entries.len() == 1 => text(&entries[0].1).map(str::to_owned),
        _ => None,
    }
}

/// What a node's persistence settings can lose.
#[derive(Debug, PartialEq, Eq)]
enum PersistenceRisk {
    /// Nothing acknowledged is lost on a crash or a restart.
    None,
    /// A crash of the host may lose a bounded window of writes: a warning.
    Window(String),
    /// A crash or a restart can undo acknowledged consumes: refused by default.
    Undoes(String),
}

fn persistence_risk(appendonly: &str, appendfsync: &str, save: &str) -> PersistenceRisk {
    if appendonly != "yes" {
        let snapshots = if save.trim().is_empty() {
            "no save points".to_owned()
        } else {
            format!("save \"{save}\"")
        };
        return PersistenceRisk::Undoes(format!(
            "appendonly no ({snapshots}): redis loads any existing dump.rdb at start-up, so a \
             crash or restart rolls back to the last snapshot and every grant consumed since \
             it becomes usable again"
        ));
    }
    match appendfsync {
        "always" => PersistenceRisk::None,
        "everysec" => PersistenceRisk::Window(
            "appendfsync everysec: a crash of the host (not of redis alone) may lose about the \
             last second of writes (up to 2 s when the disk is slow), and a grant consumed in \
             it becomes usable again"
                .to_owned(),
        ),
        other => PersistenceRisk::Window(format!(
            "appendfsync {other}: a crash of the host (not of redis alone) may lose the writes \
             the operating system had not flushed (on linux up to about 30 s), and a grant \
             consumed in them becomes usable again"
        )),
    }
}

/// The major version in an `INFO server` reply.
fn server_major_version(info: &str) -> Option<u32> {
    info.lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .and_then(|version| version.trim().split('.').next())
        .and_then(|major| major.parse().ok())
}

impl RedisApprovalStore {
    /// Connects, then probes the server before answering: it loads the store's
    /// scripts and runs the read script once (a server that cannot run them
    /// is refused with [`StoreError::Unsupported`]), refuses a single server
    /// that is a replica, and refuses a wrong topology
    /// ([`ConnectError::WrongTopology`]: a plain server among the cluster
    /// seeds, a cluster node given as a single server).
    ///
    /// Secure by default, it refuses ([`ConnectError::NotDurable`]) a node
    /// whose settings let a restart undo an acknowledged consume
    /// (`appendonly no`) or whose settings it cannot read, unless the options
    /// accept that risk by name
    /// ([`allow_non_durable_persistence`](RedisStoreOptions::allow_non_durable_persistence),
    /// [`allow_unverified_persistence`](RedisStoreOptions::allow_unverified_persistence)).
    /// It warns through `tracing` (and
    /// [`startup_warnings`](Self::startup_warnings)) about settings that can
    /// lose a bounded window (`appendfsync everysec`), about an evicting
    /// memory policy, and about every accepted risk.
    pub async fn connect(options: RedisStoreOptions) -> Result<Self, ConnectError> {
        options.validate()?;
        if let Topology::Cluster(seeds) = &options.topology {
            check_seeds(seeds, options.connect_timeout).await?;
        }
        let conn = timed(
            "connecting to redis",
            options.connect_timeout,
            Connection::open(&options),
        )
        .await?
        .map_err(|e| match e.kind() {
            ErrorKind::InvalidClientConfig => {
                ConnectError::InvalidOptions(InvalidOptions::from_redis(&e))
            }
            _ if is_cluster_disabled(&e) => ConnectError::WrongTopology {
                message: format!(
                    "a seed is a plain redis server, not a cluster node ({e}): connect to it \
                     with the `single` option, or give the cluster's node urls"
                ),
            },
            _ => ConnectError::Store(redis_error("connecting to redis", &e)),
        })?;
        let mut store = RedisApprovalStore {
            conn,
            prefix: options.key_prefix.clone(),
            retention_ms: options.retention.as_millis().to_string(),
            command_timeout: options.command_timeout,
            failover_wait: match options.topology {
                Topology::Cluster(_) => options.failover_timeout,
                Topology::Single(_) => Duration::ZERO,
            },
            durability: options.durability,
            scripts: Scripts::new(),
            startup_warnings: Vec::new(),
            allow_non_durable: options.allow_non_durable_persistence,
            allow_unverified: options.allow_unverified_persistence,
            slots: Mutex::new(HashMap::new()),
        };
        let probe_limit = options.connect_timeout;
        tokio::time::timeout(probe_limit, store.probe(probe_limit))
            .await
            .map_err(|_| StoreError::Timeout {
                message: format!(
                    "start-up probe: no answer within {} ms",
                    probe_limit.as_millis()
                ),
            })??;
        Ok(store)
    }

    /// The tag of `actor`'s slot: the first 32 lower-case hex characters of
    /// the SHA-256 of the actor id.
    pub fn actor_tag(actor: &ActorId) -> String {
        actor_tag(actor)
    }

    fn slot_of_tag(&self, tag: String) -> Slot {
        let prefix = format!("{}:{{a{tag}}}", self.prefix);
        Slot { tag, prefix }
    }

    fn slot(&self, actor: &ActorId) -> Slot {
        self.slot_of_tag(actor_tag(actor))
    }

    /// The prefix of every key in `actor`'s slot: `{prefix}:{a<tag>}`, the
    /// braces literal (the cluster hash tag).
    pub fn slot_prefix(&self, actor: &ActorId) -> String {
        self.slot(actor).prefix
    }

    /// The key of grant `id` of `actor`: `{prefix}:{a<tag>}:grant:<id>`,
    /// `{a<tag>}` (the actor's tag) being the cluster hash tag, so that a
    /// grant lives in one slot with its actor's and its run's fences.
    pub fn grant_key(&self, actor: &ActorId, id: &ApprovalId) -> String {
        self.slot(actor).grant_key(id)
    }

    /// The key naming the slot of grant `id`: `{prefix}:id:{<id>}` (the id
    /// is its hash tag), a string holding the actor's tag.
    pub fn pointer_key(&self, id: &ApprovalId) -> String {
        format!("{}:id:{{{}}}", self.prefix, id.as_str())
    }

    /// The stop fence of `actor`: `{prefix}:{a<tag>}:actor`.
    pub fn actor_fence_key(&self, actor: &ActorId) -> String {
        self.slot(actor).actor_fence_key()
    }

    /// The stop fence of `run` of `actor`: `{prefix}:{a<tag>}:run:<run id>`.
    pub fn run_fence_key(&self, actor: &ActorId, run: &RunId) -> String {
        self.slot(actor).run_fence_key(run)
    }

    /// The live set of `run` of `actor` (the grants a stop may find usable):
    /// `{prefix}:{a<tag>}:live:<run id>`.
    pub fn live_key(&self, actor: &ActorId, run: &RunId) -> String {
        self.slot(actor).live_key(run)
    }

    /// The set of `actor`'s runs with a live set: `{prefix}:{a<tag>}:runs`.
    pub fn runs_key(&self, actor: &ActorId) -> String {
        self.slot(actor).runs_key()
    }

    fn cached_tag(&self, id: &ApprovalId) -> Option<String> {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .map(|known| known.tag.clone())
    }

    /// The slot and validated fingerprint of grant `id`, when this store
    /// has both, and the head of its record when this store issued it.
    fn cached_fingerprint(&self, id: &ApprovalId) -> Option<(Slot, String, Option<Arc<Head>>)> {
        let known = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()?;
        let fingerprint = known.fingerprint?;
        Some((self.slot_of_tag(known.tag), fingerprint, known.head))
    }

    /// Remembers the head of grant `id`'s record as this store encoded it
    /// at issue (after [`remember`](Self::remember) of its slot).
    fn remember_head(&self, id: &ApprovalId, head: Head) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = slots.get_mut(id) {
            known.head = Some(Arc::new(head));
        }
    }

    /// Remembers grant `id`'s slot, and the fingerprint of fixed fields
    /// this store validated (`None` keeps one it knew for the same slot).
    fn remember(&self, id: &ApprovalId, tag: &str, fingerprint: Option<&str>) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = slots.get_mut(id)
            && known.tag == tag
        {
            if let Some(fingerprint) = fingerprint {
                known.fingerprint = Some(fingerprint.to_owned());
            }
            return;
        }
        if slots.len() >= SLOT_CACHE_ENTRIES {
            slots.clear();
        }
        slots.insert(
            id.clone(),
            Known {
                tag: tag.to_owned(),
                fingerprint: fingerprint.map(str::to_owned),
                head: None,
            },
        );
    }

    /// Forgets what this store knew of grant `id` (its record changed, or
    /// is gone from where it was).
    fn forget(&self, id: &ApprovalId) {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The store's connection, shared with an operation log over it.
    pub(crate) fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The limit of one round trip.
    pub(crate) fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// The SHA-1 that `EVALSHA` uses for `script`.
    pub fn script_sha(&self, script: GrantScript) -> &str {
        self.scripts.get(script).sha()
    }

    /// What the start-up probe warned about (also logged through `tracing`
    /// at warn level): weak persistence, settings it could not read, fewer
    /// replicas than the durability option asks for.
    pub fn startup_warnings(&self) -> &[String] {
        &self.startup_warnings
    }

    fn warn(&mut self, message: String) {
        tracing::warn!(target: "countersign_store_redis", "{message}");
        self.startup_warnings.push(message);
    }

    /// Persistence settings that could not be read: refused, or a warning
    /// when the options accept it.
    fn unverified_persistence(&mut self, node: &str, reason: &str) -> Result<(), ConnectError> {
        let risk = format!(
            "could not check persistence settings on {node} ({reason}): a restart may bring \
             consumed grants back"
        );
        if self.allow_unverified {
            self.warn(format!("{risk} (accepted by allow_unverified_persistence)"));
            return Ok(());
        }
        Err(ConnectError::NotDurable {
            message: format!(
                "{risk}; allow `config get` for the store's user, or, where the service \
                 guarantees that an acknowledged write survives a restart, accept the risk with \
                 the `allow_unverified_persistence` option"
            ),
        })
    }

    async fn probe(&mut self, limit: Duration) -> Result<(), ConnectError> {
        // Each step may take up to the whole probe's limit (the connect
        // timeout, which also bounds them all together): loading the
        // scripts compiles them on the server, which on a loaded machine
        // can outlast a command timeout chosen for single calls.
        // 1. A single server must be a primary: grants are never read from replicas.
        if !self.conn.is_cluster() {
            let replies = timed("role", limit, self.conn.on_each_primary(redis::cmd("ROLE")))
                .await?
                .map_err(|e| redis_error("role", &e))?;
            match replies.first().map(|(_, v)| v) {
                Some(Value::Array(items)) => match items.first().and_then(text) {
                    Some("master") => {}
                    Some(role) => {
                        return Err(StoreError::Unsupported {
                            message: format!(
                                "server is a {role}, not a primary: grants are never read from \
                                 replicas"
                            ),
                        }
                        .into());
                    }
                    None => self.warn("could not read the server's role".to_owned()),
                },
                _ => self.warn("could not check the server's role: role was refused".to_owned()),
            }
            // ... and not a cluster node: keys of other slots would answer MOVED.
            let mut cmd = redis::cmd("INFO");
            cmd.arg("cluster");
            let replies = timed("info", limit, self.conn.on_each_primary(cmd))
                .await?
                .map_err(|e| redis_error("info", &e))?;
            let clustered = replies.iter().any(|(_, reply)| match reply {
                Value::BulkString(bytes) => {
                    String::from_utf8_lossy(bytes).contains("cluster_enabled:1")
                }
                Value::VerbatimString { text, .. } => text.contains("cluster_enabled:1"),
                _ => false,
            });
            if clustered {
                return Err(ConnectError::WrongTopology {
                    message: "the server is a redis cluster node: connect to it with the \
                              `cluster` option, not `single`"
                        .to_owned(),
                });
            }
        }

        // 2. Server version: the scripts need effect replication (5.0 and later).
        let mut info_cmd = redis::cmd("INFO");
        info_cmd.arg("server");
        let replies = timed("info", limit, self.conn.on_each_primary(info_cmd))
            .await?
            .map_err(|e| redis_error("info", &e))?;
        for (node, reply) in replies {
            let major = match &reply {
                Value::BulkString(bytes) => server_major_version(&String::from_utf8_lossy(bytes)),
                Value::VerbatimString { text, .. } => server_major_version(text),
                _ => None,
            };
            match major {
                Some(major) if major < MIN_SERVER_MAJOR => {
                    return Err(StoreError::Unsupported {
                        message: format!(
                            "{node} runs redis {major}: the store's scripts need 5.0 or later"
                        ),
                    }
                    .into());
                }
                Some(_) => {}
                None => self.warn(format!("could not check the server version on {node}")),
            }
        }

        // 3. Load every script everywhere; a server that cannot is refused now, not at first use.
        for script in GrantScript::ALL {
            let loaded = self.scripts.get(script);
            let what = format!("loading the {} script", script.name());
            let sha = timed(&what, limit, self.conn.on_all_nodes(loaded.load_cmd()))
                .await?
                .map_err(|e| refuse_scripts(&what, &e))?;
            if text(&sha) != Some(loaded.sha()) {
                return Err(StoreError::Unsupported {
                    message: format!("{what}: the server answered a different sha1"),
                }
                .into());
            }
        }

        // 4. Run the read-only script for real, through EVALSHA as every call
        //    does and through EVAL as the reload after NOSCRIPT does.
        let probe_slot = format!("{}:{{probe}}", self.prefix);
        let probe_key = format!("{probe_slot}:grant:probe");
        let get = self.scripts.get(GrantScript::Get);
        for (reload, what) in [(false, "evalsha"), (true, "eval")] {
            let what = format!("running the get script with {what}");
            let cmd = get.invocation(reload, &[&probe_key], &[b"probe", probe_slot.as_bytes()]);
            let reply = match timed(&what, limit, self.conn.on_key(&probe_key, cmd, false)).await? {
                Ok(reply) => reply,
                // The server knows EVALSHA; its cache was flushed since the load
                // (calls recover from that with EVAL, checked next).
                Err(e) if is_noscript(&e) && !reload => continue,
                Err(e) => return Err(refuse_scripts(&what, &e).into()),
            };
            match parse_reply(GrantScript::Get, &probe_key, reply) {
                Ok(reply) if ["missing", "found", "corrupt"].contains(&reply.status.as_str()) => {}
                _ => {
                    return Err(StoreError::Unsupported {
                        message: format!("{what}: unexpected reply"),
                    }
                    .into());
                }
            }
        }

        // 5. Persistence and eviction, on every node (replicas too: one may be
        //    promoted). CONFIG may be disabled: then the settings are unknown.
        const NAMES: [&str; 4] = ["appendonly", "appendfsync", "save", "maxmemory-policy"];
        let mut settings: Vec<(String, [Option<String>; 4])> = Vec::new();
        let mut unreadable: Option<String> = None;
        for (index, name) in NAMES.into_iter().enumerate() {
            let mut cmd = redis::cmd("CONFIG");
            cmd.arg("GET").arg(name);
            let replies = match timed("config get", limit, self.conn.on_each_node(cmd)).await? {
                Ok(replies) => replies,
                Err(e) => {
                    unreadable = Some(format!("config get failed: {e}"));
                    break;
                }
            };
            for (node, reply) in replies {
                let value = config_value(&reply);
                match settings.iter_mut().find(|(n, _)| *n == node) {
                    Some((_, values)) => values[index] = value,
                    None => {
                        let mut values: [Option<String>; 4] = Default::default();
                        values[index] = value;
                        settings.push((node, values));
                    }
                }
            }
        }
        if let Some(reason) = unreadable {
            self.unverified_persistence("the servers", &reason)?;
        }
        for (node, [appendonly, appendfsync, save, eviction]) in settings {
            match (appendonly, appendfsync, save) {
                (Some(appendonly), Some(appendfsync), Some(save)) => {
                    match persistence_risk(&appendonly, &appendfsync, &save) {
                        PersistenceRisk::None => {}
                        PersistenceRisk::Window(warning) => self.warn(format!("{node}: {warning}")),
                        PersistenceRisk::Undoes(risk) if self.allow_non_durable => self.warn(
                            format!("{node}: {risk} (accepted by allow_non_durable_persistence)"),
                        ),
                        PersistenceRisk::Undoes(risk) => {
                            return Err(ConnectError::NotDurable {
                                message: format!(
                                    "{node}: {risk}; set `appendonly yes` (with `appendfsync \
                                     always`) on every node, or accept the risk with the \
                                     `allow_non_durable_persistence` option"
                                ),
                            });
                        }
                    }
                }
                _ => self.unverified_persistence(&node, "config get was refused")?,
            }
            if let Some(policy) = eviction.filter(|p| p != "noeviction") {
                self.warn(format!(
                    "{node}: maxmemory-policy {policy}: under memory pressure grants may be \
                     evicted, and an evicted grant answers unknown"
                ));
            }
        }
        Ok(self.check_replicas().await?)
    }

    /// Warns when a primary has fewer replicas than the durability option needs.
    async fn check_replicas(&mut self) -> Result<(), StoreError> {
        let Some(durability) = self.durability else {
            return Ok(());
        };
        let mut cmd = redis::cmd("INFO");
        cmd.arg("replication");
        let replies = timed("info", self.command_timeout, self.conn.on_each_primary(cmd))
            .await?
            .map_err(|e| redis_error("info", &e))?;
        for (node, reply) in replies {
            let connected = match &reply {
                Value::BulkString(bytes) => String::from_utf8_lossy(bytes)
                    .lines()
                    .find_map(|l| l.strip_prefix("connected_slaves:").map(str::to_owned))
                    .and_then(|n| n.trim().parse::<u32>().ok()),
                _ => None,
            };
            match connected {
                Some(n) if n >= durability.replicas => {}
                Some(n) => self.warn(format!(
                    "{node} has {n} connected replicas but durability needs {}: writes will fail \
                     with durability unconfirmed until enough replicas connect",
                    durability.replicas
                )),
                None => self.warn(format!("could not count the replicas of {node}")),
            }
        }
        Ok(())
    }

    /// Runs `script` on `keys` (all in one slot; the first routes the call)
    /// with EVALSHA, reloading it with EVAL when the server answers NOSCRIPT
    /// (after a restart, failover or SCRIPT FLUSH). With `durable` and a
    /// durability option, `WAIT` follows in the same pipeline on the same
    /// connection; its reply is returned too.
    pub(crate) async fn run(
        &self,
        script: GrantScript,
        keys: &[&str],
        args: &[&[u8]],
        durable: bool,
    ) -> Result<(Reply, Option<Value>), StoreError> {
        self.run_with(script, keys, args, durable, false).await
    }

    /// [`run`](Self::run), going out on the current client even while a
    /// replacement is under way when `at_once` (see
    /// [`Connection::on_key`]).
    async fn run_with(
        &self,
        script: GrantScript,
        keys: &[&str],
        args: &[&[u8]],
        durable: bool,
        at_once: bool,
    ) -> Result<(Reply, Option<Value>), StoreError> {
        let loaded = self.scripts.get(script);
        let what = format!("{} script", script.name());
        let key = keys.first().copied().unwrap_or_default();
        let wait = self.durability.filter(|_| durable);
        // A call on a cluster may wait for a failover before its round trip.
        let round_trip = self.command_timeout.saturating_add(self.failover_wait);
        for reload in [false, true] {
            let cmd = loaded.invocation(reload, keys, args);
            let result = match wait {
                None => timed(&what, round_trip, self.conn.on_key(key, cmd, at_once))
                    .await?
                    .map(|v| (v, None)),
                Some(durability) => {
                    let mut wait_cmd = redis::cmd("WAIT");
                    wait_cmd
                        .arg(durability.replicas)
                        .arg(u64::try_from(durability.timeout.as_millis()).unwrap_or(u64::MAX));
                    let limit = round_trip.saturating_add(durability.timeout);
                    timed(
                        &what,
                        limit,
                        self.conn.pipeline_on_key(key, vec![cmd, wait_cmd], at_once),
                    )
                    .await?
                    .and_then(|mut replies| {
                        if replies.len() != 2 {
                            return Err(RedisError::from(std::io::Error::other(
                                "pipeline reply has the wrong length",
                            )));
                        }
                        let wait_reply = replies.pop();
                        let script_reply = replies.pop().unwrap_or(Value::Nil).extract_error()?;
                        Ok((script_reply, wait_reply))
                    })
                }
            };
            match result {
                Err(e) if is_noscript(&e) && !reload => {
                    tracing::debug!(
                        target: "countersign_store_redis",
                        script = script.name(),
                        "script not in the server's cache; reloading it with eval"
                    );
                }
                Err(e) => return Err(redis_error(&what, &e)),
                Ok((value, wait)) => return Ok((parse_reply(script, key, value)?, wait)),
            }
        }
        Err(StoreError::unavailable(format!(
            "{what}: the server kept answering noscript"
        )))
    }

    /// Reads grant `id` in `slot` with the get script and validates all of
    /// it (`None` when the slot holds no such grant): a record the store
    /// cannot read back is [`StoreError::Corrupt`] here, before any script
    /// may write to it. Returns the record, the fingerprint of its fixed
    /// fields, which consume and revoke hand to their script so that it
    /// writes only to this very record, and whether it is stopped.
    async fn read_in(&self, slot: &Slot, id: &ApprovalId) -> Result<Option<Read>, StoreError> {
        let key = slot.grant_key(id);
        let (reply, _) = self
            .run(
                GrantScript::Get,
                &[&key],
                &[id.as_str().as_bytes(), slot.prefix.as_bytes()],
                false,
            )
            .await?;
        match (reply.status.as_str(), reply.items.as_slice()) {
            ("missing", []) => Ok(None),
            ("corrupt", [_] | [_, _]) => Err(corrupt_reply(&key, &reply)),
            ("found", [Value::BulkString(raw), fingerprint, seen]) => {
                let fingerprint = text(fingerprint)
                    .ok_or_else(|| unexpected_reply(GrantScript::Get, &key))?
                    .to_owned();
                let seen = parse_seen(GrantScript::Get, &key, Some(seen))?;
                if seen.moved.is_some() {
                    return Err(unexpected_reply(GrantScript::Get, &key));
                }
                let grant = record::decode(id, &key, raw)?.grant;
                Ok(Some(Read {
                    grant,
                    fingerprint,
                    stopped: seen.stopped,
                }))
            }
            _ => Err(unexpected_reply(GrantScript::Get, &key)),
        }
    }

    /// The tag that grant `id`'s pointer names, or `None` without one.
    async fn pointer_tag(&self, id: &ApprovalId) -> Result<Option<String>, StoreError> {
        let key = self.pointer_key(id);
        let (reply, _) = self
            .run(GrantScript::Pointer, &[&key], &[b"read"], false)
            .await?;
        match (reply.status.as_str(), reply.items.as_slice()) {
            ("missing", []) => Ok(None),
            ("found", [tag]) => {
                let tag = text(tag)
                    .filter(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
                    .ok_or_else(|| unexpected_reply(GrantScript::Pointer, &key))?;
                Ok(Some(tag.to_owned()))
            }
            ("corrupt", [_]) => Err(corrupt_reply(&key, &reply)),
            _ => Err(unexpected_reply(GrantScript::Pointer, &key)),
        }
    }

    /// The slots grant `id` may live in, best first: the one this store
    /// remembers, else `first`; then, only if the grant is not there, the
    /// one its pointer names.
    fn first_slot(&self, id: &ApprovalId, first: Option<Slot>) -> Option<Slot> {
        self.cached_tag(id)
            .map(|tag| self.slot_of_tag(tag))
            .or(first)
    }

    /// Finds grant `id` and reads it: in the remembered slot or `first`,
    /// else in the slot its pointer names. `None` when it is in neither.
    async fn locate(
        &self,
        id: &ApprovalId,
        first: Option<Slot>,
    ) -> Result<Option<(Slot, Read)>, StoreError> {
        let mut tried = None;
        if let Some(slot) = self.first_slot(id, first) {
            if let Some(read) = self.read_in(&slot, id).await? {
                self.remember(id, &slot.tag, Some(&read.fingerprint));
                return Ok(Some((slot, read)));
            }
            tried = Some(slot.tag);
        }
        let Some(tag) = self.pointer_tag(id).await? else {
            return Ok(None);
        };
        if tried.as_deref() == Some(tag.as_str()) {
            return Ok(None);
        }
        let slot = self.slot_of_tag(tag);
        let read = self.read_in(&slot, id).await?;
        if let Some(read) = &read {
            self.remember(id, &slot.tag, Some(&read.fingerprint));
        }
        Ok(read.map(|read| (slot, read)))
    }

    /// After a call moved grant `id`'s expiry to `at`: its pointer is kept
    /// as long. Best effort: the call's outcome stands whatever this answers.
    async fn keep_pointer(&self, id: &ApprovalId, slot: &Slot, at: u64) {
        let key = self.pointer_key(id);
        let at = at.to_string();
        if let Err(error) = self
            .run(
                GrantScript::Pointer,
                &[&key],
                &[b"keep", slot.tag.as_bytes(), at.as_bytes()],
                false,
            )
            .await
        {
            tracing::warn!(
                target: "countersign_store_redis",
                approval_id = %id,
                %error,
                "could not move the expiry of a grant's pointer forward"
            );
        }
    }

    /// After a write that must be replicated: enough replicas confirmed, or
    /// [`StoreError::DurabilityUnconfirmed`].
    pub(crate) fn confirm(&self, wait: Option<Value>) -> Result<(), StoreError> {
        let Some(durability) = self.durability else {
            return Ok(());
        };
        let confirmed = match wait {
            Some(Value::Int(n)) => u32::try_from(n.max(0)).unwrap_or(u32::MAX),
            _ => 0,
        };
        if confirmed >= durability.replicas {
            Ok(())
        } else {
            Err(StoreError::DurabilityUnconfirmed {
                wanted: durability.replicas,
                confirmed,
            })
        }
    }
}

/// A failure to load or run scripts at start-up: a server answer means the
/// server cannot run them; anything else is the usual error.
fn refuse_scripts(what: &str, err: &RedisError) -> StoreError {
    match err.kind() {
        ErrorKind::Server(_) | ErrorKind::Extension => StoreError::Unsupported {
            message: format!("{what}: the server cannot run the store's scripts: {err}"),
        },
        _ => redis_error(what, err),
    }
}

impl InvalidOptions {
    fn from_redis(err: &RedisError) -> Self {
        InvalidOptions::new(format!("redis refused the connection settings: {err}"))
    }
}

/// Whether `err` is a server saying it is not a cluster node.
fn is_cluster_disabled(err: &RedisError) -> bool {
    err.to_string()
        .to_ascii_lowercase()
        .contains("cluster support disabled")
}

/// Whether an `INFO cluster` reply says cluster mode is on; `None` when
/// the reply is not one.
fn cluster_enabled(reply: &Value) -> Option<bool> {
    let info = match reply {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::VerbatimString { text, .. } => text.clone(),
        _ => return None,
    };
    if info.contains("cluster_enabled:1") {
        Some(true)
    } else if info.contains("cluster_enabled:0") {
        Some(false)
    } else {
        None
    }
}

/// Asks every cluster seed whether it is a cluster node: a plain server in
/// the list is a configuration mistake (the cluster client would ignore it,
/// or fail as if the cluster were down). Seeds that cannot be reached or
/// asked are left to the cluster client.
async fn check_seeds(seeds: &[String], limit: Duration) -> Result<(), ConnectError> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(limit))
        .set_response_timeout(Some(limit));
    let mut plain = Vec::new();
    let mut clustered = Vec::new();
    for seed in seeds {
        let Ok(client) = redis::Client::open(seed.as_str()) else {
            continue;
        };
        let asked = async {
            let mut conn = client
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            redis::cmd("INFO")
                .arg("cluster")
                .query_async::<Value>(&mut conn)
                .await
        };
        let reply = match tokio::time::timeout(limit, asked).await {
            Ok(Ok(reply)) => reply,
            _ => continue,
        };
        match cluster_enabled(&reply) {
            Some(true) => clustered.push(format!("`{}`", redact(seed))),
            Some(false) => plain.push(format!("`{}`", redact(seed))),
            None => {}
        }
    }
    if plain.is_empty() {
        return Ok(());
    }
    let message = if clustered.is_empty() {
        format!(
            "{} is a plain redis server, not a cluster node: connect to it with the `single` \
             option, or give the cluster's node urls",
            plain.join(", ")
        )
    } else {
        format!(
            "the cluster seed list mixes plain redis servers ({}) with cluster nodes ({}): \
             remove the plain servers from the list",
            plain.join(", "),
            clustered.join(", ")
        )
    };
    Err(ConnectError::WrongTopology { message })
}

/// The outcome a consume script's status names, and whether the call
/// wrote a new state (`Some`) or a new count of failed attempts.
fn consume_status(status: &str) -> Option<ConsumeOutcome> {
    Some(match status {
        "consumed" => ConsumeOutcome::Consumed { replay: false },
        "replay" => ConsumeOutcome::Consumed { replay: true },
        "stale_revoked" => ConsumeOutcome::Stale(StaleReason::Revoked),
        "stale_consumed" => ConsumeOutcome::Stale(StaleReason::Consumed),
        "stale_expired" => ConsumeOutcome::Stale(StaleReason::Expired),
        "stale_mismatch" => ConsumeOutcome::Stale(StaleReason::Mismatch),
        "stale_abandoned" => ConsumeOutcome::Stale(StaleReason::Abandoned),
        "stale_stopped" => ConsumeOutcome::Stale(StaleReason::Stopped),
        "stale_locked" | "locked" => ConsumeOutcome::Stale(StaleReason::Locked),
        _ => return None,
    })
}

/// Whether a consume script's answer is exactly what [`decide_consume`]
/// rules for the record it read: the outcome, and the write (a new state,
/// a new count of failed attempts) the status names.
fn consume_agrees(status: &str, outcome: ConsumeOutcome, decision: &ConsumeDecision) -> bool {
    let writes_state = matches!(status, "consumed" | "locked");
    let counts = matches!(status, "stale_mismatch" | "locked");
    decision.outcome == outcome
        && decision.state.is_some() == writes_state
        && decision.failed_attempts.is_some() == counts
        && (status != "locked" || decision.state == Some(GrantState::Locked))
}

impl RedisApprovalStore {
    /// Stops `run` (`Some`) or every run of `actor`: one script in the
    /// actor's slot.
    async fn stop(
        &self,
        actor: &ActorId,
        run: Option<&RunId>,
        now: Timestamp,
    ) -> Result<StopOutcome, StoreError> {
        let slot = self.slot(actor);
        let now_text = now.as_millis().to_string();
        let (actor_fence, runs) = (slot.actor_fence_key(), slot.runs_key());
        let (mut keys, mut args) = (
            vec![actor_fence.clone(), runs],
            vec![
                run.map_or("actor", |_| "run").to_owned(),
                now_text,
                slot.prefix.clone(),
            ],
        );
        if let Some(run) = run {
            keys.push(slot.run_fence_key(run));
            keys.push(slot.live_key(run));
            args.push(run.as_str().to_owned());
        }
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let args: Vec<&[u8]> = args.iter().map(String::as_bytes).collect();
        let (reply, wait) = self.run(GrantScript::Stop, &keys, &args, true).await?;
        let fence = keys.get(2).copied().unwrap_or(&actor_fence);
        let outcome = match (reply.status.as_str(), reply.items.as_slice()) {
            ("stopped", [count, was]) => {
                let parsed = text(count)
                    .and_then(|c| c.parse::<u64>().ok())
                    .zip(text(was).and_then(parse_flag));
                let (stopped_grants, was_stopped) =
                    parsed.ok_or_else(|| unexpected_reply(GrantScript::Stop, fence))?;
                StopOutcome {
                    stopped_grants,
                    was_stopped,
                }
            }
            ("corrupt", [_] | [_, _]) => return Err(corrupt_reply(fence, &reply)),
            _ => return Err(unexpected_reply(GrantScript::Stop, fence)),
        };
        tracing::info!(
            target: "countersign_store_redis",
            actor_id = %actor,
            run_id = run.map(RunId::as_str),
            stopped_grants = outcome.stopped_grants,
            was_stopped = outcome.was_stopped,
            "{}",
            if run.is_some() { "stopped a run" } else { "stopped an actor" }
        );
        self.confirm(wait)?;
        Ok(outcome)
    }

    /// Resumes the fence at `key`.
    async fn resume(&self, key: &str, what: &str) -> Result<ResumeOutcome, StoreError> {
        let (reply, wait) = self
            .run(
                GrantScript::Resume,
                &[key],
                &[self.retention_ms.as_bytes()],
                true,
            )
            .await?;
        let outcome = match (reply.status.as_str(), reply.items.as_slice()) {
            ("resumed", []) => ResumeOutcome::Resumed,
            ("not_stopped", []) => return Ok(ResumeOutcome::NotStopped),
            ("corrupt", [_] | [_, _]) => return Err(corrupt_reply(key, &reply)),
            _ => return Err(unexpected_reply(GrantScript::Resume, key)),
        };
        tracing::info!(target: "countersign_store_redis", fence = key, "resumed {what}");
        self.confirm(wait)?;
        Ok(outcome)
    }
}

/// What one run of the consume or revoke script came to.
enum Attempt<T> {
    /// The script answered, and the answer checked out.
    Done(T),
    /// The record's fixed fields are not those of the fingerprint given:
    /// nothing was written; read the record again.
    Changed,
    /// No record under the key: nothing was written.
    Unknown,
}

impl RedisApprovalStore {
    /// Runs the consume script on grant `id` in `slot`, writing only if its
    /// fixed fields still have `fingerprint`, and checks its answer against
    /// the rules (reading the record it replies past `head`, when this
    /// store issued it and it starts with it).
    #[allow(clippy::too_many_arguments)]
    async fn consume_in(
        &self,
        slot: &Slot,
        fingerprint: &str,
        head: Option<&Head>,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<Attempt<ConsumeOutcome>, StoreError> {
        let key = slot.grant_key(id);
        let now_text = now.as_millis().to_string();
        let args: [&[u8]; 10] = [
            id.as_str().as_bytes(),
            now_text.as_bytes(),
            attempt.as_str().as_bytes(),
            binding.actor_id.as_str().as_bytes(),
            binding.run_id.as_str().as_bytes(),
            binding.url.as_bytes(),
            binding.action_digest.as_bytes(),
            self.retention_ms.as_bytes(),
            fingerprint.as_bytes(),
            slot.prefix.as_bytes(),
        ];
        let (reply, wait) = self.run(GrantScript::Consume, &[&key], &args, true).await?;
        let status = reply.status.as_str();
        let outcome = match status {
            "changed" if reply.bare() => return Ok(Attempt::Changed),
            "unknown" if reply.bare() => return Ok(Attempt::Unknown),
            "corrupt" => return Err(corrupt_reply(&key, &reply)),
            _ => consume_status(status)
                .ok_or_else(|| unexpected_reply(GrantScript::Consume, &key))?,
        };
        // The script saw a record with the very fixed fields validated
        // before; the library's own rules, applied to the record as the
        // script saw it, must reach its outcome.
        let (before, abandoned, seen) =
            reply_record_after(GrantScript::Consume, id, &key, &reply, head)?;
        let decision = decide_consume(&before, &abandoned, seen.stopped, binding, now, attempt);
        if !consume_agrees(status, outcome, &decision) {
            return Err(disagreement(&key, GrantScript::Consume));
        }
        if let Some(at) = seen.moved {
            self.keep_pointer(id, slot, at).await;
        }
        if let ConsumeOutcome::Consumed { .. } = outcome {
            self.confirm(wait)?;
        }
        Ok(Attempt::Done(outcome))
    }

    /// Runs the revoke script on grant `id` in `slot`, writing only if its
    /// fixed fields still have `fingerprint`, and checks its answer against
    /// the rules.
    async fn revoke_in(
        &self,
        slot: &Slot,
        fingerprint: &str,
        id: &ApprovalId,
    ) -> Result<Attempt<RevokeOutcome>, StoreError> {
        let key = slot.grant_key(id);
        let args: [&[u8]; 4] = [
            id.as_str().as_bytes(),
            self.retention_ms.as_bytes(),
            fingerprint.as_bytes(),
            slot.prefix.as_bytes(),
        ];
        let (reply, wait) = self.run(GrantScript::Revoke, &[&key], &args, true).await?;
        let outcome = match reply.status.as_str() {
            "changed" if reply.bare() => return Ok(Attempt::Changed),
            "unknown" if reply.bare() => return Ok(Attempt::Unknown),
            "corrupt" => return Err(corrupt_reply(&key, &reply)),
            "revoked" => RevokeOutcome::Revoked,
            "already_revoked" => RevokeOutcome::AlreadyRevoked,
            "already_consumed" => RevokeOutcome::AlreadyConsumed,
            _ => return Err(unexpected_reply(GrantScript::Revoke, &key)),
        };
        let (before, _, seen) = reply_record(GrantScript::Revoke, id, &key, &reply)?;
        let state = match before.state {
            GrantState::Active if seen.stopped => GrantState::Stopped,
            state => state,
        };
        if decide_revoke(&state).0 != outcome {
            return Err(disagreement(&key, GrantScript::Revoke));
        }
        if let Some(at) = seen.moved {
            self.keep_pointer(id, slot, at).await;
        }
        // Every answer but a consumed or stopped grant wrote.
        if outcome != RevokeOutcome::AlreadyConsumed && !seen.stopped {
            self.confirm(wait)?;
        }
        Ok(Attempt::Done(outcome))
    }
}

#[async_trait]
impl ApprovalStore for RedisApprovalStore {
    async fn issue(&self, approval: Approval) -> Result<(), IssueError> {
        if approval.action_digest != approval.action.digest() {
            return Err(StoreError::Rejected {
                message: "action digest does not match the action".to_owned(),
            }
            .into());
        }
        if !(1..=MAX_ATTEMPT_LIMIT).contains(&approval.attempt_limit) {
            return Err(StoreError::Rejected {
                message: format!(
                    "attempt limit must be 1 to {MAX_ATTEMPT_LIMIT}, got {}",
                    approval.attempt_limit
                ),
            }
            .into());
        }
        let slot = self.slot(&approval.actor_id);
        let token = issue_token()?;
        // The caller's "now" of an issue is the grant's issued_at.
        let keep_from = approval
            .expires_at
            .max(approval.issued_at)
            .as_millis()
            .to_string();

        // 1. The id is claimed for this actor's slot: ids are unique over
        //    every actor, and get, revoke and abandon find the slot by it.
        let pointer = self.pointer_key(&approval.id);
        let (reply, pointer_wait) = self
            .run(
                GrantScript::Pointer,
                &[&pointer],
                &[
                    b"claim",
                    slot.tag.as_bytes(),
                    keep_from.as_bytes(),
                    self.retention_ms.as_bytes(),
                ],
                true,
            )
            .await?;
        let claimed = match (reply.status.as_str(), reply.bare()) {
            ("claimed", true) => true,
            ("same", true) => false,
            ("taken", true) => return Err(IssueError::AlreadyExists(approval.id)),
            _ => return Err(unexpected_reply(GrantScript::Pointer, &pointer).into()),
        };
        self.remember(&approval.id, &slot.tag, None);

        // 2. The grant, in one step with the check of its fences.
        let key = slot.grant_key(&approval.id);
        let (actor_fence, run_fence) =
            (slot.actor_fence_key(), slot.run_fence_key(&approval.run_id));
        let (live, runs) = (slot.live_key(&approval.run_id), slot.runs_key());
        let record = record::encode_new(&approval, &token);
        let expires_at = approval.expires_at.as_millis().to_string();
        let args: [&[u8]; 8] = [
            &token,
            self.retention_ms.as_bytes(),
            keep_from.as_bytes(),
            approval.id.as_str().as_bytes(),
            approval.run_id.as_str().as_bytes(),
            expires_at.as_bytes(),
            slot.prefix.as_bytes(),
            &record,
        ];
        let keys = [
            key.as_str(),
            actor_fence.as_str(),
            run_fence.as_str(),
            live.as_str(),
            runs.as_str(),
        ];
        let (reply, wait) = self.run(GrantScript::Issue, &keys, &args, true).await?;
        match (reply.status.as_str(), reply.items.as_slice()) {
            ("issued", items @ ([] | [_])) => {
                // A new record: its fixed fields are the ones just encoded
                // from a checked `Approval` (and the generations the script
                // read), so their fingerprint is a validated one. A resent
                // call's reply names none.
                if let [fingerprint] = items {
                    let fingerprint = text(fingerprint)
                        .filter(|f| f.len() == 40)
                        .ok_or_else(|| unexpected_reply(GrantScript::Issue, &key))?;
                    self.remember(&approval.id, &slot.tag, Some(fingerprint));
                    self.remember_head(&approval.id, Head::new(record, approval.clone()));
                }
                self.confirm(pointer_wait)?;
                Ok(self.confirm(wait)?)
            }
            ("exists", []) => Err(IssueError::AlreadyExists(approval.id)),
            ("stopped", []) => {
                if claimed {
                    // Nothing is stored: the claim goes too (best effort; a
                    // pointer left behind names a slot without the grant).
                    if let Err(error) = self
                        .run(
                            GrantScript::Pointer,
                            &[&pointer],
                            &[b"release", slot.tag.as_bytes()],
                            false,
                        )
                        .await
                    {
                        tracing::debug!(
                            target: "countersign_store_redis",
                            %error,
                            "could not release the pointer of an issue refused as stopped"
                        );
                    }
                }
                Err(IssueError::Stopped)
            }
            ("corrupt", _) => Err(corrupt_reply(&key, &reply).into()),
            _ => Err(unexpected_reply(GrantScript::Issue, &key).into()),
        }
    }

    async fn revoke(&self, id: &ApprovalId) -> Result<RevokeOutcome, StoreError> {
        // One round trip when this store validated the grant's fixed
        // fields before (it issued or read it).
        if let Some((slot, fingerprint, _)) = self.cached_fingerprint(id) {
            match self.revoke_in(&slot, &fingerprint, id).await? {
                Attempt::Done(outcome) => return Ok(outcome),
                Attempt::Changed | Attempt::Unknown => self.forget(id),
            }
        }
        let mut last_key = self.pointer_key(id);
        for _ in 0..MAX_READS {
            // Every check that can refuse the record runs here, before the
            // script may mark it; the script writes only if its fixed fields
            // are unchanged.
            let Some((slot, read)) = self.locate(id, None).await? else {
                return Ok(RevokeOutcome::Unknown);
            };
            match self.revoke_in(&slot, &read.fingerprint, id).await? {
                Attempt::Done(outcome) => return Ok(outcome),
                Attempt::Changed => {
                    self.forget(id);
                    last_key = slot.grant_key(id);
                }
                Attempt::Unknown => return Ok(RevokeOutcome::Unknown),
            }
        }
        Err(kept_changing(&last_key))
    }

    async fn get(&self, id: &ApprovalId) -> Result<Option<StoredGrant>, StoreError> {
        Ok(self.locate(id, None).await?.map(|(_, read)| {
            let mut grant = read.grant;
            if read.stopped && grant.state == GrantState::Active {
                grant.state = GrantState::Stopped;
            }
            grant
        }))
    }

    async fn consume_once(
        &self,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<ConsumeOutcome, StoreError> {
        // One round trip when this store validated the grant's fixed
        // fields before (it issued or read it): the script writes only if
        // they are still exactly those. The slot is the grant's own, so a
        // binding naming another actor is counted there.
        if let Some((slot, fingerprint, head)) = self.cached_fingerprint(id) {
            match self
                .consume_in(
                    &slot,
                    &fingerprint,
                    head.as_deref(),
                    id,
                    binding,
                    now,
                    attempt,
                )
                .await?
            {
                Attempt::Done(outcome) => return Ok(outcome),
                Attempt::Changed | Attempt::Unknown => self.forget(id),
            }
        }
        // The binding names the actor, so the grant is in its slot, unless
        // the binding's actor is not the grant's (then the pointer tells).
        let hint = self.slot(&binding.actor_id);
        let mut last_key = hint.grant_key(id);
        for _ in 0..MAX_READS {
            // Every check that can refuse the record runs here, before the
            // script may mark it; the script writes only if its fixed fields
            // are unchanged.
            let Some((slot, read)) = self.locate(id, Some(hint.clone())).await? else {
                return Ok(ConsumeOutcome::Unknown);
            };
            match self
                .consume_in(&slot, &read.fingerprint, None, id, binding, now, attempt)
                .await?
            {
                Attempt::Done(outcome) => return Ok(outcome),
                Attempt::Changed => {
                    self.forget(id);
                    last_key = slot.grant_key(id);
                }
                Attempt::Unknown => return Ok(ConsumeOutcome::Unknown),
            }
        }
        Err(kept_changing(&last_key))
    }

    async fn abandon(
        &self,
        id: &ApprovalId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        let now_text = now.as_millis().to_string();
        // The slot this store remembers (the consume it gives back found
        // it), else the pointer's: an abandon right after a consume that got
        // no answer goes out at once, behind it on the same connection.
        let mut slot = self.first_slot(id, None);
        let mut from_pointer = false;
        let (slot, reply, wait) = loop {
            let current = match slot.take() {
                Some(current) => current,
                None => match self.pointer_tag(id).await? {
                    Some(tag) => {
                        from_pointer = true;
                        self.slot_of_tag(tag)
                    }
                    None => return Ok(AbandonOutcome::Unknown),
                },
            };
            let key = current.grant_key(id);
            let args: [&[u8]; 5] = [
                id.as_str().as_bytes(),
                now_text.as_bytes(),
                attempt.as_str().as_bytes(),
                self.retention_ms.as_bytes(),
                current.prefix.as_bytes(),
            ];
            // At once: behind the consume it gives back, on the client that
            // carried it, even while that client is being replaced.
            let (reply, wait) = self
                .run_with(GrantScript::Abandon, &[&key], &args, true, true)
                .await?;
            if reply.status == "unknown" && reply.bare() {
                if from_pointer {
                    return Ok(AbandonOutcome::Unknown);
                }
                // Not where this store remembered it: ask the pointer, once.
                match self.pointer_tag(id).await? {
                    Some(tag) if tag != current.tag => {
                        from_pointer = true;
                        slot = Some(self.slot_of_tag(tag));
                        continue;
                    }
                    _ => return Ok(AbandonOutcome::Unknown),
                }
            }
            break (current, reply, wait);
        };
        let key = slot.grant_key(id);
        let outcome = match reply.status.as_str() {
            "corrupt" => return Err(corrupt_reply(&key, &reply)),
            "restored" => AbandonOutcome::Usable { restored: true },
            "usable" => AbandonOutcome::Usable { restored: false },
            "consumed_by_other" => AbandonOutcome::ConsumedByOther,
            "expired" => AbandonOutcome::Expired,
            "revoked" | "retired" => AbandonOutcome::Revoked,
            "stopped" => AbandonOutcome::Stopped,
            _ => return Err(unexpected_reply(GrantScript::Abandon, &key)),
        };
        self.remember(id, &slot.tag, None);
        let (before, abandoned, seen) = reply_record(GrantScript::Abandon, id, &key, &reply)?;
        let decision = decide_abandon(&before, &abandoned, seen.stopped, now, attempt);
        // `retired` is the revoke that a full list causes: it must be exactly that.
        let retired = reply.status == "retired";
        if decision.outcome != outcome || retired != (decision.state == Some(GrantState::Revoked)) {
            return Err(disagreement(&key, GrantScript::Abandon));
        }
        if let Some(at) = seen.moved {
            self.keep_pointer(id, &slot, at).await;
        }
        // Every answer but an untouched revoked or stopped grant wrote.
        let untouched = matches!(outcome, AbandonOutcome::Revoked | AbandonOutcome::Stopped);
        if !untouched || retired {
            self.confirm(wait)?;
        }
        Ok(outcome)
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
        self.resume(&self.run_fence_key(actor, run), "a run").await
    }

    async fn resume_actor(&self, actor: &ActorId) -> Result<ResumeOutcome, StoreError> {
        self.resume(&self.actor_fence_key(actor), "an actor").await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn persistence_risks() {
        assert_eq!(persistence_risk("yes", "always", ""), PersistenceRisk::None);
        assert!(matches!(
            persistence_risk("yes", "everysec", ""),
            PersistenceRisk::Window(w) if w.contains("about the last second")
        ));
        assert!(matches!(
            persistence_risk("yes", "no", "3600 1"),
            PersistenceRisk::Window(_)
        ));
        for (appendfsync, save) in [("always", "3600 1"), ("everysec", ""), ("no", "60 1")] {
            assert!(matches!(
                persistence_risk("no", appendfsync, save),
                PersistenceRisk::Undoes(w) if w.starts_with("appendonly no")
            ));
        }
    }

    #[test]
    fn server_versions() {
        assert_eq!(
            server_major_version("# Server\r\nredis_version:7.0.15\r\n"),
            Some(7)
        );
        assert_eq!(server_major_version("redis_version:4.0.9\n"), Some(4));
        assert_eq!(server_major_version("nothing"), None);
    }

    #[test]
    fn replies_are_parsed_strictly() {
        let key = "k";
        let word = |w: &str| Value::BulkString(w.as_bytes().to_vec());
        let ok = Value::Array(vec![word("missing")]);
        let reply = parse_reply(GrantScript::Get, key, ok).unwrap();
        assert_eq!(reply.status, "missing");
        assert!(reply.bare());
        for bad in [
            Value::Nil,
            Value::Int(1),
            Value::Array(vec![]),
            Value::Array(vec![Value::Int(1)]),
            Value::Array(vec![Value::Nil, Value::Nil, Value::Nil]),
            Value::Array(vec![word("found"); 5]),
        ] {
            assert!(matches!(
                parse_reply(GrantScript::Get, key, bad),
                Err(StoreError::Corrupt { .. })
            ));
        }
        let seen = |words: &[&str]| {
            parse_seen(
                GrantScript::Consume,
                key,
                Some(&Value::Array(words.iter().map(|w| word(w)).collect())),
            )
        };
        assert_eq!(
            seen(&["stopped", "1"]).unwrap(),
            Seen {
                stopped: true,
                moved: None
            }
        );
        assert_eq!(
            seen(&["stopped", "0", "moved", "17"]).unwrap(),
            Seen {
                stopped: false,
                moved: Some(17)
            }
        );
        for bad in [
            &["stopped"][..],
            &["stopped", "yes"],
            &["stopped", "0", "moved"],
            &["stopped", "0", "moved", "-1"],
            &["moved", "1", "stopped", "0"],
            &["stopped", "0", "extra", "1"],
        ] {
            assert!(seen(bad).is_err(), "{bad:?}");
        }
        assert!(parse_seen(GrantScript::Consume, key, None).is_err());
        assert!(parse_seen(GrantScript::Consume, key, Some(&Value::Int(1))).is_err());
    }

    #[test]
    fn actor_tags_are_the_start_of_the_sha256_of_the_id() {
        let tag = actor_tag(&ActorId::new("abc").unwrap());
        // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
        assert_eq!(tag, "ba7816bf8f01cfea414140de5dae2223");
        let braces = actor_tag(&ActorId::new("{x}").unwrap());
        assert_eq!(braces.len(), 32);
        assert!(
            braces
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }

    #[test]
    fn consume_answers_agree_with_the_rules_only_when_they_write_what_the_rules_say() {
        let decision = |outcome, state, failed| ConsumeDecision {
            outcome,
            state,
            failed_attempts: failed,
        };
        let locked = ConsumeOutcome::Stale(StaleReason::Locked);
        let lock = decision(locked, Some(GrantState::Locked), Some(5));
        assert!(consume_agrees("locked", locked, &lock));
        assert!(!consume_agrees("stale_locked", locked, &lock));
        let already = decision(locked, None, None);
        assert!(consume_agrees("stale_locked", locked, &already));
        assert!(!consume_agrees("locked", locked, &already));
        let mismatch = ConsumeOutcome::Stale(StaleReason::Mismatch);
        assert!(consume_agrees(
            "stale_mismatch",
            mismatch,
            &decision(mismatch, None, Some(1))
        ));
        assert!(!consume_agrees(
            "stale_mismatch",
            mismatch,
            &decision(mismatch, None, None)
        ));
    }
}
