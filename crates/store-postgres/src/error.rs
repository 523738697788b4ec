//! How driver and pool failures become [`StoreError`]s.

use countersign_approval_core::StoreError;
use deadpool_postgres::{PoolError, TimeoutType};
use tokio_postgres::error::SqlState;

/// Whether the server refused the statement only because of a concurrent
/// transaction (serialization failure or deadlock): the statement was rolled
/// back and repeating it is safe.
pub(crate) fn is_conflict(err: &tokio_postgres::Error) -> bool {
    matches!(
        err.code(),
        Some(code) if *code == SqlState::T_R_SERIALIZATION_FAILURE
            || *code == SqlState::T_R_DEADLOCK_DETECTED
    )
}

/// Whether the connection that returned `err` must not be used again: it
/// is closed, broke without a server error, or the server is ending it
/// (administrator command, crash, shutdown, or a connection exception).
pub(crate) fn ends_connection(err: &tokio_postgres::Error) -> bool {
    match err.code() {
        None => true,
        Some(code) => {
            err.is_closed()
                || code.code().starts_with("08")
                || *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW
                || *code == SqlState::IDLE_SESSION_TIMEOUT
        }
    }
}

/// A failed statement as the trait reports it.
pub(crate) fn pg_error(what: &str, err: &tokio_postgres::Error) -> StoreError {
    let Some(code) = err.code() else {
        // No server error: the connection broke or never answered.
        return StoreError::unavailable(format!("{what}: {err}"));
    };
    let detail = err
        .as_db_error()
        .map(|db| db.message().to_owned())
        .unwrap_or_else(|| err.to_string());
    let message = format!("{what}: {detail} (sqlstate {})", code.code());
    if *code == SqlState::QUERY_CANCELED || *code == SqlState::LOCK_NOT_AVAILABLE {
        return StoreError::Timeout { message };
    }
    if *code == SqlState::READ_ONLY_SQL_TRANSACTION {
        return StoreError::Unavailable {
            message: format!("{message}: the server is read-only, perhaps a standby"),
        };
    }
    let class = &code.code()[..2];
    match class {
        // Undefined table or column, privileges, syntax: the schema is not
        // the store's, or the role may not use it.
        "42" => StoreError::Unsupported { message },
        // Data exceptions: a value the server will not store.
        "22" => StoreError::Rejected { message },
        // Feature not supported.
        "0A" => StoreError::Unsupported { message },
        _ => StoreError::Unavailable { message },
    }
}

/// A pool failure as the trait reports it.
pub(crate) fn pool_error(err: PoolError) -> StoreError {
    match err {
        PoolError::Timeout(TimeoutType::Wait) => StoreError::Timeout {
            message: "no pooled postgres connection became free in time: the pool is exhausted"
                .to_owned(),
        },
        PoolError::Timeout(TimeoutType::Create) => StoreError::Timeout {
            message: "opening a postgres connection timed out".to_owned(),
        },
        PoolError::Timeout(TimeoutType::Recycle) => StoreError::Timeout {
            message: "checking a pooled postgres connection timed out".to_owned(),
        },
        PoolError::Backend(e) => pg_error("opening a postgres connection", &e),
        PoolError::Closed => StoreError::unavailable("the postgres connection pool is closed"),
        PoolError::NoRuntimeSpecified => StoreError::Unsupported {
            message: "the postgres pool has no runtime for its timeouts".to_owned(),
        },
        PoolError::PostCreateHook(e) => {
            StoreError::unavailable(format!("preparing a postgres connection: {e}"))
        }
    }
}
