//! Test support: redis-server processes the tests start themselves on free
//! loopback ports (never the shared instance on 6379), a 3-master cluster,
//! a reply-dropping proxy, and grant helpers.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use countersign_act_tool::{Act, Context, RetryPolicy};
use countersign_approval_core::policy::{Action, AuthorizedUrl, Policy, StaticResolver};
use countersign_approval_core::{
    ActorId, Approval, ApprovalId, Clock, RunId, SystemClock, Timestamp,
};
use countersign_backend_fake::FakeBackend;
use countersign_store_memory::InMemoryOperationStore;
use countersign_store_redis::{RedisApprovalStore, RedisStoreOptions};

static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

/// A port nobody listens on right now (bind to port 0, read it, drop it).
pub fn free_port() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if port != 6379 {
            return port;
        }
    }
}

fn fresh_dir(tag: &str) -> PathBuf {
    let n = NEXT_DIR.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!(
        "countersign-redis-test-{}-{tag}-{n}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One redis-server process, killed (and its data dir removed) on drop. A
/// watchdog shell kills it too if the test process dies without dropping it
/// (statics are never dropped).
pub struct RedisServer {
    child: Option<Child>,
    watchdog: Option<Child>,
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
    keep_dir: bool,
}

impl RedisServer {
    /// A fresh server with no persistence.
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// A fresh server with extra `--name value` arguments (they override the defaults).
    pub fn start_with(extra: &[&str]) -> RedisServer {
        let dir = fresh_dir("server");
        for _ in 0..5 {
            let mut server = RedisServer {
                child: None,
                watchdog: None,
                port: free_port(),
                dir: dir.clone(),
                extra: extra.iter().map(|s| (*s).to_owned()).collect(),
                keep_dir: false,
            };
            if server.spawn().is_ok() {
                return server;
            }
            server.keep_dir = true; // the next try reuses it
        }
        panic!("could not start redis-server after 5 tries");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let port = self.port.to_string();
        let mut args: Vec<String> = vec![
            "--port".into(),
            port,
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            "no".into(),
            "--dir".into(),
            self.dir.display().to_string(),
            "--daemonize".into(),
            "no".into(),
            "--logfile".into(),
            self.dir.join("redis.log").display().to_string(),
        ];
        args.extend(self.extra.iter().cloned());
        let child = Command::new("redis-server")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("could not run redis-server: {e}"))?;
        let pid = child.id();
        self.child = Some(child);
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {parent} 2>/dev/null && kill -0 {pid} 2>/dev/null; do sleep 1; done; \
                 if ! kill -0 {parent} 2>/dev/null; then kill -9 {pid} 2>/dev/null; sleep 0.2; rm -rf '{dir}'; fi",
                parent = std::process::id(),
                dir = self.dir.display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("could not run the watchdog: {e}"))?;
        self.watchdog = Some(watchdog);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.stop_watchdog();
                self.child = None;
                return Err(format!("redis-server exited with {status}"));
            }
            if self.ping() {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        Err("redis-server did not answer ping".into())
    }

    fn stop_watchdog(&mut self) {
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
    }

    /// Whether the server answers PING (it may still be loading its data).
    pub fn ping(&self) -> bool {
        let Ok(client) = redis::Client::open(self.url()) else {
            return false;
        };
        let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
            return false;
        };
        let _ = conn.set_read_timeout(Some(Duration::from_millis(500)));
        redis::cmd("PING")
            .query::<String>(&mut conn)
            .is_ok_and(|r| r == "PONG")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A plain synchronous connection, for looking at and tampering with data.
    pub fn conn(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).unwrap();
        let conn = client
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        conn
    }

    /// SIGKILL, no shutdown: nothing is flushed that was not already.
    pub fn kill(&mut self) {
        self.stop_watchdog();
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and data dir.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn() {
                Ok(()) => break,
                Err(e) if Instant::now() > deadline => panic!("restart failed: {e}"),
                Err(_) => thread::sleep(Duration::from_millis(100)),
            }
        }
        // Wait until the data is loaded (PING answers during loading too).
        let mut conn = self.conn();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let info: String = redis::cmd("INFO")
                .arg("persistence")
                .query(&mut conn)
                .unwrap();
            if info.contains("loading:0") {
                break;
            }
            assert!(Instant::now() < deadline, "server kept loading");
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        if !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// One server shared by every test of this test binary (fresh key prefix per store).
pub fn shared_server() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(RedisServer::start)
}

/// Three masters (and their replicas, when asked), all 16384 slots assigned.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start() -> RedisCluster {
        Self::start_nodes(0)
    }

    /// Three masters, each with `replicas` replicas (linked and in sync),
    /// all 16384 slots assigned; the node timeout is 5 s, as in
    /// [`start`](Self::start).
    pub fn start_with_replicas(replicas: usize) -> RedisCluster {
        let cluster = Self::start_nodes(replicas);
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in &cluster.nodes {
            let mut conn = node.conn();
            loop {
                let info: String = redis::cmd("INFO")
                    .arg("replication")
                    .query(&mut conn)
                    .unwrap();
                let linked = info.contains("role:master")
                    && info.contains(&format!("connected_slaves:{replicas}"))
                    || info.contains("role:slave") && info.contains("master_link_status:up");
                if linked {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "replication did not link: {info}"
                );
                thread::sleep(Duration::from_millis(50));
            }
        }
        cluster
    }

    /// The node (its index in `nodes`) that is the primary of `key`'s slot
    /// now, as a live node `asker` sees it; `None` while the primary it
    /// knows is failing.
    pub fn primary_of(&self, asker: usize, key: &str) -> Option<usize> {
        let mut conn = self.nodes[asker].conn();
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut conn)
            .unwrap();
        let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(&mut conn).unwrap();
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            if !fields[2].split(',').any(|f| f == "master") || fields[2].contains("fail") {
                continue;
            }
            let owns = fields[8..].iter().any(|range| {
                let (from, to) = range.split_once('-').unwrap_or((range, range));
                match (from.parse::<u16>(), to.parse::<u16>()) {
                    (Ok(from), Ok(to)) => (from..=to).contains(&slot),
                    _ => false,
                }
            });
            if owns {
                let port: u16 = fields[1].split(['@', ':']).nth(1).unwrap().parse().unwrap();
                return self.nodes.iter().position(|n| n.port() == port);
            }
        }
        None
    }

    fn start_nodes(replicas: usize) -> RedisCluster {
        let count = 3 * (1 + replicas);
        let mut nodes = Vec::new();
        for _ in 0..count {
            let bus = free_port().to_string();
            // Relative to the node's own --dir.
            let node = RedisServer::start_with(&[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-port",
                &bus,
                "--cluster-node-timeout",
                "5000",
            ]);
            nodes.push(node);
        }
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let output = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli runs");
        assert!(
            output.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in &nodes {
            let mut conn = node.conn();
            loop {
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut conn).unwrap();
                if info.contains("cluster_state:ok")
                    && info.contains("cluster_slots_ok:16384")
                    && info.contains(&format!("cluster_known_nodes:{count}"))
                {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "cluster did not become ok: {info}"
                );
                thread::sleep(Duration::from_millis(50));
            }
        }
        RedisCluster { nodes }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }
}

/// One cluster shared by every test of this test binary.
pub fn shared_cluster() -> &'static RedisCluster {
    static CLUSTER: OnceLock<RedisCluster> = OnceLock::new();
    CLUSTER.get_or_init(RedisCluster::start)
}

/// A key prefix no other store uses.
pub fn fresh_prefix(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).unwrap();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "cs-test:{tag}:{}-{}-{hex}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

pub fn options_for(server: &RedisServer, tag: &str) -> RedisStoreOptions {
    // The test servers run without persistence: throw-away data.
    RedisStoreOptions::single(server.url())
        .key_prefix(fresh_prefix(tag))
        .allow_non_durable_persistence()
}

pub async fn store_on(server: &RedisServer, tag: &str) -> RedisApprovalStore {
    RedisApprovalStore::connect(options_for(server, tag))
        .await
        .expect("store connects")
}

pub async fn cluster_store(cluster: &RedisCluster, tag: &str) -> RedisApprovalStore {
    cluster_store_with(cluster, tag, |options| options).await
}

/// A cluster store with a fresh prefix and the options `more` adds.
pub async fn cluster_store_with(
    cluster: &RedisCluster,
    tag: &str,
    more: impl FnOnce(RedisStoreOptions) -> RedisStoreOptions,
) -> RedisApprovalStore {
    RedisApprovalStore::connect(more(
        RedisStoreOptions::cluster(cluster.urls())
            .key_prefix(fresh_prefix(tag))
            .allow_non_durable_persistence(),
    ))
    .await
    .expect("cluster store connects")
}

pub fn now() -> Timestamp {
    SystemClock.now()
}

pub const ACTOR: &str = "actor-1";
pub const RUN: &str = "run-1";

pub fn actor() -> ActorId {
    ActorId::new(ACTOR).unwrap()
}

pub fn run() -> RunId {
    RunId::new(RUN).unwrap()
}

/// The key of grant `id` of `ACTOR` in `store`.
pub fn grant_key(store: &RedisApprovalStore, id: &ApprovalId) -> String {
    store.grant_key(&actor(), id)
}

/// Every key the store may touch for grant `id` of `ACTOR` in `RUN`, by name.
pub fn grant_keys(store: &RedisApprovalStore, id: &ApprovalId) -> Vec<(&'static str, String)> {
    let (actor, run) = (actor(), run());
    vec![
        ("grant", store.grant_key(&actor, id)),
        ("pointer", store.pointer_key(id)),
        ("actor fence", store.actor_fence_key(&actor)),
        ("run fence", store.run_fence_key(&actor, &run)),
        ("live set", store.live_key(&actor, &run)),
        ("run set", store.runs_key(&actor)),
    ]
}
pub const HOST: &str = "docs.example.com";
pub const URL: &str = "https://docs.example.com/";

/// The policy every test uses: one allowed host that resolves to a public address.
pub fn policy() -> Policy {
    Policy::builder()
        .allow_host(HOST)
        .resolver(StaticResolver::answering_all(["93.184.216.34"
            .parse()
            .unwrap()]))
        .build()
        .unwrap()
}

/// The canonical URL and a click action.
pub async fn url_and_action(selector: &str) -> (AuthorizedUrl, Action) {
    let policy = policy();
    let url = policy.authorize_destination(URL).await.unwrap();
    let action = policy
        .authorize_action(&serde_json::json!({"method": "click", "selector": selector}))
        .unwrap();
    (url, action)
}

/// A fresh grant for `ACTOR`/`RUN` on `URL` clicking `selector`, valid for `ttl` from `now`.
pub async fn grant(selector: &str, ttl: Duration, now: Timestamp) -> Approval {
    let (url, action) = url_and_action(selector).await;
    Approval::for_action(
        ActorId::new(ACTOR).unwrap(),
        RunId::new(RUN).unwrap(),
        &url,
        &action,
        ttl,
        now,
    )
    .unwrap()
}

/// An element identity with quotes, non-ASCII, a bidi override and two
/// frames.
pub fn element() -> countersign_approval_core::ElementIdentity {
    countersign_approval_core::ElementIdentity::new(
        "button",
        "Pay «5 €» \"now\" \u{202E}gnp.exe",
        "button",
        "Pay \\ now",
        std::collections::BTreeMap::from([("type".to_owned(), "submit".to_owned())]),
        vec![
            countersign_approval_core::FrameIdentity::new("https://docs.example.com", "D0C"),
            countersign_approval_core::FrameIdentity::new("https://pay.example", "D1\"\\"),
        ],
    )
    .unwrap()
}

/// The Act tool for `ACTOR`/`RUN` over `store`, performing on `backend`.
pub fn act_over(
    store: Arc<RedisApprovalStore>,
    backend: &FakeBackend,
    operations: &Arc<InMemoryOperationStore>,
    retry: RetryPolicy,
) -> Act {
    let context = Context::builder()
        .actor_id(ActorId::new(ACTOR).unwrap())
        .run_id(RunId::new(RUN).unwrap())
        .backend(backend.clone())
        .source_policy(policy())
        .operation_store(operations.clone())
        .approval_store(store)
        .consume_retry(retry)
        .build()
        .unwrap();
    Act::new(context)
}

/// The model's tool call for the grant `approval_id` clicking `selector` on `URL`.
pub fn call(approval_id: &str, selector: &str) -> serde_json::Value {
    serde_json::json!({
        "url": URL,
        "approval_id": approval_id,
        "method": "click",
        "selector": selector,
    })
}

/// A loopback TCP proxy in front of a server. When armed with a needle (say
/// the consume script's SHA-1), the first server reply after a client
/// request containing the needle is swallowed and the client connection is
/// closed: the server applied the command, the client never hears of it.
pub struct ReplyDropper {
    port: u16,
    needle: Arc<std::sync::Mutex<Option<Vec<u8>>>>,
    dropped: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    frozen_below: Arc<AtomicUsize>,
}

impl ReplyDropper {
    pub fn start(upstream: u16) -> ReplyDropper {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let needle: Arc<std::sync::Mutex<Option<Vec<u8>>>> = Arc::default();
        let dropped = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let frozen_below = Arc::new(AtomicUsize::new(0));
        let (n, d, s) = (needle.clone(), dropped.clone(), stop.clone());
        let (a, f) = (accepted.clone(), frozen_below.clone());
        thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).unwrap();
                        let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                            continue;
                        };
                        let id = a.fetch_add(1, Ordering::SeqCst);
                        Self::pipe(client, server, n.clone(), d.clone(), id, f.clone());
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        ReplyDropper {
            port,
            needle,
            dropped,
            stop,
            accepted,
            frozen_below,
        }
    }

    fn pipe(
        client: TcpStream,
        server: TcpStream,
        needle: Arc<std::sync::Mutex<Option<Vec<u8>>>>,
        dropped: Arc<AtomicUsize>,
        id: usize,
        frozen_below: Arc<AtomicUsize>,
    ) {
        let frozen_up = frozen_below.clone();
        let armed = Arc::new(AtomicBool::new(false));
        let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let armed_up = armed.clone();
        // client -> server
        thread::spawn(move || {
            let mut buf = [0u8; 65536];
            loop {
                let n = match c_in.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let chunk = &buf[..n];
                if id < frozen_up.load(Ordering::SeqCst) {
                    continue; // frozen: the request vanishes, the socket stays open
                }
                {
                    let mut needle = needle.lock().unwrap();
                    if let Some(pattern) = needle.as_ref()
                        && chunk
                            .windows(pattern.len())
                            .any(|w| w == pattern.as_slice())
                    {
                        *needle = None; // only once
                        armed_up.store(true, Ordering::SeqCst);
                    }
                }
                if s_out.write_all(chunk).is_err() {
                    break;
                }
            }
            let _ = s_out.shutdown(Shutdown::Both);
        });
        // server -> client
        let (mut s_in, mut c_out) = (server, client);
        thread::spawn(move || {
            let mut buf = [0u8; 65536];
            loop {
                let n = match s_in.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if id < frozen_below.load(Ordering::SeqCst) {
                    continue; // frozen: the reply vanishes, the socket stays open
                }
                if armed.load(Ordering::SeqCst) {
                    // Swallow the reply and cut the client off.
                    dropped.fetch_add(1, Ordering::SeqCst);
                    let _ = c_out.shutdown(Shutdown::Both);
                    let _ = s_in.shutdown(Shutdown::Both);
                    break;
                }
                if c_out.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = c_out.shutdown(Shutdown::Both);
        });
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Drop the reply to the next request that contains `needle`.
    pub fn arm(&self, needle: &str) {
        *self.needle.lock().unwrap() = Some(needle.as_bytes().to_vec());
    }

    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }

    /// Every connection open now goes silent for good (bytes in either
    /// direction vanish, the sockets stay open, as with a peer that closed
    /// and a socket left in CLOSE-WAIT); connections opened later work.
    pub fn freeze_open_connections(&self) {
        self.frozen_below
            .store(self.accepted.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    /// Forget the needle: no reply is dropped until the next `arm`.
    pub fn disarm(&self) {
        *self.needle.lock().unwrap() = None;
    }
}

impl Drop for ReplyDropper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// A 3-master cluster whose nodes announce the port of a [`ReplyDropper`]
/// in front of each of them: the cluster client discovers only the proxies,
/// so every command goes through one.
pub struct ProxiedCluster {
    pub cluster: RedisCluster,
    pub proxies: Vec<ReplyDropper>,
}

impl ProxiedCluster {
    pub fn start() -> ProxiedCluster {
        let cluster = RedisCluster::start();
        let proxies: Vec<ReplyDropper> = cluster
            .nodes
            .iter()
            .map(|node| ReplyDropper::start(node.port()))
            .collect();
        for (node, proxy) in cluster.nodes.iter().zip(&proxies) {
            let mut conn = node.conn();
            let bus: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg("cluster-port")
                .query(&mut conn)
                .unwrap();
            for (name, value) in [
                ("cluster-announce-ip", "127.0.0.1".to_owned()),
                ("cluster-announce-bus-port", bus[1].clone()),
                ("cluster-announce-port", proxy.port.to_string()),
            ] {
                let _: () = redis::cmd("CONFIG")
                    .arg("SET")
                    .arg(name)
                    .arg(value)
                    .query(&mut conn)
                    .unwrap();
            }
        }
        // Wait until every node announces every other one at its proxy's port.
        let wanted: Vec<String> = proxies
            .iter()
            .map(|p| format!("127.0.0.1:{}@", p.port))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in &cluster.nodes {
            let mut conn = node.conn();
            loop {
                let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(&mut conn).unwrap();
                if wanted.iter().all(|w| nodes.contains(w.as_str())) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "nodes did not announce the proxies: {nodes}"
                );
                thread::sleep(Duration::from_millis(50));
            }
        }
        ProxiedCluster { cluster, proxies }
    }

    /// The proxies' urls: the seed list of a store that goes through them.
    pub fn urls(&self) -> Vec<String> {
        self.proxies.iter().map(ReplyDropper::url).collect()
    }

    /// Every proxy drops the reply to the next request containing `needle`.
    pub fn arm(&self, needle: &str) {
        for proxy in &self.proxies {
            proxy.arm(needle);
        }
    }

    /// Only the proxy of the primary that owns `key`'s slot drops the reply
    /// to the next request containing `needle`: a request the cluster
    /// client sends elsewhere while it recovers (and is answered `MOVED`)
    /// is never mistaken for the one lost reply.
    pub fn arm_for(&self, key: &str, needle: &str) {
        let mut conn = self.cluster.nodes[0].conn();
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut conn)
            .unwrap();
        let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(&mut conn).unwrap();
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            if !fields[2].split(',').any(|f| f == "master") {
                continue;
            }
            let owns = fields[8..].iter().any(|range| {
                let (from, to) = range.split_once('-').unwrap_or((range, range));
                matches!(
                    (from.parse::<u16>(), to.parse::<u16>()),
                    (Ok(from), Ok(to)) if (from..=to).contains(&slot)
                )
            });
            if owns {
                // Nodes announce their proxy's port.
                let port: u16 = fields[1].split(['@', ':']).nth(1).unwrap().parse().unwrap();
                let proxy = self.proxies.iter().find(|p| p.port == port).unwrap();
                proxy.arm(needle);
                return;
            }
        }
        panic!("no primary owns slot {slot}");
    }

    /// Disarms every proxy.
    pub fn disarm(&self) {
        for proxy in &self.proxies {
            proxy.disarm();
        }
    }

    /// Replies dropped so far, over every proxy.
    pub fn dropped(&self) -> usize {
        self.proxies.iter().map(ReplyDropper::dropped).sum()
    }
}

/// Waits (polling every 2 ms, up to `limit`) until `path` exists: how the
/// multi-process tests' children and parent signal each other.
pub fn wait_for(path: &Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while !path.exists() {
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(2));
    }
    true
}

/// Waits for every child test process to exit within `limit` (killing the
/// rest and failing past it) and asserts that each succeeded.
pub fn wait_for_children(children: Vec<Child>, limit: Duration) {
    let deadline = Instant::now() + limit;
    for (n, mut child) in children.into_iter().enumerate() {
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("child {n} did not finish in time");
            }
            thread::sleep(Duration::from_millis(10));
        }
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "child {n} failed: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The fields of the record at `key` by name, with their stored bytes
/// (absent ones left out); panics when the key holds no v=4 record.
pub fn record(
    conn: &mut redis::Connection,
    key: &str,
) -> std::collections::HashMap<&'static str, Vec<u8>> {
    let raw: Vec<u8> = redis::cmd("GET").arg(key).query(conn).unwrap();
    countersign_store_redis::record_fields(&raw)
        .unwrap_or_else(|| panic!("{key} holds no v=4 record"))
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| (name, v)))
        .collect()
}

/// Field `name` of the record at `key` as text ("" when absent).
pub fn record_text(conn: &mut redis::Connection, key: &str, name: &str) -> String {
    record(conn, key)
        .get(name)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_default()
}

/// Rewrites field `name` of the record at `key` (`None`: absent), keeping
/// every other field and the key's expiry.
pub fn set_field(conn: &mut redis::Connection, key: &str, name: &str, value: Option<&[u8]>) {
    let raw: Vec<u8> = redis::cmd("GET").arg(key).query(conn).unwrap();
    let mut fields = countersign_store_redis::record_fields(&raw)
        .unwrap_or_else(|| panic!("{key} holds no v=4 record"));
    let field = fields
        .iter_mut()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no field {name}"));
    field.1 = value.map(<[u8]>::to_vec);
    set_raw(
        conn,
        key,
        &countersign_store_redis::record_from_fields(&fields),
    );
}

/// Replaces the value at `key` with `raw`, keeping its expiry.
pub fn set_raw(conn: &mut redis::Connection, key: &str, raw: &[u8]) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(raw)
        .arg("KEEPTTL")
        .query(conn)
        .unwrap();
}

/// A stored action: each part a field (`None`: absent), as the record's
/// action field holds them (method, selector, description, then keys and
/// values of arguments). Short parts only.
pub fn action_field(parts: &[Option<&str>]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts {
        match part {
            Some(text) => {
                out.push(u8::try_from(text.len()).unwrap());
                out.extend_from_slice(text.as_bytes());
            }
            None => out.push(0xFD),
        }
    }
    out
}

/// A generated approval id's member in a run's live set: a zero byte and
/// the id's 16 raw bytes.
pub fn live_member(id: &ApprovalId) -> Vec<u8> {
    let hex = id.as_str().strip_prefix("apr_").unwrap();
    let mut out = vec![0u8];
    out.extend((0..16).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()));
    out
}
