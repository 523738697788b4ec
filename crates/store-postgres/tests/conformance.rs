//! The PostgreSQL store passes the whole conformance kit, the proposal
//! checks included, at READ COMMITTED (the server default), REPEATABLE READ
//! and SERIALIZABLE, on a server this test binary starts; each store gets a
//! fresh schema. The notification outbox passes the outbox checks at READ
//! COMMITTED and SERIALIZABLE. The operation log passes the
//! operation-log kit at READ COMMITTED and SERIALIZABLE.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use countersign_store_postgres::PostgresApprovalStore;
use support::{Isolation, shared_server, store_on};

async fn read_committed() -> PostgresApprovalStore {
    store_on(shared_server(), "kit_rc", Isolation::ReadCommitted).await
}

async fn repeatable_read() -> PostgresApprovalStore {
    store_on(shared_server(), "kit_rr", Isolation::RepeatableRead).await
}

async fn serializable() -> PostgresApprovalStore {
    store_on(shared_server(), "kit_ser", Isolation::Serializable).await
}

countersign_store_conformance::store_conformance_tests!(read_committed_kit, read_committed());
countersign_store_conformance::store_conformance_tests!(repeatable_read_kit, repeatable_read());
countersign_store_conformance::store_conformance_tests!(serializable_kit, serializable());

// The proposal checks, at the same three levels (a decision forces READ
// COMMITTED on its own transaction, the other steps run at the session's
// level).
countersign_store_conformance::proposal_store_conformance_tests!(
    read_committed_proposals,
    read_committed()
);
countersign_store_conformance::proposal_store_conformance_tests!(
    repeatable_read_proposals,
    repeatable_read()
);
countersign_store_conformance::proposal_store_conformance_tests!(
    serializable_proposals,
    serializable()
);

/// A fresh store with its notification outbox on, in a schema of its own.
async fn with_outbox(isolation: Isolation) -> PostgresApprovalStore {
    PostgresApprovalStore::connect(
        support::options_for(shared_server(), "kit_outbox", isolation).notification_outbox(true),
    )
    .await
    .expect("store connects")
}

// The outbox checks: a claim is its own READ COMMITTED transaction, the
// other calls run at the session's level.
countersign_store_conformance::outbox_conformance_tests!(
    read_committed_outbox,
    with_outbox(Isolation::ReadCommitted)
);
countersign_store_conformance::outbox_conformance_tests!(
    serializable_outbox,
    with_outbox(Isolation::Serializable)
);

/// The connection strings above really set the isolation level the kit
/// claims to run at.
#[tokio::test]
async fn the_kit_runs_at_the_isolation_it_names() {
    let server = shared_server();
    for (isolation, wanted) in [
        (Isolation::ReadCommitted, "read committed"),
        (Isolation::RepeatableRead, "repeatable read"),
        (Isolation::Serializable, "serializable"),
    ] {
        let (client, connection) = tokio_postgres::connect(
            &server.connection(isolation.connection_extra()),
            tokio_postgres::NoTls,
        )
        .await
        .unwrap();
        tokio::spawn(connection);
        let row = client
            .query_one("SHOW transaction_isolation", &[])
            .await
            .unwrap();
        assert_eq!(row.get::<_, String>(0), wanted);
    }
}

/// A fresh, empty log in its own schema keeping at most `max_records`.
async fn kit_log(max_records: usize) -> countersign_store_postgres::PostgresOperationLog {
    store_on(shared_server(), "kit_log", Isolation::ReadCommitted)
        .await
        .operation_log()
        .with_max_records(max_records as u64)
}

async fn serializable_kit_log(
    max_records: usize,
) -> countersign_store_postgres::PostgresOperationLog {
    store_on(shared_server(), "kit_log_ser", Isolation::Serializable)
        .await
        .operation_log()
        .with_max_records(max_records as u64)
}

countersign_store_conformance::operation_log_conformance_tests!(operation_log_kit, kit_log);
countersign_store_conformance::operation_log_conformance_tests!(
    serializable_operation_log_kit,
    serializable_kit_log
);
