//! Connection, naming and behaviour options of the PostgreSQL store.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use countersign_approval_core::StoreError;

/// The schema used when none is set.
pub const DEFAULT_SCHEMA: &str = "countersign";
/// Connections the pool opens at most, when not set.
pub const DEFAULT_POOL_SIZE: usize = 16;
/// How long a call waits for a free pooled connection, when not set.
pub const DEFAULT_POOL_WAIT_TIMEOUT: Duration = Duration::from_secs(2);
/// The server-side limit on each statement, when not set.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long opening one connection may take, when not set.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The retention to give [`purge`](crate::PostgresApprovalStore::purge)
/// unless there is a reason for another: a grant is kept 15 minutes past
/// the moment it can no longer be consumed (`max(expires_at, consumed
/// at)`).
///
/// What the kept row is for: a consume retried after a lost reply answers
/// a replay, and an abandon still finds what to give back (Act's retries
/// and abandon timeout are seconds); a model that comes back within minutes
/// with a used or expired grant hears `Stale` (`APPROVAL_STALE`) rather
/// than `Unknown` (`APPROVAL_REQUIRED`). It is not an audit trail: the
/// operation log keeps that, purged on its own retention. The table holds
/// about grants per second × (grant lifetime + retention) rows.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(15 * 60);
/// The longest schema name or table prefix plus table name, in bytes
/// (PostgreSQL's identifier limit).
pub const MAX_IDENTIFIER_BYTES: usize = 63;
/// The longest table prefix, in bytes: the prefix plus the longest name the
/// store derives from it must fit [`MAX_IDENTIFIER_BYTES`].
pub const MAX_TABLE_PREFIX_BYTES: usize = MAX_IDENTIFIER_BYTES - LONGEST_DERIVED_NAME.len();

/// The longest object name the store appends to the table prefix.
pub(crate) const LONGEST_DERIVED_NAME: &str = "operations_operation_id";

/// Who creates and upgrades the store's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaSetup {
    /// The store creates the schema and tables, and applies newer versions,
    /// when it connects (the default). The role needs `CREATE` on the
    /// database (for the schema) or ownership of an existing schema.
    Apply,
    /// The host applies [`schema_sql`](crate::schema_sql) through its own
    /// migration tool; the store only checks on connect that the schema is
    /// at exactly the version it needs, and refuses to start otherwise.
    Verify,
}

/// How to reach PostgreSQL and how the store names and bounds its work.
///
/// ```
/// use std::time::Duration;
/// use countersign_store_postgres::{PostgresStoreOptions, SchemaSetup};
///
/// let options = PostgresStoreOptions::new("host=127.0.0.1 port=5433 user=app dbname=app")
///     .schema("myapp_countersign")
///     .table_prefix("prod_")
///     .pool_size(8)
///     .statement_timeout(Duration::from_millis(500))
///     .schema_setup(SchemaSetup::Verify);
/// assert!(options.validate().is_ok());
/// assert!(PostgresStoreOptions::new("host=x").schema("Robert\"; DROP").validate().is_err());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresStoreOptions {
    pub(crate) connection: String,
    pub(crate) schema: String,
    pub(crate) table_prefix: String,
    pub(crate) pool_size: usize,
    pub(crate) pool_wait_timeout: Duration,
    pub(crate) statement_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) schema_setup: SchemaSetup,
    pub(crate) notification_outbox: bool,
}

impl PostgresStoreOptions {
    /// Options for the server described by `connection`: a libpq-style
    /// connection string, either `key=value` pairs
    /// (`host=db port=5432 user=app dbname=app`) or a URL
    /// (`postgresql://app:secret@db:5432/app`). Session settings such as the
    /// default isolation level go in its `options` parameter
    /// (`options='-c default_transaction_isolation=serializable'`).
    pub fn new(connection: impl Into<String>) -> Self {
        PostgresStoreOptions {
            connection: connection.into(),
            schema: DEFAULT_SCHEMA.to_owned(),
            table_prefix: String::new(),
            pool_size: DEFAULT_POOL_SIZE,
            pool_wait_timeout: DEFAULT_POOL_WAIT_TIMEOUT,
            statement_timeout: DEFAULT_STATEMENT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            schema_setup: SchemaSetup::Apply,
            notification_outbox: false,
        }
    }

    /// The schema that holds every table and index of the store (default
    /// `countersign`): 1 to 63 bytes of `a-z`, `0-9` and `_`, not starting
    /// with a digit or `pg_`. It is always quoted in SQL.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// A prefix for the table and index names (default none): up to
    /// [`MAX_TABLE_PREFIX_BYTES`] bytes of `a-z`, `0-9` and `_`, not starting
    /// with a digit. Tables are `{prefix}grants`, `{prefix}proposals`,
    /// `{prefix}operations`, `{prefix}run_fences`, `{prefix}actor_fences`,
    /// `{prefix}standing_grants`, `{prefix}notifications` and
    /// `{prefix}schema_version`.
    pub fn table_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.table_prefix = prefix.into();
        self
    }

    /// Connections the pool keeps open at most (default 16, at least 1).
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size;
        self
    }

    /// How long a call waits for a free pooled connection (default 2 s);
    /// past it the call fails with [`StoreError::Timeout`] and nothing was
    /// sent to the server.
    pub fn pool_wait_timeout(mut self, timeout: Duration) -> Self {
        self.pool_wait_timeout = timeout;
        self
    }

    /// The limit on each statement (default 2 s, at least 1 ms), set as the
    /// session's `statement_timeout` so the server cancels the statement,
    /// and enforced on the client too (plus one second) for a server that
    /// stops answering. Past it the call fails with [`StoreError::Timeout`].
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.statement_timeout = timeout;
        self
    }

    /// The limit on opening one connection (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Who creates and upgrades the tables (default [`SchemaSetup::Apply`]).
    pub fn schema_setup(mut self, setup: SchemaSetup) -> Self {
        self.schema_setup = setup;
        self
    }

    /// Whether the store records notification events in its outbox, the
    /// `{prefix}notifications` table, in the same statement or transaction
    /// as the step each tells of (default off: an outbox nobody drains only
    /// grows). With it on, the store is a
    /// [`NotificationOutbox`](countersign_approval_core::NotificationOutbox)
    /// for a delivery worker to drain; with it off, every outbox call
    /// answers [`StoreError::Unsupported`](countersign_approval_core::StoreError).
    pub fn notification_outbox(mut self, on: bool) -> Self {
        self.notification_outbox = on;
        self
    }

    /// The configured schema name.
    pub fn schema_name(&self) -> &str {
        &self.schema
    }

    /// The configured table prefix.
    pub fn prefix(&self) -> &str {
        &self.table_prefix
    }

    /// Checks every option, including that the connection string parses;
    /// [`PostgresApprovalStore::connect`](crate::PostgresApprovalStore::connect)
    /// does this first.
    pub fn validate(&self) -> Result<(), InvalidOptions> {
        self.validate_names()?;
        if self.pool_size == 0 {
            return Err(InvalidOptions::new("pool size must be at least 1"));
        }
        if self.pool_wait_timeout.is_zero() {
            return Err(InvalidOptions::new(
                "pool wait timeout must be more than zero",
            ));
        }
        if self.statement_timeout.as_millis() == 0
            || self.statement_timeout.as_millis() > i32::MAX as u128
        {
            return Err(InvalidOptions::new(
                "statement timeout must be at least 1 ms and at most about 24 days",
            ));
        }
        if self.connect_timeout.is_zero() {
            return Err(InvalidOptions::new(
                "connect timeout must be more than zero",
            ));
        }
        self.pg_config().map(|_| ())
    }

    /// Checks the schema name and table prefix only.
    pub(crate) fn validate_names(&self) -> Result<(), InvalidOptions> {
        if !is_identifier(&self.schema) || self.schema.len() > MAX_IDENTIFIER_BYTES {
            return Err(InvalidOptions::new(format!(
                "schema `{}` must be 1 to 63 bytes of a-z, 0-9 and _, not starting with a digit",
                self.schema
            )));
        }
        if self.schema.starts_with("pg_") {
            return Err(InvalidOptions::new(format!(
                "schema `{}` must not start with `pg_`, which postgresql reserves",
                self.schema
            )));
        }
        let prefix_ok = self.table_prefix.is_empty()
            || (is_identifier(&self.table_prefix)
                && self.table_prefix.len() <= MAX_TABLE_PREFIX_BYTES);
        if !prefix_ok {
            return Err(InvalidOptions::new(format!(
                "table prefix `{}` must be at most {MAX_TABLE_PREFIX_BYTES} bytes of a-z, 0-9 and _, \
                 not starting with a digit",
                self.table_prefix
            )));
        }
        Ok(())
    }

    /// The driver's configuration: the connection string, the connect
    /// timeout, and the statement timeout appended to the session options.
    pub(crate) fn pg_config(&self) -> Result<tokio_postgres::Config, InvalidOptions> {
        let mut config = tokio_postgres::Config::from_str(&self.connection)
            .map_err(|e| InvalidOptions::new(format!("connection string does not parse: {e}")))?;
        if config.get_hosts().is_empty() {
            return Err(InvalidOptions::new("connection string names no host"));
        }
        let statement_timeout = format!(
            "-c statement_timeout={}",
            self.statement_timeout.as_millis()
        );
        let options = match config.get_options() {
            Some(existing) if !existing.trim().is_empty() => {
                format!("{existing} {statement_timeout}")
            }
            _ => statement_timeout,
        };
        config.options(options);
        config.connect_timeout(self.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("countersign");
        }
        Ok(config)
    }
}

/// Whether `name` is `[a-z_][a-z0-9_]*`: safe to quote and never folded.
fn is_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'_'))
        && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'))
}

/// Hides any password in a connection string (URL or `key=value` form).
fn redact(connection: &str) -> String {
    if let Some(scheme_end) = connection.find("://") {
        let rest = &connection[scheme_end + 3..];
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            let user = rest[..at].split(':').next().unwrap_or("");
            return format!(
                "{}://{user}:***@{}",
                &connection[..scheme_end],
                &rest[at + 1..]
            );
        }
        return connection.to_owned();
    }
    connection
        .split_whitespace()
        .map(|pair| {
            if pair.starts_with("password=") {
                "password=***"
            } else {
                pair
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl fmt::Debug for PostgresStoreOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStoreOptions")
            .field("connection", &redact(&self.connection))
            .field("schema", &self.schema)
            .field("table_prefix", &self.table_prefix)
            .field("pool_size", &self.pool_size)
            .field("pool_wait_timeout", &self.pool_wait_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("schema_setup", &self.schema_setup)
            .finish()
    }
}

/// An option is out of range or the connection string does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidOptions {
    message: String,
}

impl InvalidOptions {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        InvalidOptions {
            message: message.into(),
        }
    }
}

/// [`PostgresApprovalStore::connect`](crate::PostgresApprovalStore::connect) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The options are invalid; nothing was contacted.
    #[error("invalid postgres store options: {0}")]
    InvalidOptions(#[from] InvalidOptions),
    /// PostgreSQL could not be reached ([`StoreError::Unavailable`],
    /// [`StoreError::Timeout`]), or the server or schema cannot serve the
    /// store ([`StoreError::Unsupported`]: not UTF-8, a read-only standby,
    /// a schema version other than this library's, missing privileges).
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn base() -> PostgresStoreOptions {
        PostgresStoreOptions::new("host=127.0.0.1 port=1 user=u dbname=d")
    }

    #[test]
    fn defaults_are_valid() {
        assert!(base().validate().is_ok());
        assert_eq!(base().schema_name(), DEFAULT_SCHEMA);
        assert_eq!(base().prefix(), "");
        assert_eq!(MAX_TABLE_PREFIX_BYTES, 40);
    }

    #[test]
    fn names_are_plain_lower_case_identifiers() {
        for good in ["a", "_x", "countersign_2", &"s".repeat(63)] {
            assert!(base().schema(good).validate().is_ok(), "{good}");
        }
        for good in ["", "p_", "x1_", &"p".repeat(40)] {
            assert!(base().table_prefix(good).validate().is_ok(), "{good}");
        }
        for bad in [
            "",
            "Upper",
            "1abc",
            "a-b",
            "a b",
            "a\"b",
            "pg_catalog",
            "é",
            &"s".repeat(64),
        ] {
            assert!(base().schema(bad).validate().is_err(), "{bad:?}");
        }
        for bad in ["X", "1", "a;", "a\"", &"p".repeat(41)] {
            assert!(base().table_prefix(bad).validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_options_are_refused_in_lower_case() {
        let bad = [
            base().pool_size(0),
            base().pool_wait_timeout(Duration::ZERO),
            base().statement_timeout(Duration::ZERO),
            base().statement_timeout(Duration::from_micros(999)),
            base().connect_timeout(Duration::ZERO),
            PostgresStoreOptions::new("host=x port=notaport"),
            PostgresStoreOptions::new("user=u dbname=d"),
            base().schema("A"),
        ];
        for options in bad {
            let err = options.validate().expect_err("must be refused");
            let text = err.to_string();
            assert!(text.starts_with(|c: char| c.is_lowercase()), "{text}");
            assert!(!text.ends_with('.'), "{text}");
        }
    }

    #[test]
    fn the_statement_timeout_is_appended_to_the_session_options() {
        let config = PostgresStoreOptions::new(
            "host=h user=u options='-c default_transaction_isolation=serializable'",
        )
        .statement_timeout(Duration::from_millis(750))
        .pg_config()
        .unwrap();
        assert_eq!(
            config.get_options(),
            Some("-c default_transaction_isolation=serializable -c statement_timeout=750")
        );
        assert_eq!(config.get_application_name(), Some("countersign"));
        let config = base().pg_config().unwrap();
        assert_eq!(config.get_options(), Some("-c statement_timeout=2000"));
    }

    #[test]
    fn debug_hides_passwords() {
        for connection in [
            "postgresql://app:s3cret@db:5432/app",
            "host=db user=app password=s3cret dbname=app",
        ] {
            let text = format!("{:?}", PostgresStoreOptions::new(connection));
            assert!(!text.contains("s3cret"), "{text}");
            assert!(text.contains("db"), "{text}");
        }
    }
}
