//! How redis failures become [`StoreError`]s and [`ConnectError`]s, and
//! the limit every round trip is held to.

use std::future::Future;
use std::time::Duration;

use countersign_approval_core::StoreError;
use redis::{ErrorKind, RedisError, ServerErrorKind};

use crate::options::{ConnectError, InvalidOptions};

/// Whether `err` is the server refusing a write because `maxmemory` is
/// reached (`-OOM`). Such an answer proves that the call wrote nothing:
/// Redis refuses a plain command before it runs, and a script only at its
/// first write that may grow memory and only while the script has written
/// nothing yet (past its first write a script runs to its end). The
/// consume and abandon scripts write first with `SET` or `ZADD`, which
/// Redis refuses there, so under `maxmemory` they are refused whole.
pub(crate) fn is_out_of_memory(err: &RedisError) -> bool {
    err.code() == Some("OOM")
}

/// A failed call as the trait reports it.
pub(crate) fn redis_error(what: &str, err: &RedisError) -> StoreError {
    if is_out_of_memory(err) {
        // Not retryable: a server at its memory limit refuses the same
        // write again until memory is freed, which outlasts any retry
        // budget; and since nothing was written, there is nothing to give
        // back, so a caller's give-back (refused the same way) ends at once.
        return StoreError::Rejected {
            message: format!(
                "{what}: redis is out of memory (`maxmemory` reached) and refused the write, \
                 so nothing was written; free memory or raise `maxmemory`"
            ),
        };
    }
    if err.is_timeout() {
        return StoreError::Timeout {
            message: format!("{what}: {err}"),
        };
    }
    let unknown_command = err.kind() == ErrorKind::Server(ServerErrorKind::ResponseError)
        && err
            .detail()
            .is_some_and(|d| d.to_ascii_lowercase().contains("unknown command"));
    if unknown_command || err.kind() == ErrorKind::Server(ServerErrorKind::NoPerm) {
        return StoreError::Unsupported {
            message: format!("{what}: server refused the command: {err}"),
        };
    }
    StoreError::unavailable(format!("{what}: {err}"))
}

/// Whether the server no longer holds the script an `EVALSHA` named (after
/// a restart, a failover or `SCRIPT FLUSH`): the call is sent again with `EVAL`.
pub(crate) fn is_noscript(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// Awaits `fut` for at most `limit`.
pub(crate) async fn timed<T>(
    what: &str,
    limit: Duration,
    fut: impl Future<Output = redis::RedisResult<T>>,
) -> Result<redis::RedisResult<T>, StoreError> {
    tokio::time::timeout(limit, fut)
        .await
        .map_err(|_| StoreError::Timeout {
            message: format!("{what}: no reply within {} ms", limit.as_millis()),
        })
}

/// A failure to open the store's connection: settings redis refused are
/// the options' fault, a plain server among cluster seeds the topology's.
pub(crate) fn connect_error(err: &RedisError) -> ConnectError {
    match err.kind() {
        ErrorKind::InvalidClientConfig => ConnectError::InvalidOptions(InvalidOptions::new(
            format!("redis refused the connection settings: {err}"),
        )),
        _ if is_cluster_disabled(err) => ConnectError::WrongTopology {
            message: format!(
                "a seed is a plain redis server, not a cluster node ({err}): connect to it \
                 with the `single` option, or give the cluster's node urls"
            ),
        },
        _ => ConnectError::Store(redis_error("connecting to redis", err)),
    }
}

/// Whether `err` is a server saying it is not a cluster node.
fn is_cluster_disabled(err: &RedisError) -> bool {
    err.to_string()
        .to_ascii_lowercase()
        .contains("cluster support disabled")
}
