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

-- @part changing_keys
-- The overlap test's candidate keys when nothing was written: the single-valued keys ($multi
-- lists the multi-valued predicates) holding more than one value in this load. Keys are
-- 64-bit hashes: integers compare far faster than text, and a collision only adds a
-- candidate (the test compares the values).
CREATE OR REPLACE TEMP TABLE _bf_candidate_keys AS
SELECT hash(coalesce(scope, 'default'), subject, predicate) AS kh FROM _bf_rows
WHERE NOT list_contains($multi, predicate)
GROUP BY kh HAVING min(hash(object)) <> max(hash(object));

-- @part written_keys
-- The candidate keys as the write saw them: those whose value changed between adjacent sorted
-- rows (`_bf_written_keys`, registered by the caller).
CREATE OR REPLACE TEMP TABLE _bf_candidate_keys AS
SELECT hash(w.scope, w.subject, w.predicate) AS kh FROM _bf_written_keys w;

-- @part candidates
-- The revisions the load writes for the candidate keys, with the columns the overlap test reads
-- (as backfill.write derives them): a row is a revision at its recorded_at and, retracted later,
-- a retracted revision at its retracted_at (a row retracted at the instant it was recorded is
-- one retracted revision). `revision` is a revision's belief time in µs: it orders a fact's
-- revisions as their numbers do (the rows of a fact have distinct belief times, none after its
-- retraction: fact_rejects in backfill_checks.sql refuses the others).
CREATE OR REPLACE TEMP TABLE _bf_candidate_revs AS
WITH candidate_rows AS (
    SELECT * FROM (
        SELECT r.__row, hash(coalesce(r.scope, 'default'), r.subject, r.predicate) AS kh,
               coalesce(r.scope, 'default') AS scope, r.subject, r.predicate,
               tm__fact_id(r.fact_id, r.recorded_at, r.__row, r.nonce) AS fact_id, r.object,
               r.valid_from, r.valid_to, r.recorded_at, r.retracted_at
        FROM _bf_rows r
        WHERE NOT list_contains($multi, r.predicate)
    ) AS c
    WHERE c.kh IN (SELECT k.kh FROM _bf_candidate_keys k)
),
parts AS (   -- part 0: the row as recorded; part 1: its retraction, when that came later
    SELECT c.*, unnest(CASE WHEN c.retracted_at > c.recorded_at THEN [0, 1] ELSE [0] END) AS part
    FROM candidate_rows c
)
SELECT p.__row, p.kh, p.scope, p.subject, p.predicate, p.fact_id, p.object, p.valid_from, p.valid_to,
       CASE WHEN p.part = 1 THEN p.retracted_at ELSE p.recorded_at END AS recorded_at,
       CASE WHEN p.part = 1 OR p.retracted_at = p.recorded_at THEN p.retracted_at END AS retracted_at,
       epoch_us(CASE WHEN p.part = 1 THEN p.retracted_at ELSE p.recorded_at END) AS revision
FROM parts p;

-- @part part_revs
-- One part of the candidate revisions ($part of $parts, by key hash), for one pass of the test.
CREATE OR REPLACE TEMP TABLE _bf_part_revs AS
SELECT * FROM _bf_candidate_revs WHERE kh % $parts = $part;

-- @part overlap
-- The rows whose value overlaps another fact's value of the same key in both valid and belief
-- time: check()'s rule (tm_problems, macros.sql) over the part's revisions, with the belief
-- ends of revisions.sql (tm__believed).
WITH believed AS (
    SELECT b.* FROM tm__believed('_bf_part_revs') AS b WHERE b.retracted_at IS NULL
)
SELECT count(*) AS n, min(__row) AS example FROM (
    SELECT a.__row FROM believed a JOIN believed b
      ON a.kh = b.kh AND a.scope = b.scope AND a.subject = b.subject AND a.predicate = b.predicate
     AND a.fact_id <> b.fact_id AND a.object IS DISTINCT FROM b.object
     AND tm_overlaps(a.recorded_at, a.believed_until, b.recorded_at, b.believed_until)
     AND tm_overlaps(a.valid_from, a.valid_to, b.valid_from, b.valid_to)
    GROUP BY a.__row);
