//! An emergency stop racing consumes from many processes: 4 OS processes ×
//! 16 tasks call Act on 500 grants of one run while the parent stops the
//! run, on one server and on a 3-master cluster.
//!
//! Checked: every `ok` call started before `stop_run` returned and its
//! grant's `consumed_at` is before that instant; every call that started
//! after it was refused as stopped; the `ok` calls and the grants the stop
//! counted add up to the 500 grants; every backend action is exactly one
//! `ok` call, and each grant was performed at most once.
//!
//! The children are this test binary run again with `--exact stop_child
//! --ignored`; the parent passes the topology, the key prefix and file paths
//! through the environment. Times are the wall clock (`SystemClock`) of one
//! machine, in microseconds since the Unix epoch, so the parent's and the
//! children's instants compare. The figures are printed (`cargo test -p
//! countersign-store-redis --all-features --test stop_run -- --nocapture`);
//! docs/redis.md quotes them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use countersign_act_tool::RetryPolicy;
use countersign_approval_core::{ApprovalId, ApprovalStore, GrantState, StopOutcome};
use countersign_backend_fake::FakeBackend;
use countersign_store_memory::InMemoryOperationStore;
use countersign_store_redis::{RedisApprovalStore, RedisStoreOptions};
use support::{RedisCluster, RedisServer, act_over, call, grant, now};

const PROCESSES: usize = 4;
const TASKS_PER_PROCESS: usize = 16;
const GRANTS: usize = 500;
/// The tasks walk the grants from this many starting points (16 tasks each).
const FRONTS: usize = 4;
/// The stop comes once the grant this far into the first front's walk is
/// consumed: about 4 × 40 grants are used by then.
const TRIGGER: usize = 40;
/// Calls each task still makes after it saw that the stop returned.
const CALLS_AFTER_STOP: usize = 20;
const SELECTOR: &str = "button#stop";

const ENV_URLS: &str = "COUNTERSIGN_STOP_URLS";
const ENV_CLUSTER: &str = "COUNTERSIGN_STOP_CLUSTER";
const ENV_PREFIX: &str = "COUNTERSIGN_STOP_PREFIX";
const ENV_DIR: &str = "COUNTERSIGN_STOP_DIR";
const ENV_CHILD: &str = "COUNTERSIGN_STOP_CHILD";

/// The two tests share two cores: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn micros_now() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros(),
    )
    .unwrap()
}

fn options(urls: &[String], cluster: bool, prefix: &str) -> RedisStoreOptions {
    let options = if cluster {
        RedisStoreOptions::cluster(urls.to_vec())
    } else {
        RedisStoreOptions::single(urls[0].clone())
    };
    options
        .key_prefix(prefix)
        .command_timeout(Duration::from_secs(10))
        .allow_non_durable_persistence()
}

/// One call as a child reports it.
struct Call {
    code: String,
    id: String,
    started: u64,
    ended: u64,
}

fn race(urls: &[String], cluster: bool, topology: &str) {
    let prefix = support::fresh_prefix("stop");
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "countersign-stop-{}-{topology}-{}",
        std::process::id(),
        support::free_port()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = runtime.block_on(async {
        RedisApprovalStore::connect(options(urls, cluster, &prefix))
            .await
            .unwrap()
    });
    let mut ids = Vec::new();
    runtime.block_on(async {
        let t0 = now();
        for _ in 0..GRANTS {
            let approval = grant(SELECTOR, Duration::from_secs(600), t0).await;
            ids.push(approval.id.clone());
            store.issue(approval).await.unwrap();
        }
    });
    let texts: Vec<&str> = ids.iter().map(ApprovalId::as_str).collect();
    std::fs::write(dir.join("ids"), texts.join("\n")).unwrap();

    let began = Instant::now();
    let exe = std::env::current_exe().unwrap();
    let mut children = Vec::new();
    for child in 0..PROCESSES {
        children.push(
            Command::new(&exe)
                .args(["--exact", "stop_child", "--nocapture", "--ignored"])
                .env(ENV_URLS, urls.join(","))
                .env(ENV_CLUSTER, if cluster { "1" } else { "0" })
                .env(ENV_PREFIX, &prefix)
                .env(ENV_DIR, &dir)
                .env(ENV_CHILD, child.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
    }
    for child in 0..PROCESSES {
        assert!(
            support::wait_for(&dir.join(format!("ready-{child}")), Duration::from_secs(60)),
            "child {child} never got ready"
        );
    }
    let started = Instant::now();
    std::fs::write(dir.join("go"), "").unwrap();

    // The stop lands among the consumes: once the first front has used
    // TRIGGER grants.
    let (actor, run) = (support::actor(), support::run());
    let (stop, stop_called, stop_returned) = runtime.block_on(async {
        let trigger = &ids[TRIGGER];
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let grant = store.get(trigger).await.unwrap().unwrap();
            if matches!(grant.state, GrantState::Consumed { .. }) {
                break;
            }
            assert!(Instant::now() < deadline, "the consumes never got going");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let called = micros_now();
        let stop = store.stop_run(&actor, &run, now()).await.unwrap();
        (stop, called, micros_now())
    });
    std::fs::write(dir.join("stopped"), stop_returned.to_string()).unwrap();

    support::wait_for_children(children, Duration::from_secs(120));
    let race_time = started.elapsed();

    // Every call each child made, and its actions.
    let mut calls = Vec::new();
    let mut actions = 0;
    for child in 0..PROCESSES {
        let report = std::fs::read_to_string(dir.join(format!("report-{child}"))).unwrap();
        for line in report.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            match parts.as_slice() {
                ["actions", n] => actions += n.parse::<usize>().unwrap(),
                [code, id, started, ended] => calls.push(Call {
                    code: (*code).to_owned(),
                    id: (*id).to_owned(),
                    started: started.parse().unwrap(),
                    ended: ended.parse().unwrap(),
                }),
                _ => panic!("bad report line {line:?}"),
            }
        }
    }
    let mut codes: HashMap<&str, usize> = HashMap::new();
    for c in &calls {
        *codes.entry(c.code.as_str()).or_default() += 1;
    }
    let oks: Vec<&Call> = calls.iter().filter(|c| c.code == "ok").collect();
    let ok_ids: HashSet<&str> = oks.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ok_ids.len(), oks.len(), "a grant was performed twice");
    assert_eq!(actions, oks.len(), "every backend action is exactly one ok");
    // No ok from a call that started after the stop returned; every such
    // call was refused as stopped.
    let late: Vec<&Call> = calls.iter().filter(|c| c.started > stop_returned).collect();
    assert!(!late.is_empty(), "no call started after the stop returned");
    for c in &late {
        assert_eq!(
            c.code, "stale-stopped",
            "a call after the stop answered {}",
            c.code
        );
    }
    for c in &oks {
        assert!(
            c.started < stop_returned,
            "{}: an ok call started {} µs after the stop returned",
            c.id,
            c.started - stop_returned
        );
    }
    let racing_oks = oks.iter().filter(|c| c.ended > stop_called).count();

    // The store agrees: each ok grant consumed before the stop returned,
    // every other grant stopped, and the stop counted exactly those.
    let (consumed, stopped, consumed_without_ok) = runtime.block_on(async {
        let (mut consumed, mut stopped, mut without_ok) = (0, 0, 0);
        for id in &ids {
            let grant = store.get(id).await.unwrap().unwrap();
            match grant.state {
                GrantState::Consumed { at, .. } => {
                    assert!(
                        at.as_millis() * 1000 < stop_returned,
                        "{id}: consumed at {} ms, the stop returned at {stop_returned} µs",
                        at.as_millis()
                    );
                    consumed += 1;
                    if !ok_ids.contains(id.as_str()) {
                        without_ok += 1;
                    }
                }
                GrantState::Stopped => {
                    assert!(!ok_ids.contains(id.as_str()), "{id}: ok but stopped");
                    stopped += 1;
                }
                other => panic!("{id}: {other:?} after the race"),
            }
        }
        (consumed, stopped, without_ok)
    });
    assert_eq!(stop.stopped_grants, stopped as u64, "the stop's count");
    assert!(!stop.was_stopped);
    assert_eq!(
        oks.len() + stop.stopped_grants as usize + consumed_without_ok,
        GRANTS,
        "ok calls + stopped grants + grants used up without an ok"
    );
    assert_eq!(consumed, oks.len() + consumed_without_ok);
    assert!(
        !oks.is_empty() && stop.stopped_grants > 0,
        "the stop landed among the consumes"
    );
    assert_eq!(consumed_without_ok, 0, "a grant was used up without an ok");
    // A second stop counts nothing.
    let again = runtime
        .block_on(store.stop_run(&actor, &run, now()))
        .unwrap();
    assert_eq!(
        again,
        StopOutcome {
            stopped_grants: 0,
            stopped_standing: 0,
            was_stopped: true
        }
    );
    let stale = codes.get("stale-stopped").copied().unwrap_or(0);
    eprintln!(
        "stop_run ({topology}): {} act calls from {PROCESSES} processes x {TASKS_PER_PROCESS} \
         tasks on {GRANTS} grants of one run in {race_time:?} ({:?} with start-up); stop_run \
         took {} µs and stopped {} grants; {} ok ({racing_oks} of them answered after the stop \
         was called), all before it returned; {} calls started after it returned, every one \
         refused as stopped; {stale} stale-stopped in all; codes {codes:?}",
        calls.len(),
        began.elapsed(),
        stop_returned - stop_called,
        stop.stopped_grants,
        oks.len(),
        late.len(),
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stop_racing_consumes_from_four_processes_on_one_server() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = RedisServer::start();
    race(&[server.url()], false, "one server");
}

#[test]
fn a_stop_racing_consumes_from_four_processes_on_a_cluster() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = RedisCluster::start();
    race(&cluster.urls(), true, "3-master cluster");
}

/// One consuming process; runs only when the parent test starts it.
#[test]
#[ignore = "a child process of the stop_run tests"]
fn stop_child() {
    let (Ok(urls), Ok(cluster), Ok(prefix), Ok(dir), Ok(child)) = (
        std::env::var(ENV_URLS),
        std::env::var(ENV_CLUSTER),
        std::env::var(ENV_PREFIX),
        std::env::var(ENV_DIR),
        std::env::var(ENV_CHILD),
    ) else {
        eprintln!("stop_child: not started by a stop test; nothing to do");
        return;
    };
    let urls: Vec<String> = urls.split(',').map(str::to_owned).collect();
    let dir = PathBuf::from(dir);
    let ids: Vec<String> = std::fs::read_to_string(dir.join("ids"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let report_path = dir.join(format!("report-{child}"));
    let report = runtime.block_on(async move {
        let store = RedisApprovalStore::connect(options(&urls, cluster == "1", &prefix))
            .await
            .unwrap();
        let backend = FakeBackend::new();
        let operations = Arc::new(InMemoryOperationStore::new());
        let act = Arc::new(act_over(
            Arc::new(store),
            &backend,
            &operations,
            RetryPolicy::default(),
        ));
        std::fs::write(dir.join(format!("ready-{child}")), "").unwrap();
        assert!(support::wait_for(&dir.join("go"), Duration::from_secs(60)));
        // Told when the stop returned.
        let stopped = Arc::new(AtomicBool::new(false));
        let watcher = {
            let (stopped, marker) = (stopped.clone(), dir.join("stopped"));
            tokio::spawn(async move {
                while !marker.exists() {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                stopped.store(true, Ordering::SeqCst);
            })
        };

        let ids = Arc::new(ids);
        let child_n: usize = child.parse().unwrap();
        let mut tasks = Vec::new();
        for task in 0..TASKS_PER_PROCESS {
            let (act, ids, stopped) = (act.clone(), ids.clone(), stopped.clone());
            tasks.push(tokio::spawn(async move {
                let mut calls = Vec::new();
                let front = (child_n * TASKS_PER_PROCESS + task) % FRONTS;
                let start = front * ids.len() / FRONTS;
                let mut after_stop = 0;
                for k in 0..ids.len() {
                    if stopped.load(Ordering::SeqCst) {
                        after_stop += 1;
                        if after_stop > CALLS_AFTER_STOP {
                            break;
                        }
                    }
                    let id = &ids[(start + k) % ids.len()];
                    let began = micros_now();
                    let result = act.execute_json(&call(id, SELECTOR)).await;
                    let ended = micros_now();
                    let code = if result["status"] == "ok" {
                        assert_eq!(result["locator"]["approval_id"], id.as_str());
                        "ok".to_owned()
                    } else {
                        let code = result["error"]["code"].as_str().unwrap();
                        let message = result["error"]["message"].as_str().unwrap_or_default();
                        if code == "APPROVAL_STALE" && message.contains("stopped this run") {
                            "stale-stopped".to_owned()
                        } else {
                            code.to_owned()
                        }
                    };
                    calls.push(format!("{code} {id} {began} {ended}"));
                }
                calls
            }));
        }
        let mut lines = Vec::new();
        for task in tasks {
            lines.extend(task.await.unwrap());
        }
        watcher.abort();
        // Every performed action is for a grant this process reported ok.
        let won: HashSet<&str> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("ok "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        assert_eq!(backend.len(), won.len());
        for record in backend.records() {
            assert!(won.contains(record.approval_id.as_str()));
        }
        lines.push(format!("actions {}", backend.len()));
        lines.join("\n")
    });
    std::fs::write(report_path, report).unwrap();
}
