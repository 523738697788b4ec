-- countersign PostgreSQL store, schema version 3: proposals, the actions a
-- model asked the host to approve, and the host's one decision on each.
-- Upgrades version 2 in place by adding a table: no grant, fence or
-- operation row is touched.
--
-- The names in braces are filled in by the store with the configured schema
-- and table prefix, always as quoted identifiers.

-- One row per proposal. Every column but the decision columns (`state`,
-- `approval_id`, `decided_by`, `decided_at`) is written once, at propose,
-- and covered by `seal` (sha-256 over those columns, the screenshot by its
-- own sha-256); the store refuses a row whose seal does not match as
-- corrupt and never decides on it. `run_gen` and `actor_gen` are the
-- generations of the run's and actor's fences when it was proposed: a
-- proposal whose fences moved on since was stopped, for good.
CREATE TABLE {table:proposals} (
    id              text     NOT NULL PRIMARY KEY,
    format          smallint NOT NULL,
    seal            text     NOT NULL,
    actor_id        text     NOT NULL,
    run_id          text     NOT NULL,
    url             text     NOT NULL,
    action          text     NOT NULL,
    action_digest   text     NOT NULL,
    proposed_at     bigint   NOT NULL,
    expires_at      bigint   NOT NULL,
    -- The page snapshot: the page columns and target_found all null (no
    -- snapshot) or all set; the screenshot is optional within a snapshot.
    page_session_id text,
    page_target_id  text,
    page_revision   text,
    screenshot_png  bytea,
    target_found    boolean,
    run_gen         bigint   NOT NULL,
    actor_gen       bigint   NOT NULL,
    -- 'pending', 'approved' (approval_id names the grant issued with the
    -- decision) or 'denied'; decided_at set once decided, decided_by when
    -- the host named who decided.
    state           text     NOT NULL,
    approval_id     text,
    decided_by      text,
    decided_at      bigint
);
-- A PNG is compressed already: store it out of line without trying again.
ALTER TABLE {table:proposals} ALTER COLUMN screenshot_png SET STORAGE EXTERNAL;

-- The pending proposals of one run, oldest first, walked in index order;
-- decided ones leave this index.
CREATE INDEX {name:proposals_pending} ON {table:proposals} (actor_id, run_id, proposed_at, id)
    WHERE state = 'pending';
-- The purge walks proposals by expiry.
CREATE INDEX {name:proposals_expires_at} ON {table:proposals} (expires_at);
