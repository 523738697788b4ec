-- countersign PostgreSQL store, schema version 6: the notification outbox,
-- the events a delivery worker tells people of (a proposal made, expiring,
-- decided, expired; a run stopped). Upgrades version 5 in place by adding a
-- table: no grant, fence, proposal, standing grant or operation row is
-- touched.
--
-- The names in braces are filled in by the store with the configured schema
-- and table prefix, always as quoted identifiers.

-- One row per event, keyed by its id (derived from what happened, so the
-- same event recorded twice is one row). A store with its outbox on inserts
-- the row in the same statement or transaction as the step it tells of.
-- `seq` orders events of one instant as they were recorded. `attempt`
-- counts the claims, and `claimable_at` is when the event is next
-- claimable: when it is due, or when its claim lapses. A finished event
-- keeps its row (with `finished_at`) for a day, so that scheduling it again
-- adds nothing; the claims forget it after that.
CREATE TABLE {table:notifications} (
    event_id     text     NOT NULL PRIMARY KEY,
    seq          bigint   GENERATED ALWAYS AS IDENTITY,
    -- `proposal.created`, `proposal.expiring`, `proposal.decided`,
    -- `proposal.expired` or `run.stopped`.
    kind         text     NOT NULL,
    actor_id     text     NOT NULL,
    -- Null when every run of the actor was stopped.
    run_id       text,
    -- Null for a stop.
    proposal_id  text,
    occurred_at  bigint   NOT NULL,
    claimable_at bigint   NOT NULL,
    attempt      bigint   NOT NULL,
    finished_at  bigint
);

-- The claims walk the waiting events in the order they became claimable.
CREATE INDEX {name:notifications_due} ON {table:notifications} (claimable_at, seq)
    WHERE finished_at IS NULL;
-- The claims forget finished events by when they finished.
CREATE INDEX {name:notifications_done} ON {table:notifications} (finished_at)
    WHERE finished_at IS NOT NULL;
