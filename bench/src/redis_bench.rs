//! Benchmark 4: `RedisApprovalStore::consume_once` against `redis-benchmark`
//! running EVALSHA of an equivalent script on the same server, in the same run.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use countersign_approval_core::{ApprovalId, ApprovalStore, Clock, SystemClock, Timestamp};
use countersign_store_redis::{RedisApprovalStore, RedisStoreOptions};

use crate::harness::{Row, ServerToolComparison, compare_with_server_tool, median};
use crate::memory_bench::Fixture;

const PRELUDE: &str = include_str!("../../crates/store-redis/src/lua/prelude.lua");
const CONSUME: &str = include_str!("../../crates/store-redis/src/lua/consume.lua");

/// The baseline script: the store's own consume script, changed only so that
/// every call does the work of a first, successful consume (read and check
/// the record, compute its fingerprint, compare the binding, SET,
/// PEXPIREAT) whatever the key's state and whatever fingerprint it is
/// given, takes the id from the key, since `redis-benchmark` cannot put
/// the same random number in two arguments, and takes the digest as hex,
/// since a command-line argument cannot hold its raw bytes (the hex is
/// decoded in the script: a few µs the store's own calls do not pay).
fn baseline_script() -> Result<String, String> {
    // The id is the key's last part (`{prefix}:{a<tag>}:grant:<id>`).
    let body = CONSUME
        .replacen(
            "local err = check_key(key, slot, ARGV[1])",
            "local id = string.match(key, ':grant:([^:]*)$')\nlocal err = check_key(key, slot, id)",
            1,
        )
        .replace("ARGV[1]", "id")
        .replacen(
            "if f.state == CONSUMED then",
            "if f.state == CONSUMED and false then",
            1,
        )
        .replacen(
            "if fingerprint(f) ~= ARGV[9] then",
            "if fingerprint(f) == nil then",
            1,
        )
        .replacen(
            "and f.digest == ARGV[7]",
            "and f.digest == from_hex(ARGV[7])",
            1,
        );
    let patched = [
        "string.match(key, ':grant:",
        "and false then",
        "fingerprint(f) == nil",
        "from_hex(ARGV[7])",
    ];
    if !patched.iter().all(|p| body.contains(p)) {
        return Err("the consume script changed; update the benchmark's baseline".into());
    }
    Ok(format!("{PRELUDE}\n{body}"))
}

/// A throw-away redis-server on a free loopback port.
pub(crate) struct Server {
    child: Child,
    pub(crate) port: u16,
    dir: PathBuf,
}

impl Server {
    pub(crate) fn start(fsync_always: bool) -> Result<Server, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let dir = std::env::temp_dir().join(format!("countersign-bench-redis-{port}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let (aof, fsync) = if fsync_always {
            ("yes", "always")
        } else {
            ("no", "everysec")
        };
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", aof, "--appendfsync", fsync])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("could not start redis-server: {e}"))?;
        let server = Server { child, port, dir };
        for _ in 0..200 {
            if server.cli(&["PING"]).is_ok_and(|o| o == "PONG") {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        Err("redis-server did not answer PING".into())
    }

    pub(crate) fn cli(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .map_err(|e| format!("could not run redis-cli: {e}"))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How many `EVALSHA` calls `server` has run (`INFO commandstats`).
fn evalsha_calls(server: &Server) -> Result<u64, String> {
    let stats = server.cli(&["INFO", "commandstats"])?;
    stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse().ok())
        .ok_or_else(|| format!("no evalsha count in INFO commandstats: {stats}"))
}

/// Runs `redis-benchmark` and returns (requests per second, p50 latency in ms).
fn redis_benchmark(
    server: &Server,
    clients: usize,
    requests: u64,
    keyspace: usize,
    args: &[String],
) -> Result<(f64, f64), String> {
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &server.port.to_string()])
        .args(["-c", &clients.to_string(), "-n", &requests.to_string()])
        .args(["-r", &keyspace.to_string(), "--csv"])
        .args(args)
        .output()
        .map_err(|e| format!("could not run redis-benchmark: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
    let line = text
        .lines()
        .find(|l| !l.starts_with("\"test\""))
        .ok_or_else(|| format!("redis-benchmark printed nothing: {text}"))?;
    let cols: Vec<f64> = line
        .split(',')
        .skip(1)
        .filter_map(|c| c.trim_matches('"').parse().ok())
        .collect();
    match cols.as_slice() {
        [rps, _avg, _min, p50, ..] => Ok((*rps, *p50)),
        _ => Err(format!("unexpected redis-benchmark output: {line}")),
    }
}

/// A store and the ids of the grants issued to it for one round.
pub(crate) struct Run {
    pub(crate) store: Arc<dyn ApprovalStore>,
    pub(crate) ids: Vec<ApprovalId>,
}

async fn issued(
    f: &Fixture,
    port: u16,
    prefix: &str,
    n: u64,
    concurrency: usize,
) -> Result<Run, String> {
    let store = RedisApprovalStore::connect(
        // One of the measured configurations runs without persistence on purpose.
        RedisStoreOptions::single(format!("redis://127.0.0.1:{port}/"))
            .key_prefix(prefix)
            .allow_non_durable_persistence(),
    )
    .await
    .map_err(|e| e.to_string())?;
    issue_all(Arc::new(store), f.grants(n), concurrency).await
}

/// Issues `grants` to `store` with `concurrency` tasks.
pub(crate) async fn issue_all(
    store: Arc<dyn ApprovalStore>,
    grants: Vec<countersign_approval_core::Approval>,
    concurrency: usize,
) -> Result<Run, String> {
    let grants = Arc::new(grants);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (store, grants, next) = (store.clone(), grants.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(g) = grants.get(i) else { break };
                store.issue(g.clone()).await.map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(Run {
        store,
        ids: grants.iter().map(|g| g.id.clone()).collect(),
    })
}

/// Consumes every grant with `concurrency` tasks; returns (ops/s, p50 latency ms).
pub(crate) async fn consume_all(
    f: &Fixture,
    run: Run,
    concurrency: usize,
) -> Result<(f64, f64), String> {
    let ids = Arc::new(run.ids);
    let next = Arc::new(AtomicUsize::new(0));
    let binding = Arc::new(f.binding.clone());
    let attempt = Arc::new(f.attempt.clone());
    let now = f.now;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (store, ids, next, binding, attempt) = (
            run.store.clone(),
            ids.clone(),
            next.clone(),
            binding.clone(),
            attempt.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut ok = 0usize;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(id) = ids.get(i) else { break };
                let t = Instant::now();
                let outcome = store.consume_once(id, &binding, now, &attempt).await;
                latencies.push(t.elapsed().as_secs_f64() * 1e3);
                if matches!(
                    outcome,
                    Ok(countersign_approval_core::ConsumeOutcome::Consumed { replay: false })
                ) {
                    ok += 1;
                }
            }
            (latencies, ok)
        }));
    }
    let mut latencies = Vec::new();
    let mut ok = 0;
    for t in tasks {
        let (l, o) = t.await.map_err(|e| e.to_string())?;
        latencies.extend(l);
        ok += o;
    }
    let elapsed = start.elapsed().as_secs_f64();
    if ok != ids.len() {
        return Err(format!("consume: {ok} of {} grants consumed", ids.len()));
    }
    Ok((ids.len() as f64 / elapsed, median(&mut latencies)))
}

/// p50 latency (ms) of the baseline script sent one at a time through a bare
/// redis-rs `ConnectionManager`: the client library's share of the latency,
/// without any of the store's work.
async fn bare_client_p50(
    port: u16,
    sha: &str,
    slot: &str,
    args: &[String],
    keyspace: usize,
    n: u64,
) -> Result<f64, String> {
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{port}/")).map_err(|e| e.to_string())?;
    // No response timeout: on a busy machine one reply may take longer
    // than the client's default, and the figure is a median anyway.
    let config = redis::aio::ConnectionManagerConfig::new().set_response_timeout(None);
    let mut conn = redis::aio::ConnectionManager::new_with_config(client, config)
        .await
        .map_err(|e| format!("bare client: {e}"))?;
    let mut latencies = Vec::new();
    for i in 0..n {
        let key = format!(
            "{slot}:grant:apr_bench{:012}",
            (i as usize * 7919) % keyspace
        );
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(sha).arg(1).arg(key);
        for a in &args[4..] {
            cmd.arg(a.as_str());
        }
        let t = Instant::now();
        let _: redis::Value = cmd
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("bare client: {e}"))?;
        latencies.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(&mut latencies))
}

/// The Redis rows and a section describing the setup.
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
    let mut f = Fixture::new()?;
    // The grants live on the real clock: the shared fixture's fixed `now`
    // (in 2023) is far behind the server's, so every consume would move
    // the record's expiry (retention counts from the server's time then)
    // and follow it with the pointer's, one more round trip that a host
    // whose clock agrees with the server's never makes.
    let now = SystemClock.now();
    f.template.issued_at = now;
    // An hour: longer than the run, so no grant (nor the baseline's) expires
    // while it is measured.
    f.template.expires_at = Timestamp::from_millis(now.as_millis() + 3_600_000);
    f.now = now;
    // Short alternating rounds: drift (other tenants, the disk under fsync)
    // then hits both sides alike.
    let plan = |clients: usize| -> (u64, usize) {
        match (quick, clients) {
            (true, _) => (200, 1),
            (false, 1) => (3_000, 15),
            // Below the 16 384 grants a store remembers the fingerprint of
            // (docs/redis.md, section 3): past it, the first consumes would
            // find their grants forgotten and read each one first.
            (false, _) => (10_000, 13),
        }
    };
    let script = baseline_script()?;
    let keyspace: usize = if quick { 1_000 } else { 100_000 };
    let mut rows = Vec::new();
    let mut section = String::new();
    let _ = writeln!(
        section,
        "## Redis store\n\nEach configuration gets its own `redis-server` on a free loopback \
         port. The subject consumes freshly issued grants through \
         `RedisApprovalStore` (one multiplexed connection; tokio, a current-thread runtime for \
         one task and 2 worker threads for 50); the \
         baseline is `redis-benchmark -c N -n <same count> -r 100000 --csv EVALSHA` of the \
         store's own consume script, changed only to take the id from the key and to do \
         the full work of a successful consume on every call (read and check the record, \
         compute its fingerprint, compare the binding, `SET`, `PEXPIREAT`), on 100000 grants \
         issued by the store. Rounds alternate subject and baseline: {} rounds of {} consumes \
         at 1 task, {} rounds of {} at 50; the figures are medians over rounds. The baseline's \
         client ignores the reply; ours checks it. The subject's grants were issued by the \
         store that consumes them, so it knows the fingerprint of their fixed fields and \
         consumes in one round trip, as the baseline does (every round checks it: exactly one \
         `EVALSHA` per consume in `INFO commandstats`; a round issues fewer grants than the \
         16 384 a store remembers); a store that never saw a grant \
         first reads and validates it with the get script (one more round trip, so that no \
         check that can refuse a record runs after the record is written; docs/redis.md, \
         section 3), which the scale section below measures.",
        plan(1).1,
        plan(1).0,
        plan(50).1,
        plan(50).0
    );
    for fsync in [false, true] {
        let server = Server::start(fsync)?;
        let persistence = if fsync {
            "appendonly yes, appendfsync always"
        } else {
            "persistence off"
        };
        // Grants for the baseline: ids `apr_bench` + 12 digits, as `__rand_int__` makes them.
        let slot = rt.block_on(async {
            let store = RedisApprovalStore::connect(
                RedisStoreOptions::single(format!("redis://127.0.0.1:{}/", server.port))
                    .key_prefix("base")
                    .allow_non_durable_persistence(),
            )
            .await
            .map_err(|e| e.to_string())?;
            let store = Arc::new(store);
            let total = keyspace;
            let next = Arc::new(AtomicUsize::new(0));
            let mut tasks = Vec::new();
            for _ in 0..32 {
                let (store, next, template) = (store.clone(), next.clone(), f.template.clone());
                tasks.push(tokio::spawn(async move {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= total {
                            break;
                        }
                        let mut g = template.clone();
                        let Some(id) = ApprovalId::parse(&format!("apr_bench{i:012}")) else {
                            return Err("bad id".to_owned());
                        };
                        g.id = id;
                        store.issue(g).await.map_err(|e| e.to_string())?;
                    }
                    Ok(())
                }));
            }
            for t in tasks {
                t.await.map_err(|e| e.to_string())??;
            }
            // Every grant of the fixture's actor lives under this slot prefix.
            Ok::<_, String>(store.slot_prefix(&f.binding.actor_id))
        })?;
        let key_pattern = format!("{slot}:grant:apr_bench__rand_int__");
        let sha = server.cli(&["SCRIPT", "LOAD", &script])?;
        if sha.len() != 40 {
            return Err(format!("SCRIPT LOAD failed: {sha}"));
        }
        let bench_args: Vec<String> = [
            "EVALSHA",
            &sha,
            "1",
            &key_pattern,
            "-",
            &f.now.as_millis().to_string(),
            f.attempt.as_str(),
            f.binding.actor_id.as_str(),
            f.binding.run_id.as_str(),
            &f.binding.url,
            &f.binding.action_digest.to_hex(),
            &countersign_store_redis::DEFAULT_RETENTION
                .as_millis()
                .to_string(),
            // The fingerprint (ignored by the baseline) and the slot prefix.
            "-",
            &slot,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();

        for clients in [1usize, 50] {
            let (requests, rounds) = plan(clients);
            let mut ours = Vec::new();
            let mut theirs = Vec::new();
            let mut bare = Vec::new();
            for round in 0..rounds {
                let prefix = format!("s{clients}r{round}");
                // One task needs no second worker: a current-thread runtime
                // keeps the request, the connection's driver and the reply on
                // one thread, as a single-task host would.
                let rt = if clients == 1 { &single } else { &rt };
                let run = rt.block_on(issued(&f, server.port, &prefix, requests, 32))?;
                let baseline = redis_benchmark(&server, clients, requests, keyspace, &bench_args)?;
                let scripts_before = evalsha_calls(&server)?;
                let subject = rt.block_on(consume_all(&f, run, clients))?;
                // The section says one round trip per consume: a store that
                // read its grants first would be measured on another path.
                let scripts = evalsha_calls(&server)?.saturating_sub(scripts_before);
                if scripts != requests {
                    return Err(format!(
                        "the store ran {scripts} scripts for {requests} consumes, not one each"
                    ));
                }
                ours.push(subject);
                theirs.push(baseline);
                if clients == 1 {
                    bare.push(rt.block_on(bare_client_p50(
                        server.port,
                        &sha,
                        &slot,
                        &bench_args,
                        keyspace,
                        requests,
                    ))?);
                }
            }
            let ServerToolComparison {
                subject,
                baseline,
                target,
                what,
                note,
            } = compare_with_server_tool(&ours, &theirs, clients);
            rows.push(Row {
                name: format!(
                    "redis store: consume_once, {clients} concurrent, {persistence} ({what})"
                ),
                baseline_name: format!("redis-benchmark -c {clients} EVALSHA, same server"),
                subject,
                baseline,
                target,
                note: if bare.is_empty() {
                    note
                } else {
                    format!(
                        "{note}; bare redis-rs, same script: p50 {:.3} ms",
                        median(&mut bare)
                    )
                },
            });
        }
    }
    Ok((rows, section))
}
