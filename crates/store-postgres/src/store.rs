//! The store: its type, connecting (the pool, then the start-up checks and
//! the schema), its accessors, and the purge.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use countersign_approval_core::{StoreError, Timestamp};
use deadpool::managed::QueueMode;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{NoTls, Socket};

use crate::oplog::PostgresOperationLog;
use crate::options::{ConnectError, InvalidOptions, PostgresStoreOptions};
use crate::pool::{Shared, purge_batches};
use crate::schema::Names;
use crate::setup::probe_and_setup;

/// Grants, proposals and standing grants in PostgreSQL: one sealed row per
/// grant, per proposal and per standing grant, every atomic step one
/// statement (a stop, a decision on a proposal and a change of a standing
/// grant one short transaction). See the [crate docs](crate) for the
/// layout and guarantees.
///
/// Cheap to clone: clones share the pool.
#[derive(Clone)]
pub struct PostgresApprovalStore {
    /// The pool, names and statements, shared with the operation log.
    pub(crate) shared: Arc<Shared>,
    startup_warnings: Arc<Vec<String>>,
}

impl fmt::Debug for PostgresApprovalStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresApprovalStore")
            .field("grants", &self.shared.names.grants)
            .field("operations", &self.shared.names.operations)
            .field("statement_limit", &self.shared.statement_limit())
            .finish_non_exhaustive()
    }
}

impl PostgresApprovalStore {
    /// Connects without TLS (loopback or a trusted network), then sets up or
    /// checks the schema and probes the server; see
    /// [`connect_with_tls`](Self::connect_with_tls).
    pub async fn connect(options: PostgresStoreOptions) -> Result<Self, ConnectError> {
        Self::connect_with_tls(options, NoTls).await
    }

    /// Connects through the host's TLS connector, the `tokio-postgres`
    /// connector type of the host's choice (for example
    /// `postgres_native_tls::MakeTlsConnector` or
    /// `tokio_postgres_rustls::MakeRustlsConnect`); `sslmode` in the
    /// connection string says whether TLS is required. This bound is the
    /// only `tokio-postgres` type in this crate's API.
    ///
    /// Before answering it opens one connection and refuses a server that
    /// is a standby or not UTF-8 encoded ([`StoreError::Unsupported`]);
    /// creates or upgrades the schema
    /// ([`SchemaSetup::Apply`](crate::options::SchemaSetup::Apply), under an
    /// advisory lock so concurrent starts apply it once) or checks its
    /// version ([`SchemaSetup::Verify`](crate::options::SchemaSetup::Verify));
    /// and warns through `tracing` (and
    /// [`startup_warnings`](Self::startup_warnings)) when `fsync`,
    /// `synchronous_commit` or `full_page_writes` can lose commits.
    pub async fn connect_with_tls<T>(
        options: PostgresStoreOptions,
        tls: T,
    ) -> Result<Self, ConnectError>
    where
        T: MakeTlsConnect<Socket> + Clone + Sync + Send + 'static,
        T::Stream: Sync + Send,
        T::TlsConnect: Sync + Send,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        options.validate()?;
        let names = Names::new(&options)?;
        let manager = Manager::from_config(
            options.pg_config()?,
            tls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size)
            // The connection used last is the next one out: a single caller
            // keeps one warm server process instead of cycling through all
            // of them, and idle connections stay idle.
            .queue_mode(QueueMode::Lifo)
            .wait_timeout(Some(options.pool_wait_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| InvalidOptions::new(format!("cannot build the connection pool: {e}")))?;
        let shared = Shared::new(
            pool,
            names,
            options.statement_timeout + Duration::from_secs(1),
            options.notification_outbox,
        );
        let setup_limit = options.connect_timeout + options.statement_timeout;
        let warnings = tokio::time::timeout(setup_limit, probe_and_setup(&shared, &options))
            .await
            .map_err(|_| StoreError::Timeout {
                message: format!(
                    "start-up probe and schema setup: no answer within {} ms",
                    setup_limit.as_millis()
                ),
            })??;
        for warning in &warnings {
            tracing::warn!(target: "countersign_store_postgres", "{warning}");
        }
        Ok(PostgresApprovalStore {
            shared: Arc::new(shared),
            startup_warnings: Arc::new(warnings),
        })
    }

    /// What the start-up probe found risky (weak durability settings), in
    /// words; empty when nothing was.
    pub fn startup_warnings(&self) -> &[String] {
        &self.startup_warnings
    }

    /// The operation log in the same schema, sharing this store's pool.
    pub fn operation_log(&self) -> PostgresOperationLog {
        PostgresOperationLog::new(self.shared.clone())
    }

    /// The exact SQL of the consume statement (parameters: id, now in ms,
    /// attempt id, actor, run, URL, action digest), for operators to
    /// `EXPLAIN` or to replay with `pgbench -f`.
    pub fn consume_statement(&self) -> &str {
        &self.shared.statements.consume
    }

    /// The grants table, schema-qualified and quoted (`"countersign"."grants"`).
    pub fn grants_table(&self) -> &str {
        &self.shared.names.grants
    }

    /// The operations table, schema-qualified and quoted.
    pub fn operations_table(&self) -> &str {
        &self.shared.names.operations
    }

    /// The run fences table (one row per run of an actor: its stop
    /// generation and flag), schema-qualified and quoted.
    pub fn run_fences_table(&self) -> &str {
        &self.shared.names.run_fences
    }

    /// The actor fences table (one row per actor), schema-qualified and
    /// quoted.
    pub fn actor_fences_table(&self) -> &str {
        &self.shared.names.actor_fences
    }

    /// The proposals table (one row per proposal and its decision),
    /// schema-qualified and quoted.
    pub fn proposals_table(&self) -> &str {
        &self.shared.names.proposals
    }

    /// The standing grants table (one row per standing grant: its uses,
    /// the attempts holding them and the attempts given back),
    /// schema-qualified and quoted.
    pub fn standing_grants_table(&self) -> &str {
        &self.shared.names.standing_grants
    }

    /// The exact SQL of the statement that opens a decision's transaction
    /// (parameter: the proposal id): the shared locks of its run and actor,
    /// the proposal's row `FOR UPDATE`, its fences `FOR SHARE`. For
    /// operators to `EXPLAIN`.
    pub fn lock_proposal_statement(&self) -> &str {
        &self.shared.statements.lock_proposal
    }

    /// Deletes every grant, proposal and standing grant that stopped
    /// mattering more than `retention` before `now`, in batches of 10 000
    /// rows, each its own statement: first the grants for which
    /// `max(expires_at, consumed at) + retention` is at or before `now`,
    /// then the proposals for which `expires_at + retention` is, except an
    /// approved proposal whose grant is still kept (so a proposal is kept
    /// at least until it expires, and a decided one as long as its grant),
    /// then the standing grants for which `expires_at + retention` is (so
    /// one is kept at least until it expires). Returns how many rows were
    /// deleted, of the three kinds together. Meant for a scheduled job
    /// (see `docs/postgres.md`); safe to run from several hosts at once.
    ///
    /// A purged id is unknown afterwards, so keep `retention` at least as
    /// long as anyone may still present the grant, decide the proposal or
    /// use the standing grant; past its expiry a grant can never be
    /// consumed, a proposal decided, nor a standing grant used, anyway.
    pub async fn purge(&self, now: Timestamp, retention: Duration) -> Result<u64, StoreError> {
        let statements = &self.shared.statements;
        // Grants first: a proposal approved with a grant goes only once the
        // grant is gone.
        let kinds = [
            ("purging grants", &statements.purge),
            ("purging proposals", &statements.purge_proposals),
            ("purging standing grants", &statements.purge_standing),
        ];
        let mut total = 0;
        for (what, statement) in kinds {
            total += purge_batches(&self.shared, what, statement, now, retention).await?;
        }
        Ok(total)
    }
}
