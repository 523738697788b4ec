-- countersign PostgreSQL store, schema version 1: grants and the operation log.
--
-- The names in braces are filled in by the store with the configured schema
-- and table prefix, always as quoted identifiers.

-- One row per grant. Every column but the state columns is written once, at
-- issue, and covered by `seal` (sha-256 over those columns); the store
-- refuses a row whose seal does not match as corrupt and never changes it.
CREATE TABLE {table:grants} (
    id                 text     NOT NULL PRIMARY KEY,
    format             smallint NOT NULL,
    seal               text     NOT NULL,
    actor_id           text     NOT NULL,
    run_id             text     NOT NULL,
    url                text     NOT NULL,
    action             text     NOT NULL,
    action_digest      text     NOT NULL,
    issued_at          bigint   NOT NULL,
    expires_at         bigint   NOT NULL,
    approver_note      text,
    page_revision      text,
    operation_id       text,
    session_id         text,
    -- 'active', 'revoked' or 'consumed'.
    state              text     NOT NULL,
    consumed_at        bigint,
    consumed_by        text,
    -- Attempts whose consume was given back; kept so they never count again.
    abandoned_attempts text[]   NOT NULL DEFAULT ARRAY[]::text[]
);

-- The purge walks grants by expiry; the consume goes by primary key.
CREATE INDEX {name:grants_expires_at} ON {table:grants} (expires_at);

-- One row per Act call, in the order they were recorded.
CREATE TABLE {table:operations} (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operation_id  text   NOT NULL,
    actor_id      text   NOT NULL,
    run_id        text   NOT NULL,
    -- The approval id the model gave: well formed (approval_id), malformed
    -- (its length and escaped prefix), or a JSON value of another type; all
    -- null when it gave none.
    approval_id   text,
    approval_id_bytes  bigint,
    approval_id_prefix text,
    approval_id_json_type text,
    url           text,
    action_digest text,
    outcome       text   NOT NULL,
    reason        text   NOT NULL,
    started_at    bigint NOT NULL,
    finished_at   bigint NOT NULL,
    CONSTRAINT {name:operations_operation_id} UNIQUE (operation_id)
);

-- The records of one run, in order; and the purge by age.
CREATE INDEX {name:operations_run} ON {table:operations} (run_id, seq);
CREATE INDEX {name:operations_finished_at} ON {table:operations} (finished_at);
