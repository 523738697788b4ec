//! Cost per grant at scale: bytes per live grant and consume latency with a
//! thousand and a million live grants, store by store.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use countersign_approval_core::{
    ActorId, Approval, ApprovalId, ApprovalStore, AttemptId, Clock, ConsumeOutcome, RunId,
    SystemClock, Timestamp,
};
use countersign_store_memory::InMemoryApprovalStore;
use countersign_store_redis::{RedisApprovalStore, RedisStoreOptions};

use crate::harness::median;

/// Grants per run when filling: an agent's run holds a handful of live
/// grants, so 100 keeps each run's live set in Redis's compact encoding, as
/// it is in practice.
const GRANTS_PER_RUN: u64 = 100;
/// Runs per actor when filling.
const RUNS_PER_ACTOR: u64 = 100;
/// Consumes timed per size and per path.
const PROBES: u64 = 1_000;
/// Consumes per size before the next size takes its turn: the sizes
/// alternate, so drift on this shared machine hits both alike.
const ROUND: u64 = 25;
/// A prime that divides none of the sizes: `k * STRIDE % n` visits distinct
/// grants for every `k < n`, spread over the whole fill.
const STRIDE: u64 = 7_919;

/// The grant every scale figure is made of: a click with a 10-byte
/// selector on a 25-byte URL, valid for an hour from the real clock (the
/// Redis store keeps a record until its expiry plus retention, counted on
/// the server's clock).
pub(crate) struct ScaleFixture {
    template: Approval,
    /// Distinguishes the grants of one fill from another's.
    tag: u32,
}

impl ScaleFixture {
    pub(crate) fn new(tag: u32) -> Result<ScaleFixture, String> {
        let policy = crate::policy_bench::policy()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| e.to_string())?;
        let url = rt
            .block_on(policy.authorize_destination("https://docs.example.com/"))
            .map_err(|e| e.to_string())?;
        let action = policy
            .authorize_action(&serde_json::json!({"method": "click", "selector": "button#buy"}))
            .map_err(|e| e.to_string())?;
        let template = Approval::for_action(
            ActorId::new("actor-0000").map_err(|e| e.to_string())?,
            RunId::new("run-000000").map_err(|e| e.to_string())?,
            &url,
            &action,
            Duration::from_secs(3600),
            SystemClock.now(),
        )
        .map_err(|e| e.to_string())?;
        Ok(ScaleFixture { template, tag })
    }

    /// Grant `i`: an id shaped like a generated one (`apr_` and 32 hex
    /// digits), in run `i / GRANTS_PER_RUN` of actor `run / RUNS_PER_ACTOR`.
    pub(crate) fn approval(&self, i: u64) -> Result<Approval, String> {
        let run = i / GRANTS_PER_RUN;
        let actor = run / RUNS_PER_ACTOR;
        let mut g = self.template.clone();
        g.id = ApprovalId::parse(&format!("apr_{:08x}{i:024x}", self.tag)).ok_or("bad id")?;
        g.actor_id = ActorId::new(format!("actor-{actor:04}")).map_err(|e| e.to_string())?;
        g.run_id = RunId::new(format!("run-{run:06}")).map_err(|e| e.to_string())?;
        Ok(g)
    }

    /// The grants consumed by probe `k` of a fill of `n`.
    fn probe_index(k: u64, n: u64) -> u64 {
        (k * STRIDE) % n
    }
}

/// Resident memory of this process, in bytes (Linux `/proc/self/statm`).
fn resident_bytes() -> Result<u64, String> {
    let statm = std::fs::read_to_string("/proc/self/statm").map_err(|e| e.to_string())?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .ok_or("unreadable /proc/self/statm")?;
    Ok(pages * 4096)
}

/// One size: bytes per grant (resident growth while issuing `live` grants)
/// and the p50 of `probes` single consumes of further fresh grants.
fn memory_at(f: &ScaleFixture, live: u64, probes: u64) -> Result<(f64, f64), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    let store = InMemoryApprovalStore::new();
    let before = resident_bytes()?;
    rt.block_on(async {
        // Grants are built one at a time so only the store holds them.
        for i in 0..live {
            store
                .issue(f.approval(i)?)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(())
    })?;
    let grown = resident_bytes()?.saturating_sub(before);
    let probe_grants: Vec<Approval> = (live..live + probes)
        .map(|i| f.approval(i))
        .collect::<Result<_, _>>()?;
    let mut samples = Vec::with_capacity(probe_grants.len());
    rt.block_on(async {
        for g in &probe_grants {
            store.issue(g.clone()).await.map_err(|e| e.to_string())?;
        }
        let attempt = AttemptId::generate().map_err(|e| e.to_string())?;
        let now = SystemClock.now();
        for g in &probe_grants {
            let binding = g.binding();
            let start = Instant::now();
            let outcome = store
                .consume_once(&g.id, &binding, now, &attempt)
                .await
                .map_err(|e| e.to_string())?;
            samples.push(start.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(outcome);
        }
        Ok::<_, String>(())
    })?;
    Ok((grown as f64 / live as f64, median(&mut samples)))
}

/// The sizes a run measures, and how they are labelled.
fn sizes(quick: bool) -> [u64; 2] {
    if quick {
        [1_000, 100_000]
    } else {
        [1_000, 1_000_000]
    }
}

/// One store's consume p50 (µs) by live grants, for the scale chart.
#[derive(Debug, Clone)]
pub struct ScaleCurve {
    /// The store, and the path when a store has two.
    pub label: String,
    /// `(live grants, consume p50 in µs)`, smallest size first.
    pub points: Vec<(u64, f64)>,
}

/// The memory store's section of the scale report.
pub fn memory(quick: bool) -> Result<(String, ScaleCurve), String> {
    let f = ScaleFixture::new(1)?;
    let sizes: &[u64] = if quick {
        &[1_000, 20_000]
    } else {
        &[1_000, 1_000_000]
    };
    let probes = if quick { 200 } else { 5_000 };
    let mut rows = Vec::new();
    let mut p50s = Vec::new();
    let mut curve = ScaleCurve {
        label: "memory".to_owned(),
        points: Vec::new(),
    };
    for &live in sizes {
        let (bytes, p50) = memory_at(&f, live, probes)?;
        curve.points.push((live, p50));
        eprintln!(
            "scale: memory store, {live} live grants: {bytes:.0} bytes per grant, consume p50 {p50:.2} µs"
        );
        rows.push(format!("| {live} | {bytes:.0} | {p50:.2} µs |"));
        p50s.push(p50);
    }
    let ratio = p50s.last().copied().unwrap_or(0.0) / p50s.first().copied().unwrap_or(1.0);
    Ok((
        format!(
            "### Memory store\n\n\
         Grants with a 10-byte selector and a 1-hour lifetime, issued one by one into one \
         `InMemoryApprovalStore`; bytes per grant are the process's resident growth while \
         issuing divided by the count (the allocator's own overhead included, so the small \
         size reads high); consume p50 is over {probes} single consumes of further fresh \
         grants on one thread.\n\n\
         | live grants | bytes per grant | consume p50 |\n| --- | --- | --- |\n{}\n\n\
         Consume p50 at the largest size is {ratio:.2}× the p50 at the smallest. A purge \
         (`purge`, by an expiry index, in batches of `PURGE_BATCH` = 1024 under the lock) \
         costs in proportion to what it drops, not to the store's size.\n",
            rows.join("\n")
        ),
        curve,
    ))
}

/// `INFO memory`'s `used_memory`.
fn used_memory(conn: &mut redis::Connection) -> Result<u64, String> {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(conn)
        .map_err(|e| e.to_string())?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| "no used_memory in INFO memory".to_owned())
}

/// `MEMORY USAGE key SAMPLES 0` (every element counted).
fn memory_usage(conn: &mut redis::Connection, key: &str) -> Result<u64, String> {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query::<Option<u64>>(conn)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{key}: no such key"))
}

/// Issues grants `indices` of `f` to `store` with `tasks` concurrent
/// callers: the multiplexed connection pipelines their scripts.
pub(crate) async fn fill(
    store: Arc<dyn ApprovalStore>,
    f: &Arc<ScaleFixture>,
    indices: Vec<u64>,
    tasks: usize,
) -> Result<(), String> {
    let indices = Arc::new(indices);
    let next = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (store, f, next, indices) = (store.clone(), f.clone(), next.clone(), indices.clone());
        handles.push(tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let Some(&i) = usize::try_from(n).ok().and_then(|n| indices.get(n)) else {
                    return Ok::<_, String>(());
                };
                store
                    .issue(f.approval(i)?)
                    .await
                    .map_err(|e| format!("issuing grant {i}: {e}"))?;
            }
        }));
    }
    for h in handles {
        h.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

/// A run's grants after its first: copies of the first (which the store
/// issued, creating the run's fences, live set and the actor's run set), each
/// under its own id, written in pipelines exactly as the issue script
/// writes a grant (the record with its id, the pointer, the live-set
/// member, the same expiries). Far faster than a million issues; the
/// layout is checked against the store-written first grant of every run,
/// and the probes then read and consume copies through the store.
fn redis_copy(
    conn: &mut redis::Connection,
    store: &RedisApprovalStore,
    f: &ScaleFixture,
    filled: u64,
) -> Result<(), String> {
    let changed = |what: &str| {
        format!("the Redis store's {what} changed; update the bench's bulk copy (scale_bench.rs)")
    };
    let runs: Vec<u64> = (0..filled).step_by(GRANTS_PER_RUN as usize).collect();
    for batch in runs.chunks(100) {
        let mut reads = redis::pipe();
        let templates: Vec<Approval> = batch
            .iter()
            .map(|&i| f.approval(i))
            .collect::<Result<_, _>>()?;
        for g in &templates {
            let key = store.grant_key(&g.actor_id, &g.id);
            let pointer = store.pointer_key(&g.id);
            reads
                .cmd("GET")
                .arg(&key)
                .cmd("PEXPIRETIME")
                .arg(&key)
                .cmd("GET")
                .arg(&pointer)
                .cmd("PEXPIRETIME")
                .arg(&pointer)
                .cmd("ZRANGE")
                .arg(store.live_key(&g.actor_id, &g.run_id))
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES");
        }
        type Read = (Vec<u8>, i64, Vec<u8>, i64, Vec<(Vec<u8>, String)>);
        let read: Vec<Read> = {
            let flat: Vec<redis::Value> = reads.query(conn).map_err(|e| e.to_string())?;
            flat.chunks(5)
                .map(|c| {
                    let get = |v: &redis::Value| redis::from_redis_value_ref::<Vec<u8>>(v);
                    let int = |v: &redis::Value| redis::from_redis_value_ref::<i64>(v);
                    Ok::<Read, redis::ParsingError>((
                        get(&c[0])?,
                        int(&c[1])?,
                        get(&c[2])?,
                        int(&c[3])?,
                        redis::from_redis_value_ref(&c[4])?,
                    ))
                })
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?
        };
        let mut writes = redis::pipe();
        for ((&first, g), (record, record_at, pointer, pointer_at, live)) in
            batch.iter().zip(&templates).zip(&read)
        {
            let fields =
                countersign_store_redis::record_fields(record).ok_or_else(|| changed("record"))?;
            let tag = RedisApprovalStore::actor_tag(&g.actor_id);
            if hex(pointer) != tag {
                return Err(changed("pointer"));
            }
            let [(member, score)] = live.as_slice() else {
                return Err(changed("live set"));
            };
            if *member != live_member(&g.id)? || score.is_empty() {
                return Err(changed("live set"));
            }
            for i in first + 1..(first + GRANTS_PER_RUN).min(filled) {
                let copy = f.approval(i)?;
                let fields: Vec<countersign_store_redis::RecordField> = fields
                    .iter()
                    .map(|(name, value)| match *name {
                        "id" => (*name, Some(copy.id.as_str().as_bytes().to_vec())),
                        _ => (*name, value.clone()),
                    })
                    .collect();
                let key = store.grant_key(&copy.actor_id, &copy.id);
                let pointer_key = store.pointer_key(&copy.id);
                writes
                    .cmd("SET")
                    .arg(&key)
                    .arg(countersign_store_redis::record_from_fields(&fields))
                    .ignore()
                    .cmd("PEXPIREAT")
                    .arg(&key)
                    .arg(record_at)
                    .ignore()
                    .cmd("SET")
                    .arg(&pointer_key)
                    .arg(pointer)
                    .ignore()
                    .cmd("PEXPIREAT")
                    .arg(&pointer_key)
                    .arg(pointer_at)
                    .ignore()
                    .cmd("ZADD")
                    .arg(store.live_key(&copy.actor_id, &copy.run_id))
                    .arg(score)
                    .arg(live_member(&copy.id)?)
                    .ignore();
            }
        }
        writes.query::<()>(conn).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A generated id's member in its run's live set: a zero byte and the 16
/// bytes its 32 hex digits spell.
fn live_member(id: &ApprovalId) -> Result<Vec<u8>, String> {
    let digits = id
        .as_str()
        .strip_prefix("apr_")
        .ok_or("not a generated id")?;
    let mut out = vec![0u8];
    for pair in digits.as_bytes().chunks(2) {
        let text = std::str::from_utf8(pair).map_err(|e| e.to_string())?;
        out.push(u8::from_str_radix(text, 16).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

/// Consumes `grants` one at a time through `store`; the latency of each, in ms.
async fn timed_consumes(
    store: &RedisApprovalStore,
    grants: &[Approval],
) -> Result<Vec<f64>, String> {
    let attempt = AttemptId::generate().map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(grants.len());
    for g in grants {
        let binding = g.binding();
        let now: Timestamp = SystemClock.now();
        let start = Instant::now();
        let outcome = store
            .consume_once(&g.id, &binding, now, &attempt)
            .await
            .map_err(|e| e.to_string())?;
        out.push(start.elapsed().as_secs_f64() * 1e3);
        if outcome != (ConsumeOutcome::Consumed { replay: false }) {
            return Err(format!("consume of {} answered {outcome:?}", g.id));
        }
    }
    Ok(out)
}

/// One filled Redis server and what was measured on it.
struct RedisSize {
    server: crate::redis_bench::Server,
    fixture: Arc<ScaleFixture>,
    live: u64,
    /// used_memory growth per grant over the fill.
    used_per_grant: f64,
    record: f64,
    pointer: f64,
    live_entry: f64,
    fill_secs: f64,
    /// A store that never saw the probed grants (another worker's).
    cold: RedisApprovalStore,
    /// The store that issues the fresh grants it then consumes.
    issuer: Arc<RedisApprovalStore>,
    cold_ms: Vec<f64>,
    issuer_ms: Vec<f64>,
    consumed_record: f64,
}

fn options(port: u16) -> RedisStoreOptions {
    // The bench's server runs without persistence on purpose.
    RedisStoreOptions::single(format!("redis://127.0.0.1:{port}/"))
        .key_prefix("countersign")
        .allow_non_durable_persistence()
}

/// Starts a server, fills it with `live` grants (plus the probes' share)
/// and measures their memory.
fn redis_size(rt: &tokio::runtime::Runtime, live: u64, tag: u32) -> Result<RedisSize, String> {
    let server = crate::redis_bench::Server::start(false)?;
    let port = server.port;
    let fixture = Arc::new(ScaleFixture::new(tag)?);
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{port}/")).map_err(|e| e.to_string())?;
    let mut conn = client.get_connection().map_err(|e| e.to_string())?;
    let (issuer, cold) = rt.block_on(async {
        let issuer = RedisApprovalStore::connect(options(port))
            .await
            .map_err(|e| e.to_string())?;
        let cold = RedisApprovalStore::connect(options(port))
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((Arc::new(issuer), cold))
    })?;
    let before = used_memory(&mut conn)?;
    let started = Instant::now();
    // The probes consume PROBES of the filled grants: fill that many more,
    // so `live` remain when they are done.
    let filled = live + PROBES;
    let templates: Vec<u64> = (0..filled).step_by(GRANTS_PER_RUN as usize).collect();
    rt.block_on(fill(issuer.clone(), &fixture, templates, 64))?;
    redis_copy(&mut conn, &issuer, &fixture, filled)?;
    let fill_secs = started.elapsed().as_secs_f64();
    let after = used_memory(&mut conn)?;
    eprintln!("scale: redis, {filled} grants filled in {fill_secs:.1} s");

    // Sampled across the fill, away from the probes.
    let samples: Vec<u64> = (0..100).map(|k| (k * 104_729 + 17) % filled).collect();
    let (mut record, mut pointer) = (0u64, 0u64);
    for &i in &samples {
        let g = fixture.approval(i)?;
        record += memory_usage(&mut conn, &issuer.grant_key(&g.actor_id, &g.id))?;
        pointer += memory_usage(&mut conn, &issuer.pointer_key(&g.id))?;
    }
    let (mut live_bytes, mut live_members) = (0u64, 0u64);
    for &i in samples.iter().take(20) {
        let g = fixture.approval(i)?;
        let key = issuer.live_key(&g.actor_id, &g.run_id);
        live_bytes += memory_usage(&mut conn, &key)?;
        live_members += redis::cmd("ZCARD")
            .arg(&key)
            .query::<u64>(&mut conn)
            .map_err(|e| e.to_string())?;
    }
    let n = samples.len() as f64;
    Ok(RedisSize {
        server,
        fixture,
        live,
        used_per_grant: after.saturating_sub(before) as f64 / filled as f64,
        record: record as f64 / n,
        pointer: pointer as f64 / n,
        live_entry: live_bytes as f64 / live_members.max(1) as f64,
        fill_secs,
        cold,
        issuer,
        cold_ms: Vec::new(),
        issuer_ms: Vec::new(),
        consumed_record: 0.0,
    })
}

/// One round of probes on one size: `ROUND` filled grants consumed by the
/// store that never saw them, then `ROUND` fresh grants issued and consumed
/// by the issuing store.
async fn redis_round(size: &mut RedisSize, round: u64, fresh_base: u64) -> Result<(), String> {
    let filled = size.live + PROBES;
    let cold: Vec<Approval> = (round * ROUND..(round + 1) * ROUND)
        .map(|k| size.fixture.approval(ScaleFixture::probe_index(k, filled)))
        .collect::<Result<_, _>>()?;
    size.cold_ms
        .extend(timed_consumes(&size.cold, &cold).await?);
    let fresh: Vec<Approval> = (0..ROUND)
        .map(|k| size.fixture.approval(fresh_base + round * ROUND + k))
        .collect::<Result<_, _>>()?;
    for g in &fresh {
        size.issuer
            .issue(g.clone())
            .await
            .map_err(|e| e.to_string())?;
    }
    size.issuer_ms
        .extend(timed_consumes(&size.issuer, &fresh).await?);
    Ok(())
}

/// The Redis store's section of the scale report.
/// The Redis store's section of the scale report, and its two curves.
pub fn redis(quick: bool) -> Result<(String, Vec<ScaleCurve>), String> {
    let fill_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let [small, large] = sizes(quick);
    let mut filled = [
        redis_size(&fill_rt, small, 2)?,
        redis_size(&fill_rt, large, 3)?,
    ];
    // Probes on one thread, as a single caller sees the store.
    let probe_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    // Fresh grants get indices past every filled one.
    let fresh_base = 1u64 << 40;
    for round in 0..PROBES / ROUND {
        // Each size goes first every other round.
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for index in order {
            probe_rt.block_on(redis_round(&mut filled[index], round, fresh_base))?;
        }
    }
    for size in filled.iter_mut() {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", size.server.port))
            .map_err(|e| e.to_string())?;
        let mut conn = client.get_connection().map_err(|e| e.to_string())?;
        let mut total = 0;
        for k in 0..20 {
            let g = size
                .fixture
                .approval(ScaleFixture::probe_index(k, size.live + PROBES))?;
            total += memory_usage(&mut conn, &size.cold.grant_key(&g.actor_id, &g.id))?;
        }
        size.consumed_record = total as f64 / 20.0;
    }

    let mut table = String::new();
    let mut p50 = Vec::new();
    let mut curves = vec![
        ScaleCurve {
            label: "redis, the issuing store".to_owned(),
            points: Vec::new(),
        },
        ScaleCurve {
            label: "redis, another worker's store".to_owned(),
            points: Vec::new(),
        },
    ];
    for size in filled.iter_mut() {
        let (cold, issuer) = (median(&mut size.cold_ms), median(&mut size.issuer_ms));
        p50.push((cold, issuer));
        curves[0].points.push((size.live, issuer * 1e3));
        curves[1].points.push((size.live, cold * 1e3));
        eprintln!(
            "scale: redis, {} live grants: record {:.0} B (consumed {:.0} B), pointer {:.0} B, \
             live-set entry {:.0} B, used_memory {:.0} B per grant; consume p50 {cold:.3} ms \
             (another worker's store), {issuer:.3} ms (the issuing store)",
            size.live,
            size.record,
            size.consumed_record,
            size.pointer,
            size.live_entry,
            size.used_per_grant
        );
        let _ = writeln!(
            table,
            "| {} | {:.0} ({:.0} consumed) | {:.0} | {:.0} | **{:.0}** | {:.0} | {cold:.3} ms | {issuer:.3} ms |",
            size.live,
            size.record,
            size.consumed_record,
            size.pointer,
            size.live_entry,
            size.record + size.pointer + size.live_entry,
            size.used_per_grant,
        );
    }
    let ratio = |pick: fn(&(f64, f64)) -> f64| {
        p50.last().map(pick).unwrap_or(0.0) / p50.first().map(pick).unwrap_or(1.0)
    };
    let label = if quick {
        "quick run: 1 000 and 100 000 live grants, not a million"
    } else {
        "1 000 and 1 000 000 live grants"
    };
    Ok((
        format!(
            "### Redis store\n\n\
         ({label}.) One `redis-server` per size, persistence off, started by the run, with the \
         default key prefix; grants in runs of {GRANTS_PER_RUN} and actors of \
         {RUNS_PER_ACTOR} runs, each a click with a 10-byte selector on a 25-byte URL, valid \
         for an hour, with an id shaped like a generated one. The first grant of every run is \
         issued through `RedisApprovalStore::issue` (64 concurrent tasks over one multiplexed \
         connection, which pipelines them); the other {} of each run are copies of it under \
         their own ids, written in pipelines exactly as the issue script writes a grant (record, \
         pointer, live-set member, same expiries) and checked against it: {:.0} s for the \
         larger fill, where a million issues would take minutes. Per grant: `MEMORY USAGE … SAMPLES 0` of the record (100 sampled \
         grants; after the probes, 20 consumed ones) and of its pointer, the run's live set \
         divided by its members (20 sampled runs), and `INFO` `used_memory` growth over the \
         fill divided by the grants filled (which adds the keyspace's own tables and expiry \
         entries). Consume p50: {PROBES} consumes per size and path, one at a time on one \
         thread, in rounds of {ROUND} that alternate between the sizes: filled grants spread \
         over the whole fill, consumed by a store that never saw them (another worker's), and \
         fresh grants issued and then consumed by the same store. Each size is filled with \
         {PROBES} grants more than its label, which the first path consumes.\n\n\
         | live grants | record B | pointer B | live-set entry B | record + pointer + entry B | used_memory growth B per grant | consume p50, another worker's store | consume p50, the issuing store |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n{table}\n\
         Consume p50 at the larger size is {:.2}× the p50 at the smaller through another \
         worker's store and {:.2}× through the issuing store.\n",
            GRANTS_PER_RUN - 1,
            filled.last().map(|s| s.fill_secs).unwrap_or(0.0),
            ratio(|p| p.0),
            ratio(|p| p.1),
        ),
        curves,
    ))
}

/// Runs `sql` with `psql` on the bench's PostgreSQL server; its output.
fn psql(server: &crate::postgres_bench::Server, sql: &str) -> Result<String, String> {
    let out = std::process::Command::new(crate::postgres_bench::bin("psql"))
        .args(["-h", "127.0.0.1", "-p", &server.port.to_string()])
        .args(["-U", "postgres", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .map_err(|e| format!("could not run psql: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "psql failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// `pg_total_relation_size` of `table` (table, indexes and TOAST).
fn pg_size(server: &crate::postgres_bench::Server, table: &str) -> Result<u64, String> {
    let text = psql(server, &format!("SELECT pg_total_relation_size('{table}')"))?;
    text.parse().map_err(|_| format!("unexpected size: {text}"))
}

/// The columns the PostgreSQL store's seal covers, in its order, as SQL
/// text over a template row `t` and a new id `n.id` (the store's own
/// `record::SEALED_SQL`; a copy whose seal no longer matches reads as
/// corrupt, which the check after the copy and the probes would report).
const PG_SEALED: [&str; 18] = [
    "t.format::text",
    "n.id",
    "t.actor_id",
    "t.run_id",
    "t.url",
    "t.action",
    "t.action_digest",
    "t.issued_at::text",
    "t.expires_at::text",
    "t.approver_note",
    "t.page_revision",
    "t.operation_id",
    "t.session_id",
    "t.approver_id",
    "t.approved_at::text",
    "t.attempt_limit::text",
    "t.run_gen::text",
    "t.actor_gen::text",
];

/// A run's grants after its first, in PostgreSQL: one `INSERT … SELECT`
/// over `generate_series` that copies each run's first row (issued by the
/// store, which also created the run's and the actor's fence rows) under
/// the ids the fixture gives grants 1 to 99 of the run, sealed as the
/// store seals a row.
fn pg_copy(
    server: &crate::postgres_bench::Server,
    table: &str,
    f: &ScaleFixture,
    filled: u64,
) -> Result<(), String> {
    let parts: Vec<String> = PG_SEALED
        .iter()
        .map(|v| format!("coalesce(octet_length({v})::text || ':' || {v}, '-') || ';'"))
        .collect();
    let seal = format!(
        "encode(sha256(convert_to({}, 'UTF8')), 'hex')",
        parts.join(" || ")
    );
    let columns = "format, actor_id, run_id, url, action, action_digest, issued_at, \
                   expires_at, approver_note, page_revision, operation_id, session_id, \
                   approver_id, approved_at, attempt_limit, run_gen, actor_gen, state, \
                   failed_attempts";
    let from_template: Vec<String> = columns
        .split(", ")
        .map(|c| format!("t.{}", c.trim()))
        .collect();
    let sql = format!(
        "INSERT INTO {table} (id, seal, {columns}) \
         SELECT n.id, {seal}, {} FROM {table} t CROSS JOIN LATERAL ( \
           SELECT 'apr_' || lpad(to_hex({tag}), 8, '0') || \
             lpad(to_hex(substr(t.run_id, 5)::bigint * {GRANTS_PER_RUN} + k), 24, '0') AS id \
           FROM generate_series(1, {}) AS k \
           WHERE substr(t.run_id, 5)::bigint * {GRANTS_PER_RUN} + k < {filled}) n",
        from_template.join(", "),
        GRANTS_PER_RUN - 1,
        tag = f.tag,
    );
    psql(server, &sql)?;
    psql(server, &format!("VACUUM ANALYZE {table}"))?;
    Ok(())
}

/// One size in PostgreSQL: its store and what was measured.
struct PgSize {
    store: countersign_store_postgres::PostgresApprovalStore,
    fixture: Arc<ScaleFixture>,
    live: u64,
    bytes: f64,
    fill_secs: f64,
    ms: Vec<f64>,
}

/// The PostgreSQL store's section of the scale report.
/// The PostgreSQL store's section of the scale report, and its curve.
pub fn postgres(quick: bool) -> Result<(String, ScaleCurve), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let server = crate::postgres_bench::Server::start(false)?;
    let mut sizes_measured = Vec::new();
    for (n, live) in sizes(quick).into_iter().enumerate() {
        let prefix = format!("scale{n}_");
        let fixture = Arc::new(ScaleFixture::new(10 + n as u32)?);
        let filler = rt.block_on(crate::postgres_bench::connect(
            &server,
            "options='-c synchronous_commit=off'",
            &prefix,
            16,
        ))?;
        let table = filler.grants_table().to_owned();
        let before = pg_size(&server, &table)?;
        let started = Instant::now();
        let filled = live + PROBES;
        let templates: Vec<u64> = (0..filled).step_by(GRANTS_PER_RUN as usize).collect();
        rt.block_on(fill(Arc::new(filler), &fixture, templates, 16))?;
        pg_copy(&server, &table, &fixture, filled)?;
        let fill_secs = started.elapsed().as_secs_f64();
        let count: u64 = psql(&server, &format!("SELECT count(*) FROM {table}"))?
            .parse()
            .map_err(|e| format!("{e}"))?;
        if count != filled {
            return Err(format!("postgres copy: {count} rows, {filled} wanted"));
        }
        let after = pg_size(&server, &table)?;
        eprintln!("scale: postgres, {filled} grants filled in {fill_secs:.1} s");
        let store = rt.block_on(crate::postgres_bench::connect(&server, "", &prefix, 4))?;
        // A copy reads back as the grant it copies: the seal checks out.
        let copy = fixture.approval(1)?;
        let read = rt
            .block_on(store.get(&copy.id))
            .map_err(|e| format!("a copied row does not read back (update the bench's copy): {e}"))?
            .ok_or("a copied row is missing")?;
        if read.approval != copy {
            return Err("a copied row reads back as another grant".to_owned());
        }
        sizes_measured.push(PgSize {
            store,
            fixture,
            live,
            bytes: after.saturating_sub(before) as f64 / filled as f64,
            fill_secs,
            ms: Vec::new(),
        });
    }
    // Probes on one thread, alternating between the sizes.
    let probe_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    for round in 0..PROBES / ROUND {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for index in order {
            let size = &mut sizes_measured[index];
            let filled = size.live + PROBES;
            let grants: Vec<Approval> = (round * ROUND..(round + 1) * ROUND)
                .map(|k| size.fixture.approval(ScaleFixture::probe_index(k, filled)))
                .collect::<Result<_, _>>()?;
            let attempt = AttemptId::generate().map_err(|e| e.to_string())?;
            probe_rt.block_on(async {
                for g in &grants {
                    let binding = g.binding();
                    let now = SystemClock.now();
                    let start = Instant::now();
                    let outcome = size
                        .store
                        .consume_once(&g.id, &binding, now, &attempt)
                        .await
                        .map_err(|e| e.to_string())?;
                    size.ms.push(start.elapsed().as_secs_f64() * 1e3);
                    if outcome != (ConsumeOutcome::Consumed { replay: false }) {
                        return Err(format!("consume of {} answered {outcome:?}", g.id));
                    }
                }
                Ok::<_, String>(())
            })?;
        }
    }
    let mut table = String::new();
    let mut p50s = Vec::new();
    let mut curve = ScaleCurve {
        label: "postgres".to_owned(),
        points: Vec::new(),
    };
    for size in sizes_measured.iter_mut() {
        let p50 = median(&mut size.ms);
        p50s.push(p50);
        curve.points.push((size.live, p50 * 1e3));
        eprintln!(
            "scale: postgres, {} live grants: {:.0} B per grant, consume p50 {p50:.3} ms",
            size.live, size.bytes
        );
        let _ = writeln!(table, "| {} | {:.0} | {p50:.3} ms |", size.live, size.bytes);
    }
    let ratio = p50s.last().copied().unwrap_or(0.0) / p50s.first().copied().unwrap_or(1.0);
    let label = if quick {
        "quick run: 1 000 and 100 000 live grants, not a million"
    } else {
        "1 000 and 1 000 000 live grants"
    };
    Ok((
        format!(
            "### PostgreSQL store\n\n\
         ({label}.) One PostgreSQL cluster started by the run (`initdb`, loopback, \
         `synchronous_commit = off`, so the disk's flush time does not hide the table's), a \
         table prefix per size, the same grants as above. The first grant of every run is \
         issued through `PostgresApprovalStore::issue` (16 concurrent tasks), which also \
         creates the run's and the actor's fence rows; the other {} of each run are one \
         `INSERT … SELECT` over `generate_series` through the store's schema, copying that row \
         under their own ids with the seal the store computes (a copy reads back through the \
         store, checked): {:.0} s for the larger fill, where issuing a million one by one takes \
         minutes on this machine. Then `VACUUM ANALYZE`. Bytes per grant: \
         `pg_total_relation_size` of the grants table (heap, indexes, TOAST) grown over the \
         fill, divided by the rows filled; fence rows are in their own tables, one per run and \
         per actor. Consume p50: {PROBES} consumes per size, one at a time on one thread, of \
         filled grants spread over the whole table, in rounds of {ROUND} that alternate \
         between the sizes; every consume is one statement, whichever store issued the \
         grant. Each size is filled with {PROBES} grants more than its label, which the \
         probes consume.\n\n\
         | live grants | bytes per grant (table + indexes) | consume p50, 1 task |\n\
         | --- | --- | --- |\n{table}\n\
         Consume p50 at the larger size is {ratio:.2}× the p50 at the smaller.\n",
            GRANTS_PER_RUN - 1,
            sizes_measured.last().map(|s| s.fill_secs).unwrap_or(0.0),
        ),
        curve,
    ))
}
