//! One interface over the two kinds of connection: a single server through
//! a `ConnectionManager`, or Redis Cluster through `cluster_async`.

use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, ResponsePolicy, Route, RoutingInfo, SingleNodeRoutingInfo, Slot,
    SlotAddr,
};
use redis::{Cmd, Pipeline, RedisResult, Value};

/// A cheap-to-clone handle on the store's connections.
#[derive(Clone)]
pub(crate) enum Connection {
    /// One server (its primary); reconnects by itself.
    Single(ConnectionManager),
    /// A cluster; commands go to the primary that owns the key's slot.
    Cluster(ClusterConnection),
}

/// The primary owning `key`'s slot: grants are never read from replicas.
fn primary_for(key: &str) -> SingleNodeRoutingInfo {
    SingleNodeRoutingInfo::SpecificNode(Route::with_slot(Slot::for_key(key), SlotAddr::Master))
}

impl Connection {
    /// Runs `cmd`, which touches only `key`, on the primary that holds `key`.
    pub(crate) async fn on_key(&self, key: &str, cmd: Cmd) -> RedisResult<Value> {
        let value = match self.clone() {
            Connection::Single(mut conn) => conn.send_packed_command(&cmd).await?,
            Connection::Cluster(mut conn) => {
                conn.route_command(cmd, RoutingInfo::SingleNode(primary_for(key)))
                    .await?
            }
        };
        value.extract_error()
    }

    /// Sends `cmds` in one pipeline on one connection to the primary that
    /// holds `key`, and returns each command's reply (server errors included
    /// as `Value::ServerError`). Used for a write followed by `WAIT`, which
    /// counts the writes of its own connection.
    pub(crate) async fn pipeline_on_key(
        &self,
        key: &str,
        cmds: Vec<Cmd>,
    ) -> RedisResult<Vec<Value>> {
        let count = cmds.len();
        let mut pipeline = Pipeline::with_capacity(count);
        for cmd in cmds {
            pipeline.add_command(cmd);
        }
        match self.clone() {
            Connection::Single(mut conn) => conn.send_packed_commands(&pipeline, 0, count).await,
            Connection::Cluster(mut conn) => {
                conn.route_pipeline(pipeline, 0, count, primary_for(key))
                    .await
            }
        }
    }

    /// Runs an administrative `cmd` on every primary and returns each
    /// primary's reply, labelled with its address (`"server"` on a single
    /// server). Server errors stay in the list as `Value::ServerError`.
    pub(crate) async fn on_each_primary(&self, cmd: Cmd) -> RedisResult<Vec<(String, Value)>> {
        match self.clone() {
            Connection::Single(mut conn) => {
                let value = match conn.send_packed_command(&cmd).await {
                    Ok(value) => value,
                    Err(err) => {
                        let first = err
                            .clone()
                            .into_server_errors()
                            .and_then(|errors| errors.first().map(|(_, e)| e.clone()));
                        match first {
                            Some(server_error) => Value::ServerError(server_error),
                            None => return Err(err),
                        }
                    }
                };
                Ok(vec![("server".to_owned(), value)])
            }
            Connection::Cluster(mut conn) => {
                let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
                match conn.route_command(cmd, routing).await? {
                    Value::Map(entries) => Ok(entries
                        .into_iter()
                        .map(|(node, value)| {
                            let node = match node {
                                Value::BulkString(bytes) => {
                                    String::from_utf8_lossy(&bytes).into_owned()
                                }
                                other => format!("{other:?}"),
                            };
                            (node, value)
                        })
                        .collect()),
                    other => Ok(vec![("cluster".to_owned(), other)]),
                }
            }
        }
    }

    /// Runs `cmd` on every node (primaries and replicas) and succeeds only
    /// if every node did; used for `SCRIPT LOAD`.
    pub(crate) async fn on_all_nodes(&self, cmd: Cmd) -> RedisResult<Value> {
        let value = match self.clone() {
            Connection::Single(mut conn) => conn.send_packed_command(&cmd).await?,
            Connection::Cluster(mut conn) => {
                let routing = RoutingInfo::MultiNode((
                    MultipleNodeRoutingInfo::AllNodes,
                    Some(ResponsePolicy::AllSucceeded),
                ));
                conn.route_command(cmd, routing).await?
            }
        };
        value.extract_error()
    }
}
