//! Benchmark 5: `PostgresApprovalStore::consume_once` against `pgbench`
//! running the store's own consume statement (`-f`) on the same server, in
//! the same run. (The table's size and consume latency by table size are
//! in the scale section, `scale_bench.rs`.)

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use countersign_approval_core::{ApprovalId, ApprovalStore};
use countersign_store_postgres::{PostgresApprovalStore, PostgresStoreOptions};

use crate::harness::{Row, ServerToolComparison, Side, compare_with_server_tool, median};
use crate::memory_bench::Fixture;
use crate::redis_bench::{Run, consume_all, issue_all};

/// The newest `/usr/lib/postgresql/<n>/bin/<name>`, else `<name>` on `PATH`.
pub(crate) fn bin(name: &str) -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                    Some((v, e.path().join("bin").join(name)))
                })
                .filter(|(_, p)| p.exists())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
        .pop()
        .map(|(_, p)| p)
        .unwrap_or_else(|| PathBuf::from(name))
}

fn as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A server command, run as `postgres` when we are root (initdb and
/// postgres refuse root).
fn server_command(name: &str) -> Command {
    if as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin(name));
        c
    } else {
        Command::new(bin(name))
    }
}

/// A throw-away PostgreSQL cluster on a free loopback port, `fsync` and
/// `synchronous_commit` on.
pub(crate) struct Server {
    dir: PathBuf,
    pub(crate) port: u16,
}

impl Server {
    pub(crate) fn start(synchronous_commit: bool) -> Result<Server, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let dir = std::env::temp_dir().join(format!("countersign-bench-pg-{port}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        if as_root() {
            Command::new("chown")
                .arg("postgres:")
                .arg(&dir)
                .status()
                .map_err(|e| e.to_string())?;
        }
        let server = Server { dir, port };
        let out = server_command("initdb")
            .arg("-D")
            .arg(server.data())
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale"])
            .output()
            .map_err(|e| {
                format!("could not run initdb (install the postgresql server package): {e}")
            })?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let conf = server.data().join("postgresql.auto.conf");
        let mut text = std::fs::read_to_string(&conf).unwrap_or_default();
        text.push_str(&format!(
            "listen_addresses = '127.0.0.1'\nfsync = on\nsynchronous_commit = {}\n\
             shared_buffers = 256MB\nmax_connections = 100\n",
            if synchronous_commit { "on" } else { "off" }
        ));
        std::fs::write(&conf, text).map_err(|e| e.to_string())?;
        let status = server_command("pg_ctl")
            .arg("-D")
            .arg(server.data())
            .arg("-l")
            .arg(server.dir.join("server.log"))
            .args(["-w", "-t", "60", "start", "-o"])
            .arg(format!("-p {} -k {}", server.port, server.dir.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("could not run pg_ctl: {e}"))?;
        if !status.success() {
            return Err("pg_ctl start failed".into());
        }
        Ok(server)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn connection(&self, extra: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres {extra}",
            self.port
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = server_command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) async fn connect(
    server: &Server,
    extra: &str,
    prefix: &str,
    pool: usize,
) -> Result<PostgresApprovalStore, String> {
    PostgresApprovalStore::connect(
        PostgresStoreOptions::new(server.connection(extra))
            .schema("bench")
            .table_prefix(prefix)
            .pool_size(pool),
    )
    .await
    .map_err(|e| e.to_string())
}

/// The pgbench script: the store's consume statement with the id drawn at
/// random from the baseline's grants, the other parameters as literals, and
/// the three predicates that make a consumed row unchangeable removed, so
/// every transaction does the work of a first, successful consume (seal
/// check, binding check, row update, commit).
fn pgbench_script(statement: &str, f: &Fixture, keyspace: usize) -> Result<String, String> {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "''"));
    let guard = " AND state = 'active' AND consumed_at IS NULL AND consumed_by IS NULL";
    if !statement.contains(guard) {
        return Err("the consume statement changed; update the benchmark's baseline".into());
    }
    let sql = statement
        .replace(guard, "")
        .replace("$7", &quote(&f.binding.action_digest.to_hex()))
        .replace("$6", &quote(&f.binding.url))
        .replace("$5", &quote(f.binding.run_id.as_str()))
        .replace("$4", &quote(f.binding.actor_id.as_str()))
        .replace("$3", &quote(f.attempt.as_str()))
        .replace("$2", &f.now.as_millis().to_string())
        .replace("$1", "'apr_bench' || lpad(:n::text, 12, '0')");
    Ok(format!(
        "\\set n random(0, {})\n{sql};\n",
        keyspace.saturating_sub(1)
    ))
}

/// Runs pgbench; returns (transactions per second, p50 latency in ms).
fn pgbench(server: &Server, dir: &Path, clients: usize, count: u64) -> Result<(f64, f64), String> {
    let logs = dir.join(format!("log-{clients}"));
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let per_client = (count / clients as u64).max(1);
    let out = Command::new(bin("pgbench"))
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &server.port.to_string(),
            "-U",
            "postgres",
        ])
        .args(["-n", "-M", "prepared", "-c", &clients.to_string()])
        .args(["-j", &clients.min(2).to_string()])
        .args(["-t", &per_client.to_string(), "-l"])
        .arg(format!("--log-prefix={}", logs.join("pgb").display()))
        .arg("-f")
        .arg(dir.join("consume.sql"))
        .arg("postgres")
        .output()
        .map_err(|e| format!("could not run pgbench: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "pgbench failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let tps = text
        .lines()
        .find(|l| l.starts_with("tps = "))
        .and_then(|l| l["tps = ".len()..].split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .ok_or_else(|| format!("no tps in pgbench output: {text}"))?;
    // Each log line: client_id transaction_no time_us script_no time_epoch time_us
    let mut latencies = Vec::new();
    for entry in std::fs::read_dir(&logs).map_err(|e| e.to_string())? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let log = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        for line in log.lines() {
            if let Some(us) = line.split(' ').nth(2).and_then(|v| v.parse::<f64>().ok()) {
                latencies.push(us / 1e3);
            }
        }
    }
    if latencies.is_empty() {
        return Err("pgbench wrote no latencies".into());
    }
    Ok((tps, median(&mut latencies)))
}

/// One WAL-sized flush on the data directory's disk, in ms: `pg_test_fsync`
/// timing `fdatasync` (Linux's default `wal_sync_method`) after one 8 kB
/// write, for one second.
fn flush_ms(dir: &Path) -> Result<f64, String> {
    let file = dir.join("pg_test_fsync.out");
    let out = Command::new(bin("pg_test_fsync"))
        .args(["-s", "1", "-f"])
        .arg(&file)
        .output()
        .map_err(|e| format!("could not run pg_test_fsync: {e}"))?;
    let _ = std::fs::remove_file(&file);
    let text = String::from_utf8_lossy(&out.stdout);
    // "        fdatasync                   456.123 ops/sec    2192 usecs/op",
    // first in the section that compares sync methods after one 8 kB write.
    text.lines()
        .find(|line| line.trim_start().starts_with("fdatasync "))
        .and_then(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "usecs/op")?;
            words.get(at.checked_sub(1)?)?.parse::<f64>().ok()
        })
        .map(|us| us / 1e3)
        .ok_or_else(|| format!("no fdatasync figure in pg_test_fsync's output: {text}"))
}

fn grants_with(
    f: &Fixture,
    tag: &str,
    range: std::ops::Range<usize>,
) -> Vec<countersign_approval_core::Approval> {
    range
        .filter_map(|i| {
            let mut g = f.template.clone();
            g.id = ApprovalId::parse(&format!("apr_{tag}{i:012}"))?;
            Some(g)
        })
        .collect()
}

/// The PostgreSQL rows and a section describing the setup and the table size.
pub fn consume(quick: bool) -> Result<(Vec<Row>, String), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let single = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let f = Fixture::new()?;
    let keyspace: usize = if quick { 1_000 } else { 100_000 };
    let plan = |clients: usize| -> (u64, usize) {
        match (quick, clients) {
            (true, _) => (200, 1),
            (false, 1) => (1_000, 7),
            (false, _) => (8_000, 5),
        }
    };

    let mut rows = Vec::new();
    let mut section = String::new();
    let _ = writeln!(
        section,
        "## PostgreSQL store\n\nTwo PostgreSQL {} clusters started by the run (`initdb`, loopback, \
         `fsync = on`): one with `synchronous_commit = off`, where a consume's latency is the \
         client, protocol and statement; one with `synchronous_commit = on`, where every consume \
         also waits for its WAL flush, so at one client the disk's flush time dominates: that row's \
         baseline is the same statement without the wait plus the wait itself, that is pgbench's \
         1-client p50 on the `synchronous_commit = off` cluster plus `pg_test_fsync`'s \
         `fdatasync` after one 8 kB write on the same disk, measured in every round beside the \
         consumes (pgbench's own 1-client figure with the flush is in the row's note). The \
         subject consumes freshly issued grants through `PostgresApprovalStore` (a \
         deadpool-postgres pool of 16; tokio, a current-thread runtime for one task and 2 worker \
         threads for 16). The baseline is `pgbench -M prepared -c N -f consume.sql` where \
         `consume.sql` is the store's own consume statement (`consume_statement()`) with the \
         id drawn at random from {keyspace} grants the store issued and the three predicates \
         that keep a consumed row unchangeable removed, so every transaction does the full work \
         of a successful consume; pgbench's p50 comes from its per-transaction log. Rounds \
         alternate: {} rounds of {} consumes at 1 client, {} rounds of {} at 16; figures are \
         medians over rounds.",
        server_version(),
        plan(1).1,
        plan(1).0,
        plan(16).1,
        plan(16).0
    );
    // pgbench's 1-client p50 without waiting for the flush: the statement's
    // own time, to which the synchronous 1-client baseline adds one flush.
    let mut statement_ns: Option<f64> = None;
    for synchronous in [false, true] {
        let server = Server::start(synchronous)?;
        let setting = if synchronous {
            "synchronous_commit on"
        } else {
            "synchronous_commit off"
        };
        // The baseline's grants, issued by the store (sealed), with the store's
        // own statement captured for pgbench. Filled without waiting for fsync.
        let statement = rt.block_on(async {
            let fill = Arc::new(
                connect(&server, "options='-c synchronous_commit=off'", "base_", 16).await?,
            );
            let statement = fill.consume_statement().to_owned();
            issue_all(fill, grants_with(&f, "bench", 0..keyspace), 16).await?;
            Ok::<_, String>(statement)
        })?;
        std::fs::write(
            server.dir.join("consume.sql"),
            pgbench_script(&statement, &f, keyspace)?,
        )
        .map_err(|e| e.to_string())?;

        for clients in [1usize, 16] {
            let (requests, rounds) = plan(clients);
            let mut ours = Vec::new();
            let mut theirs = Vec::new();
            let mut flushes = Vec::new();
            for round in 0..rounds {
                if synchronous && clients == 1 {
                    flushes.push(flush_ms(&server.dir)?);
                }
                let prefix = format!("c{clients}r{round}_");
                let rt = if clients == 1 { &single } else { &rt };
                let run: Run = rt.block_on(async {
                    let store: Arc<dyn ApprovalStore> =
                        Arc::new(connect(&server, "", &prefix, 16).await?);
                    issue_all(store, grants_with(&f, "run", 0..requests as usize), 16).await
                })?;
                theirs.push(pgbench(&server, &server.dir, clients, requests)?);
                ours.push(rt.block_on(consume_all(&f, run, clients))?);
            }
            let ServerToolComparison {
                subject,
                baseline,
                target,
                what,
                note,
            } = compare_with_server_tool(&ours, &theirs, clients);
            if !synchronous && clients == 1 {
                statement_ns = Some(baseline.median_ns);
            }
            if synchronous && clients == 1 {
                let flush = median(&mut flushes);
                let statement = statement_ns
                    .ok_or("the synchronous_commit off cluster gave no 1-client figure")?;
                rows.push(Row {
                    name: format!(
                        "postgres store: consume_once, 1 concurrent, {setting} (p50 latency)"
                    ),
                    baseline_name:
                        "pgbench -c 1 with synchronous_commit off + one WAL flush (pg_test_fsync, fdatasync of one 8 kB write, same disk)"
                            .to_owned(),
                    subject,
                    baseline: Side {
                        median_ns: statement + flush * 1e6,
                    },
                    target,
                    note: format!(
                        "{note} (pgbench with the flush); statement {:.3} ms + flush p50 {flush:.3} ms over {} rounds",
                        statement / 1e6,
                        flushes.len()
                    ),
                });
                let _ = baseline;
                continue;
            }
            rows.push(Row {
                name: format!(
                    "postgres store: consume_once, {clients} concurrent, {setting} ({what})"
                ),
                baseline_name: format!(
                    "pgbench -c {clients} -f <the store's consume>, same server"
                ),
                subject,
                baseline,
                target,
                note,
            });
        }
    }
    Ok((rows, section))
}

fn server_version() -> String {
    Command::new(bin("postgres"))
        .arg("--version")
        .output()
        // "postgres (PostgreSQL) 15.20 (Debian …)"
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .nth(2)
                .unwrap_or("")
                .to_owned()
        })
        .unwrap_or_default()
}
