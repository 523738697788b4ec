//! Many OS processes, each with its own connections and its own Act tool
//! and fake backend, race for the same grants on one Redis server: exactly
//! one success per grant, and exactly as many recorded actions as grants.
//!
//! The children are this test binary run again with
//! `--exact race_child --ignored`; the parent passes the server's port, the
//! key prefix and file paths through the environment.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use countersign_act_tool::RetryPolicy;
use countersign_approval_core::{ApprovalId, ApprovalStore, GrantState};
use countersign_backend_fake::FakeBackend;
use countersign_store_memory::InMemoryOperationStore;
use countersign_store_redis::{RedisApprovalStore, RedisStoreOptions};
use support::{RedisServer, act_over, call, grant, now};

const PROCESSES: usize = 4;
const TASKS_PER_PROCESS: usize = 16;
const GRANTS: usize = 320;
const SELECTOR: &str = "button#race";

const ENV_PORT: &str = "COUNTERSIGN_RACE_PORT";
const ENV_PREFIX: &str = "COUNTERSIGN_RACE_PREFIX";
const ENV_DIR: &str = "COUNTERSIGN_RACE_DIR";
const ENV_CHILD: &str = "COUNTERSIGN_RACE_CHILD";

#[test]
fn processes_race_for_every_grant_and_each_is_performed_once() {
    let server = RedisServer::start();
    let prefix = support::fresh_prefix("race");
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "countersign-race-{}-{}",
        std::process::id(),
        server.port()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = runtime.block_on(async {
        RedisApprovalStore::connect(
            RedisStoreOptions::single(server.url())
                .key_prefix(prefix.clone())
                .allow_non_durable_persistence(),
        )
        .await
        .unwrap()
    });
    let mut ids = Vec::new();
    runtime.block_on(async {
        let t0 = now();
        for _ in 0..GRANTS {
            let approval = grant(SELECTOR, Duration::from_secs(600), t0).await;
            ids.push(approval.id.as_str().to_owned());
            store.issue(approval).await.unwrap();
        }
    });
    std::fs::write(dir.join("ids"), ids.join("\n")).unwrap();

    let started = Instant::now();
    let exe = std::env::current_exe().unwrap();
    let mut children = Vec::new();
    for child in 0..PROCESSES {
        children.push(
            Command::new(&exe)
                .args(["--exact", "race_child", "--nocapture", "--ignored"])
                .env(ENV_PORT, server.port().to_string())
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
    // Start them together once every child is connected.
    for child in 0..PROCESSES {
        assert!(
            support::wait_for(&dir.join(format!("ready-{child}")), Duration::from_secs(60)),
            "child {child} never got ready"
        );
    }
    std::fs::write(dir.join("go"), "").unwrap();

    support::wait_for_children(children, Duration::from_secs(120));
    let elapsed = started.elapsed();

    // Count: one winner per grant across all processes; one backend record per win.
    let mut winners: HashMap<String, usize> = HashMap::new();
    let mut records = 0;
    let mut calls = 0;
    let mut codes: HashMap<String, usize> = HashMap::new();
    for child in 0..PROCESSES {
        let report = std::fs::read_to_string(dir.join(format!("report-{child}"))).unwrap();
        for line in report.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            match parts.as_slice() {
                ["ok", id] => *winners.entry((*id).to_owned()).or_default() += 1,
                ["records", n] => records += n.parse::<usize>().unwrap(),
                ["calls", n] => calls += n.parse::<usize>().unwrap(),
                ["code", code, n] => {
                    *codes.entry((*code).to_owned()).or_default() += n.parse::<usize>().unwrap()
                }
                _ => panic!("bad report line {line:?}"),
            }
        }
    }
    eprintln!(
        "race: {calls} act calls from {PROCESSES} processes x {TASKS_PER_PROCESS} tasks on \
         {GRANTS} grants in {elapsed:?}; codes {codes:?}"
    );
    assert_eq!(calls, PROCESSES * TASKS_PER_PROCESS * GRANTS);
    assert_eq!(winners.len(), GRANTS, "every grant has a winner");
    assert!(winners.values().all(|&n| n == 1), "a grant had two winners");
    for id in &ids {
        assert_eq!(winners.get(id), Some(&1), "{id}");
    }
    assert_eq!(records, GRANTS, "recorded actions");
    assert_eq!(codes.get("ok"), Some(&GRANTS));
    assert_eq!(
        codes.get("APPROVAL_STALE"),
        Some(&(calls - GRANTS)),
        "every other call is stale: {codes:?}"
    );

    // The store agrees: every grant consumed.
    runtime.block_on(async {
        for id in &ids {
            let grant = store
                .get(&ApprovalId::parse(id).unwrap())
                .await
                .unwrap()
                .unwrap();
            assert!(matches!(grant.state, GrantState::Consumed { .. }));
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// One contending process; runs only when the parent test starts it.
#[test]
#[ignore = "a child process of processes_race_for_every_grant_and_each_is_performed_once"]
fn race_child() {
    let (Ok(port), Ok(prefix), Ok(dir), Ok(child)) = (
        std::env::var(ENV_PORT),
        std::env::var(ENV_PREFIX),
        std::env::var(ENV_DIR),
        std::env::var(ENV_CHILD),
    ) else {
        eprintln!("race_child: not started by the race test; nothing to do");
        return;
    };
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
        let store = RedisApprovalStore::connect(
            RedisStoreOptions::single(format!("redis://127.0.0.1:{port}/"))
                .key_prefix(prefix)
                .command_timeout(Duration::from_secs(10))
                .allow_non_durable_persistence(),
        )
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

        let ids = Arc::new(ids);
        let child_n: usize = child.parse().unwrap();
        let mut tasks = Vec::new();
        for task in 0..TASKS_PER_PROCESS {
            let (act, ids) = (act.clone(), ids.clone());
            tasks.push(tokio::spawn(async move {
                let mut results = Vec::new();
                // Every task walks every grant, each from its own starting point.
                let start = (child_n * TASKS_PER_PROCESS + task) * 5 % ids.len();
                for k in 0..ids.len() {
                    let id = &ids[(start + k) % ids.len()];
                    let result = act.execute_json(&call(id, SELECTOR)).await;
                    let code = if result["status"] == "ok" {
                        assert_eq!(result["locator"]["approval_id"], id.as_str());
                        "ok".to_owned()
                    } else {
                        result["error"]["code"].as_str().unwrap().to_owned()
                    };
                    results.push((id.clone(), code));
                }
                results
            }));
        }
        let mut lines = Vec::new();
        let mut codes: HashMap<String, usize> = HashMap::new();
        let mut calls = 0;
        for task in tasks {
            for (id, code) in task.await.unwrap() {
                calls += 1;
                if code == "ok" {
                    lines.push(format!("ok {id}"));
                }
                *codes.entry(code).or_default() += 1;
            }
        }
        // Every performed action is for a grant this process won.
        let won: Vec<&str> = lines.iter().map(|l| &l[3..]).collect();
        for record in backend.records() {
            assert!(won.contains(&record.approval_id.as_str()));
        }
        lines.push(format!("records {}", backend.len()));
        lines.push(format!("calls {calls}"));
        for (code, n) in codes {
            lines.push(format!("code {code} {n}"));
        }
        lines.join("\n")
    });
    std::fs::write(report_path, report).unwrap();
}
