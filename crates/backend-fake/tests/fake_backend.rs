//! The fake backend's record and failure switches.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use countersign_approval_core::policy::{Policy, StaticResolver};
use countersign_approval_core::{
    ActionRequest, ActorId, ApprovalId, Backend, OperationId, RunId, WriteAccess,
};
use countersign_backend_fake::FakeBackend;

async fn request(selector: &str) -> ActionRequest {
    let policy = Policy::builder()
        .allow_host("docs.example.com")
        .resolver(StaticResolver::answering_all(["93.184.216.34"
            .parse()
            .unwrap()]))
        .build()
        .unwrap();
    ActionRequest {
        operation_id: OperationId::generate().unwrap(),
        approval_id: ApprovalId::generate().unwrap(),
        actor_id: ActorId::new("actor").unwrap(),
        run_id: RunId::new("run").unwrap(),
        url: policy
            .authorize_destination("https://docs.example.com/")
            .await
            .unwrap(),
        action: policy
            .authorize_action(&serde_json::json!({"method": "click", "selector": selector}))
            .unwrap(),
        writes: WriteAccess::Open,
    }
}

#[tokio::test]
async fn records_in_order_and_clones_share_the_record() {
    let backend = FakeBackend::new();
    let clone = backend.clone();
    assert!(clone.is_empty());
    let (a, b) = (request("a#one").await, request("a#two").await);
    backend.perform(&a).await.unwrap();
    clone.perform(&b).await.unwrap();
    assert_eq!(backend.len(), 2);
    assert_eq!(clone.records(), vec![a, b]);
    assert_eq!(backend.failures(), 0);
}

#[tokio::test]
async fn fail_next_fails_exactly_the_next_calls() {
    let backend = FakeBackend::new();
    let r = request("a#docs").await;
    backend.fail_next();
    backend.fail_next();
    let err = backend.perform(&r).await.unwrap_err();
    assert_eq!(err.message(), "fake backend was told to fail");
    assert!(err.may_have_acted(), "the default is fail-safe");
    assert!(backend.perform(&r).await.is_err());
    backend.perform(&r).await.unwrap();
    assert_eq!(backend.len(), 1);
    assert_eq!(backend.failures(), 2);
}

#[tokio::test]
async fn failures_can_say_nothing_was_dispatched_until_cleared() {
    let backend = FakeBackend::new();
    let r = request("a#docs").await;
    backend.fail_before_dispatch(true);
    backend.fail_next();
    let err = backend.perform(&r).await.unwrap_err();
    assert!(!err.may_have_acted());
    assert_eq!(
        err.message(),
        "fake backend was told to fail before dispatching"
    );
    backend.fail_before_dispatch(false);
    backend.fail_next();
    assert!(backend.perform(&r).await.unwrap_err().may_have_acted());
    backend.fail_before_dispatch(true);
    backend.clear();
    backend.fail_next();
    assert!(backend.perform(&r).await.unwrap_err().may_have_acted());
    assert!(backend.is_empty());
}

#[tokio::test]
async fn fail_all_fails_until_switched_off_and_clear_resets() {
    let backend = FakeBackend::new();
    let r = request("a#docs").await;
    backend.fail_all(true);
    for _ in 0..3 {
        assert!(backend.perform(&r).await.is_err());
    }
    assert!(backend.is_empty());
    backend.fail_all(false);
    backend.perform(&r).await.unwrap();
    assert_eq!(backend.len(), 1);
    assert_eq!(backend.failures(), 3);
    backend.clear();
    assert!(backend.is_empty());
    assert_eq!(backend.failures(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_performs_are_all_recorded() {
    let backend = FakeBackend::new();
    let r = request("a#docs").await;
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (b, r) = (backend.clone(), r.clone());
        tasks.push(tokio::spawn(async move { b.perform(&r).await }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(backend.len(), 32);
}
