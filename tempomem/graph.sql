-- tempomem: typed-link traversal's SQL in tempomem's own connection (tempomem.graph): the
-- entities held in memory, the links the adjacency array is built from, and the calls of the
-- `tm_traverse` and `dependency_changes` macros of macros.sql.
--
-- Named parts, each starting at a line `-- @part <name>` (connection.sql_parts). Each part is
-- whole statements over the views and macros of revisions.sql and macros.sql (a connection of
-- mem.connect() has them), run as they stand, their values bound as `$name` parameters;
-- `entities` needs recall.sql's `index` first.

-- @part entities
-- The entities of one store version in memory, numbered as `_tm_links` numbers them.
CREATE OR REPLACE TABLE _tm_entity_cache AS SELECT n.* FROM _tm_entities_live AS n;
CREATE OR REPLACE VIEW _tm_entities AS SELECT n.* FROM _tm_entity_cache AS n;

-- @part links
-- Every possible link, by source entity: the rows of the in-memory adjacency array (CSR).
SELECT l.* FROM _tm_links AS l ORDER BY l.src_id

-- @part traverse
-- tm.graph.traverse: the hop multipliers as two lists ($types, $factors) made into a map.
SELECT * FROM tm_traverse($start, $depth, $valid_at, $believed_at,
                          multipliers := MAP(CAST($types AS VARCHAR[]), CAST($factors AS DOUBLE[])),
                          predicates := CAST($predicates AS VARCHAR[]))

-- @part dependency_changes
-- tm.graph.dependency_changes.
SELECT * FROM dependency_changes($root, $at_time, $lookback, depth := $depth, believed_at := $believed_at,
                                 predicates := CAST($predicates AS VARCHAR[]))
