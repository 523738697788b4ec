//! The start-up checks and the schema: on a first connection, refuse a
//! server the store cannot keep its guarantees on, warn about settings
//! that can lose commits, then apply or verify the schema.

use countersign_approval_core::StoreError;

use crate::error::pg_error;
use crate::options::{PostgresStoreOptions, SchemaSetup};
use crate::pool::Shared;
use crate::schema::SCHEMA_VERSION;

/// The oldest server the schema runs on (`sha256()` came in 11).
const MIN_SERVER_VERSION_NUM: i32 = 110_000;

/// Opens a first connection, checks the server, and sets up or checks the schema.
pub(crate) async fn probe_and_setup(
    shared: &Shared,
    options: &PostgresStoreOptions,
) -> Result<Vec<String>, StoreError> {
    let mut client = shared.client().await?;
    let what = "start-up probe";
    let row = client
        .query_one(
            "SELECT current_setting('server_encoding'), pg_is_in_recovery(), \
             current_setting('server_version_num')::int, current_setting('fsync'), \
             current_setting('synchronous_commit'), current_setting('full_page_writes')",
            &[],
        )
        .await
        .map_err(|e| pg_error(what, &e))?;
    let setting = |i: usize| row.try_get::<_, String>(i).unwrap_or_default();
    let encoding = setting(0);
    if encoding != "UTF8" {
        return Err(StoreError::Unsupported {
            message: format!("the database encoding is `{encoding}`; the store needs UTF8"),
        });
    }
    if row.try_get::<_, bool>(1).unwrap_or(true) {
        return Err(StoreError::Unsupported {
            message: "the server is a standby in recovery; grants must go to the primary"
                .to_owned(),
        });
    }
    let version: i32 = row.try_get(2).unwrap_or(0);
    if version < MIN_SERVER_VERSION_NUM {
        return Err(StoreError::Unsupported {
            message: format!("postgresql {version} is too old; the store needs 11 or later"),
        });
    }
    let mut warnings = Vec::new();
    if setting(3) != "on" {
        warnings.push(
            "fsync is off: a crash of the server host can lose or corrupt committed writes, and \
             a grant consumed before it may become usable again"
                .to_owned(),
        );
    }
    let synchronous_commit = setting(4);
    if synchronous_commit == "off" {
        warnings.push(
            "synchronous_commit is off: a crash of the server may lose the last commits (up to \
             three times wal_writer_delay), and a grant consumed in them becomes usable again"
                .to_owned(),
        );
    }
    if setting(5) != "on" {
        warnings.push(
            "full_page_writes is off: a crash during a page write can corrupt the grants table"
                .to_owned(),
        );
    }

    let names = &shared.names;
    let version_table = names.schema_version.clone();
    match options.schema_setup {
        SchemaSetup::Apply => {
            let tx = client
                .transaction()
                .await
                .map_err(|e| pg_error("schema setup", &e))?;
            tx.query(
                "SELECT pg_advisory_xact_lock($1)",
                &[&names.setup_lock_key()],
            )
            .await
            .map_err(|e| pg_error("schema setup: taking the setup lock", &e))?;
            let current = schema_version(&tx, &version_table).await?.unwrap_or(0);
            if current > SCHEMA_VERSION {
                return Err(newer_schema(Some(current)));
            }
            if current < SCHEMA_VERSION {
                tx.batch_execute(&names.setup_sql(current))
                    .await
                    .map_err(|e| pg_error("schema setup: applying the schema", &e))?;
            }
            tx.commit()
                .await
                .map_err(|e| pg_error("schema setup: committing", &e))?;
        }
        SchemaSetup::Verify => {
            let current = schema_version(&client, &version_table).await?;
            match current {
                Some(v) if v == SCHEMA_VERSION => {}
                Some(v) if v > SCHEMA_VERSION => return Err(newer_schema(Some(v))),
                other => {
                    return Err(StoreError::Unsupported {
                        message: format!(
                            "the schema is at version {} but this library needs {SCHEMA_VERSION}: \
                             apply the sql from `schema_sql` first",
                            other.unwrap_or(0)
                        ),
                    });
                }
            }
        }
    }
    Ok(warnings)
}

/// The refusal of a schema newer than this library knows.
fn newer_schema(current: Option<i32>) -> StoreError {
    StoreError::Unsupported {
        message: format!(
            "the schema is at version {} but this library knows only up to {SCHEMA_VERSION}: \
             upgrade the library",
            current.unwrap_or(0)
        ),
    }
}

/// The highest applied version, or `None` when there is no version table.
async fn schema_version<C: deadpool_postgres::GenericClient>(
    client: &C,
    version_table: &str,
) -> Result<Option<i32>, StoreError> {
    let what = "reading the schema version";
    let exists = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&version_table])
        .await
        .map_err(|e| pg_error(what, &e))?
        .try_get::<_, bool>(0)
        .unwrap_or(false);
    if !exists {
        return Ok(None);
    }
    let row = client
        .query_one(
            &format!("SELECT coalesce(max(version), 0) FROM {version_table}"),
            &[],
        )
        .await
        .map_err(|e| pg_error(what, &e))?;
    row.try_get::<_, i32>(0)
        .map(Some)
        .map_err(|e| StoreError::unavailable(format!("{what}: {e}")))
}
