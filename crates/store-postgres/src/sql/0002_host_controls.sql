-- countersign PostgreSQL store, schema version 2: host controls over live
-- grants (stopping a run or an actor, the failed-attempt cap, who approved).
-- Upgrades version 1 in place, in the same transaction as the rest of the
-- setup.
--
-- The names in braces are filled in by the store with the configured schema
-- and table prefix, always as quoted identifiers; `seal:1` and `seal:2` are
-- the expressions that compute a row's format-1 and format-2 seal.

-- Who approved the grant and when (both null, or both set), how many
-- mismatched presentations lock it, and the generations of its run's and
-- its actor's fences when it was issued: all written once, at issue, and
-- covered by the seal. `failed_attempts` counts mismatched presentations
-- and changes with the state; it is not sealed.
ALTER TABLE {table:grants}
    ADD COLUMN approver_id     text,
    ADD COLUMN approved_at     bigint,
    ADD COLUMN attempt_limit   bigint NOT NULL DEFAULT 5,
    ADD COLUMN failed_attempts bigint NOT NULL DEFAULT 0,
    ADD COLUMN run_gen         bigint NOT NULL DEFAULT 0,
    ADD COLUMN actor_gen       bigint NOT NULL DEFAULT 0;
-- Every grant written from now on sets them explicitly.
ALTER TABLE {table:grants}
    ALTER COLUMN attempt_limit DROP DEFAULT,
    ALTER COLUMN run_gen DROP DEFAULT,
    ALTER COLUMN actor_gen DROP DEFAULT;

-- One fence per run (of one actor) and one per actor. `gen` grows by one at
-- every stop: a grant whose recorded generation differs from its fence's is
-- stopped for good. `stopped` refuses new grants until the host resumes.
-- A fence row exists for every grant's run and actor (the issue statement
-- creates it), so consumes can lock it.
CREATE TABLE {table:run_fences} (
    actor_id text    NOT NULL,
    run_id   text    NOT NULL,
    gen      bigint  NOT NULL DEFAULT 0,
    stopped  boolean NOT NULL DEFAULT false,
    PRIMARY KEY (actor_id, run_id)
);
CREATE TABLE {table:actor_fences} (
    actor_id text    NOT NULL PRIMARY KEY,
    gen      bigint  NOT NULL DEFAULT 0,
    stopped  boolean NOT NULL DEFAULT false
);

-- The fences of the grants already stored, at generation 0.
INSERT INTO {table:run_fences} (actor_id, run_id)
    SELECT DISTINCT actor_id, run_id FROM {table:grants};
INSERT INTO {table:actor_fences} (actor_id)
    SELECT DISTINCT actor_id FROM {table:grants};

-- Format 1 rows whose seal holds become format 2, sealed over the new
-- columns too (no approver, the default attempt limit of 5, generation 0).
-- A row whose format-1 seal does not hold stays format 1: the store refuses
-- it as corrupt, as it did before the upgrade.
UPDATE {table:grants} SET format = 2, seal = {seal:2}
    WHERE format = 1 AND seal = {seal:1};

-- Stopping a run or an actor counts its usable grants.
CREATE INDEX {name:grants_actor_run} ON {table:grants} (actor_id, run_id);

-- The approver of the grant an Act call used.
ALTER TABLE {table:operations} ADD COLUMN approver_id text;
