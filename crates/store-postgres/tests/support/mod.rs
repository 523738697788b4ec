//! Test support: PostgreSQL servers the tests start themselves with
//! `initdb` and `pg_ctl` in a temporary directory on a free loopback port
//! (never the machine's instance on 5432), and grant helpers.
//!
//! `initdb` and `postgres` refuse to run as root; when the tests run as root
//! (CI does), every server command runs as the `postgres` user through
//! `runuser -u postgres --`, and the temporary directory is handed to that
//! user. Without PostgreSQL installed the tests stop with a message saying
//! what to install.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use countersign_act_tool::{Act, Context, RetryPolicy};
use countersign_approval_core::policy::{Action, AuthorizedUrl, Policy, StaticResolver};
use countersign_approval_core::{ActorId, Approval, Clock, RunId, SystemClock, Timestamp};
use countersign_backend_fake::FakeBackend;
use countersign_store_memory::InMemoryOperationStore;
use countersign_store_postgres::{PostgresApprovalStore, PostgresStoreOptions};

static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

/// The user that runs the server when the tests run as root.
const SERVER_USER: &str = "postgres";

/// Where the server binaries are: `$PG_BIN`, else the newest
/// `/usr/lib/postgresql/<n>/bin`, else the `PATH`.
fn bin(name: &str) -> PathBuf {
    if let Ok(dir) = std::env::var("PG_BIN") {
        return Path::new(&dir).join(name);
    }
    if let Ok(entries) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<(u32, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                Some((v, e.path().join("bin").join(name)))
            })
            .filter(|(_, p)| p.exists())
            .collect();
        versions.sort();
        if let Some((_, path)) = versions.pop() {
            return path;
        }
    }
    PathBuf::from(name)
}

fn require_postgres() {
    let ok = Command::new(bin("initdb"))
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "these tests start their own PostgreSQL server but `initdb` was not found: install \
         the PostgreSQL server (Debian/Ubuntu: `apt-get install postgresql`; macOS: `brew install \
         postgresql@15`), or set PG_BIN to the directory holding initdb, pg_ctl and postgres"
    );
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A command for a server binary, run as `postgres` when we are root.
fn server_command(program: &str) -> Command {
    if running_as_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", SERVER_USER, "--"]).arg(bin(program));
        command
    } else {
        Command::new(bin(program))
    }
}

fn run(mut command: Command, what: &str) -> Output {
    let output = command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("could not run {what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A port nobody listens on right now, never 5432 or 6379.
pub fn free_port() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if port != 5432 && port != 6379 {
            return port;
        }
    }
}

/// One PostgreSQL server (`fsync` on), stopped and its directory removed on
/// drop. A watchdog shell stops it too if the test process dies first.
pub struct PgServer {
    dir: PathBuf,
    port: u16,
    watchdog: Option<std::process::Child>,
}

impl PgServer {
    /// A fresh cluster with the default settings the tests need.
    pub fn start() -> PgServer {
        Self::start_with(&[])
    }

    /// A fresh cluster with extra `name=value` settings.
    pub fn start_with(settings: &[&str]) -> PgServer {
        require_postgres();
        let n = NEXT_DIR.fetch_add(1, Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("countersign-pg-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        if running_as_root() {
            run(
                {
                    let mut c = Command::new("chown");
                    c.arg(format!("{SERVER_USER}:")).arg(&dir);
                    c
                },
                "chown of the test directory",
            );
        }
        let mut initdb = server_command("initdb");
        initdb.arg("-D").arg(dir.join("data")).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-locale",
        ]);
        run(initdb, "initdb");
        let mut conf = String::from(
            "listen_addresses = '127.0.0.1'\nfsync = on\nsynchronous_commit = on\n\
             max_connections = 300\nshared_buffers = 64MB\nlog_min_messages = warning\n\
             logging_collector = off\n",
        );
        for setting in settings {
            conf.push_str(setting);
            conf.push('\n');
        }
        let conf_path = dir.join("data").join("postgresql.auto.conf");
        let mut existing = std::fs::read_to_string(&conf_path).unwrap_or_default();
        existing.push_str(&conf);
        std::fs::write(&conf_path, existing).unwrap();
        let mut server = PgServer {
            dir,
            port: 0,
            watchdog: None,
        };
        for attempt in 0..5 {
            server.port = free_port();
            if server.pg_ctl_start().is_ok() {
                server.start_watchdog();
                return server;
            }
            assert!(attempt < 4, "could not start postgres after 5 tries");
        }
        unreachable!()
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn pg_ctl_start(&self) -> Result<(), String> {
        let mut command = server_command("pg_ctl");
        command
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.join("server.log"))
            .args(["-w", "-t", "60", "start", "-o"])
            .arg(format!("-p {} -k {}", self.port, self.dir.display()));
        let output = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        if output.status.success() {
            Ok(())
        } else {
            Err(std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default())
        }
    }

    fn start_watchdog(&mut self) {
        let prefix = if running_as_root() {
            format!("runuser -u {SERVER_USER} -- ")
        } else {
            String::new()
        };
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {parent} 2>/dev/null; do sleep 1; done; \
                 {prefix}'{pg_ctl}' -D '{data}' -m immediate stop >/dev/null 2>&1; rm -rf '{dir}'",
                parent = std::process::id(),
                pg_ctl = bin("pg_ctl").display(),
                data = self.data().display(),
                dir = self.dir.display(),
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.watchdog = Some(watchdog);
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The libpq connection string of the `postgres` database, with extra
    /// `key=value` pairs.
    pub fn connection(&self, extra: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres {extra}",
            self.port
        )
    }

    /// The postmaster's process id.
    pub fn postmaster_pid(&self) -> u32 {
        let text = std::fs::read_to_string(self.data().join("postmaster.pid")).unwrap();
        text.lines().next().unwrap().trim().parse().unwrap()
    }

    /// SIGKILL to the postmaster and every process it started: no shutdown,
    /// nothing flushed that was not already.
    pub fn kill(&self) {
        let pid = self.postmaster_pid();
        let mut children = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // pid (comm) state ppid ...
            let Some(after) = stat.rsplit_once(") ") else {
                continue;
            };
            let ppid = after
                .1
                .split(' ')
                .nth(1)
                .and_then(|p| p.parse::<u32>().ok());
            if ppid == Some(pid) {
                children.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        let _ = Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .args(&children)
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Path::new(&format!("/proc/{pid}")).exists()
            || children
                .iter()
                .any(|c| Path::new(&format!("/proc/{c}")).exists())
        {
            assert!(Instant::now() < deadline, "postgres did not die");
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the server again on the same port and data (crash recovery runs).
    pub fn restart(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match self.pg_ctl_start() {
                Ok(()) => return,
                Err(log) if Instant::now() > deadline => panic!("restart failed: {log}"),
                Err(_) => thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    fn stop(&mut self) {
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        let mut command = server_command("pg_ctl");
        command
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "stop"]);
        let _ = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// A plain client for looking at and tampering with data; its
    /// connection runs on the current runtime.
    pub async fn admin(&self) -> tokio_postgres::Client {
        let (client, connection) =
            tokio_postgres::connect(&self.connection(""), tokio_postgres::NoTls)
                .await
                .unwrap();
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One server shared by every test of this test binary (a fresh schema per store).
pub fn shared_server() -> &'static PgServer {
    static SERVER: OnceLock<PgServer> = OnceLock::new();
    SERVER.get_or_init(PgServer::start)
}

/// A schema name no other store uses.
pub fn fresh_schema(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).unwrap();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "t_{tag}_{}_{}_{hex}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// The default transaction isolation a store's connections use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    ReadCommitted,
    RepeatableRead,
    Serializable,
}

impl Isolation {
    pub fn connection_extra(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "",
            Isolation::RepeatableRead => {
                // The server splits options on spaces unless escaped as `\ `;
                // the connection-string parser wants that backslash doubled.
                "options='-c default_transaction_isolation=repeatable\\\\ read'"
            }
            Isolation::Serializable => "options='-c default_transaction_isolation=serializable'",
        }
    }
}

pub fn options_for(server: &PgServer, tag: &str, isolation: Isolation) -> PostgresStoreOptions {
    PostgresStoreOptions::new(server.connection(isolation.connection_extra()))
        .schema(fresh_schema(tag))
        .statement_timeout(Duration::from_secs(10))
        .pool_wait_timeout(Duration::from_secs(30))
}

pub async fn store_on(server: &PgServer, tag: &str, isolation: Isolation) -> PostgresApprovalStore {
    PostgresApprovalStore::connect(options_for(server, tag, isolation))
        .await
        .expect("store connects")
}

pub fn now() -> Timestamp {
    SystemClock.now()
}

pub const ACTOR: &str = "actor-1";
pub const RUN: &str = "run-1";
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

/// The versions recorded in `schema`'s version table (no table prefix),
/// in order.
pub async fn schema_versions(admin: &tokio_postgres::Client, schema: &str) -> Vec<i32> {
    admin
        .query(
            &format!("SELECT version FROM \"{schema}\".schema_version ORDER BY 1"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
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

/// The Act tool for `ACTOR`/`RUN` over `store`, performing on `backend`.
pub fn act_over(
    store: Arc<PostgresApprovalStore>,
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

/// Forces a server kill into a burst of calls, so that "the kill hit some
/// calls" holds however the threads are scheduled: tasks that must meet
/// the dead server wait in [`KillGate::killed`] until it is dead, and
/// [`KillGate::kill_then_restart_after_a_hit`] brings it back only once a
/// call has failed against it ([`KillGate::hit`]).
pub struct KillGate {
    killed: tokio::sync::watch::Sender<bool>,
    hit: tokio::sync::Notify,
}

impl KillGate {
    pub fn new() -> Arc<KillGate> {
        Arc::new(KillGate {
            killed: tokio::sync::watch::Sender::new(false),
            hit: tokio::sync::Notify::new(),
        })
    }

    /// Waits until the server is dead.
    pub async fn killed(&self) {
        self.killed.subscribe().wait_for(|k| *k).await.unwrap();
    }

    /// Tells the gate a call failed against the dead server.
    pub fn hit(&self) {
        // `notify_one` keeps the wake-up when nobody waits yet.
        self.hit.notify_one();
    }

    /// SIGKILLs the server, lets the waiting tasks go, and restarts it
    /// `pause` after the first call failed against it.
    pub async fn kill_then_restart_after_a_hit(&self, server: &Arc<PgServer>, pause: Duration) {
        let dead = Arc::clone(server);
        tokio::task::spawn_blocking(move || dead.kill())
            .await
            .unwrap();
        self.killed.send_replace(true);
        self.hit.notified().await;
        let back = Arc::clone(server);
        tokio::task::spawn_blocking(move || {
            thread::sleep(pause);
            back.restart();
        })
        .await
        .unwrap();
    }
}

/// The bare name of `store`'s schema, which every statement it sends names
/// (in a table or an advisory lock key).
pub fn schema_of(store: &PostgresApprovalStore) -> String {
    store
        .grants_table()
        .split('.')
        .next()
        .unwrap_or("")
        .trim_matches('"')
        .to_owned()
}

/// The statements of the store on `schema` waiting on a lock whose text
/// starts with `prefix` (the tests of one binary share one server, each
/// store with a schema of its own); `advisory` narrows to advisory locks.
pub async fn lock_waiters(
    admin: &tokio_postgres::Client,
    schema: &str,
    prefix: &str,
    advisory: bool,
) -> Vec<i32> {
    admin
        .query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'countersign' \
             AND wait_event_type = 'Lock' AND ($3 = false OR wait_event = 'advisory') \
             AND starts_with(query, $1) AND strpos(query, $2) > 0",
            &[&prefix, &schema, &advisory],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Waits (up to 20 s) until `n` such statements wait on a lock.
pub async fn wait_for_lock_waiters(
    admin: &tokio_postgres::Client,
    schema: &str,
    prefix: &str,
    advisory: bool,
    n: usize,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while lock_waiters(admin, schema, prefix, advisory).await.len() < n {
        assert!(
            Instant::now() < deadline,
            "never saw {n} statements starting `{prefix}` wait on a lock"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The whole row `id` of `table` as JSON text, to prove a refused call
/// changed nothing.
pub async fn row_json(admin: &tokio_postgres::Client, table: &str, id: &str) -> String {
    admin
        .query_one(
            &format!("SELECT row_to_json(t)::text FROM {table} t WHERE id = $1"),
            &[&id],
        )
        .await
        .unwrap()
        .get(0)
}

/// A client of `server` holding row `id` of `table` locked `FOR UPDATE` in
/// an open transaction, until it runs `ROLLBACK`.
pub async fn hold_row(server: &PgServer, table: &str, id: &str) -> tokio_postgres::Client {
    let locker = server.admin().await;
    locker.batch_execute("BEGIN").await.unwrap();
    locker
        .query(
            &format!("SELECT 1 FROM {table} WHERE id = $1 FOR UPDATE"),
            &[&id],
        )
        .await
        .unwrap();
    locker
}

/// The text of `schema_sql` before the step to `version`: a schema exactly
/// as the library before that version created it.
pub fn schema_sql_before(options: &PostgresStoreOptions, version: i32) -> String {
    let sql = countersign_store_postgres::schema_sql(options).unwrap();
    let cut = sql
        .find(&format!(
            "-- countersign PostgreSQL store, schema version {version}"
        ))
        .unwrap_or_else(|| panic!("the version {version} step starts with its header"));
    let older = sql[..cut].to_owned();
    assert!(
        older.contains(&format!("VALUES ({}, ", version - 1))
            && !older.contains(&format!("VALUES ({version}, "))
    );
    older
}
