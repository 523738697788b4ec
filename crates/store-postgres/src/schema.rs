//! The store's schema: the versioned SQL files, how names are filled in,
//! and applying or checking them.

use sha2::{Digest, Sha256};

use crate::options::{InvalidOptions, PostgresStoreOptions};
use crate::record;

/// The schema version this library reads and writes.
pub const SCHEMA_VERSION: i32 = 6;

/// One step of the schema: its version, what it does, and its SQL with
/// placeholders.
pub(crate) struct Migration {
    pub(crate) version: i32,
    pub(crate) description: &'static str,
    pub(crate) sql: &'static str,
}

/// Every step, oldest first; the last one's version is [`SCHEMA_VERSION`].
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "grants and operations",
        sql: include_str!("sql/0001_grants_and_operations.sql"),
    },
    Migration {
        version: 2,
        description: "host controls: fences, attempt cap, approver",
        sql: include_str!("sql/0002_host_controls.sql"),
    },
    Migration {
        version: 3,
        description: "proposals",
        sql: include_str!("sql/0003_proposals.sql"),
    },
    Migration {
        version: 4,
        description: "element-bound grants and proposals",
        sql: include_str!("sql/0004_element.sql"),
    },
    Migration {
        version: 5,
        description: "standing grants",
        sql: include_str!("sql/0005_standing_grants.sql"),
    },
    Migration {
        version: 6,
        description: "notification outbox",
        sql: include_str!("sql/0006_notifications.sql"),
    },
];

/// The version table, created before any step.
const VERSION_TABLE_SQL: &str = "CREATE TABLE IF NOT EXISTS {table:schema_version} (
    version     integer     NOT NULL PRIMARY KEY,
    description text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);
";

/// The configured names, quoted, ready to paste into SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Names {
    schema: String,
    prefix: String,
    /// `"schema"."{prefix}grants"`.
    pub(crate) grants: String,
    /// `"schema"."{prefix}operations"`.
    pub(crate) operations: String,
    /// `"schema"."{prefix}run_fences"`.
    pub(crate) run_fences: String,
    /// `"schema"."{prefix}actor_fences"`.
    pub(crate) actor_fences: String,
    /// `"schema"."{prefix}proposals"`.
    pub(crate) proposals: String,
    /// `"schema"."{prefix}standing_grants"`.
    pub(crate) standing_grants: String,
    /// `"schema"."{prefix}notifications"`: the notification outbox.
    pub(crate) notifications: String,
    /// `"schema"."{prefix}schema_version"`.
    pub(crate) schema_version: String,
}

impl Names {
    /// The names of `options`, which must already be valid.
    pub(crate) fn new(options: &PostgresStoreOptions) -> Result<Names, InvalidOptions> {
        options.validate_names()?;
        let schema = options.schema.clone();
        let prefix = options.table_prefix.clone();
        let table = |name: &str| format!("\"{schema}\".\"{prefix}{name}\"");
        Ok(Names {
            grants: table("grants"),
            operations: table("operations"),
            run_fences: table("run_fences"),
            actor_fences: table("actor_fences"),
            proposals: table("proposals"),
            standing_grants: table("standing_grants"),
            notifications: table("notifications"),
            schema_version: table("schema_version"),
            schema,
            prefix,
        })
    }

    /// The text that keys this store's advisory locks on runs and actors
    /// (see `Statements`): the schema and the prefix, so two stores in one
    /// database never wait on each other.
    pub(crate) fn lock_namespace(&self) -> String {
        format!("countersign {}.{}", self.schema, self.prefix)
    }

    /// `sql` with `{schema}`, `{table:NAME}`, `{name:NAME}`, and the seal
    /// expressions `{seal:1}` (a format 1 row's, as schema version 1 sealed
    /// it) and `{seal:2}` (the format 2 seal of a format 1 row being
    /// converted) filled in.
    pub(crate) fn render(&self, sql: &str) -> String {
        let mut out = String::with_capacity(sql.len() + 256);
        let mut rest = sql;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let Some(close) = after.find('}') else {
                out.push_str(&rest[open..]);
                return out;
            };
            let token = &after[..close];
            match token.split_once(':') {
                None if token == "schema" => out.push_str(&format!("\"{}\"", self.schema)),
                Some(("table", name)) => {
                    out.push_str(&format!("\"{}\".\"{}{name}\"", self.schema, self.prefix))
                }
                Some(("name", name)) => out.push_str(&format!("\"{}{name}\"", self.prefix)),
                Some(("seal", "1")) => out.push_str(&record::seal_sql_over(&record::SEALED_SQL_V1)),
                Some(("seal", "2")) => {
                    // The row still reads format 1 while its format 2 seal
                    // is computed: the format value is the one being set.
                    let mut values = record::SEALED_SQL;
                    values[0] = "'2'::text";
                    out.push_str(&record::seal_sql_over(&values))
                }
                _ => out.push_str(&rest[open..open + close + 2]),
            }
            rest = &after[close + 1..];
        }
        out.push_str(rest);
        out
    }

    /// The key of the advisory lock that serialises schema setup in this
    /// schema (whatever the table prefix, so two prefixes never race to
    /// create the schema itself).
    pub(crate) fn setup_lock_key(&self) -> i64 {
        let digest = Sha256::digest(format!("countersign schema setup {}", self.schema));
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        i64::from_be_bytes(first)
    }

    /// The SQL that creates the schema, the version table, and every step
    /// after `from_version`, recording each step in the version table.
    pub(crate) fn setup_sql(&self, from_version: i32) -> String {
        let mut sql = self.render("CREATE SCHEMA IF NOT EXISTS {schema};\n");
        sql.push_str(&self.render(VERSION_TABLE_SQL));
        for step in MIGRATIONS.iter().filter(|m| m.version > from_version) {
            sql.push('\n');
            sql.push_str(&self.render(step.sql));
            sql.push_str(&format!(
                "\nINSERT INTO {} (version, description) VALUES ({}, '{}');\n",
                self.schema_version, step.version, step.description
            ));
        }
        sql
    }
}

/// The complete SQL that creates the store's schema at [`SCHEMA_VERSION`]
/// for `options`' schema name and table prefix, for hosts that apply schema
/// changes through their own migration tool (then connect with
/// [`SchemaSetup::Verify`](crate::SchemaSetup::Verify)).
///
/// Run it in one transaction. It creates only the schema (if missing) and
/// objects inside it, and records the version in `{prefix}schema_version`.
///
/// ```
/// use countersign_store_postgres::{PostgresStoreOptions, schema_sql};
///
/// let sql = schema_sql(&PostgresStoreOptions::new("host=db").schema("app_grants"))?;
/// assert!(sql.starts_with("CREATE SCHEMA IF NOT EXISTS \"app_grants\";"));
/// assert!(sql.contains("CREATE TABLE \"app_grants\".\"grants\" ("));
/// # Ok::<(), countersign_store_postgres::InvalidOptions>(())
/// ```
pub fn schema_sql(options: &PostgresStoreOptions) -> Result<String, InvalidOptions> {
    Ok(Names::new(options)?.setup_sql(0))
}

/// The SQL that upgrades a schema at `from_version` (as recorded in
/// `{prefix}schema_version`) to [`SCHEMA_VERSION`], for hosts whose own
/// migration tool applies schema changes ([`SchemaSetup::Verify`](crate::SchemaSetup::Verify)).
/// Empty of steps when `from_version` is already current; [`schema_sql`] is
/// this from version 0.
///
/// Run it in one transaction. From version 1, stop every host on the older
/// library first (the version 2 step converts every grant row); the
/// version 3 step only adds the proposals table, the version 4 step only
/// adds the nullable `element` columns, the version 5 step only adds
/// the standing grants table and the version 6 step only adds the
/// notification outbox's table, so hosts already running the previous
/// library keep working while any of them is applied (see
/// `docs/postgres.md`).
///
/// ```
/// use countersign_store_postgres::{PostgresStoreOptions, schema_upgrade_sql};
///
/// let sql = schema_upgrade_sql(&PostgresStoreOptions::new("host=db"), 1)?;
/// assert!(sql.contains("CREATE TABLE \"countersign\".\"run_fences\" ("));
/// assert!(!sql.contains("CREATE TABLE \"countersign\".\"grants\" ("));
/// let sql = schema_upgrade_sql(&PostgresStoreOptions::new("host=db"), 2)?;
/// assert!(sql.contains("CREATE TABLE \"countersign\".\"proposals\" ("));
/// assert!(!sql.contains("CREATE TABLE \"countersign\".\"run_fences\" ("));
/// let sql = schema_upgrade_sql(&PostgresStoreOptions::new("host=db"), 4)?;
/// assert!(sql.contains("CREATE TABLE \"countersign\".\"standing_grants\" ("));
/// assert!(!sql.contains("CREATE TABLE \"countersign\".\"proposals\" ("));
/// # Ok::<(), countersign_store_postgres::InvalidOptions>(())
/// ```
pub fn schema_upgrade_sql(
    options: &PostgresStoreOptions,
    from_version: i32,
) -> Result<String, InvalidOptions> {
    Ok(Names::new(options)?.setup_sql(from_version))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn every_placeholder_is_filled_and_every_name_is_quoted_inside_the_schema() {
        let options = PostgresStoreOptions::new("host=h")
            .schema("s1")
            .table_prefix("p_");
        let sql = schema_sql(&options).unwrap();
        assert!(!sql.contains('{') && !sql.contains('}'), "{sql}");
        for created in sql
            .lines()
            .filter(|l| l.starts_with("CREATE"))
            .map(str::trim)
        {
            let ok = created == "CREATE SCHEMA IF NOT EXISTS \"s1\";"
                || created.starts_with("CREATE TABLE IF NOT EXISTS \"s1\".\"p_")
                || created.starts_with("CREATE TABLE \"s1\".\"p_")
                || (created.starts_with("CREATE INDEX \"p_")
                    && created.contains(" ON \"s1\".\"p_"));
            assert!(ok, "creates outside the schema or unquoted: {created}");
        }
        for altered in sql.lines().filter(|l| {
            l.starts_with("ALTER") || l.starts_with("INSERT") || l.starts_with("UPDATE")
        }) {
            assert!(
                altered.contains(" \"s1\".\"p_"),
                "outside the schema: {altered}"
            );
        }
        assert_eq!(sql.matches("CREATE TABLE").count(), 8);
        assert_eq!(sql.matches("CREATE INDEX").count(), 10);
        assert!(sql.contains("INSERT INTO \"s1\".\"p_schema_version\" (version, description) VALUES (1, 'grants and operations');"));
        assert!(sql.contains("INSERT INTO \"s1\".\"p_schema_version\" (version, description) VALUES (2, 'host controls: fences, attempt cap, approver');"));
        assert!(sql.contains("INSERT INTO \"s1\".\"p_schema_version\" (version, description) VALUES (3, 'proposals');"));
        assert!(sql.contains("INSERT INTO \"s1\".\"p_schema_version\" (version, description) VALUES (4, 'element-bound grants and proposals');"));
        assert!(sql.contains("INSERT INTO \"s1\".\"p_schema_version\" (version, description) VALUES (5, 'standing grants');"));
        assert!(sql.contains("INSERT INTO \"s1\".\"p_schema_version\" (version, description) VALUES (6, 'notification outbox');"));
        assert!(
            sql.contains("encode(sha256("),
            "the seal placeholders are filled"
        );
    }

    #[test]
    fn versions_are_consecutive_and_end_at_the_current_one() {
        for (n, step) in MIGRATIONS.iter().enumerate() {
            assert_eq!(step.version, n as i32 + 1);
        }
        assert_eq!(MIGRATIONS.last().unwrap().version, SCHEMA_VERSION);
        let names = Names::new(&PostgresStoreOptions::new("host=h")).unwrap();
        assert!(!names.setup_sql(SCHEMA_VERSION).contains("CREATE TABLE \""));
        let upgrade = names.setup_sql(1);
        assert!(!upgrade.contains("CREATE TABLE \"countersign\".\"grants\""));
        assert!(upgrade.contains("ALTER TABLE \"countersign\".\"grants\""));
        assert!(upgrade.contains("VALUES (2, "));
        assert!(!upgrade.contains("VALUES (1, "));
        // From version 2 only the proposals step runs: nothing else changes.
        let upgrade = names.setup_sql(2);
        assert!(upgrade.contains("CREATE TABLE \"countersign\".\"proposals\""));
        assert!(!upgrade.contains("ADD COLUMN approver_id"));
        assert!(!upgrade.contains("UPDATE "));
        assert!(upgrade.contains("VALUES (3, "));
        assert!(!upgrade.contains("VALUES (2, "));
        // From version 3 the element columns are added (and then the
        // standing grants table created): no row is rewritten.
        let upgrade = names.setup_sql(3);
        assert_eq!(upgrade.matches("CREATE TABLE \"").count(), 2);
        assert!(upgrade.contains("CREATE TABLE \"countersign\".\"standing_grants\" ("));
        assert!(
            upgrade.contains("ALTER TABLE \"countersign\".\"grants\" ADD COLUMN element text;")
        );
        assert!(
            upgrade.contains("ALTER TABLE \"countersign\".\"proposals\" ADD COLUMN element text;")
        );
        assert!(!upgrade.contains("UPDATE "));
        assert!(upgrade.contains("VALUES (4, "));
        assert!(!upgrade.contains("VALUES (3, "));
        // From version 4 only the standing grants and the notifications
        // tables are created: no other table is altered and no row is
        // rewritten.
        let upgrade = names.setup_sql(4);
        assert_eq!(upgrade.matches("CREATE TABLE \"").count(), 2);
        assert!(upgrade.contains("CREATE TABLE \"countersign\".\"standing_grants\" ("));
        assert!(!upgrade.contains("ALTER TABLE"));
        assert!(!upgrade.contains("UPDATE "));
        assert!(upgrade.contains("VALUES (5, "));
        assert!(!upgrade.contains("VALUES (4, "));
        // From version 5 only the notifications table is created.
        let upgrade = names.setup_sql(5);
        assert_eq!(upgrade.matches("CREATE TABLE \"").count(), 1);
        assert!(upgrade.contains("CREATE TABLE \"countersign\".\"notifications\" ("));
        assert!(!upgrade.contains("ALTER TABLE"));
        assert!(!upgrade.contains("UPDATE "));
        assert!(upgrade.contains("VALUES (6, "));
        assert!(!upgrade.contains("VALUES (5, "));
    }

    #[test]
    fn the_conversion_seals_differ_only_in_the_format_and_the_new_columns() {
        let names = Names::new(&PostgresStoreOptions::new("host=h")).unwrap();
        let v1 = names.render("{seal:1}");
        let v2 = names.render("{seal:2}");
        assert_eq!(v1.matches("octet_length(").count(), 13);
        assert_eq!(v2.matches("octet_length(").count(), record::SEALED);
        assert!(v1.contains("octet_length(format::text)"));
        assert!(v2.contains("octet_length('2'::text)"));
        assert!(!v2.contains("format::text"));
        // The conversion seal is the format 2 seal with the format filled in
        // (of a row without an element: the column comes with version 4).
        assert_eq!(
            v2.replace("'2'::text", "format::text"),
            record::seal_sql_over(&record::SEALED_SQL)
        );
    }

    #[test]
    fn derived_names_fit_the_identifier_limit() {
        let options = PostgresStoreOptions::new("host=h")
            .table_prefix("p".repeat(crate::MAX_TABLE_PREFIX_BYTES));
        let names = Names::new(&options).unwrap();
        let sql = names.setup_sql(0);
        for quoted in sql.split('"').skip(1).step_by(2) {
            assert!(quoted.len() <= crate::MAX_IDENTIFIER_BYTES, "{quoted}");
        }
        assert!(sql.contains(crate::options::LONGEST_DERIVED_NAME));
    }

    #[test]
    fn setup_locks_differ_by_schema_only() {
        let a = Names::new(&PostgresStoreOptions::new("host=h")).unwrap();
        let b = Names::new(&PostgresStoreOptions::new("host=h").table_prefix("b_")).unwrap();
        let c = Names::new(&PostgresStoreOptions::new("host=h").schema("other")).unwrap();
        assert_eq!(a.setup_lock_key(), b.setup_lock_key());
        assert_ne!(a.setup_lock_key(), c.setup_lock_key());
    }
}
