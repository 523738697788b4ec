//! The store: its type, connecting, the names of its keys, and the one
//! way every call runs a script.

use std::fmt;
use std::time::Duration;

use countersign_approval_core::{
    ActorId, ApprovalId, MAX_LISTED_PROPOSALS, ProposalId, RunId, StandingId, StoreError, Timestamp,
};
use redis::{RedisError, Value};

use crate::cache::SlotCache;
use crate::conn::{Connection, is_lost_connection};
use crate::error::{connect_error, is_noscript, redis_error, timed};
use crate::keys::{self, Slot};
use crate::options::{ConnectError, Durability, RedisStoreOptions, Topology};
use crate::outbox_state::OutboxState;
use crate::probe::{check_seeds, probe};
use crate::reply::{Reply, corrupt_reply, parse_reply, unexpected_reply};
use crate::scripts::{GrantScript, Scripts};

/// How many times a read is sent again after its connection failed under
/// it (see [`RedisApprovalStore::run_read`]).
const READ_RESENDS: u32 = 2;

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
    /// What this store learnt lately of grants, by id: their slots, and
    /// the fingerprints of fixed fields it validated.
    pub(crate) slots: SlotCache,
    /// The notification outbox's state in this process, when the store
    /// keeps one.
    pub(crate) outbox: Option<OutboxState>,
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
        .map_err(|e| connect_error(&e))?;
        let scripts = Scripts::new();
        let startup_warnings = probe(&conn, &scripts, &options).await?;
        Ok(RedisApprovalStore {
            conn,
            prefix: options.key_prefix.clone(),
            retention_ms: options.retention.as_millis().to_string(),
            command_timeout: options.command_timeout,
            failover_wait: match options.topology {
                Topology::Cluster(_) => options.failover_timeout,
                Topology::Single(_) => Duration::ZERO,
            },
            durability: options.durability,
            scripts,
            startup_warnings,
            slots: SlotCache::default(),
            outbox: options.notification_outbox.then(OutboxState::default),
        })
    }

    /// The tag of `actor`'s slot: the first 32 lower-case hex characters of
    /// the SHA-256 of the actor id.
    pub fn actor_tag(actor: &ActorId) -> String {
        keys::actor_tag(actor)
    }

    /// The slot of the actor whose tag is `tag` (one a pointer named).
    pub(crate) fn slot_of_tag(&self, tag: String) -> Slot {
        Slot::of_tag(&self.prefix, tag)
    }

    /// The slot of `actor`, where all its grants, proposals and fences live.
    pub(crate) fn slot(&self, actor: &ActorId) -> Slot {
        Slot::of_actor(&self.prefix, actor)
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
        keys::pointer_key(&self.prefix, id)
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
    /// The key of proposal `id` of `actor`:
    /// `{prefix}:{a<tag>}:proposal:<id>`, in the actor's slot with its
    /// grants and fences.
    pub fn proposal_key(&self, actor: &ActorId, id: &ProposalId) -> String {
        self.slot(actor).proposal_key(id)
    }

    /// The index of `run`'s undecided proposals of `actor`:
    /// `{prefix}:{a<tag>}:pending:<run id>`, a sorted set whose members
    /// `<proposed_at as 20 digits>:<id>` (all of score 0) sort oldest first.
    pub fn pending_key(&self, actor: &ActorId, run: &RunId) -> String {
        self.slot(actor).pending_key(run)
    }

    /// The key naming the slot of proposal `id`: `{prefix}:pid:{<id>}` (the
    /// id is its hash tag), a string holding the actor's tag.
    pub fn proposal_pointer_key(&self, id: &ProposalId) -> String {
        keys::proposal_pointer_key(&self.prefix, id)
    }

    /// The key of standing grant `id` of `actor`:
    /// `{prefix}:{a<tag>}:standing:<id>`, in the actor's slot with its
    /// fences.
    pub fn standing_key(&self, actor: &ActorId, id: &StandingId) -> String {
        self.slot(actor).standing_key(id)
    }

    /// The index of `run`'s standing grants of `actor`:
    /// `{prefix}:{a<tag>}:standings:<run id>`, a sorted set of their ids
    /// scored by `issued_at` (equal scores sort by id).
    pub fn standings_key(&self, actor: &ActorId, run: &RunId) -> String {
        self.slot(actor).standings_key(run)
    }

    /// The key naming the slot of standing grant `id`: `{prefix}:sid:{<id>}`
    /// (the id is its hash tag), a string holding the actor's tag.
    pub fn standing_pointer_key(&self, id: &StandingId) -> String {
        keys::standing_pointer_key(&self.prefix, id)
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
    pub(crate) async fn run_with(
        &self,
        script: GrantScript,
        keys: &[&str],
        args: &[&[u8]],
        durable: bool,
        at_once: bool,
    ) -> Result<(Reply, Option<Value>), StoreError> {
        self.run_sending(script, keys, args, (durable, at_once), 0)
            .await
    }

    /// Runs `script`, which only reads, as [`run`](Self::run) does (not
    /// durable: it writes nothing). A call whose connection failed under it
    /// (dropped, reset, refused) is sent again, at most [`READ_RESENDS`]
    /// times, on the client that replaces the failed one: a read changes
    /// nothing, so running it twice is safe, and a read that failed only
    /// because its primary just died waits for the replica's promotion, as
    /// every call that finds no primary does. Writes are never resent.
    pub(crate) async fn run_read(
        &self,
        script: GrantScript,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<Reply, StoreError> {
        let (reply, _) = self
            .run_sending(script, keys, args, (false, false), READ_RESENDS)
            .await?;
        Ok(reply)
    }

    /// [`run_with`](Self::run_with) with `(durable, at_once)`, sending the
    /// call again up to `resends` times after a connection failure (only
    /// for a script that writes nothing).
    async fn run_sending(
        &self,
        script: GrantScript,
        keys: &[&str],
        args: &[&[u8]],
        (durable, at_once): (bool, bool),
        mut resends: u32,
    ) -> Result<(Reply, Option<Value>), StoreError> {
        let loaded = self.scripts.get(script);
        let what = format!("{} script", script.name());
        let key = keys.first().copied().unwrap_or_default();
        let wait = self.durability.filter(|_| durable);
        // A call on a cluster may wait for a failover before its round trip.
        let round_trip = self.command_timeout.saturating_add(self.failover_wait);
        let mut reload = false;
        loop {
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
                Err(e) if is_noscript(&e) && reload => {
                    return Err(StoreError::unavailable(format!(
                        "{what}: the server kept answering noscript"
                    )));
                }
                Err(e) if is_noscript(&e) => {
                    tracing::debug!(
                        target: "countersign_store_redis",
                        script = script.name(),
                        "script not in the server's cache; reloading it with eval"
                    );
                    reload = true;
                }
                Err(e) if resends > 0 && is_lost_connection(&e) => {
                    tracing::debug!(
                        target: "countersign_store_redis",
                        script = script.name(),
                        error = %e,
                        "a read lost its connection; sending it again"
                    );
                    resends -= 1;
                }
                Err(e) => return Err(redis_error(&what, &e)),
                Ok((value, wait)) => return Ok((parse_reply(script, key, value)?, wait)),
            }
        }
    }

    /// Runs the list `script` on the index of `run` of `actor` that
    /// `index_of` names in the actor's slot, at `now`: the index's key and
    /// the records (or heads) the script lists, oldest first, at most
    /// [`MAX_LISTED_PROPOSALS`], each a bulk string for the caller to read
    /// strictly. Not durable: a list script writes only to drop index
    /// entries that can never be listed again.
    pub(crate) async fn run_list(
        &self,
        script: GrantScript,
        (actor, run): (&ActorId, &RunId),
        index_of: fn(&Slot, &RunId) -> String,
        now: Timestamp,
    ) -> Result<(String, Vec<Vec<u8>>), StoreError> {
        let slot = self.slot(actor);
        let index = index_of(&slot, run);
        let index = index.as_str();
        let now_text = now.as_millis().to_string();
        let most = MAX_LISTED_PROPOSALS.to_string();
        let args: [&[u8]; 4] = [
            run.as_str().as_bytes(),
            slot.prefix.as_bytes(),
            now_text.as_bytes(),
            most.as_bytes(),
        ];
        let (reply, _) = self.run(script, &[index], &args, false).await?;
        if reply.status == "corrupt" && matches!(reply.items.len(), 1 | 2) {
            return Err(corrupt_reply(index, &reply));
        }
        let unexpected = || unexpected_reply(script, index);
        let mut items = reply.items;
        let listed = match (reply.status.as_str(), items.pop(), items.is_empty()) {
            ("listed", Some(Value::Array(listed)), true)
                if listed.len() <= MAX_LISTED_PROPOSALS =>
            {
                listed
            }
            _ => return Err(unexpected()),
        };
        let listed = listed
            .into_iter()
            .map(|item| match item {
                Value::BulkString(bytes) => Ok(bytes),
                _ => Err(unexpected()),
            })
            .collect::<Result<_, _>>()?;
        Ok((index.to_owned(), listed))
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
