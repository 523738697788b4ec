//! Connection and behaviour options of the Redis store.

use std::fmt;
use std::time::Duration;

use countersign_approval_core::StoreError;

/// How long a record is kept past the moment it can no longer be consumed
/// (`max(expires_at, now)`): 15 minutes.
///
/// What the kept record is for: a consume retried after a lost reply
/// answers a replay, and an abandon still finds what to give back (Act's
/// retries and abandon timeout are seconds); a model that comes back within
/// minutes with a used or expired grant hears `Stale` (`APPROVAL_STALE`)
/// rather than `Unknown` (`APPROVAL_REQUIRED`). It is not an audit trail:
/// the operation log keeps that, under its own retention. Every second of
/// retention costs the bytes of a second's worth of grants (see
/// `docs/redis.md`, section 4).
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(15 * 60);
/// The key prefix used when none is set.
pub const DEFAULT_KEY_PREFIX: &str = "countersign";
/// How long one Redis round trip may take before it fails as a timeout.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
/// How long connecting (and the start-up probe) may take.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a call on a Redis Cluster waits for a slot's primary to come
/// back or for its replica to be promoted: 15 s.
///
/// A replica is promoted about `cluster-node-timeout` after its primary
/// died, plus an election of a second or two (the store's tests, with a
/// 5 s node timeout, measured 5.5–8.5 s), so this covers node timeouts up
/// to about 10 s; with Redis's default of 15 s set about 20 s.
pub const DEFAULT_FAILOVER_TIMEOUT: Duration = Duration::from_secs(15);
/// The longest failover timeout accepted.
pub const MAX_FAILOVER_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// The longest retention accepted.
pub const MAX_RETENTION: Duration = Duration::from_secs(366 * 24 * 60 * 60);
/// The longest key prefix accepted, in bytes.
pub const MAX_KEY_PREFIX_BYTES: usize = 128;

/// Where the grants live.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Topology {
    Single(String),
    Cluster(Vec<String>),
}

/// Replication required after every write: `WAIT replicas timeout`.
///
/// When fewer replicas confirm in time, the call fails with
/// [`StoreError::DurabilityUnconfirmed`]; the write itself stays applied
/// on the primary (a consume stays consumed), so the caller must fail
/// closed, and a retry with the same attempt id answers a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durability {
    /// How many replicas must acknowledge each write (at least 1).
    pub replicas: u32,
    /// How long to wait for them: at least 1 ms (`WAIT` with 0 would block
    /// forever), counted in whole milliseconds.
    pub timeout: Duration,
}

impl Durability {
    /// Wait for `replicas` replicas for at most `timeout` after each write.
    pub fn new(replicas: u32, timeout: Duration) -> Self {
        Durability { replicas, timeout }
    }
}

/// How to reach Redis and how the store behaves.
///
/// ```
/// use std::time::Duration;
/// use countersign_store_redis::{Durability, RedisStoreOptions};
///
/// let options = RedisStoreOptions::single("redis://127.0.0.1:7001/")
///     .key_prefix("myapp:countersign")
///     .retention(Duration::from_secs(6 * 60 * 60))
///     .command_timeout(Duration::from_millis(500))
///     .durability(Durability::new(1, Duration::from_millis(100)));
/// assert!(options.validate().is_ok());
/// assert!(RedisStoreOptions::single("redis://127.0.0.1:7001/").key_prefix("a{b}").validate().is_err());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct RedisStoreOptions {
    pub(crate) topology: Topology,
    pub(crate) key_prefix: String,
    pub(crate) retention: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) failover_timeout: Duration,
    pub(crate) durability: Option<Durability>,
    pub(crate) allow_non_durable_persistence: bool,
    pub(crate) allow_unverified_persistence: bool,
    pub(crate) notification_outbox: bool,
}

impl RedisStoreOptions {
    fn with_topology(topology: Topology) -> Self {
        RedisStoreOptions {
            topology,
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            retention: DEFAULT_RETENTION,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            failover_timeout: DEFAULT_FAILOVER_TIMEOUT,
            durability: None,
            allow_non_durable_persistence: false,
            allow_unverified_persistence: false,
            notification_outbox: false,
        }
    }

    /// One Redis server (its primary), e.g. `redis://127.0.0.1:6380/` or
    /// `rediss://user:password@host:6380/0` (TLS only if `redis` was built with a TLS feature).
    pub fn single(url: impl Into<String>) -> Self {
        Self::with_topology(Topology::Single(url.into()))
    }

    /// A Redis Cluster, given one or more of its nodes; the rest are discovered.
    pub fn cluster<I, S>(nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::with_topology(Topology::Cluster(
            nodes.into_iter().map(Into::into).collect(),
        ))
    }

    /// The first part of every key (default `countersign`): non-empty, at
    /// most 128 bytes, without `{`, `}` or control characters. Grants live
    /// at `{prefix}:{a<tag>}:grant:<id>` (see the [crate docs](crate#layout)).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// How long a record is kept after `max(expires_at, now)` (default
    /// [`DEFAULT_RETENTION`], 15 minutes; at least 1 ms, at most 366 days,
    /// counted in whole milliseconds).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// The limit on each Redis round trip (default 2 s); past it the call
    /// fails with [`StoreError::Timeout`]. A durable write may take this
    /// plus the [`Durability::timeout`].
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// The limit on connecting and on the start-up probe (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// On a Redis Cluster, how long one call waits for the primary of its
    /// slot while the cluster proves the call did not run there: no
    /// connection to the node, `CLUSTERDOWN`, `MASTERDOWN`, `LOADING`,
    /// `READONLY` (default [`DEFAULT_FAILOVER_TIMEOUT`], 15 s; zero
    /// fails such a call at once; at most 10 minutes). Meanwhile the call is
    /// sent again, routed by the cluster's refreshed slot map, every 100
    /// ms or so, so a call on the slots of a primary that died succeeds
    /// once its replica is promoted. A call whose reply was lost (it may
    /// have run) is never sent again by the store: it fails, and the
    /// caller's retry with the same attempt id answers a replay. Set it
    /// above your cluster's `cluster-node-timeout` plus a couple of
    /// seconds of election. Ignored on a single server.
    pub fn failover_timeout(mut self, timeout: Duration) -> Self {
        self.failover_timeout = timeout;
        self
    }

    /// Require replicas to acknowledge every write (default: none).
    ///
    /// Without it, a failover can lose every write the old primary had
    /// acknowledged but not yet shipped to the promoted replica (Redis
    /// replicates asynchronously): a grant consumed in that window is active
    /// again on the new primary and can be performed a second time; an
    /// issue or a revoke in it is lost too. With it, a write is confirmed
    /// only once `replicas` replicas hold it, which narrows that window to a
    /// promoted replica that was not among them (see `docs/redis.md`).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = Some(durability);
        self
    }

    /// **Risk: a restart can bring consumed grants back.** Accept a server
    /// with `appendonly no` (RDB snapshots only, or no persistence), which
    /// [`connect`](crate::RedisApprovalStore::connect) refuses by default.
    ///
    /// Redis loads an existing `dump.rdb` at start-up whatever `save` says
    /// now (a manual `SAVE`, an earlier configuration, or a replica's full
    /// sync writes one): after a crash or restart, every grant consumed or
    /// revoked since that snapshot is active again and can be performed a
    /// second time, while grants issued since are lost. Use this only for
    /// throw-away servers (tests, local development) or where a second
    /// performance of an approved action is acceptable. The store still
    /// warns at start-up.
    pub fn allow_non_durable_persistence(mut self) -> Self {
        self.allow_non_durable_persistence = true;
        self
    }

    /// **Risk: the store cannot tell whether a restart loses consumes.**
    /// Accept a server whose persistence settings cannot be read (`CONFIG`
    /// disabled or forbidden, as on many managed services), which
    /// [`connect`](crate::RedisApprovalStore::connect) refuses by default.
    /// Only opt in when the service guarantees what `appendonly yes`
    /// guarantees (an acknowledged write survives a restart); otherwise a
    /// restart may bring consumed grants back, as
    /// [`allow_non_durable_persistence`](Self::allow_non_durable_persistence)
    /// describes. The store still warns at start-up.
    pub fn allow_unverified_persistence(mut self) -> Self {
        self.allow_unverified_persistence = true;
        self
    }

    /// Whether the store records notification events in an outbox (default
    /// off: an outbox nobody drains only grows). With it on, propose, a
    /// decision and a stop each record their event in their own script, in
    /// the actor's slot, and the store is a
    /// [`NotificationOutbox`](countersign_approval_core::NotificationOutbox)
    /// for a delivery worker to drain; with it off, every outbox call
    /// answers [`StoreError::Unsupported`](countersign_approval_core::StoreError).
    pub fn notification_outbox(mut self, on: bool) -> Self {
        self.notification_outbox = on;
        self
    }

    /// The configured key prefix.
    pub fn prefix(&self) -> &str {
        &self.key_prefix
    }

    /// Checks every option; [`RedisApprovalStore::connect`](crate::RedisApprovalStore::connect)
    /// does this first.
    pub fn validate(&self) -> Result<(), InvalidOptions> {
        let prefix = &self.key_prefix;
        if prefix.is_empty() {
            return Err(InvalidOptions::new("key prefix must not be empty"));
        }
        if prefix.len() > MAX_KEY_PREFIX_BYTES {
            return Err(InvalidOptions::new("key prefix must be at most 128 bytes"));
        }
        if prefix.contains(['{', '}']) {
            return Err(InvalidOptions::new(
                "key prefix must not contain `{` or `}`: the store's keys carry their own cluster hash tags",
            ));
        }
        if prefix.chars().any(char::is_control) {
            return Err(InvalidOptions::new(
                "key prefix must not contain control characters",
            ));
        }
        if self.retention.as_millis() == 0 || self.retention > MAX_RETENTION {
            return Err(InvalidOptions::new(
                "retention must be at least 1 ms and at most 366 days",
            ));
        }
        if self.command_timeout.is_zero() {
            return Err(InvalidOptions::new(
                "command timeout must be more than zero",
            ));
        }
        if self.connect_timeout.is_zero() {
            return Err(InvalidOptions::new(
                "connect timeout must be more than zero",
            ));
        }
        if self.failover_timeout > MAX_FAILOVER_TIMEOUT {
            return Err(InvalidOptions::new(
                "failover timeout must be at most 10 minutes",
            ));
        }
        if let Some(durability) = self.durability {
            if durability.replicas == 0 {
                return Err(InvalidOptions::new(
                    "durability must require at least one replica",
                ));
            }
            let millis = durability.timeout.as_millis();
            if millis == 0 || millis > u128::from(u32::MAX) {
                return Err(InvalidOptions::new(
                    "durability timeout must be at least 1 ms and at most about 49 days",
                ));
            }
        }
        match &self.topology {
            Topology::Single(url) if url.trim().is_empty() => {
                Err(InvalidOptions::new("server url must not be empty"))
            }
            Topology::Cluster(nodes) if nodes.is_empty() => {
                Err(InvalidOptions::new("a cluster needs at least one node url"))
            }
            Topology::Cluster(nodes) if nodes.iter().any(|n| n.trim().is_empty()) => {
                Err(InvalidOptions::new("cluster node urls must not be empty"))
            }
            _ => Ok(()),
        }
    }
}

/// Hides any password in a Redis URL.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}://***@{}", &url[..scheme_end], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

impl fmt::Debug for RedisStoreOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("RedisStoreOptions");
        match &self.topology {
            Topology::Single(url) => debug.field("single", &redact(url)),
            Topology::Cluster(nodes) => debug.field(
                "cluster",
                &nodes.iter().map(|n| redact(n)).collect::<Vec<_>>(),
            ),
        };
        debug
            .field("key_prefix", &self.key_prefix)
            .field("retention", &self.retention)
            .field("command_timeout", &self.command_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("failover_timeout", &self.failover_timeout)
            .field("durability", &self.durability)
            .field(
                "allow_non_durable_persistence",
                &self.allow_non_durable_persistence,
            )
            .field(
                "allow_unverified_persistence",
                &self.allow_unverified_persistence,
            )
            .finish()
    }
}

/// An option is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidOptions {
    message: String,
}

impl InvalidOptions {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        InvalidOptions {
            message: message.into(),
        }
    }
}

/// [`RedisApprovalStore::connect`](crate::RedisApprovalStore::connect) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The options are invalid; nothing was contacted.
    #[error("invalid redis store options: {0}")]
    InvalidOptions(#[from] InvalidOptions),
    /// Redis could not be reached ([`StoreError::Unavailable`],
    /// [`StoreError::Timeout`]) or cannot run the store's scripts
    /// ([`StoreError::Unsupported`]).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The servers are not the topology the options name: a plain server
    /// given to [`RedisStoreOptions::cluster`], a cluster node given to
    /// [`RedisStoreOptions::single`], or a cluster seed list that mixes
    /// both. A configuration mistake: retrying cannot help.
    #[error("wrong redis topology: {message}")]
    WrongTopology {
        /// What is wrong and what to change.
        message: String,
    },
    /// A server's persistence settings let a crash or restart undo an
    /// acknowledged consume (`appendonly no`), or cannot be read, and the
    /// options do not accept that risk
    /// ([`RedisStoreOptions::allow_non_durable_persistence`],
    /// [`RedisStoreOptions::allow_unverified_persistence`]). A configuration
    /// mistake: retrying cannot help.
    #[error("redis server is not durable enough: {message}")]
    NotDurable {
        /// Which server, which setting, and what to change.
        message: String,
    },
}

impl ConnectError {
    /// Whether connecting again later may succeed: only for a store error
    /// that is itself retryable (unreachable, timed out). Invalid options,
    /// a wrong topology and a non-durable server are configuration
    /// mistakes.
    pub fn is_retryable(&self) -> bool {
        match self {
            ConnectError::Store(error) => error.is_retryable(),
            ConnectError::InvalidOptions(_)
            | ConnectError::WrongTopology { .. }
            | ConnectError::NotDurable { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn base() -> RedisStoreOptions {
        RedisStoreOptions::single("redis://127.0.0.1:1/")
    }

    #[test]
    fn defaults_are_valid() {
        assert!(base().validate().is_ok());
        assert!(
            RedisStoreOptions::cluster(["redis://127.0.0.1:1/"])
                .validate()
                .is_ok()
        );
        assert_eq!(base().prefix(), DEFAULT_KEY_PREFIX);
    }

    #[test]
    fn bad_options_are_refused() {
        let bad = [
            base().key_prefix(""),
            base().key_prefix("a{b"),
            base().key_prefix("a}b"),
            base().key_prefix("a\nb"),
            base().key_prefix("x".repeat(129)),
            base().retention(Duration::ZERO),
            base().retention(Duration::from_micros(999)),
            base().retention(MAX_RETENTION + Duration::from_secs(1)),
            base().command_timeout(Duration::ZERO),
            base().connect_timeout(Duration::ZERO),
            base().failover_timeout(MAX_FAILOVER_TIMEOUT + Duration::from_millis(1)),
            base().durability(Durability::new(0, Duration::from_secs(1))),
            base().durability(Durability::new(1, Duration::ZERO)),
            base().durability(Durability::new(1, Duration::from_micros(999))),
            RedisStoreOptions::single(" "),
            RedisStoreOptions::cluster(Vec::<String>::new()),
            RedisStoreOptions::cluster([""]),
        ];
        for options in bad {
            let err = options.validate().expect_err("must be refused");
            let text = err.to_string();
            assert!(text.starts_with(|c: char| c.is_lowercase()), "{text}");
            assert!(!text.ends_with('.'), "{text}");
        }
    }

    #[test]
    fn debug_hides_passwords() {
        let options = RedisStoreOptions::single("redis://user:s3cret@host:6380/0");
        let text = format!("{options:?}");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("host:6380"), "{text}");
        let options = RedisStoreOptions::cluster(["redis://:pw@a:1", "redis://b:2"]);
        let text = format!("{options:?}");
        assert!(!text.contains("pw@"), "{text}");
    }
}
