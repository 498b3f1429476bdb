-- tempomem: the report's counts and the red flags of SPEC §9 for a backfill
-- (tempomem.backfill.flags), overlapping_values among them.
--
-- Named parts, each starting at a line `-- @part <name>` (connection.sql_parts), each one
-- whole statement over the load's tables: `_bf_checked` (every input row, parsed, with its
-- first bad field) and `_bf_rows` (the rows that load), made by tempomem.backfill.checks.

-- @part counts
-- The report's counts and the flags' counts, as one row; counts are of input rows.
CREATE TEMP TABLE _bf_counts AS
WITH checked AS (
    SELECT count(*) FILTER (WHERE _bad_field IS NULL) AS ok,
           count(*) FILTER (WHERE recorded_at > $now OR retracted_at > $now) AS future_n,
           min(__row) FILTER (WHERE recorded_at > $now OR retracted_at > $now) AS future_row,
           count(*) FILTER (WHERE retracted_at < recorded_at) AS before_n,
           min(__row) FILTER (WHERE retracted_at < recorded_at) AS before_row,
           count(*) FILTER (WHERE _unreadable) AS unreadable_n, min(__row) FILTER (WHERE _unreadable) AS unreadable_row
    FROM _bf_checked
),
loaded AS (
    SELECT count(*) AS loaded, count(*) FILTER (WHERE _fixed) AS fixed, min(__row) FILTER (WHERE _fixed) AS fixed_row,
           count(*) FILTER (WHERE _no_start) AS no_start_n, min(__row) FILTER (WHERE _no_start) AS no_start_row,
           -- Candidates for an instant shared by more than a fifth of the rows: such an instant
           -- fills a run of more than n/5 of the n values sorted, and runs that long always
           -- hold one of the 11 values at the deciles (consecutive deciles are at most n/10 + 1
           -- apart, less than n/5 once n >= 10; a flag needs 100 rows). The deciles are a
           -- selection, not a sort or a group per instant; the candidates are counted exactly.
           quantile_disc(valid_from, $deciles) FILTER (WHERE valid_from IS NOT NULL AND NOT _fixed) AS from_candidates,
           quantile_disc(recorded_at, $deciles) AS recorded_candidates
    FROM _bf_rows
),
shared_from AS (
    SELECT r.valid_from AS t, count(*) AS c, min(r.__row) AS example FROM _bf_rows r
    WHERE list_contains((SELECT l.from_candidates FROM loaded l), r.valid_from) AND NOT r._fixed
    GROUP BY r.valid_from ORDER BY c DESC, t LIMIT 1
),
shared_recorded AS (
    SELECT r.recorded_at AS t, count(*) AS c, min(r.__row) AS example FROM _bf_rows r
    WHERE list_contains((SELECT l.recorded_candidates FROM loaded l), r.recorded_at)
    GROUP BY r.recorded_at ORDER BY c DESC, t LIMIT 1
),
shared AS (
    SELECT (SELECT CASE WHEN c > $share * loaded AND c >= $min_rows THEN c ELSE 0 END FROM shared_from) AS from_n,
           (SELECT example FROM shared_from) AS from_row,
           (SELECT CASE WHEN c > $share * loaded AND c >= $min_rows THEN c ELSE 0 END FROM shared_recorded)
               AS recorded_n,
           (SELECT example FROM shared_recorded) AS recorded_row
    FROM loaded
)
SELECT * EXCLUDE (from_candidates, recorded_candidates) FROM checked, loaded, shared;

-- @part flags
-- The red flags as rows (flag, count, example_row); count 0 = not raised.
CREATE TEMP TABLE _bf_flags AS
SELECT unnest([
    {'flag': 'belief_from_future', 'count': future_n, 'example_row': future_row},
    {'flag': 'retracted_before_recorded', 'count': before_n, 'example_row': before_row},
    {'flag': 'fixed_span', 'count': fixed, 'example_row': fixed_row},
    {'flag': 'inferred_start', 'count': no_start_n, 'example_row': no_start_row},
    {'flag': 'shared_valid_from', 'count': coalesce(from_n, 0), 'example_row': from_row},
    {'flag': 'shared_recorded_at', 'count': coalesce(recorded_n, 0), 'example_row': recorded_row},
    {'flag': 'unreadable_time', 'count': unreadable_n, 'example_row': unreadable_row},
    {'flag': 'already_stored', 'count': (SELECT count(*) FROM _bf_stored_repeats),
     'example_row': (SELECT min(__row) FROM _bf_stored_repeats)}
], recursive := true)
FROM _bf_counts;

-- @part written_i
-- The number `i` the overlap test names a written revision by: its place `pos` in its file
-- and which file (`file`, of `files`): a busy key's matches are many, and deduplicating them by
-- one integer costs a fraction of five columns of text.
CREATE OR REPLACE TEMP MACRO tm__bf_written_i(pos, file, files) AS CAST(pos AS BIGINT) * files + file;

-- @part candidates
-- The revisions the load wrote ($files, the Parquet files of the write, each sorted by key)
-- that are believed (not retracted) and belong to the candidate keys: the single-valued keys
-- ($multi lists the multi-valued predicates) whose value changed between adjacent written rows
-- (`_bf_written_keys`, registered by the caller, each with its number `k`: the test compares
-- keys by it). Each is read as written, its belief end being the `folded_until` the write
-- derived (revisions.sql's tm__believed_until), so the test repeats neither that derivation nor
-- its sort.
CREATE OR REPLACE TEMP TABLE _ov_candidates AS
SELECT tm__bf_written_i(w.file_row_number, list_position($files, w.filename) - 1, len($files)) AS i,
       k.k, w.fact_id, w.object, w.valid_from, w.valid_to, w.recorded_at, w.folded_until AS believed_until
FROM read_parquet($files, file_row_number = true, filename = true) AS w
JOIN _bf_written_keys AS k ON k.scope = w.scope AND k.subject = w.subject AND k.predicate = w.predicate
WHERE w.retracted_at IS NULL AND NOT list_contains($multi, w.predicate);

-- @part overlap_rows
-- The flag's count and example: a believed revision is the recorded part of exactly one input
-- row (a retraction is never believed), which the write noted (`_bf_written_rows`: each written
-- revision's file, place in it and input row, registered by the caller). Finding the row
-- again by key, recorded_at and fact id cost more than the rest of the flag.
SELECT count(*) AS n, min(w.row) AS example
FROM _bf_written_rows AS w
SEMI JOIN _ov_found AS v ON v.i = tm__bf_written_i(w.pos, w.file, $files);
