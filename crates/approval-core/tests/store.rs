#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Store errors, outcome words, and the traits as trait objects.

use std::sync::Arc;

use async_trait::async_trait;
use countersign_approval_core::{
    AbandonOutcome, ActionRequest, Approval, ApprovalId, ApprovalStore, AttemptId, Backend,
    BackendError, Binding, ConsumeOutcome, IssueError, OperationId, OperationLog, OperationRecord,
    OutcomeCode, RevokeOutcome, RunId, StaleReason, StoreError, StoredGrant, Timestamp,
};

#[test]
fn store_errors_say_whether_a_retry_may_help() {
    let retryable = [
        StoreError::unavailable("connection reset"),
        StoreError::Timeout {
            message: "no reply in 2s".into(),
        },
        StoreError::DurabilityUnconfirmed {
            wanted: 2,
            confirmed: 1,
        },
    ];
    for error in &retryable {
        assert!(error.is_retryable(), "{error}");
    }
    let final_errors = [
        StoreError::corrupt("apr_1", "missing field `url`"),
        StoreError::Unsupported {
            message: "scripts are disabled".into(),
        },
        StoreError::Rejected {
            message: "record too large".into(),
        },
    ];
    for error in &final_errors {
        assert!(!error.is_retryable(), "{error}");
    }
}

#[test]
fn store_error_messages_are_lower_case_without_a_final_period() {
    let errors = [
        StoreError::unavailable("connection reset"),
        StoreError::Timeout {
            message: "no reply".into(),
        },
        StoreError::DurabilityUnconfirmed {
            wanted: 2,
            confirmed: 1,
        },
        StoreError::corrupt("apr_1", "missing field"),
        StoreError::Unsupported {
            message: "no scripts".into(),
        },
        StoreError::Rejected {
            message: "too large".into(),
        },
    ];
    for error in errors {
        let text = error.to_string();
        assert!(text.chars().next().unwrap().is_lowercase(), "{text}");
        assert!(!text.ends_with('.'), "{text}");
    }
    assert_eq!(
        StoreError::corrupt("apr_1", "missing field").to_string(),
        "record `apr_1` is corrupt: missing field"
    );
    let id = ApprovalId::parse("apr_1").unwrap();
    assert_eq!(
        IssueError::AlreadyExists(id).to_string(),
        "approval `apr_1` already exists"
    );
    assert_eq!(
        IssueError::from(StoreError::unavailable("down")).to_string(),
        "store unavailable: down"
    );
}

#[test]
fn outcome_words() {
    let reasons = [
        (StaleReason::Revoked, "revoked"),
        (StaleReason::Consumed, "consumed"),
        (StaleReason::Expired, "expired"),
        (StaleReason::Mismatch, "mismatch"),
        (StaleReason::Abandoned, "abandoned"),
    ];
    for (reason, word) in reasons {
        assert_eq!(reason.as_str(), word);
    }
    let codes: Vec<&str> = OutcomeCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(
        codes,
        [
            "ok",
            "APPROVAL_REQUIRED",
            "APPROVAL_STALE",
            "NOT_AUTHORIZED",
            "STORE_UNAVAILABLE",
            "BACKEND_FAILED"
        ]
    );
    assert_eq!(OutcomeCode::ApprovalStale.to_string(), "APPROVAL_STALE");
}

/// A store that refuses everything: enough to show the trait is object safe.
struct Down;

#[async_trait]
impl ApprovalStore for Down {
    async fn issue(&self, _: Approval) -> Result<(), IssueError> {
        Err(StoreError::unavailable("down").into())
    }
    async fn revoke(&self, _: &ApprovalId) -> Result<RevokeOutcome, StoreError> {
        Err(StoreError::unavailable("down"))
    }
    async fn get(&self, _: &ApprovalId) -> Result<Option<StoredGrant>, StoreError> {
        Err(StoreError::unavailable("down"))
    }
    async fn consume_once(
        &self,
        _: &ApprovalId,
        _: &Binding,
        _: Timestamp,
        _: &AttemptId,
    ) -> Result<ConsumeOutcome, StoreError> {
        Err(StoreError::unavailable("down"))
    }
    async fn abandon(
        &self,
        _: &ApprovalId,
        _: &AttemptId,
        _: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        Err(StoreError::unavailable("down"))
    }
    async fn stop_run(
        &self,
        _: &countersign_approval_core::ActorId,
        _: &RunId,
        _: Timestamp,
    ) -> Result<countersign_approval_core::StopOutcome, StoreError> {
        Err(StoreError::unavailable("down"))
    }
    async fn stop_actor(
        &self,
        _: &countersign_approval_core::ActorId,
        _: Timestamp,
    ) -> Result<countersign_approval_core::StopOutcome, StoreError> {
        Err(StoreError::unavailable("down"))
    }
    async fn resume_run(
        &self,
        _: &countersign_approval_core::ActorId,
        _: &RunId,
    ) -> Result<countersign_approval_core::ResumeOutcome, StoreError> {
        Err(StoreError::unavailable("down"))
    }
    async fn resume_actor(
        &self,
        _: &countersign_approval_core::ActorId,
    ) -> Result<countersign_approval_core::ResumeOutcome, StoreError> {
        Err(StoreError::unavailable("down"))
    }
}

#[async_trait]
impl OperationLog for Down {
    async fn record(&self, _: OperationRecord) -> Result<(), StoreError> {
        Err(StoreError::unavailable("down"))
    }
    async fn records_for_run(&self, _: &RunId) -> Result<Vec<OperationRecord>, StoreError> {
        Err(StoreError::unavailable("down"))
    }
    async fn record_for_operation(
        &self,
        _: &OperationId,
    ) -> Result<Option<OperationRecord>, StoreError> {
        Err(StoreError::unavailable("down"))
    }
}

#[async_trait]
impl Backend for Down {
    async fn perform(&self, _: &ActionRequest) -> Result<(), BackendError> {
        Err(BackendError::new("down"))
    }
}

fn assert_send_sync<T: Send + Sync + ?Sized>() {}

#[test]
fn traits_are_object_safe_and_shareable() {
    assert_send_sync::<dyn ApprovalStore>();
    assert_send_sync::<dyn OperationLog>();
    assert_send_sync::<dyn Backend>();

    let store: Arc<dyn ApprovalStore> = Arc::new(Down);
    let _log: Arc<dyn OperationLog> = Arc::new(Down);
    let _backend: Arc<dyn Backend> = Arc::new(Down);
    // `Arc<dyn ApprovalStore>` is itself a store, so generic code accepts it.
    fn takes_a_store<S: ApprovalStore + 'static>(store: S) -> Arc<dyn ApprovalStore> {
        Arc::new(store)
    }
    let wrapped = takes_a_store(store.clone());

    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let id = ApprovalId::generate().unwrap();
    let error = runtime.block_on(wrapped.get(&id)).unwrap_err();
    assert!(error.is_retryable());
    assert_eq!(BackendError::new("down").message(), "down");
    assert_eq!(
        BackendError::new("down").to_string(),
        "backend failed: down"
    );
}
