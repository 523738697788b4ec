-- countersign PostgreSQL store, schema version 4: element-bound grants and
-- proposals. Upgrades version 3 in place by adding a nullable column to the
-- grants and the proposals: no row is rewritten.
--
-- The names in braces are filled in by the store with the configured schema
-- and table prefix, always as quoted identifiers.

-- The canonical JSON of the element the grant (or the proposal's page) is
-- bound to; null binds no element, as every row written before this version
-- does. Written once, like the columns the seal covers: a row's seal covers
-- its element after the other sealed columns when it is set, and covers
-- nothing more when it is null, so the rows already stored keep their seals
-- and read as bound to no element, which is what they were approved with.
-- A library older than this version computes seals without the element, so
-- it refuses an element-bound row as corrupt rather than reading it without
-- its element.
ALTER TABLE {table:grants} ADD COLUMN element text;
ALTER TABLE {table:proposals} ADD COLUMN element text;
