//! The Redis operation log: one stream per key prefix, with a run index and
//! an operation-id key beside it, all in one cluster slot.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use countersign_approval_core::policy::ActionDigest;
use countersign_approval_core::{
    ActorId, ApprovalId, ApproverId, GivenApprovalId, OperationId, OperationLog, OperationRecord,
    OutcomeCode, RunId, StoreError, Timestamp,
};
use redis::{Cmd, Script, Value};

use crate::conn::Connection;
use crate::error::{is_noscript, redis_error, timed};
use crate::options::{InvalidOptions, MAX_RETENTION};
use crate::reply::text;
use crate::store::RedisApprovalStore;

/// Records a log keeps by default: 100 000.
pub const DEFAULT_MAX_RECORDS: u64 = 100_000;
/// The most records a log may be told to keep: 10 000 000.
pub const MAX_RECORDS_LIMIT: u64 = 10_000_000;
/// How long records are kept by default: 24 hours.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(24 * 60 * 60);
/// The oldest server version the log runs on (`XTRIM MINID`), as (major, minor).
const MIN_SERVER_VERSION: (u32, u32) = (6, 2);
/// The JSON types a model may give instead of an approval id string.
const JSON_TYPES: [&str; 4] = ["boolean", "number", "array", "object"];
/// The record format written by this version of the log.
const FORMAT_VERSION: &str = "1";

/// How much an operation log keeps: at most `max_records` records (the
/// newest), none older than `max_age` by the server's clock. Each run's
/// index keeps at most as many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationLogRetention {
    max_records: u64,
    max_age: Duration,
}

impl Default for OperationLogRetention {
    fn default() -> Self {
        OperationLogRetention {
            max_records: DEFAULT_MAX_RECORDS,
            max_age: DEFAULT_MAX_AGE,
        }
    }
}

impl OperationLogRetention {
    /// Keep at most `max_records` (1 to [`MAX_RECORDS_LIMIT`]) records, each
    /// for at most `max_age` (at least 1 ms, at most 366 days).
    pub fn new(max_records: u64, max_age: Duration) -> Result<Self, InvalidOptions> {
        if max_records == 0 || max_records > MAX_RECORDS_LIMIT {
            return Err(InvalidOptions::new(format!(
                "operation log must keep 1 to {MAX_RECORDS_LIMIT} records, got {max_records}"
            )));
        }
        if max_age.as_millis() == 0 || max_age > MAX_RETENTION {
            return Err(InvalidOptions::new(
                "operation log retention must be at least 1 ms and at most 366 days",
            ));
        }
        Ok(OperationLogRetention {
            max_records,
            max_age,
        })
    }

    /// The most records kept.
    pub fn max_records(&self) -> u64 {
        self.max_records
    }

    /// The longest a record is kept.
    pub fn max_age(&self) -> Duration {
        self.max_age
    }
}

/// Field names of a log entry, as stored.
mod field {
    pub(super) const VERSION: &str = "v";
    pub(super) const OPERATION: &str = "op";
    pub(super) const ACTOR: &str = "actor";
    pub(super) const RUN: &str = "run";
    pub(super) const APPROVAL: &str = "approval";
    pub(super) const APPROVAL_BYTES: &str = "approval_bytes";
    pub(super) const APPROVAL_PREFIX: &str = "approval_prefix";
    pub(super) const APPROVAL_TYPE: &str = "approval_type";
    pub(super) const URL: &str = "url";
    pub(super) const DIGEST: &str = "digest";
    pub(super) const APPROVER: &str = "approver";
    pub(super) const OUTCOME: &str = "outcome";
    pub(super) const REASON: &str = "reason";
    pub(super) const STARTED_AT: &str = "started_at";
    pub(super) const FINISHED_AT: &str = "finished_at";

    pub(super) const ALL: [&str; 15] = [
        VERSION,
        OPERATION,
        ACTOR,
        RUN,
        APPROVAL,
        APPROVAL_BYTES,
        APPROVAL_PREFIX,
        APPROVAL_TYPE,
        URL,
        DIGEST,
        APPROVER,
        OUTCOME,
        REASON,
        STARTED_AT,
        FINISHED_AT,
    ];
}

/// One of the log's two scripts, with its SHA-1.
#[derive(Debug, Clone)]
struct LogScript {
    name: &'static str,
    source: &'static str,
    sha: String,
}

impl LogScript {
    fn new(name: &'static str, source: &'static str) -> Self {
        LogScript {
            name,
            source,
            sha: Script::new(source).get_hash().to_owned(),
        }
    }

    fn invocation(&self, reload: bool, keys: &[&str], args: &[&str]) -> Cmd {
        let mut cmd = if reload {
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(self.source);
            cmd
        } else {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(self.sha.as_str());
            cmd
        };
        cmd.arg(keys.len()).arg(keys).arg(args);
        cmd
    }
}

/// Operation records in Redis, shared by every worker of a host: one
/// stream per key prefix. See the [crate docs](crate#operation-log) for the
/// layout.
///
/// Cheap to share behind an `Arc`; it uses the connection of the
/// [`RedisApprovalStore`] it was made from.
pub struct RedisOperationLog {
    conn: Connection,
    stream_key: String,
    command_timeout: Duration,
    max_records: String,
    max_age_ms: String,
    record_script: LogScript,
    read_script: LogScript,
}

impl fmt::Debug for RedisOperationLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisOperationLog")
            .field("stream_key", &self.stream_key)
            .field("max_records", &self.max_records)
            .field("max_age_ms", &self.max_age_ms)
            .finish_non_exhaustive()
    }
}

/// The `(major, minor)` version in an `INFO server` reply.
fn server_version(info: &str) -> Option<(u32, u32)> {
    let version = info
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))?;
    let mut parts = version.trim().split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Parses a decimal timestamp exactly as the log writes it.
fn parse_millis(text: &str) -> Option<Timestamp> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical
        .then(|| text.parse::<u64>().ok().map(Timestamp::from_millis))
        .flatten()
}

impl RedisOperationLog {
    /// An operation log under the store's key prefix, over the store's
    /// connection, keeping what `retention` says. Checks that every primary
    /// runs Redis 6.2 or later ([`StoreError::Unsupported`] otherwise) and
    /// loads the log's scripts.
    pub async fn for_store(
        store: &RedisApprovalStore,
        retention: OperationLogRetention,
    ) -> Result<Self, StoreError> {
        let log = RedisOperationLog {
            conn: store.connection().clone(),
            stream_key: format!("{}:oplog:{{log}}", store.prefix()),
            command_timeout: store.command_timeout(),
            max_records: retention.max_records.to_string(),
            max_age_ms: retention.max_age.as_millis().to_string(),
            record_script: LogScript::new("record", include_str!("lua/oplog_record.lua")),
            read_script: LogScript::new("read", include_str!("lua/oplog_read.lua")),
        };
        let mut info = redis::cmd("INFO");
        info.arg("server");
        let replies = timed("info", log.command_timeout, log.conn.on_each_primary(info))
            .await?
            .map_err(|e| redis_error("info", &e))?;
        for (node, reply) in replies {
            let version = text(&reply).and_then(server_version).or(match &reply {
                Value::VerbatimString { text, .. } => server_version(text),
                _ => None,
            });
            if version.is_none_or(|v| v < MIN_SERVER_VERSION) {
                return Err(StoreError::Unsupported {
                    message: format!(
                        "{node}: the operation log needs redis 6.2 or later (xtrim minid)"
                    ),
                });
            }
        }
        for script in [&log.record_script, &log.read_script] {
            let what = format!("loading the oplog {} script", script.name);
            let mut load = redis::cmd("SCRIPT");
            load.arg("LOAD").arg(script.source);
            let sha = timed(&what, log.command_timeout, log.conn.on_all_nodes(load))
                .await?
                .map_err(|e| redis_error(&what, &e))?;
            if text(&sha) != Some(script.sha.as_str()) {
                return Err(StoreError::Unsupported {
                    message: format!("{what}: the server answered a different sha1"),
                });
            }
        }
        Ok(log)
    }

    /// The stream every record goes to: `{prefix}:oplog:{log}`.
    pub fn stream_key(&self) -> &str {
        &self.stream_key
    }

    /// The index of `run`'s records: `{prefix}:oplog:{log}:run:<run id>`.
    pub fn run_key(&self, run: &RunId) -> String {
        format!("{}:run:{}", self.stream_key, run.as_str())
    }

    /// The key naming operation `id`'s entry: `{prefix}:oplog:{log}:op:<operation id>`.
    pub fn operation_key(&self, id: &OperationId) -> String {
        format!("{}:op:{}", self.stream_key, id.as_str())
    }

    /// Runs `script` with EVALSHA, resent with EVAL after NOSCRIPT.
    async fn run(
        &self,
        script: &LogScript,
        keys: &[&str],
        args: &[&str],
    ) -> Result<Value, StoreError> {
        let what = format!("oplog {} script", script.name);
        for reload in [false, true] {
            let cmd = script.invocation(reload, keys, args);
            match timed(
                &what,
                self.command_timeout,
                self.conn.on_key(&self.stream_key, cmd, false),
            )
            .await?
            {
                Err(e) if is_noscript(&e) && !reload => {}
                Err(e) => return Err(redis_error(&what, &e)),
                Ok(value) => return Ok(value),
            }
        }
        Err(StoreError::unavailable(format!(
            "{what}: the server kept answering noscript"
        )))
    }

    async fn read(&self, mode: &str, key: &str) -> Result<Vec<OperationRecord>, StoreError> {
        let reply = self
            .run(&self.read_script, &[&self.stream_key, key], &[mode])
            .await?;
        let corrupt = |message: &str| StoreError::corrupt(&self.stream_key, message);
        let Value::Array(entries) = reply else {
            return Err(corrupt("unexpected reply from the oplog read script"));
        };
        entries
            .into_iter()
            .map(|entry| match entry {
                Value::Array(mut parts) if parts.len() == 2 => match parts.pop() {
                    Some(Value::Array(flat)) => decode(&self.stream_key, &flat),
                    _ => Err(corrupt("log entry has no fields")),
                },
                _ => Err(corrupt("unexpected reply from the oplog read script")),
            })
            .collect()
    }
}

/// The field/value pairs of one record.
fn encode(record: &OperationRecord) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        (field::VERSION, FORMAT_VERSION.to_owned()),
        (field::OPERATION, record.operation_id.as_str().to_owned()),
        (field::ACTOR, record.actor_id.as_str().to_owned()),
        (field::RUN, record.run_id.as_str().to_owned()),
        (field::OUTCOME, record.outcome.as_str().to_owned()),
        (field::REASON, record.reason.clone()),
        (field::STARTED_AT, record.started_at.as_millis().to_string()),
        (
            field::FINISHED_AT,
            record.finished_at.as_millis().to_string(),
        ),
    ];
    match &record.approval_id {
        GivenApprovalId::WellFormed(id) => fields.push((field::APPROVAL, id.as_str().to_owned())),
        GivenApprovalId::Malformed { bytes, prefix, .. } => {
            fields.push((field::APPROVAL_BYTES, bytes.to_string()));
            fields.push((field::APPROVAL_PREFIX, prefix.clone()));
        }
        GivenApprovalId::NotAString { json_type, .. } => {
            fields.push((field::APPROVAL_TYPE, (*json_type).to_owned()));
        }
        // Absent, and any kind this version does not know: nothing stored.
        _ => {}
    }
    if let Some(url) = &record.url {
        fields.push((field::URL, url.clone()));
    }
    if let Some(digest) = &record.action_digest {
        fields.push((field::DIGEST, digest.to_hex()));
    }
    if let Some(approver) = &record.approver_id {
        fields.push((field::APPROVER, approver.as_str().to_owned()));
    }
    fields
}

/// Reads one log entry's fields as a record, accepting only a complete,
/// well-formed v=1 entry.
fn decode(key: &str, flat: &[Value]) -> Result<OperationRecord, StoreError> {
    let corrupt = |message: &str| StoreError::corrupt(key, message);
    if !flat.len().is_multiple_of(2) {
        return Err(corrupt("log entry has an odd number of items"));
    }
    let mut fields: Vec<(&str, &str)> = Vec::with_capacity(flat.len() / 2);
    for pair in flat.chunks_exact(2) {
        let (Some(name), Some(value)) = (text(&pair[0]), text(&pair[1])) else {
            return Err(corrupt("log entry field is not utf-8 text"));
        };
        if !field::ALL.contains(&name) {
            return Err(corrupt("log entry has an unknown field"));
        }
        if fields.iter().any(|(n, _)| *n == name) {
            return Err(corrupt("log entry repeats a field"));
        }
        fields.push((name, value));
    }
    let get = |name: &str| fields.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    let required = |name: &'static str| {
        get(name).ok_or_else(|| corrupt(&format!("log entry lacks field {name}")))
    };
    if required(field::VERSION)? != FORMAT_VERSION {
        return Err(corrupt("unsupported log entry version"));
    }
    let outcome_text = required(field::OUTCOME)?;
    let outcome = OutcomeCode::ALL
        .into_iter()
        .find(|code| code.as_str() == outcome_text)
        .ok_or_else(|| corrupt("log entry has an unknown outcome"))?;
    Ok(OperationRecord {
        operation_id: OperationId::parse(required(field::OPERATION)?)
            .ok_or_else(|| corrupt("op is not an operation id"))?,
        actor_id: ActorId::new(required(field::ACTOR)?)
            .map_err(|_| corrupt("actor is not a valid actor id"))?,
        run_id: RunId::new(required(field::RUN)?)
            .map_err(|_| corrupt("run is not a valid run id"))?,
        approval_id: match (
            get(field::APPROVAL),
            get(field::APPROVAL_BYTES),
            get(field::APPROVAL_PREFIX),
            get(field::APPROVAL_TYPE),
        ) {
            (None, None, None, None) => GivenApprovalId::Absent,
            (Some(id), None, None, None) => GivenApprovalId::WellFormed(
                ApprovalId::parse(id).ok_or_else(|| corrupt("approval is not an approval id"))?,
            ),
            (None, Some(bytes), Some(prefix), None) => GivenApprovalId::malformed(
                bytes
                    .parse()
                    .map_err(|_| corrupt("approval_bytes is not a length"))?,
                prefix.to_owned(),
            ),
            (None, None, None, Some(json_type)) => GivenApprovalId::not_a_string(
                JSON_TYPES
                    .into_iter()
                    .find(|known| *known == json_type)
                    .ok_or_else(|| corrupt("approval_type is not a json type"))?,
            ),
            _ => return Err(corrupt("log entry mixes approval id fields")),
        },
        url: get(field::URL).map(str::to_owned),
        action_digest: get(field::DIGEST)
            .map(|hex| {
                ActionDigest::from_str(hex)
                    .map_err(|_| corrupt("digest is not 64 lower-case hex characters"))
            })
            .transpose()?,
        approver_id: get(field::APPROVER)
            .map(|id| ApproverId::new(id).map_err(|_| corrupt("approver is not an approver id")))
            .transpose()?,
        outcome,
        reason: required(field::REASON)?.to_owned(),
        started_at: parse_millis(required(field::STARTED_AT)?)
            .ok_or_else(|| corrupt("started_at is not a timestamp"))?,
        finished_at: parse_millis(required(field::FINISHED_AT)?)
            .ok_or_else(|| corrupt("finished_at is not a timestamp"))?,
    })
}

#[async_trait]
impl OperationLog for RedisOperationLog {
    async fn record(&self, record: OperationRecord) -> Result<(), StoreError> {
        let run_key = self.run_key(&record.run_id);
        let operation_key = self.operation_key(&record.operation_id);
        let fields = encode(&record);
        let mut args: Vec<&str> = vec![&self.max_records, &self.max_age_ms];
        for (name, value) in &fields {
            args.push(name);
            args.push(value);
        }
        let reply = self
            .run(
                &self.record_script,
                &[&self.stream_key, &run_key, &operation_key],
                &args,
            )
            .await?;
        match reply {
            Value::Array(items)
                if matches!(items.first().and_then(text), Some("recorded" | "exists")) =>
            {
                Ok(())
            }
            _ => Err(StoreError::corrupt(
                &self.stream_key,
                "unexpected reply from the oplog record script",
            )),
        }
    }

    async fn records_for_run(&self, run: &RunId) -> Result<Vec<OperationRecord>, StoreError> {
        let records = self.read("run", &self.run_key(run)).await?;
        if records.iter().any(|r| r.run_id != *run) {
            return Err(StoreError::corrupt(
                self.run_key(run),
                "run index names a record of another run",
            ));
        }
        Ok(records)
    }

    async fn record_for_operation(
        &self,
        id: &OperationId,
    ) -> Result<Option<OperationRecord>, StoreError> {
        let key = self.operation_key(id);
        let mut records = self.read("operation", &key).await?;
        match records.pop() {
            None => Ok(None),
            Some(record) if records.is_empty() && record.operation_id == *id => Ok(Some(record)),
            Some(_) => Err(StoreError::corrupt(
                key,
                "operation key names a record of another operation",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn versions_are_read_with_their_minor() {
        assert_eq!(
            server_version("# Server\r\nredis_version:7.0.15\r\n"),
            Some((7, 0))
        );
        assert_eq!(server_version("redis_version:6.2.1"), Some((6, 2)));
        assert!(server_version("redis_version:6.0.9").unwrap() < MIN_SERVER_VERSION);
        assert_eq!(server_version("nothing"), None);
    }

    #[test]
    fn retention_is_validated() {
        assert!(OperationLogRetention::new(0, DEFAULT_MAX_AGE).is_err());
        assert!(OperationLogRetention::new(MAX_RECORDS_LIMIT + 1, DEFAULT_MAX_AGE).is_err());
        assert!(OperationLogRetention::new(1, Duration::ZERO).is_err());
        assert!(OperationLogRetention::new(1, MAX_RETENTION + Duration::from_secs(1)).is_err());
        let ok = OperationLogRetention::new(10, Duration::from_secs(60)).unwrap();
        assert_eq!(
            (ok.max_records(), ok.max_age()),
            (10, Duration::from_secs(60))
        );
        assert_eq!(
            OperationLogRetention::default(),
            OperationLogRetention::new(DEFAULT_MAX_RECORDS, DEFAULT_MAX_AGE).unwrap()
        );
    }

    #[test]
    fn entries_are_read_strictly() {
        let flat = |pairs: &[(&str, &str)]| -> Vec<Value> {
            pairs
                .iter()
                .flat_map(|(n, v)| {
                    [
                        Value::BulkString(n.as_bytes().to_vec()),
                        Value::BulkString(v.as_bytes().to_vec()),
                    ]
                })
                .collect()
        };
        let good = [
            ("v", "1"),
            ("op", "op_1"),
            ("actor", "a"),
            ("run", "r"),
            ("outcome", "NOT_AUTHORIZED"),
            ("reason", "no"),
            ("started_at", "5"),
            ("finished_at", "6"),
        ];
        let record = decode("k", &flat(&good)).unwrap();
        assert_eq!(record.outcome, OutcomeCode::NotAuthorized);
        assert_eq!(record.approval_id, GivenApprovalId::Absent);
        let mut mixed = good.to_vec();
        mixed.extend([("approval", "apr_1"), ("approval_type", "number")]);
        assert!(decode("k", &flat(&mixed)).is_err());
        let mut typed = good.to_vec();
        typed.push(("approval_type", "string"));
        assert!(decode("k", &flat(&typed)).is_err());
        for (name, bad) in [
            ("v", "2"),
            ("outcome", "MAYBE"),
            ("started_at", "05"),
            ("op", "op.1"),
        ] {
            let mut pairs = good.to_vec();
            for pair in &mut pairs {
                if pair.0 == name {
                    pair.1 = bad;
                }
            }
            assert!(matches!(
                decode("k", &flat(&pairs)),
                Err(StoreError::Corrupt { .. })
            ));
        }
        let mut approved = good.to_vec();
        approved.push(("approver", "ops «ü» {x}"));
        assert_eq!(
            decode("k", &flat(&approved)).unwrap().approver_id,
            Some(ApproverId::new("ops «ü» {x}").unwrap())
        );
        let mut bad_approver = good.to_vec();
        bad_approver.push(("approver", ""));
        assert!(decode("k", &flat(&bad_approver)).is_err());
        let mut extra = good.to_vec();
        extra.push(("secret", "x"));
        assert!(decode("k", &flat(&extra)).is_err());
        assert!(decode("k", &flat(&good[1..])).is_err());
    }
}
