-- countersign PostgreSQL store, schema version 5: standing grants, the
-- counted grants a person approves for a scope ("this, up to N times, until
-- T"). Upgrades version 4 in place by adding a table: no grant, fence,
-- proposal or operation row is touched.
--
-- The names in braces are filled in by the store with the configured schema
-- and table prefix, always as quoted identifiers.

-- One row per standing grant. Every column but the state columns (`state`,
-- `failed_attempts`, `used_by`, `given_back`) is written once, at issue, and
-- covered by `seal` (sha-256 over those columns); the store refuses a row
-- whose seal does not match as corrupt and never changes it. `run_gen` and
-- `actor_gen` are the generations of the run's and actor's fences when it
-- was issued: a standing grant whose fences moved on since was stopped, for
-- good (resuming clears only the fence's flag, never its generation).
CREATE TABLE {table:standing_grants} (
    id              text     NOT NULL PRIMARY KEY,
    format          smallint NOT NULL,
    seal            text     NOT NULL,
    actor_id        text     NOT NULL,
    run_id          text     NOT NULL,
    -- The canonical scope text, compared byte for byte with a use's.
    scope           text     NOT NULL,
    uses            bigint   NOT NULL,
    issued_at       bigint   NOT NULL,
    expires_at      bigint   NOT NULL,
    approver_id     text     NOT NULL,
    approved_at     bigint   NOT NULL,
    attempt_limit   bigint   NOT NULL,
    run_gen         bigint   NOT NULL,
    actor_gen       bigint   NOT NULL,
    -- 'active', 'revoked' or 'locked'; stopped is derived from the fences.
    state           text     NOT NULL,
    -- Uses presented with another actor, run or scope.
    failed_attempts bigint   NOT NULL,
    -- The attempts that hold a use, oldest first; spent when it holds
    -- `uses` of them.
    used_by         text[]   NOT NULL,
    -- The attempts whose use was given back: they never take one again.
    given_back      text[]   NOT NULL
);

-- The usable standing grants of one run, oldest first, walked in index
-- order (ids compared byte by byte, as the library orders them); ended ones
-- leave this index.
CREATE INDEX {name:standing_grants_usable} ON {table:standing_grants}
    (actor_id, run_id, issued_at, id COLLATE "C") WHERE state = 'active';
-- The purge walks standing grants by expiry.
CREATE INDEX {name:standing_grants_expiry} ON {table:standing_grants} (expires_at);
