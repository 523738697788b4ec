#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The in-memory store and log pass the whole conformance kit.

use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};

countersign_store_conformance::store_conformance_tests!(in_memory, async {
    InMemoryApprovalStore::new()
});

countersign_store_conformance::operation_log_conformance_tests!(
    in_memory_operation_log,
    |max_records| async move { InMemoryOperationStore::with_max_records(max_records) }
);

countersign_store_conformance::proposal_store_conformance_tests!(in_memory_proposals, async {
    InMemoryApprovalStore::new()
});

countersign_store_conformance::outbox_conformance_tests!(in_memory_outbox, async {
    InMemoryApprovalStore::new().with_notification_outbox()
});
