#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The in-memory store passes the whole conformance kit.

use countersign_store_memory::InMemoryApprovalStore;

countersign_store_conformance::store_conformance_tests!(in_memory, async {
    InMemoryApprovalStore::new()
});
