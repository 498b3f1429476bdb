-- tempomem: recall's SQL in tempomem's own connection (tempomem.recall), beside the `recall`
-- macro of macros.sql that it serves: the embeddings still to fill, the vectors of a data file,
-- and the in-memory stand-ins that give the macro the same rows faster.
--
-- Named parts, each starting at a line `-- @part <name>` (connection.sql_parts). Each part is
-- whole statements over the views and macros of revisions.sql and macros.sql (a connection of
-- mem.connect() has them), run as they stand, their values bound as `$name` parameters.

-- @part missing
-- The revisions that need an embedding: they have a text, none yet, and are not erased.
SELECT e.fact_id, e.revision, e.text FROM _tm_events AS e
WHERE e.embedding IS NULL AND e.status <> 'erased' AND e.text IS NOT NULL

-- @part file_vectors
-- The embeddings of one data file, $f, which recall holds in memory per file.
SELECT p.fact_id, p.revision, p.embedding FROM read_parquet($f) AS p WHERE p.embedding IS NOT NULL

-- @part missing_per_file
-- Per data file of $files, the rows still lacking an embedding (as `missing` counts them): a
-- file without any is left out of the answer.
SELECT p.filename, count(*) FROM read_parquet($files, filename = true) AS p
WHERE p.embedding IS NULL AND p.status <> 'erased' AND p.text IS NOT NULL GROUP BY ALL

-- @part scores
-- tm_scores reads the similarities NumPy computed (registered as `_tm_query_scores` before each
-- recall) instead of computing cosines in SQL; `_tm_query_scores` must exist when this runs,
-- since DuckDB binds a table macro when it is created.
CREATE OR REPLACE MACRO tm_scores(query_vec) AS TABLE
SELECT s.fact_id, s.revision, s.score FROM _tm_query_scores AS s

-- @part index
-- Every revision without its vector, held in memory (rebuilt when the store version changes):
-- the time slice recall and traversal filter, and the rows an answer returns.
CREATE OR REPLACE TABLE _tm_index_cache AS SELECT p.* EXCLUDE (embedding) FROM _tm_revisions_plus AS p;
CREATE OR REPLACE VIEW _tm_index AS SELECT i.rowid AS row_key, i.* FROM _tm_index_cache AS i;
CREATE OR REPLACE VIEW _tm_rows AS
SELECT i.rowid AS row_key, i.* EXCLUDE (believed_until, object_is_entity), CAST(NULL AS FLOAT[]) AS embedding
FROM _tm_index_cache AS i;

-- @part recall
-- The k best of the time slice, with the trusted policy of the query forms (tempomem.trust).
SELECT * FROM recall(CAST($q AS FLOAT[]), $k, $valid_at, $believed_at,
                     subject := $subject, predicate := $predicate,
                     sources := CAST($sources AS VARCHAR[]), min_confidence := $min_confidence)
