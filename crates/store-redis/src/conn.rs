//! One interface over the two kinds of connection: a single server through
//! a `ConnectionManager`, or Redis Cluster through `cluster_async`.
//!
//! Neither client ever resends a command by itself: the cluster client is
//! built with no retries (see `Client::open`), and this module follows
//! only the answers that prove a command did not run (`MOVED`, `ASK`,
//! `TRYAGAIN`, `CLUSTERDOWN`, `LOADING`, `MASTERDOWN`, `READONLY`, no
//! connection to the node, a connection refused). A command whose fate is
//! unknown (a dropped connection, a timeout) fails back to the caller,
//! whose retry carries the same attempt id. While a slot's primary is gone
//! (the answers that say so, above), a call waits for it, or for its
//! replica's promotion, up to the failover timeout.
//!
//! A client whose calls time out without any reply arriving, or whose
//! connection dies, is replaced by a fresh one (see [`Connection`]), so a
//! store never stays stuck on sockets the server has closed.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, ResponsePolicy, Route, RoutingInfo, SingleNodeRoutingInfo, Slot,
    SlotAddr,
};
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisResult, ServerErrorKind, Value};

use crate::options::{RedisStoreOptions, Topology};

/// How many times one call follows redirects and `TRYAGAIN` answers
/// before it gives up (the command timeout bounds it too).
const MAX_REDIRECTS: u32 = 16;

/// Where to send a command again when the cluster proved it did not run it.
enum NextTry {
    /// Follow `MOVED`: the slot's primary is this node now.
    Moved { host: String, port: u16 },
    /// Follow `ASK`: send `ASKING` and the command to this node, once.
    Ask { host: String, port: u16 },
    /// The slot is being migrated (`TRYAGAIN`): wait, then route by slot
    /// again; counted with the redirects.
    Wait,
    /// The slot has no primary to answer (its node unreachable, the
    /// cluster down, a failover under way): wait, then route by slot
    /// again, for up to the failover timeout.
    Failover,
}

/// What to do after `err`, or `None` when the command may have run (or
/// the error is final): then the error goes back to the caller.
fn not_run(err: &RedisError) -> Option<NextTry> {
    let address = || {
        let (addr, _slot) = err.redirect_node()?;
        let (host, port) = addr.rsplit_once(':')?;
        Some((host.to_owned(), port.parse().ok()?))
    };
    match err.kind() {
        ErrorKind::Server(ServerErrorKind::Moved) => {
            Some(address().map_or(NextTry::Wait, |(host, port)| NextTry::Moved { host, port }))
        }
        ErrorKind::Server(ServerErrorKind::Ask) => {
            Some(address().map_or(NextTry::Wait, |(host, port)| NextTry::Ask { host, port }))
        }
        ErrorKind::Server(ServerErrorKind::TryAgain) => Some(NextTry::Wait),
        ErrorKind::Server(
            ServerErrorKind::ClusterDown
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly,
        )
        | ErrorKind::ClusterConnectionNotFound => Some(NextTry::Failover),
        // Refused: nothing was sent on that connection. A connection that
        // dropped (reset, closed) may have carried the command: not here.
        _ if err.is_connection_refusal() => Some(NextTry::Failover),
        _ => None,
    }
}

/// The pause before try `n` after a "wait" answer: 5 ms, 10 ms, … up to 100 ms.
fn pause(tries: u32) -> Duration {
    Duration::from_millis(u64::from(tries.min(20)) * 5)
}

/// One client: a cheap-to-clone handle on its sockets.
#[derive(Clone)]
enum Client {
    /// One server (its primary); reconnects by itself.
    Single(ConnectionManager),
    /// A cluster; commands go to the primary that owns the key's slot,
    /// waiting up to the failover timeout (the `Duration`) for one.
    Cluster(ClusterConnection, Duration),
}

/// The primary owning `key`'s slot: grants are never read from replicas.
fn primary_for(key: &str) -> SingleNodeRoutingInfo {
    SingleNodeRoutingInfo::SpecificNode(Route::with_slot(Slot::for_key(key), SlotAddr::Master))
}

impl Client {
    /// Opens the client the options describe.
    async fn open(options: &RedisStoreOptions) -> RedisResult<Client> {
        match &options.topology {
            Topology::Single(url) => {
                let client = redis::Client::open(url.as_str())?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(options.connect_timeout))
                    .set_response_timeout(None)
                    .set_number_of_retries(2)
                    .set_max_delay(Duration::from_millis(500));
                let manager = client.get_connection_manager_with_config(config).await?;
                Ok(Client::Single(manager))
            }
            Topology::Cluster(nodes) => {
                // No retries: the client would otherwise resend a script whose
                // connection dropped after the server ran it, and the resend of an
                // applied consume answers `replay` to a brand-new attempt. Redirects
                // and "try again" answers, which prove the script did not run, are
                // followed by `cluster_on_key` instead.
                let client = ClusterClientBuilder::new(nodes.iter().map(String::as_str))
                    .connection_timeout(options.connect_timeout)
                    .response_timeout(options.command_timeout)
                    .retries(0)
                    .build()?;
                let conn = client.get_async_connection().await?;
                Ok(Client::Cluster(conn, options.failover_timeout))
            }
        }
    }

    /// Runs `cmd`, which touches only `key`, on the primary that holds `key`.
    pub(crate) async fn on_key(&self, key: &str, cmd: Cmd) -> RedisResult<Value> {
        match self.clone() {
            Client::Single(mut conn) => conn.send_packed_command(&cmd).await?.extract_error(),
            Client::Cluster(conn, failover) => {
                let mut replies = cluster_on_key(conn, failover, key, vec![cmd]).await?;
                replies.pop().unwrap_or(Value::Nil).extract_error()
            }
        }
    }

    /// Sends `cmds` in one pipeline on one connection to the primary that
    /// holds `key`, and returns each command's reply (server errors included
    /// as `Value::ServerError`). Used for a write followed by `WAIT`, which
    /// counts the writes of its own connection.
    pub(crate) async fn pipeline_on_key(
        &self,
        key: &str,
        cmds: Vec<Cmd>,
    ) -> RedisResult<Vec<Value>> {
        match self.clone() {
            Client::Single(mut conn) => {
                let count = cmds.len();
                let mut pipeline = Pipeline::with_capacity(count);
                for cmd in cmds {
                    pipeline.add_command(cmd);
                }
                conn.send_packed_commands(&pipeline, 0, count).await
            }
            Client::Cluster(conn, failover) => cluster_on_key(conn, failover, key, cmds).await,
        }
    }

    /// Runs an administrative `cmd` on every primary and returns each
    /// primary's reply, labelled with its address (`"server"` on a single
    /// server). Server errors stay in the list as `Value::ServerError`.
    pub(crate) async fn on_each_primary(&self, cmd: Cmd) -> RedisResult<Vec<(String, Value)>> {
        self.on_each(cmd, MultipleNodeRoutingInfo::AllMasters).await
    }

    /// Like [`on_each_primary`](Self::on_each_primary), on every node of a
    /// cluster, replicas included.
    pub(crate) async fn on_each_node(&self, cmd: Cmd) -> RedisResult<Vec<(String, Value)>> {
        self.on_each(cmd, MultipleNodeRoutingInfo::AllNodes).await
    }

    async fn on_each(
        &self,
        cmd: Cmd,
        nodes: MultipleNodeRoutingInfo,
    ) -> RedisResult<Vec<(String, Value)>> {
        match self.clone() {
            Client::Single(mut conn) => {
                let value = match conn.send_packed_command(&cmd).await {
                    Ok(value) => value,
                    Err(err) => {
                        let first = err
                            .clone()
                            .into_server_errors()
                            .and_then(|errors| errors.first().map(|(_, e)| e.clone()));
                        match first {
                            Some(server_error) => Value::ServerError(server_error),
                            None => return Err(err),
                        }
                    }
                };
                Ok(vec![("server".to_owned(), value)])
            }
            Client::Cluster(mut conn, _) => {
                let routing = RoutingInfo::MultiNode((nodes, None));
                match conn.route_command(cmd, routing).await? {
                    Value::Map(entries) => Ok(entries
                        .into_iter()
                        .map(|(node, value)| {
                            let node = match node {
                                Value::BulkString(bytes) => {
                                    String::from_utf8_lossy(&bytes).into_owned()
                                }
                                other => format!("{other:?}"),
                            };
                            (node, value)
                        })
                        .collect()),
                    other => Ok(vec![("cluster".to_owned(), other)]),
                }
            }
        }
    }

    /// Runs `cmd` on every node (primaries and replicas) and succeeds only
    /// if every node did; used for `SCRIPT LOAD`.
    pub(crate) async fn on_all_nodes(&self, cmd: Cmd) -> RedisResult<Value> {
        let value = match self.clone() {
            Client::Single(mut conn) => conn.send_packed_command(&cmd).await?,
            Client::Cluster(mut conn, _) => {
                let routing = RoutingInfo::MultiNode((
                    MultipleNodeRoutingInfo::AllNodes,
                    Some(ResponsePolicy::AllSucceeded),
                ));
                conn.route_command(cmd, routing).await?
            }
        };
        value.extract_error()
    }
}

/// Sends `cmds` as one pipeline to the primary of `key`'s slot, following
/// the answers that prove the first command did not run; returns one reply
/// per command (with `ASKING` left out). While the slot has no primary to
/// answer, it waits up to `failover` from the first such answer: each try
/// that finds no connection to the node makes the cluster client refresh
/// its slot map, so a later try reaches the promoted replica.
async fn cluster_on_key(
    mut conn: ClusterConnection,
    failover: Duration,
    key: &str,
    cmds: Vec<Cmd>,
) -> RedisResult<Vec<Value>> {
    let count = cmds.len();
    let mut route = primary_for(key);
    let mut asking = false;
    let mut tries = 0;
    let mut failing: Option<(Instant, u32)> = None;
    loop {
        let mut pipeline = Pipeline::with_capacity(count + 1);
        if asking {
            pipeline.add_command(redis::cmd("ASKING"));
        }
        for cmd in &cmds {
            pipeline.add_command(cmd.clone());
        }
        let offset = usize::from(asking);
        let result = conn
            .route_pipeline(pipeline, offset, count, route.clone())
            .await
            .and_then(|replies| match replies.first() {
                // The first command's redirect or "try again" arrives as a reply value.
                Some(Value::ServerError(_)) => match replies[0].clone().extract_error() {
                    Err(err) if not_run(&err).is_some() => Err(err),
                    _ => Ok(replies),
                },
                _ => Ok(replies),
            });
        let err = match result {
            Ok(replies) => return Ok(replies),
            Err(err) => err,
        };
        let Some(next) = not_run(&err) else {
            return Err(err);
        };
        if let NextTry::Failover = next {
            let (since, waits) = failing.get_or_insert_with(|| (Instant::now(), 0));
            *waits += 1;
            let wait = pause(*waits);
            if since.elapsed() + wait > failover {
                return Err(err);
            }
            // The redirects so far led to a node that is gone (a replica
            // answers `MOVED` to its dead primary until it is promoted
            // itself): the wait, not their count, bounds them now.
            tries = 0;
            route = primary_for(key);
            asking = false;
            tokio::time::sleep(wait).await;
            continue;
        }
        tries += 1;
        if tries >= MAX_REDIRECTS {
            return Err(err);
        }
        asking = false;
        match next {
            NextTry::Moved { host, port } => {
                route = SingleNodeRoutingInfo::ByAddress { host, port };
            }
            NextTry::Ask { host, port } => {
                route = SingleNodeRoutingInfo::ByAddress { host, port };
                asking = true;
            }
            NextTry::Wait | NextTry::Failover => {
                route = primary_for(key);
                tokio::time::sleep(pause(tries)).await;
            }
        }
    }
}

/// The shortest time between two replacements of a store's client.
pub(crate) const REPLACEMENT_GAP: Duration = Duration::from_millis(250);

/// The store's handle on Redis: the current [`Client`], replaced by a fresh
/// one when a call through it fails in a way that may leave its sockets
/// unusable: a dropped or refused connection, or a timeout (or a call
/// abandoned before its reply) during which no reply at all arrived on the
/// same connection. A call that timed out while replies kept arriving was
/// only queued behind slow commands (a `WAIT` blocks its connection for up
/// to its timeout): replacing that client would close a live connection
/// and make the server drop every command still queued on it, such as the
/// abandons sent after consumes it already applied. The replacement
/// connects in the background, at most once per [`REPLACEMENT_GAP`]; calls
/// that start meanwhile wait for it (at most the connect timeout), and the
/// old client is closed when its last call ends.
#[derive(Clone)]
pub(crate) struct Connection {
    shared: Arc<Shared>,
}

struct Shared {
    options: RedisStoreOptions,
    state: Mutex<State>,
    /// Wakes the calls waiting for a replacement to end.
    replaced: tokio::sync::Notify,
    /// The current client's generation, for the calls whose caller stopped
    /// waiting: they end when their reply arrives or their client is replaced.
    current: tokio::sync::watch::Sender<u64>,
}

struct State {
    client: Client,
    generation: u64,
    replacing: bool,
    last_replaced: Option<Instant>,
    /// How many replies arrived on the current client, per [`Lane`].
    replies: HashMap<Lane, u64>,
}

/// The calls that share one connection, whose replies prove it alive: every
/// call on a single server; on a cluster, the calls on keys of one slot
/// (they go to one node). Calls on several nodes have no lane: they prove
/// nothing about one connection, and any timeout of theirs counts.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Lane {
    Server,
    Slot(Slot),
}

/// Whether `err` says the connection failed under the command (dropped,
/// reset, refused, none to the node), not that a server answered it or
/// that it timed out: a command that only reads may be sent again then.
pub(crate) fn is_lost_connection(err: &RedisError) -> bool {
    !err.is_timeout()
        && (err.is_io_error()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.kind() == ErrorKind::ClusterConnectionNotFound)
}

/// Whether `err` may mean the client's sockets are unusable.
fn is_connection_failure(err: &RedisError) -> bool {
    err.is_timeout()
        || err.is_io_error()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.kind() == ErrorKind::ClusterConnectionNotFound
}

/// Watches one call: reports a failure when the call fails as a connection
/// failure, or is dropped before it ends (a timeout around it fired).
struct Watch {
    shared: Arc<Shared>,
    generation: u64,
    lane: Option<Lane>,
    /// The lane's reply count when the call began.
    replies_before: u64,
    ended: bool,
}

impl Watch {
    fn end<T>(mut self, result: RedisResult<T>) -> RedisResult<T> {
        self.ended = true;
        match &result {
            Err(err) if err.is_timeout() => self.timed_out(),
            Err(err) if is_connection_failure(err) => {
                tracing::debug!(
                    target: "countersign_store_redis",
                    error = %err,
                    "a call failed on the connection; replacing the client"
                );
                Shared::failed(&self.shared, self.generation);
            }
            _ => {}
        }
        result
    }

    /// The call got no reply in time: the client is stuck unless another
    /// call on the same lane got its reply meanwhile.
    fn timed_out(&self) {
        if let Some(lane) = self.lane {
            let state = self.shared.lock();
            let replies = state.replies.get(&lane).copied().unwrap_or(0);
            if state.generation == self.generation && replies > self.replies_before {
                tracing::debug!(
                    target: "countersign_store_redis",
                    "a call timed out behind slower ones on a connection that answers; keeping \
                     the client"
                );
                return;
            }
        }
        tracing::debug!(
            target: "countersign_store_redis",
            "a call timed out with no reply on its connection; replacing the client"
        );
        Shared::failed(&self.shared, self.generation);
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if !self.ended {
            self.timed_out();
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A call on client `generation` failed: start replacing it, unless it
    /// already was, a replacement is under way, or the last one is recent.
    fn failed(shared: &Arc<Shared>, generation: u64) {
        let mut state = shared.lock();
        let recent = state
            .last_replaced
            .is_some_and(|at| at.elapsed() < REPLACEMENT_GAP);
        if state.generation != generation || state.replacing || recent {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        state.replacing = true;
        drop(state);
        let replacement = Replacement(Arc::clone(shared));
        runtime.spawn(async move {
            let shared = &replacement.0;
            let limit = shared.options.connect_timeout;
            let opened = tokio::time::timeout(limit, Client::open(&shared.options)).await;
            let mut state = shared.lock();
            state.last_replaced = Some(Instant::now());
            match opened {
                Ok(Ok(client)) => {
                    state.client = client;
                    state.generation += 1;
                    state.replies.clear();
                    shared.current.send_replace(state.generation);
                    tracing::info!(
                        target: "countersign_store_redis",
                        generation = state.generation,
                        "replaced the redis client after a failed call"
                    );
                }
                Ok(Err(err)) => tracing::warn!(
                    target: "countersign_store_redis",
                    error = %err,
                    "could not replace the redis client; the next failed call tries again"
                ),
                Err(_) => tracing::warn!(
                    target: "countersign_store_redis",
                    "could not replace the redis client within the connect timeout; the next \
                     failed call tries again"
                ),
            }
        });
    }
}

/// A replacement under way; when it ends (done, failed, or dropped with
/// its runtime) the next failure may start another.
struct Replacement(Arc<Shared>);

impl Drop for Replacement {
    fn drop(&mut self) {
        self.0.lock().replacing = false;
        self.0.replaced.notify_waiters();
    }
}

/// One call on client `generation`, until its reply arrives: polled by its
/// caller, or, once the caller stops waiting, by a task of its own (see
/// [`Connection::call`]).
struct InFlight<T, Fut>
where
    T: Send + 'static,
    Fut: Future<Output = RedisResult<T>> + Send + 'static,
{
    /// `None` once the reply arrived.
    call: Option<Pin<Box<Fut>>>,
    shared: Arc<Shared>,
    generation: u64,
    lane: Option<Lane>,
}

/// Counts a reply on `lane` as proof that its connection is alive, while
/// the client it came on is still the current one.
fn note_reply<T>(shared: &Shared, generation: u64, lane: Option<Lane>, result: &RedisResult<T>) {
    let replied = match result {
        Ok(_) => true,
        Err(err) => !is_connection_failure(err),
    };
    if replied && let Some(lane) = lane {
        let mut state = shared.lock();
        if state.generation == generation {
            *state.replies.entry(lane).or_insert(0) += 1;
        }
    }
}

impl<T, Fut> Future for InFlight<T, Fut>
where
    T: Send + 'static,
    Fut: Future<Output = RedisResult<T>> + Send + 'static,
{
    type Output = RedisResult<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Every field is Unpin (the call is boxed), so the struct is too.
        let this = self.get_mut();
        let Some(call) = this.call.as_mut() else {
            return Poll::Ready(Err(RedisError::from(std::io::Error::other(
                "the call was polled after it ended",
            ))));
        };
        let result = std::task::ready!(call.as_mut().poll(cx));
        this.call = None;
        note_reply(&this.shared, this.generation, this.lane, &result);
        Poll::Ready(result)
    }
}

impl<T, Fut> Drop for InFlight<T, Fut>
where
    T: Send + 'static,
    Fut: Future<Output = RedisResult<T>> + Send + 'static,
{
    fn drop(&mut self) {
        // Only the call of a caller that stopped waiting is still here.
        let Some(call) = self.call.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (shared, generation, lane) = (Arc::clone(&self.shared), self.generation, self.lane);
        runtime.spawn(async move {
            let mut current = shared.current.subscribe();
            tokio::select! {
                result = call => note_reply(&shared, generation, lane, &result),
                // Only an error if the sender is gone, which `shared` prevents.
                _ = current.wait_for(|g| *g != generation) => {}
            }
        });
    }
}

impl Connection {
    /// Opens the client the options describe.
    pub(crate) async fn open(options: &RedisStoreOptions) -> RedisResult<Connection> {
        let client = Client::open(options).await?;
        Ok(Connection {
            shared: Arc::new(Shared {
                options: options.clone(),
                state: Mutex::new(State {
                    client,
                    generation: 0,
                    replacing: false,
                    last_replaced: None,
                    replies: HashMap::new(),
                }),
                replaced: tokio::sync::Notify::new(),
                current: tokio::sync::watch::Sender::new(0),
            }),
        })
    }

    /// Whether this is a cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.shared.lock().client, Client::Cluster(..))
    }

    /// How many times the client has been replaced.
    pub(crate) fn replacements(&self) -> u64 {
        self.shared.lock().generation
    }

    /// The current client, and a watch on the call about to use it (on
    /// `key`, or on several nodes when `None`). While a replacement is under
    /// way the call waits for it (at most the connect timeout) rather than
    /// use a client that just failed, unless it must go `at_once`.
    async fn checkout(&self, key: Option<&str>, at_once: bool) -> (Client, Watch) {
        // Created before the check, so that the end of the replacement
        // cannot slip between the check and the wait.
        let replaced = self.shared.replaced.notified();
        if !at_once && self.shared.lock().replacing {
            let _ = tokio::time::timeout(self.shared.options.connect_timeout, replaced).await;
        }
        let state = self.shared.lock();
        let lane = match (&state.client, key) {
            (Client::Single(_), _) => Some(Lane::Server),
            (Client::Cluster(..), Some(key)) => Some(Lane::Slot(Slot::for_key(key))),
            (Client::Cluster(..), None) => None,
        };
        let watch = Watch {
            shared: Arc::clone(&self.shared),
            generation: state.generation,
            lane,
            replies_before: lane
                .and_then(|lane| state.replies.get(&lane).copied())
                .unwrap_or(0),
            ended: false,
        };
        (state.client.clone(), watch)
    }

    /// Runs `run` on the current client, watched. The call is polled in the
    /// caller's task; a caller that stops waiting (a timeout around the
    /// call) hands the call to a task of its own, which outlives it: its
    /// reply, when it arrives, still counts as proof that its lane's
    /// connection is alive, so that calls queued behind it are not mistaken
    /// for a dead connection. Such a task ends when the reply arrives or
    /// when its client is replaced, whichever comes first. (Polling in the
    /// caller's task spares every call a spawn, a channel and a wake-up on
    /// another thread.)
    async fn call<T, F, Fut>(&self, key: Option<&str>, at_once: bool, run: F) -> RedisResult<T>
    where
        T: Send + 'static,
        F: FnOnce(Client) -> Fut,
        Fut: Future<Output = RedisResult<T>> + Send + 'static,
    {
        let (client, watch) = self.checkout(key, at_once).await;
        let in_flight = InFlight {
            call: Some(Box::pin(run(client))),
            shared: Arc::clone(&self.shared),
            generation: watch.generation,
            lane: watch.lane,
        };
        let result = in_flight.await;
        watch.end(result)
    }

    /// Runs `cmd`, which touches only `key`, on the primary that holds `key`.
    /// With `at_once` it goes out on the current client even while a
    /// replacement is under way: an abandon must reach the server within
    /// its caller's short timeout, behind the consume it gives back on the
    /// client that may still deliver both (a replacement waits for a server
    /// that may be paused for longer than that).
    pub(crate) async fn on_key(&self, key: &str, cmd: Cmd, at_once: bool) -> RedisResult<Value> {
        let owned = key.to_owned();
        self.call(Some(key), at_once, |client| async move {
            client.on_key(&owned, cmd).await
        })
        .await
    }

    /// Sends `cmds` in one pipeline to the primary that holds `key`; see
    /// [`Client::pipeline_on_key`] (and [`on_key`](Self::on_key) for
    /// `at_once`).
    pub(crate) async fn pipeline_on_key(
        &self,
        key: &str,
        cmds: Vec<Cmd>,
        at_once: bool,
    ) -> RedisResult<Vec<Value>> {
        let owned = key.to_owned();
        self.call(Some(key), at_once, |client| async move {
            client.pipeline_on_key(&owned, cmds).await
        })
        .await
    }

    /// Runs `cmd` on every primary; see [`Client::on_each_primary`].
    pub(crate) async fn on_each_primary(&self, cmd: Cmd) -> RedisResult<Vec<(String, Value)>> {
        self.call(None, false, |client| async move {
            client.on_each_primary(cmd).await
        })
        .await
    }

    /// Runs `cmd` on every node; see [`Client::on_each_node`].
    pub(crate) async fn on_each_node(&self, cmd: Cmd) -> RedisResult<Vec<(String, Value)>> {
        self.call(None, false, |client| async move {
            client.on_each_node(cmd).await
        })
        .await
    }

    /// Runs `cmd` on every node; see [`Client::on_all_nodes`].
    pub(crate) async fn on_all_nodes(&self, cmd: Cmd) -> RedisResult<Value> {
        self.call(None, false, |client| async move {
            client.on_all_nodes(cmd).await
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn only_a_failed_connection_lets_a_read_be_sent_again() {
        let io = |kind| RedisError::from(std::io::Error::new(kind, "x"));
        for kind in [
            std::io::ErrorKind::BrokenPipe,
            std::io::ErrorKind::ConnectionReset,
            std::io::ErrorKind::ConnectionRefused,
        ] {
            assert!(is_lost_connection(&io(kind)), "{kind:?}");
        }
        assert!(!is_lost_connection(&io(std::io::ErrorKind::TimedOut)));
        let answered = RedisError::from((ErrorKind::Server(ServerErrorKind::NoScript), "noscript"));
        assert!(!is_lost_connection(&answered));
    }
}
