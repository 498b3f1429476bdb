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
    {'flag': 'unreadable_time', 'count': unreadable_n, 'example_row': unreadable_row}
], recursive := true)
FROM _bf_counts;

-- @part candidates
-- The revisions the load wrote ($files, the Parquet files of the write, each sorted by key)
-- that are believed (not retracted) and belong to the candidate keys: the single-valued keys
-- ($multi lists the multi-valued predicates) whose value changed between adjacent written rows
-- (`_bf_written_keys`, registered by the caller). Each is read as written, its belief end
-- being the `folded_until` the write derived (revisions.sql's tm__believed_until), so the test
-- repeats neither that derivation nor its sort. `kh` hashes the key: the parts of the test
-- split on it, and integers compare faster than text. `i`, the revision's place in its file
-- and which file, names it in the test's result: a busy key's matches are many, and
-- deduplicating them by one integer costs a fraction of five columns of text.
CREATE OR REPLACE TEMP TABLE _bf_candidate_revs AS
SELECT CAST(w.file_row_number AS BIGINT) * len($files) + list_position($files, w.filename) - 1 AS i,
       hash(w.scope, w.subject, w.predicate) AS kh,
       w.scope, w.subject, w.predicate, w.fact_id, w.object,
       w.valid_from, w.valid_to, w.recorded_at, w.folded_until AS believed_until
FROM read_parquet($files, file_row_number = true, filename = true) AS w
SEMI JOIN _bf_written_keys AS k ON k.scope = w.scope AND k.subject = w.subject AND k.predicate = w.predicate
WHERE w.retracted_at IS NULL AND NOT list_contains($multi, w.predicate);

-- @part overlapping
-- The revisions found overlapping (their `i`), over the passes.
CREATE OR REPLACE TEMP TABLE _bf_overlapping AS SELECT c.i FROM _bf_candidate_revs AS c LIMIT 0;

-- @part part_revs
-- One part of the candidate revisions ($part of $parts, by key hash), for one pass of the test,
-- each marked `busy` when its key hash has more than $busy_from of them. The test pairs every
-- two revisions of a key that is not busy (overlap), which for a few revisions costs least, and
-- counts the overlaps of a busy key's open revisions (overlap_open, overlap_bounded), whose
-- pairs grow with the square of its revisions. A hash shared by keys only makes them busy.
CREATE OR REPLACE TEMP TABLE _bf_part_revs AS
WITH part AS (SELECT * FROM _bf_candidate_revs WHERE kh % $parts = $part),
busy AS (SELECT kh FROM part GROUP BY kh HAVING count(*) > $busy_from)
SELECT p.*, p.kh IN (SELECT b.kh FROM busy AS b) AS busy FROM part AS p;

-- @part overlap
-- check()'s rule (tm_problems, macros.sql) over the keys of one part that are not busy: the
-- revisions whose value overlaps another fact's value of the same key in both valid and belief
-- time, added to `_bf_overlapping`.
INSERT INTO _bf_overlapping
SELECT DISTINCT a.i
FROM _bf_part_revs AS a JOIN _bf_part_revs AS b
  ON a.kh = b.kh AND a.scope = b.scope AND a.subject = b.subject AND a.predicate = b.predicate
 AND a.fact_id <> b.fact_id AND a.object IS DISTINCT FROM b.object
 AND tm_overlaps(a.recorded_at, a.believed_until, b.recorded_at, b.believed_until)
 AND tm_overlaps(a.valid_from, a.valid_to, b.valid_from, b.valid_to)
WHERE NOT a.busy;

-- @part overlap_open
-- The same rule between the open revisions of the busy keys of one part: those believed from
-- recorded_at on (`believed_until` NULL; only a fact's latest revision is open). Any two of
-- them are believed together from the later one's recorded_at, so valid time alone decides.
-- They are counted, not paired: a key's
-- revisions overlapping a's valid interval are all but those ending at or before its start and
-- those starting at or after its end (for non-empty intervals the two never meet), and a overlaps
-- another value exactly when that count exceeds the same count over its own value's revisions.
-- Each count is a running count over the key's bounds in time order, so a key costs n log n: the
-- pairs of a key of 30k open revisions, every two overlapping, took 12 s (counted: 0.5 s).
INSERT INTO _bf_overlapping
WITH open AS MATERIALIZED (
    SELECT * FROM _bf_part_revs WHERE busy AND believed_until IS NULL AND NOT tm_is_empty(valid_from, valid_to)
),
per_key AS (
    SELECT kh, scope, subject, predicate, count(*) AS n, count(valid_from) AS starts
    FROM open GROUP BY kh, scope, subject, predicate
),
per_value AS (
    SELECT kh, scope, subject, predicate, object, count(*) AS n, count(valid_from) AS starts
    FROM open GROUP BY kh, scope, subject, predicate, object
),
-- kind 0: an end; 1: a's start, asking how many ended at or before it; 2: a's end, asking how
-- many started before it; 3: a start. At one instant they come in that order.
bounds AS (
    SELECT kh, scope, subject, predicate, object, valid_to AS t, 0 AS kind, NULL AS i FROM open WHERE valid_to IS NOT NULL
    UNION ALL
    SELECT kh, scope, subject, predicate, object, valid_from, 1, i FROM open WHERE valid_from IS NOT NULL
    UNION ALL
    SELECT kh, scope, subject, predicate, object, valid_to, 2, i FROM open WHERE valid_to IS NOT NULL
    UNION ALL
    SELECT kh, scope, subject, predicate, object, valid_from, 3, NULL FROM open WHERE valid_from IS NOT NULL
),
running AS (
    SELECT i, kind,
           sum(CAST(kind = 0 AS INTEGER)) OVER by_key AS key_ended, sum(CAST(kind = 3 AS INTEGER)) OVER by_key AS key_started,
           sum(CAST(kind = 0 AS INTEGER)) OVER by_value AS value_ended, sum(CAST(kind = 3 AS INTEGER)) OVER by_value AS value_started
    FROM bounds
    WINDOW by_key AS (PARTITION BY kh, scope, subject, predicate ORDER BY t, kind ROWS UNBOUNDED PRECEDING),
           by_value AS (PARTITION BY kh, scope, subject, predicate, object ORDER BY t, kind ROWS UNBOUNDED PRECEDING)
),
asked AS (
    SELECT i, max(CASE WHEN kind = 1 THEN key_ended END) AS key_ended, max(CASE WHEN kind = 1 THEN value_ended END) AS value_ended,
           max(CASE WHEN kind = 2 THEN key_started END) AS key_started,
           max(CASE WHEN kind = 2 THEN value_started END) AS value_started
    FROM running WHERE kind IN (1, 2) GROUP BY i
)
SELECT o.i
FROM open AS o
JOIN per_key AS k ON k.kh = o.kh AND k.scope = o.scope AND k.subject = o.subject AND k.predicate = o.predicate
JOIN per_value AS v ON v.kh = o.kh AND v.scope = o.scope AND v.subject = o.subject AND v.predicate = o.predicate
                   AND v.object IS NOT DISTINCT FROM o.object
LEFT JOIN asked AS a ON a.i = o.i
WHERE k.n - coalesce(a.key_ended, 0) - CASE WHEN o.valid_to IS NULL THEN 0 ELSE k.starts - a.key_started END
    > v.n - coalesce(a.value_ended, 0) - CASE WHEN o.valid_to IS NULL THEN 0 ELSE v.starts - a.value_started END;

-- @part overlap_bounded
-- And between a busy key's revisions of bounded belief (a fact's revision that a later one of it
-- followed) and every revision of the key: both revisions of a pair that overlaps are flagged.
-- A load's bounded revisions are its rows that share a fact id or are retracted later: few in
-- most loads (a busy key of many pays for their pairs).
INSERT INTO _bf_overlapping
WITH pairs AS MATERIALIZED (
    SELECT a.i AS a_i, b.i AS b_i
    FROM _bf_part_revs AS a JOIN _bf_part_revs AS b
      ON a.kh = b.kh AND a.scope = b.scope AND a.subject = b.subject AND a.predicate = b.predicate
     AND a.fact_id <> b.fact_id AND a.object IS DISTINCT FROM b.object
     AND tm_overlaps(a.recorded_at, a.believed_until, b.recorded_at, b.believed_until)
     AND tm_overlaps(a.valid_from, a.valid_to, b.valid_from, b.valid_to)
    WHERE a.busy AND a.believed_until IS NOT NULL
)
SELECT a_i FROM pairs UNION SELECT b_i FROM pairs;

-- @part overlap_rows
-- The flag's count and example: a believed revision is the recorded part of exactly one input
-- row (a retraction is never believed), the row with its key, recorded_at and fact id (the
-- given one, or the one tm__fact_id made: the write's ids). Only the flagged keys' rows make ids.
SELECT count(*) AS n, min(r.__row) AS example
FROM (SELECT c.* FROM _bf_candidate_revs AS c SEMI JOIN _bf_overlapping AS v ON v.i = c.i) AS o
JOIN (SELECT __row, coalesce(scope, 'default') AS scope, subject, predicate, recorded_at, fact_id AS given, nonce
      FROM _bf_rows) AS r
  ON r.scope = o.scope AND r.subject = o.subject AND r.predicate = o.predicate AND r.recorded_at = o.recorded_at
 AND tm__fact_id(r.given, r.recorded_at, r.__row, r.nonce) = o.fact_id;
