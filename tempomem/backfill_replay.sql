-- tempomem: a backfill's replay through the write path (tempomem.backfill.resolve): the
-- log's rows as the operations rounds.sql applies, chunk by chunk of whole keys.
--
-- Named parts, each starting at a line `-- @part <name>` (connection.sql_parts), each one
-- whole statement over `_bf_rows` (the rows that load, made by tempomem.backfill.checks).

-- @part chunks
-- The log's keys in the store's order, each with the chunk it is applied in: chunks of whole
-- keys, about $chunk operations (rows and their retractions) each.
CREATE OR REPLACE TEMP TABLE _tm_replay_keys AS
SELECT scope, subject, predicate,
       (sum(ops) OVER (ORDER BY scope, subject, predicate ROWS UNBOUNDED PRECEDING) - ops) // $chunk AS chunk
FROM (SELECT coalesce(scope, 'default') AS scope, subject, predicate, count(*) + count(retracted_at) AS ops
      FROM _bf_rows GROUP BY ALL);

-- @part bounds
-- The (scope, subject) of each chunk's first key but the first chunk's: the bounds of the key
-- ranges (write.key_ranges) the replay is applied in. A subject is never split: the range that
-- starts at its subject takes all its keys (and two chunks that start on one subject are one).
SELECT min((scope, subject)) AS lo FROM _tm_replay_keys WHERE chunk > 0 GROUP BY chunk;

-- @part chunk_ops
-- One chunk's operations (the keys of the range $from_scope, $from_subject to $to_scope,
-- $to_subject, tm__bf_in_range of backfill_write.sql): what rounds.sql reads as `_tm_ops_in`, in the columns
-- rounds.OP_COLUMNS and rounds.PAYLOAD_COLUMNS, with the defaults of writepath.new_assertion for
-- what a row leaves out; `__row` stays for reports. A row is named by `__row` and `recorded_at`
-- (an importer's source row that becomes two revisions gives two rows of one `__row`, at
-- distinct belief times; named by `__row` alone, each was applied twice). Every row is an
-- assertion at its recorded_at, and a row's retracted_at a correction, at that time, of the fact the assertion landed on;
-- operations are ordered by time, assertions before corrections at one instant, then by input
-- row, and numbered in that order from $offset (a key's operations are all in its chunk, so it
-- is their order in the whole log). A new fact's id is numbered by its row (`serial`), so that
-- the ids made at one instant sort by row across chunks, as those of one assert_many do by
-- place in the batch. The rows are found by their key's range, not joined to
-- their chunk: a join of every row of a 10M-row log to its key, and a window numbering all of
-- them, cost 13 s, about what applying a tenth of its chunks does.
CREATE OR REPLACE TEMP TABLE _tm_ops_in AS
WITH mine AS MATERIALIZED (
    SELECT r.* FROM _bf_rows AS r
    WHERE tm__bf_in_range(coalesce(r.scope, 'default'), r.subject, $from_scope, $from_subject, $to_scope, $to_subject)
),
events AS (
    -- part 0 is a row's assertion, part 1 its retraction: one scan of the rows makes both
    SELECT e.__row, e.recorded_at, e.part, CASE WHEN e.part = 1 THEN e.retracted_at ELSE e.recorded_at END AS commit_time
    FROM (SELECT r.__row, r.recorded_at, r.retracted_at,
                 unnest(CASE WHEN r.retracted_at IS NULL THEN [0] ELSE [0, 1] END) AS part
          FROM mine AS r) AS e
),
-- numbered on narrow rows, then joined to the rest: a window sorts every column it carries
ordered AS (
    SELECT e.*, $offset + row_number() OVER (ORDER BY e.commit_time, e.part, e.__row) AS op FROM events AS e
),
-- a retraction's target is the assertion of its row; only those assertions are hashed
targets AS (
    SELECT t.__row, t.recorded_at, t.op FROM ordered AS t
    SEMI JOIN ordered AS c ON c.part = 1 AND c.__row = t.__row AND c.recorded_at = t.recorded_at
    WHERE t.part = 0
)
SELECT o.op, CASE WHEN o.part = 0 THEN 'assert' ELSE 'correct' END AS kind, o.commit_time,
       coalesce(r.scope, 'default') AS scope, r.subject, r.predicate, r.object, r.valid_from, r.valid_to,
       coalesce(r.valid_from_inferred, false) AS valid_from_inferred, CAST(NULL AS TIMESTAMPTZ) AS reference_time,
       list_filter(coalesce(r.artifacts, []),
                   lambda a, i: list_position(coalesce(r.artifacts, []), a) = i) AS artifacts,
       CASE WHEN o.part = 1 THEN coalesce(r.retraction_reason, r.reason, 'retracted (backfill)')
            WHEN r.valid_to IS NOT NULL THEN r.reason END AS reason,
       t.op AS target_op,
       coalesce(r.text, concat_ws(' ', r.subject, r.predicate, r.object)) AS text,
       coalesce(r.source, 'user') AS source, coalesce(r.confidence, 0.9) AS confidence,
       CAST(NULL AS VARCHAR) AS origin, r.attributes, r.embedding,
       coalesce(r.link_type, 'entity') AS link_type, coalesce(r.weight, 1.0) AS weight,
       2 * o.__row + o.part AS serial, r.__row
FROM ordered AS o
JOIN mine AS r ON r.__row = o.__row AND r.recorded_at = o.recorded_at
LEFT JOIN targets AS t ON o.part = 1 AND t.__row = o.__row AND t.recorded_at = o.recorded_at;

-- @part refused_rows
-- The input rows of a chunk's refused operations (`_tm_refused_ops`, registered by the
-- caller), with what the report says of them.
SELECT o.__row AS "row", o.kind AS op_kind, f.kind, f.fact_id, o.object,
       strftime(o.commit_time, '%Y-%m-%dT%H:%M:%S.%f+00:00') AS recorded_at_text,
       f.conflict_ids, f.conflict_objects
FROM _tm_refused_ops AS f JOIN _tm_ops_in AS o ON o.op = f.op;
