-- tempomem: two values of one single-valued key at one valid instant in one belief snapshot
-- (SPEC §8's check() and §9's overlapping_values), found among candidate revisions without
-- pairing every two revisions of a busy key (tempomem.overlaps drives it).
--
-- Named parts, each starting at a line `-- @part <name>` (connection.sql_parts). The caller
-- makes `_ov_candidates`: one row per revision that may overlap (believed: not retracted, not
-- erased; of a single-valued key), with `i` (a distinct integer naming it), `k` (a non-negative
-- integer naming its key: two candidates share it exactly when they share scope, subject and
-- predicate), fact_id, object, valid_from, valid_to, recorded_at and believed_until, on a
-- connection with macros.sql's interval predicates. The test compares keys by `k` alone: on a
-- load's million candidates, also comparing the key's three texts on every pair was a third of
-- its time. `found` makes
-- `_ov_found`; then, part after part, `part_revs` and the tests after it add to it the `i` of
-- every revision whose value overlaps another fact's value of its key in both valid and belief
-- time: exactly those check()'s rule (tm_problems, macros.sql) pairs.

-- @part found
-- The revisions found overlapping (their `i`), over the parts.
CREATE OR REPLACE TEMP TABLE _ov_found AS SELECT c.i FROM _ov_candidates AS c LIMIT 0;

-- @part busy_keys
-- The keys of more than $busy_from candidate revisions, once for all parts (a key's
-- revisions are all in one part): part_revs marks their revisions `busy`.
CREATE OR REPLACE TEMP TABLE _ov_busy_keys AS
SELECT k FROM _ov_candidates GROUP BY k HAVING count(*) > $busy_from;

-- @part part_revs
-- One part of the candidate revisions ($part of $parts, by key), for one pass of the test,
-- each marked `busy` when its key has more than $busy_from of them (busy_keys). The test pairs every
-- two revisions of a key that is not busy (overlap), which for a few revisions costs least, and
-- counts a busy key's overlaps (overlap_open, dominance, overlap_bounded_open), whose pairs grow
-- with the square of its revisions, pairing only those believed together for a while
-- (overlap_bounded_pairs). Both tests read each revision's times as microseconds (`r`, `u`, `lo`,
-- `hi`; NULL for an open bound) and leave out a revision with an empty valid or belief
-- interval, which overlaps nothing (`can_overlap` false).
CREATE OR REPLACE TEMP TABLE _ov_part AS
SELECT c.*, c.k IN (SELECT b.k FROM _ov_busy_keys AS b) AS busy,
       NOT tm_is_empty(c.valid_from, c.valid_to) AND NOT tm_is_empty(c.recorded_at, c.believed_until) AS can_overlap,
       epoch_us(c.recorded_at) AS r, epoch_us(c.believed_until) AS u, epoch_us(c.valid_from) AS lo,
       epoch_us(c.valid_to) AS hi
FROM _ov_candidates AS c WHERE c.k % $parts = $part;

-- @part overlap
-- check()'s rule (tm_problems, macros.sql) over the keys of one part that are not busy: the
-- revisions whose value overlaps another fact's value of the same key in both valid and belief
-- time, added to `_ov_found`. A semi join: each revision is kept at its first such partner, not
-- paired with all of them and then made distinct (Graphiti edges of 20 revisions a key, most
-- overlapping: 9M pairs for 1M revisions, 0.75 -> 0.29 s). An open bound is the least or greatest
-- BIGINT here, so that tm_overlaps is two comparisons a side (mem0's 1.8M revisions, none
-- overlapping, so every pair of a key weighed: 0.59 -> 0.37 s).
INSERT INTO _ov_found
WITH bounded AS MATERIALIZED (
    SELECT i, k, fact_id, object, r, coalesce(u, 9223372036854775807) AS u,
           coalesce(lo, -9223372036854775808) AS lo, coalesce(hi, 9223372036854775807) AS hi
    FROM _ov_part
    WHERE NOT busy AND can_overlap
)
SELECT a.i
FROM bounded AS a SEMI JOIN bounded AS b
  ON a.k = b.k AND a.fact_id <> b.fact_id AND a.object IS DISTINCT FROM b.object
 AND a.r < b.u AND b.r < a.u AND a.lo < b.hi AND b.lo < a.hi;

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
INSERT INTO _ov_found
WITH open AS MATERIALIZED (
    SELECT * FROM _ov_part WHERE busy AND believed_until IS NULL AND can_overlap
),
per_key AS (
    SELECT k, count(*) AS n, count(valid_from) AS starts
    FROM open GROUP BY k
),
per_value AS (
    SELECT k, object, count(*) AS n, count(valid_from) AS starts
    FROM open GROUP BY k, object
),
-- kind 0: an end; 1: a's start, asking how many ended at or before it; 2: a's end, asking how
-- many started before it; 3: a start. At one instant they come in that order.
bounds AS (
    SELECT k, object, valid_to AS t, 0 AS kind, NULL AS i FROM open WHERE valid_to IS NOT NULL
    UNION ALL
    SELECT k, object, valid_from, 1, i FROM open WHERE valid_from IS NOT NULL
    UNION ALL
    SELECT k, object, valid_to, 2, i FROM open WHERE valid_to IS NOT NULL
    UNION ALL
    SELECT k, object, valid_from, 3, NULL FROM open WHERE valid_from IS NOT NULL
),
running AS (
    SELECT i, kind,
           sum(CAST(kind = 0 AS INTEGER)) OVER by_key AS key_ended, sum(CAST(kind = 3 AS INTEGER)) OVER by_key AS key_started,
           sum(CAST(kind = 0 AS INTEGER)) OVER by_value AS value_ended, sum(CAST(kind = 3 AS INTEGER)) OVER by_value AS value_started
    FROM bounds
    WINDOW by_key AS (PARTITION BY k ORDER BY t, kind ROWS UNBOUNDED PRECEDING),
           by_value AS (PARTITION BY k, object ORDER BY t, kind ROWS UNBOUNDED PRECEDING)
),
asked AS (
    SELECT i, max(CASE WHEN kind = 1 THEN key_ended END) AS key_ended, max(CASE WHEN kind = 1 THEN value_ended END) AS value_ended,
           max(CASE WHEN kind = 2 THEN key_started END) AS key_started,
           max(CASE WHEN kind = 2 THEN value_started END) AS value_started
    FROM running WHERE kind IN (1, 2) GROUP BY i
)
SELECT o.i
FROM open AS o
JOIN per_key AS pk ON pk.k = o.k
JOIN per_value AS v ON v.k = o.k AND v.object IS NOT DISTINCT FROM o.object
LEFT JOIN asked AS a ON a.i = o.i
WHERE pk.n - coalesce(a.key_ended, 0) - CASE WHEN o.valid_to IS NULL THEN 0 ELSE pk.starts - a.key_started END
    > v.n - coalesce(a.value_ended, 0) - CASE WHEN o.valid_to IS NULL THEN 0 ELSE v.starts - a.value_started END;

-- @part busy_revisions
-- The busy keys' revisions of one part that can overlap, for the tests of the bounded ones: a
-- fact's revision that a later one of it followed (`believed_until` set; a fact's revisions
-- follow each other in belief time, so two of one fact never overlap).
CREATE OR REPLACE TEMP TABLE _ov_busy AS
SELECT i, k, object, fact_id, believed_until IS NULL AS open, r, u, lo, hi
FROM _ov_part
WHERE busy AND can_overlap;

-- @part dominance
-- A bounded revision a, believed over [r_a, u_a), and an open one b, believed from r_b on,
-- are believed together exactly when r_b < u_a. So how many open revisions a bounded one
-- overlaps is, as for two open ones (overlap_open), those recorded before u_a less those of
-- them ending at or before its start and those starting at or after its end; and from the open
-- one's side, the bounded ones believed past r_b less the same two. Each "recorded before and
-- ending before" is a two-dimensional count: for each query (x, y), the points of its group with
-- x_p < x_q and y_p <= y_q. `_ov_dom` holds them all (bounds negated where the question is
-- "later" or "after", so every one asks "before"), by key and by value, numbered `pos` in x
-- order (a query before a point at one x), and `_ov_dom_counts` gathers the counts, level by
-- level (dominance_level). `problem`: 1 recorded before u_a, 2 and 3 ending before its start and
-- starting after its end; 4-6 the same from the open revision's side; 1 and 4 count plus.
CREATE OR REPLACE TEMP TABLE _ov_dom AS
WITH bounded AS (SELECT * FROM _ov_busy WHERE NOT open),
opened AS (    -- of the keys with bounded revisions: the others have nothing to count here
    SELECT o.* FROM _ov_busy AS o WHERE o.open AND o.k IN (SELECT b.k FROM bounded AS b)
),
questions AS (
    SELECT 1 AS problem, true AS is_point, NULL AS i, k, object, r AS x, 0 AS y FROM opened
    UNION ALL SELECT 1, false, i, k, object, u, 0 FROM bounded
    UNION ALL SELECT 2, true, NULL, k, object, r, hi FROM opened WHERE hi IS NOT NULL
    UNION ALL SELECT 2, false, i, k, object, u, lo FROM bounded WHERE lo IS NOT NULL
    UNION ALL SELECT 3, true, NULL, k, object, r, -lo FROM opened WHERE lo IS NOT NULL
    UNION ALL SELECT 3, false, i, k, object, u, -hi FROM bounded WHERE hi IS NOT NULL
    UNION ALL SELECT 4, true, NULL, k, object, -u, 0 FROM bounded
    UNION ALL SELECT 4, false, i, k, object, -r, 0 FROM opened
    UNION ALL SELECT 5, true, NULL, k, object, -u, hi FROM bounded WHERE hi IS NOT NULL
    UNION ALL SELECT 5, false, i, k, object, -r, lo FROM opened WHERE lo IS NOT NULL
    UNION ALL SELECT 6, true, NULL, k, object, -u, -lo FROM bounded WHERE lo IS NOT NULL
    UNION ALL SELECT 6, false, i, k, object, -r, -hi FROM opened WHERE hi IS NOT NULL
),
grouped AS (    -- each question by key, and by value (key and object; a NULL object is a value)
    SELECT q.* EXCLUDE (object), false AS by_value, NULL AS object FROM questions AS q
    UNION ALL
    SELECT q.* EXCLUDE (object), true, q.object FROM questions AS q
),
numbered AS (  -- a group's number (an integer partitions faster than its seven columns, level after level)
    SELECT g.problem, g.by_value, g.is_point, g.i, g.x, g.y,
           dense_rank() OVER (ORDER BY g.problem, g.by_value, g.k, g.object) AS grp
    FROM grouped AS g
)
SELECT n.* EXCLUDE (x), row_number() OVER (PARTITION BY n.grp ORDER BY n.x, n.is_point) - 1 AS pos
FROM numbered AS n;
-- Problems 1 and 4 ask only "recorded before": a running count in x order answers them, and the
-- levels are left the others.
CREATE OR REPLACE TEMP TABLE _ov_dom_counts AS
SELECT d.i, d.problem, d.by_value, d.c
FROM (SELECT i, problem, by_value, is_point,
             sum(CAST(is_point AS INTEGER)) OVER (PARTITION BY grp ORDER BY pos ROWS UNBOUNDED PRECEDING) AS c
      FROM _ov_dom WHERE problem IN (1, 4)) AS d
WHERE NOT d.is_point;
DELETE FROM _ov_dom WHERE problem IN (1, 4);

-- @part dominance_level
-- One level ($m) of the two-dimensional counts: in x order a group is cut into blocks of 2^($m+1)
-- rows, and each query in a block's second half counts the points of its first half with y at or
-- below its own (a running count in y order, points first at one y). Summed over the levels, a
-- query has counted every point before it in x order once: log n statements of n rows each.
INSERT INTO _ov_dom_counts
SELECT d.i, d.problem, d.by_value, d.c
FROM (
    SELECT i, problem, by_value, is_point, pos,
           sum(CAST(is_point AND (pos >> $m) % 2 = 0 AS INTEGER)) OVER (
               PARTITION BY grp, pos >> ($m + 1)
               ORDER BY y, NOT is_point ROWS UNBOUNDED PRECEDING) AS c
    FROM _ov_dom
) AS d
WHERE NOT d.is_point AND (d.pos >> $m) % 2 = 1;

-- @part overlap_bounded_open
-- The bounded and open revisions that overlap one of the other kind of another value: the
-- count over the key exceeds the count over the revision's own value.
INSERT INTO _ov_found
WITH counted AS (
    SELECT i, by_value, sum(CASE WHEN problem IN (1, 4) THEN c ELSE -c END) AS overlapping
    FROM _ov_dom_counts GROUP BY i, by_value
)
SELECT k.i FROM counted AS k
LEFT JOIN counted AS v ON v.i = k.i AND v.by_value
WHERE NOT k.by_value AND k.overlapping > coalesce(v.overlapping, 0);

-- @part overlap_bounded_pairs
-- And two bounded revisions, paired: a load's bounded revisions are believed for a while each,
-- so the pairs believed together are few, and an inequality join (DuckDB's IEJoin) finds just
-- those. Each key is a band of its own on one number line (its number << 64, plus the instant),
-- so that the join has no equality for DuckDB to hash on: hashing on the key would pair every
-- two of a key. Both sides are tables: over a CTE DuckDB plans a merge join on one bound and
-- tests the other on every pair, and the other conditions, if not left to after the pairs are
-- a table, are pushed into the join in place of its bounds.
CREATE OR REPLACE TEMP TABLE _ov_bounded AS
WITH ranked AS (
    SELECT b.*, CAST(b.k AS HUGEINT) << 64 AS band
    FROM _ov_busy AS b WHERE NOT b.open
)
SELECT r.*, r.band + r.r AS since, r.band + r.u AS until FROM ranked AS r;
CREATE OR REPLACE TEMP TABLE _ov_believed_together AS
SELECT a.i AS a_i, b.i AS b_i, a.object AS a_object, b.object AS b_object, a.fact_id AS a_fact,
       b.fact_id AS b_fact, a.lo AS a_lo, a.hi AS a_hi, b.lo AS b_lo, b.hi AS b_hi
FROM _ov_bounded AS a JOIN _ov_bounded AS b ON a.since < b.until AND b.since < a.until;
INSERT INTO _ov_found
WITH pairs AS MATERIALIZED (
    SELECT a_i, b_i FROM _ov_believed_together
    WHERE a_fact <> b_fact AND a_object IS DISTINCT FROM b_object
      AND (a_lo IS NULL OR b_hi IS NULL OR a_lo < b_hi) AND (b_lo IS NULL OR a_hi IS NULL OR b_lo < a_hi)
)
SELECT a_i FROM pairs UNION SELECT b_i FROM pairs;
