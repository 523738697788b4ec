//! The start-up checks: the cluster seeds, then, on the store's own
//! connection, the server's role and version, the store's scripts, its
//! persistence and eviction settings, and its replicas. Each refuses what
//! would break a guarantee later, at connect time, or warns.

use std::time::Duration;

use countersign_approval_core::StoreError;
use redis::{ErrorKind, RedisError, Value};

use crate::conn::Connection;
use crate::error::{is_noscript, redis_error, timed};
use crate::keys::probe_keys;
use crate::options::{ConnectError, RedisStoreOptions, redact};
use crate::reply::{parse_reply, text};
use crate::scripts::{GrantScript, Scripts};

/// The oldest server major version whose scripts replicate by effect, which
/// the scripts need (they read `TIME` before writing).
const MIN_SERVER_MAJOR: u32 = 5;

/// Reads a `CONFIG GET <name>` reply (RESP2 array or RESP3 map).
fn config_value(value: &Value) -> Option<String> {
    match value {
        Value::Array(items) if items.len() == 2 => text(&items[1]).map(str::to_owned),
        Value::Map(entries) if entries.len() == 1 => text(&entries[0].1).map(str::to_owned),
        _ => None,
    }
}

/// What a node's persistence settings can lose.
#[derive(Debug, PartialEq, Eq)]
enum PersistenceRisk {
    /// Nothing acknowledged is lost on a crash or a restart.
    None,
    /// A crash of the host may lose a bounded window of writes: a warning.
    Window(String),
    /// A crash or a restart can undo acknowledged consumes: refused by default.
    Undoes(String),
}

fn persistence_risk(appendonly: &str, appendfsync: &str, save: &str) -> PersistenceRisk {
    if appendonly != "yes" {
        let snapshots = if save.trim().is_empty() {
            "no save points".to_owned()
        } else {
            format!("save \"{save}\"")
        };
        return PersistenceRisk::Undoes(format!(
            "appendonly no ({snapshots}): redis loads any existing dump.rdb at start-up, so a \
             crash or restart rolls back to the last snapshot and every grant consumed since \
             it becomes usable again"
        ));
    }
    match appendfsync {
        "always" => PersistenceRisk::None,
        "everysec" => PersistenceRisk::Window(
            "appendfsync everysec: a crash of the host (not of redis alone) may lose about the \
             last second of writes (up to 2 s when the disk is slow), and a grant consumed in \
             it becomes usable again"
                .to_owned(),
        ),
        other => PersistenceRisk::Window(format!(
            "appendfsync {other}: a crash of the host (not of redis alone) may lose the writes \
             the operating system had not flushed (on linux up to about 30 s), and a grant \
             consumed in them becomes usable again"
        )),
    }
}

/// The major version in an `INFO server` reply.
fn server_major_version(info: &str) -> Option<u32> {
    info.lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .and_then(|version| version.trim().split('.').next())
        .and_then(|major| major.parse().ok())
}

/// A failure to load or run scripts at start-up: a server answer means the
/// server cannot run them; anything else is the usual error.
fn refuse_scripts(what: &str, err: &RedisError) -> StoreError {
    match err.kind() {
        ErrorKind::Server(_) | ErrorKind::Extension => StoreError::Unsupported {
            message: format!("{what}: the server cannot run the store's scripts: {err}"),
        },
        _ => redis_error(what, err),
    }
}

/// Whether an `INFO cluster` reply says cluster mode is on; `None` when
/// the reply is not one.
fn cluster_enabled(reply: &Value) -> Option<bool> {
    let info = match reply {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::VerbatimString { text, .. } => text.clone(),
        _ => return None,
    };
    if info.contains("cluster_enabled:1") {
        Some(true)
    } else if info.contains("cluster_enabled:0") {
        Some(false)
    } else {
        None
    }
}

/// Asks every cluster seed whether it is a cluster node: a plain server in
/// the list is a configuration mistake (the cluster client would ignore it,
/// or fail as if the cluster were down). Seeds that cannot be reached or
/// asked are left to the cluster client.
pub(crate) async fn check_seeds(seeds: &[String], limit: Duration) -> Result<(), ConnectError> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(limit))
        .set_response_timeout(Some(limit));
    let mut plain = Vec::new();
    let mut clustered = Vec::new();
    for seed in seeds {
        let Ok(client) = redis::Client::open(seed.as_str()) else {
            continue;
        };
        let asked = async {
            let mut conn = client
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            redis::cmd("INFO")
                .arg("cluster")
                .query_async::<Value>(&mut conn)
                .await
        };
        let reply = match tokio::time::timeout(limit, asked).await {
            Ok(Ok(reply)) => reply,
            _ => continue,
        };
        match cluster_enabled(&reply) {
            Some(true) => clustered.push(format!("`{}`", redact(seed))),
            Some(false) => plain.push(format!("`{}`", redact(seed))),
            None => {}
        }
    }
    if plain.is_empty() {
        return Ok(());
    }
    let message = if clustered.is_empty() {
        format!(
            "{} is a plain redis server, not a cluster node: connect to it with the `single` \
             option, or give the cluster's node urls",
            plain.join(", ")
        )
    } else {
        format!(
            "the cluster seed list mixes plain redis servers ({}) with cluster nodes ({}): \
             remove the plain servers from the list",
            plain.join(", "),
            clustered.join(", ")
        )
    };
    Err(ConnectError::WrongTopology { message })
}

/// Probes the server on `conn` before the store answers, within the
/// connect timeout (see
/// [`RedisApprovalStore::connect`](crate::store::RedisApprovalStore::connect));
/// returns what it warned about.
pub(crate) async fn probe(
    conn: &Connection,
    scripts: &Scripts,
    options: &RedisStoreOptions,
) -> Result<Vec<String>, ConnectError> {
    let mut probe = Probe {
        conn,
        scripts,
        options,
        warnings: Vec::new(),
    };
    let probe_limit = options.connect_timeout;
    tokio::time::timeout(probe_limit, probe.run(probe_limit))
        .await
        .map_err(|_| StoreError::Timeout {
            message: format!(
                "start-up probe: no answer within {} ms",
                probe_limit.as_millis()
            ),
        })??;
    Ok(probe.warnings)
}

/// One start-up probe: the connection and scripts it checks, the options
/// whose accepted risks it weighs, and what it warned about so far.
struct Probe<'a> {
    conn: &'a Connection,
    scripts: &'a Scripts,
    options: &'a RedisStoreOptions,
    warnings: Vec<String>,
}

impl Probe<'_> {
    /// Logs `message` now and keeps it for the store's
    /// [`startup_warnings`](crate::store::RedisApprovalStore::startup_warnings).
    fn warn(&mut self, message: String) {
        tracing::warn!(target: "countersign_store_redis", "{message}");
        self.warnings.push(message);
    }

    /// Persistence settings that could not be read: refused, or a warning
    /// when the options accept it.
    fn unverified_persistence(&mut self, node: &str, reason: &str) -> Result<(), ConnectError> {
        let risk = format!(
            "could not check persistence settings on {node} ({reason}): a restart may bring \
             consumed grants back"
        );
        if self.options.allow_unverified_persistence {
            self.warn(format!("{risk} (accepted by allow_unverified_persistence)"));
            return Ok(());
        }
        Err(ConnectError::NotDurable {
            message: format!(
                "{risk}; allow `config get` for the store's user, or, where the service \
                 guarantees that an acknowledged write survives a restart, accept the risk with \
                 the `allow_unverified_persistence` option"
            ),
        })
    }

    /// The checks on the store's connection, in order.
    async fn run(&mut self, limit: Duration) -> Result<(), ConnectError> {
        // Each step may take up to the whole probe's limit (the connect
        // timeout, which also bounds them all together): loading the
        // scripts compiles them on the server, which on a loaded machine
        // can outlast a command timeout chosen for single calls.
        // 1. A single server must be a primary: grants are never read from replicas.
        if !self.conn.is_cluster() {
            let replies = timed("role", limit, self.conn.on_each_primary(redis::cmd("ROLE")))
                .await?
                .map_err(|e| redis_error("role", &e))?;
            match replies.first().map(|(_, v)| v) {
                Some(Value::Array(items)) => match items.first().and_then(text) {
                    Some("master") => {}
                    Some(role) => {
                        return Err(StoreError::Unsupported {
                            message: format!(
                                "server is a {role}, not a primary: grants are never read from \
                                 replicas"
                            ),
                        }
                        .into());
                    }
                    None => self.warn("could not read the server's role".to_owned()),
                },
                _ => self.warn("could not check the server's role: role was refused".to_owned()),
            }
            // ... and not a cluster node: keys of other slots would answer MOVED.
            let mut cmd = redis::cmd("INFO");
            cmd.arg("cluster");
            let replies = timed("info", limit, self.conn.on_each_primary(cmd))
                .await?
                .map_err(|e| redis_error("info", &e))?;
            let clustered = replies.iter().any(|(_, reply)| match reply {
                Value::BulkString(bytes) => {
                    String::from_utf8_lossy(bytes).contains("cluster_enabled:1")
                }
                Value::VerbatimString { text, .. } => text.contains("cluster_enabled:1"),
                _ => false,
            });
            if clustered {
                return Err(ConnectError::WrongTopology {
                    message: "the server is a redis cluster node: connect to it with the \
                              `cluster` option, not `single`"
                        .to_owned(),
                });
            }
        }

        // 2. Server version: the scripts need effect replication (5.0 and later).
        let mut info_cmd = redis::cmd("INFO");
        info_cmd.arg("server");
        let replies = timed("info", limit, self.conn.on_each_primary(info_cmd))
            .await?
            .map_err(|e| redis_error("info", &e))?;
        for (node, reply) in replies {
            let major = match &reply {
                Value::BulkString(bytes) => server_major_version(&String::from_utf8_lossy(bytes)),
                Value::VerbatimString { text, .. } => server_major_version(text),
                _ => None,
            };
            match major {
                Some(major) if major < MIN_SERVER_MAJOR => {
                    return Err(StoreError::Unsupported {
                        message: format!(
                            "{node} runs redis {major}: the store's scripts need 5.0 or later"
                        ),
                    }
                    .into());
                }
                Some(_) => {}
                None => self.warn(format!("could not check the server version on {node}")),
            }
        }

        // 3. Load every script everywhere; a server that cannot is refused now, not at first use.
        for script in GrantScript::ALL {
            let loaded = self.scripts.get(script);
            let what = format!("loading the {} script", script.name());
            let sha = timed(&what, limit, self.conn.on_all_nodes(loaded.load_cmd()))
                .await?
                .map_err(|e| refuse_scripts(&what, &e))?;
            if text(&sha) != Some(loaded.sha()) {
                return Err(StoreError::Unsupported {
                    message: format!("{what}: the server answered a different sha1"),
                }
                .into());
            }
        }

        // 4. Run the read-only script for real, through EVALSHA as every call
        //    does and through EVAL as the reload after NOSCRIPT does.
        let (probe_slot, probe_key) = probe_keys(&self.options.key_prefix);
        let get = self.scripts.get(GrantScript::Get);
        for (reload, what) in [(false, "evalsha"), (true, "eval")] {
            let what = format!("running the get script with {what}");
            let cmd = get.invocation(reload, &[&probe_key], &[b"probe", probe_slot.as_bytes()]);
            let reply = match timed(&what, limit, self.conn.on_key(&probe_key, cmd, false)).await? {
                Ok(reply) => reply,
                // The server knows EVALSHA; its cache was flushed since the load
                // (calls recover from that with EVAL, checked next).
                Err(e) if is_noscript(&e) && !reload => continue,
                Err(e) => return Err(refuse_scripts(&what, &e).into()),
            };
            match parse_reply(GrantScript::Get, &probe_key, reply) {
                Ok(reply) if ["missing", "found", "corrupt"].contains(&reply.status.as_str()) => {}
                _ => {
                    return Err(StoreError::Unsupported {
                        message: format!("{what}: unexpected reply"),
                    }
                    .into());
                }
            }
        }

        // 5. Persistence and eviction, on every node (replicas too: one may be
        //    promoted). CONFIG may be disabled: then the settings are unknown.
        const NAMES: [&str; 4] = ["appendonly", "appendfsync", "save", "maxmemory-policy"];
        let mut settings: Vec<(String, [Option<String>; 4])> = Vec::new();
        let mut unreadable: Option<String> = None;
        for (index, name) in NAMES.into_iter().enumerate() {
            let mut cmd = redis::cmd("CONFIG");
            cmd.arg("GET").arg(name);
            let replies = match timed("config get", limit, self.conn.on_each_node(cmd)).await? {
                Ok(replies) => replies,
                Err(e) => {
                    unreadable = Some(format!("config get failed: {e}"));
                    break;
                }
            };
            for (node, reply) in replies {
                let value = config_value(&reply);
                match settings.iter_mut().find(|(n, _)| *n == node) {
                    Some((_, values)) => values[index] = value,
                    None => {
                        let mut values: [Option<String>; 4] = Default::default();
                        values[index] = value;
                        settings.push((node, values));
                    }
                }
            }
        }
        if let Some(reason) = unreadable {
            self.unverified_persistence("the servers", &reason)?;
        }
        for (node, [appendonly, appendfsync, save, eviction]) in settings {
            match (appendonly, appendfsync, save) {
                (Some(appendonly), Some(appendfsync), Some(save)) => {
                    match persistence_risk(&appendonly, &appendfsync, &save) {
                        PersistenceRisk::None => {}
                        PersistenceRisk::Window(warning) => self.warn(format!("{node}: {warning}")),
                        PersistenceRisk::Undoes(risk)
                            if self.options.allow_non_durable_persistence =>
                        {
                            self.warn(format!(
                                "{node}: {risk} (accepted by allow_non_durable_persistence)"
                            ))
                        }
                        PersistenceRisk::Undoes(risk) => {
                            return Err(ConnectError::NotDurable {
                                message: format!(
                                    "{node}: {risk}; set `appendonly yes` (with `appendfsync \
                                     always`) on every node, or accept the risk with the \
                                     `allow_non_durable_persistence` option"
                                ),
                            });
                        }
                    }
                }
                _ => self.unverified_persistence(&node, "config get was refused")?,
            }
            if let Some(policy) = eviction.filter(|p| p != "noeviction") {
                self.warn(format!(
                    "{node}: maxmemory-policy {policy}: under memory pressure grants may be \
                     evicted, and an evicted grant answers unknown"
                ));
            }
        }
        Ok(self.check_replicas().await?)
    }

    /// Warns when a primary has fewer replicas than the durability option needs.
    async fn check_replicas(&mut self) -> Result<(), StoreError> {
        let Some(durability) = self.options.durability else {
            return Ok(());
        };
        let mut cmd = redis::cmd("INFO");
        cmd.arg("replication");
        let replies = timed(
            "info",
            self.options.command_timeout,
            self.conn.on_each_primary(cmd),
        )
        .await?
        .map_err(|e| redis_error("info", &e))?;
        for (node, reply) in replies {
            let connected = match &reply {
                Value::BulkString(bytes) => String::from_utf8_lossy(bytes)
                    .lines()
                    .find_map(|l| l.strip_prefix("connected_slaves:").map(str::to_owned))
                    .and_then(|n| n.trim().parse::<u32>().ok()),
                _ => None,
            };
            match connected {
                Some(n) if n >= durability.replicas => {}
                Some(n) => self.warn(format!(
                    "{node} has {n} connected replicas but durability needs {}: writes will fail \
                     with durability unconfirmed until enough replicas connect",
                    durability.replicas
                )),
                None => self.warn(format!("could not count the replicas of {node}")),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn persistence_risks() {
        assert_eq!(persistence_risk("yes", "always", ""), PersistenceRisk::None);
        assert!(matches!(
            persistence_risk("yes", "everysec", ""),
            PersistenceRisk::Window(w) if w.contains("about the last second")
        ));
        assert!(matches!(
            persistence_risk("yes", "no", "3600 1"),
            PersistenceRisk::Window(_)
        ));
        for (appendfsync, save) in [("always", "3600 1"), ("everysec", ""), ("no", "60 1")] {
            assert!(matches!(
                persistence_risk("no", appendfsync, save),
                PersistenceRisk::Undoes(w) if w.starts_with("appendonly no")
            ));
        }
    }

    #[test]
    fn server_versions() {
        assert_eq!(
            server_major_version("# Server\r\nredis_version:7.0.15\r\n"),
            Some(7)
        );
        assert_eq!(server_major_version("redis_version:4.0.9\n"), Some(4));
        assert_eq!(server_major_version("nothing"), None);
    }
}
