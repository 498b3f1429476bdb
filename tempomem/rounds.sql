-- SPEC §5 applied to a whole batch at once, in rounds (driven by tempomem/rounds.py).
--
-- Operations on different keys (scope, subject, predicate) never meet, and the operations of
-- one key apply in order. So round r applies the r-th operation of every key at once, against
-- the states the previous round left: the result is that of applying the rows one by one.
-- The cells of SPEC §5's table come from `_tm_decisions` (case_name, rule, action), the rows of
-- tempomem/temporal/decisions.py, so this file and the one-row path read the same table.
--
-- While the rounds run, keys and facts are numbers: a key is `k`, its rank in the store's sort
-- order (`_tm_keys`), and a fact `f`, the operation that made it (a negative number for a
-- stored fact). Every join, window and delete below is on them: on the strings they stand for,
-- each would hash or sort several times the bytes. The `output` part turns them back.
--
-- Tables the driver makes before the first round (rounds.py has their columns):
--   _tm_keys     the batch's keys: scope, subject, predicate and `k`;
--   _tm_ops      one row per operation: `op` (its place in the batch), `round`, `kind`
--                ('assert' or 'correct'), `commit_time`, `k`, the asserted values, `rule`
--                (the table's column for its predicate), `new_id` (the id of the fact it would
--                make) and, for a correction, `target_op` (the assertion whose fact it retracts);
--   _tm_state    the latest state of every fact the batch can act on, changed by each round;
--   _tm_landed, _tm_refused   what the rounds produce; the driver keeps each round's `_tm_u`
--                (the states it changed) as `_tm_emitted`, with the round's number and `i`,
--                its place there.
-- This file needs macros.sql (tm_overlaps, tm__cmp_starts) loaded first.
--
-- Statements are grouped in parts named by `-- @part` lines (connection.sql_parts): `setup` runs
-- once; then `runs` (the closed form, in closedform.sql, over each key's next $window
-- operations) and `keep_states`, then `next_sorted` or `next_in_place` after it (the busy pass
-- of closedform_busy.sql is followed by the same), and while it pays, one `round` and
-- `advance` before it is tried again; then each statement of `round` once per round with $round
-- bound; `output` once at the end.

-- @part setup
-- Which row of SPEC §5's table a pair (N, S) falls in; decisions.case_of is its twin.
CREATE OR REPLACE MACRO tm_case(n_object, n_from, n_to, s_object, s_from, s_to) AS CASE
    WHEN NOT tm_overlaps(n_from, n_to, s_from, s_to) THEN
         CASE WHEN n_object = s_object THEN 'same_object_apart' ELSE 'different_object_apart' END
    WHEN n_object = s_object THEN 'same_object_overlap'
    WHEN tm__cmp_starts(s_from, n_from) < 0 THEN 'different_object_s_earlier'
    WHEN tm__cmp_starts(n_from, s_from) < 0 THEN 'different_object_n_earlier'
    ELSE 'different_object_same_start' END;

-- A fact's artifacts with a duplicate's added, first occurrence first (both are distinct lists).
CREATE OR REPLACE MACRO tm_merged_artifacts(have, more) AS
    coalesce(have, []) || list_filter(coalesce(more, []), lambda x: NOT list_contains(coalesce(have, []), x));

-- @part advance
-- After one round between closed-form passes: its operations are done, the next are round 1.
CREATE OR REPLACE TEMP TABLE _tm_ops AS
SELECT * REPLACE (CAST(round - 1 AS INTEGER) AS round) FROM _tm_ops WHERE round > 1 ORDER BY round;

-- @part round
-- This round's operations: at most one per key.
CREATE OR REPLACE TEMP TABLE _tm_r AS
SELECT * FROM _tm_ops WHERE round = $round;

-- The believed facts of the round's keys: the only facts an operation can act on.
CREATE OR REPLACE TEMP TABLE _tm_b AS
SELECT s.*
FROM _tm_state AS s
JOIN _tm_r AS o ON o.k = s.k
WHERE s.status NOT IN ('retracted', 'erased');

-- Assertions as they land. First SPEC §5's unknown-start rule: a NULL start of a single-valued
-- key that has a believed fact becomes the reference time (still flagged inferred), unless N
-- ends by then. Then a duplicate is found: the earliest-recorded believed fact whose cell is
-- `merge`. N lands as a new fact, or as the duplicate with N's artifacts added and its unknowns
-- filled (an unknown start takes a start the caller gave; a missing end takes N's end).
CREATE OR REPLACE TEMP TABLE _tm_landing AS
WITH n AS (
    SELECT o.*,
           CASE WHEN o.valid_from IS NULL AND o.arity = 'single' AND nb.believed IS NOT NULL
                     AND NOT coalesce(o.valid_to <= coalesce(o.reference_time, o.commit_time), false)
                THEN coalesce(o.reference_time, o.commit_time)
                ELSE o.valid_from END AS n_from
    FROM _tm_r AS o
    LEFT JOIN (SELECT b.k, count(*) AS believed FROM _tm_b AS b GROUP BY b.k) AS nb ON nb.k = o.k
    WHERE o.kind = 'assert'
),
dup AS (
    SELECT n.op, arg_min(b.f, (b.first_recorded_at, b.fact_id)) AS f
    FROM n
    JOIN _tm_b AS b ON b.k = n.k
    JOIN _tm_decisions AS d
      ON d.rule = n.rule
     AND d.case_name = tm_case(n.object, n.n_from, n.valid_to, b.object, b.valid_from, b.valid_to)
    WHERE d.action = 'merge'
    GROUP BY n.op
),
m AS (
    SELECT n.*, s.f AS dup_f, s.fact_id AS dup_id, s.valid_from AS s_from, s.valid_to AS s_to,
           s.valid_from_inferred AS s_inferred, s.status AS s_status, s.reason AS s_reason,
           s.artifacts AS s_artifacts, s.retracted_at AS s_retracted_at, s.superseded_at AS s_superseded_at,
           s.superseded_by AS s_superseded_by, s.first_recorded_at AS s_first, s.last_recorded_at AS s_last,
           s.emitted AS s_emitted,
           s.valid_from IS NULL AND n.n_from IS NOT NULL AND NOT n.valid_from_inferred AS fills_start,
           s.valid_to IS NULL AND n.valid_to IS NOT NULL AS fills_end
    FROM n
    LEFT JOIN dup AS d ON d.op = n.op
    LEFT JOIN _tm_b AS s ON s.f = d.f
)
SELECT m.op, m.commit_time, m.rule, m.dup_f IS NOT NULL AS merged,
       coalesce(m.dup_f, m.op) AS f, coalesce(m.dup_id, m.new_id) AS fact_id, m.k, m.object,
       CASE WHEN m.dup_f IS NULL OR m.fills_start THEN m.n_from ELSE m.s_from END AS valid_from,
       CASE WHEN m.dup_f IS NULL THEN m.valid_to ELSE coalesce(m.s_to, m.valid_to) END AS valid_to,
       CASE WHEN m.dup_f IS NULL THEN m.valid_from_inferred
            WHEN m.fills_start THEN false ELSE m.s_inferred END AS valid_from_inferred,
       m.s_retracted_at AS retracted_at, m.s_superseded_at AS superseded_at, m.s_superseded_by AS superseded_by,
       CASE WHEN m.dup_f IS NULL THEN CASE WHEN m.valid_to IS NULL THEN 'live' ELSE 'ended' END
            WHEN m.fills_end THEN 'ended' ELSE m.s_status END AS status,
       CASE WHEN m.dup_f IS NULL THEN m.reason ELSE m.s_reason END AS reason,
       CASE WHEN m.dup_f IS NULL THEN m.artifacts ELSE tm_merged_artifacts(m.s_artifacts, m.artifacts) END AS artifacts,
       coalesce(m.s_first, m.commit_time) AS first_recorded_at, m.s_last AS last_recorded_at,
       coalesce(m.s_emitted, false) AS emitted,
       m.dup_f IS NULL OR m.fills_start OR m.fills_end
           OR len(tm_merged_artifacts(m.s_artifacts, m.artifacts)) <> len(coalesce(m.s_artifacts, [])) AS touched
FROM m;

-- The conflict cells of the landed N against every other believed fact of its key.
CREATE OR REPLACE TEMP TABLE _tm_acts AS
SELECT l.op, l.commit_time, d.action, b.*
FROM _tm_landing AS l
JOIN _tm_b AS b ON b.k = l.k AND b.f <> l.f
JOIN _tm_decisions AS d
  ON d.rule = l.rule AND d.case_name = tm_case(l.object, l.valid_from, l.valid_to, b.object, b.valid_from, b.valid_to)
WHERE d.action IN ('refuse', 'close_new', 'close_existing', 'retract_existing');

-- N's final state: stored already closed at the earliest later value (`close_new`), and
-- whether the write path refuses it: a `refuse` cell, or a fact it would revise whose latest
-- revision was recorded at or after this commit (SPEC §1.4: the clock is behind it).
CREATE OR REPLACE TEMP TABLE _tm_final AS
WITH closing AS (
    SELECT a.op, min(a.valid_from) AS valid_to,
           arg_min(a.fact_id, (a.valid_from, a.first_recorded_at, a.fact_id)) AS by_id,
           arg_min(a.object, (a.valid_from, a.first_recorded_at, a.fact_id)) AS by_object
    FROM _tm_acts AS a WHERE a.action = 'close_new' GROUP BY a.op
),
blocked AS (
    SELECT a.op, bool_or(a.action = 'refuse') AS conflict,
           string_agg(a.fact_id, ', ' ORDER BY a.first_recorded_at, a.fact_id)
               FILTER (WHERE a.action = 'refuse') AS conflict_ids,
           string_agg(format('''{}''', a.object), ', ' ORDER BY a.first_recorded_at, a.fact_id)
               FILTER (WHERE a.action = 'refuse') AS conflict_objects,
           bool_or(a.action IN ('close_existing', 'retract_existing') AND NOT a.emitted
                   AND a.last_recorded_at >= a.commit_time) AS behind
    FROM _tm_acts AS a GROUP BY a.op
)
SELECT l.* REPLACE (
           coalesce(c.valid_to, l.valid_to) AS valid_to,
           CASE WHEN c.op IS NULL THEN l.status ELSE 'superseded' END AS status,
           CASE WHEN c.op IS NULL THEN l.superseded_by ELSE c.by_id END AS superseded_by,
           CASE WHEN c.op IS NULL THEN l.superseded_at ELSE l.commit_time END AS superseded_at,
           CASE WHEN c.op IS NULL THEN l.reason
                ELSE format('superseded by fact {} ({})', c.by_id, c.by_object) END AS reason,
           l.touched OR c.op IS NOT NULL AS touched),
       CASE WHEN l.merged AND l.touched AND NOT l.emitted AND l.last_recorded_at >= l.commit_time THEN 'clock'
            WHEN coalesce(bk.conflict, false) THEN 'conflict'
            WHEN l.merged AND c.op IS NOT NULL AND NOT l.emitted AND l.last_recorded_at >= l.commit_time THEN 'clock'
            WHEN coalesce(bk.behind, false) THEN 'clock' END AS refused,
       bk.conflict_ids, bk.conflict_objects
FROM _tm_landing AS l
LEFT JOIN closing AS c ON c.op = l.op
LEFT JOIN blocked AS bk ON bk.op = l.op;

-- Corrections: the fact the target assertion landed on is retracted at this commit. One whose
-- target was refused is moot; one whose fact is no longer believed is an error for the driver.
CREATE OR REPLACE TEMP TABLE _tm_corrections AS
SELECT o.op, o.commit_time, o.reason, t.f, t.fact_id,
       CASE WHEN s.f IS NULL OR s.status IN ('retracted', 'erased') THEN 'not_believed'
            WHEN NOT s.emitted AND s.last_recorded_at >= o.commit_time THEN 'clock' END AS refused
FROM _tm_r AS o
JOIN _tm_landed AS t ON t.op = o.target_op
LEFT JOIN _tm_state AS s ON s.f = t.f
WHERE o.kind = 'correct';

-- Every state this round changes, as it now stands.
CREATE OR REPLACE TEMP TABLE _tm_u AS
SELECT f.f, f.fact_id, f.k, f.object, f.valid_from, f.valid_to, f.valid_from_inferred,
       f.retracted_at, f.superseded_at, f.superseded_by, f.status, f.reason, f.artifacts, f.first_recorded_at,
       f.commit_time AS last_recorded_at, true AS emitted
FROM _tm_final AS f WHERE f.refused IS NULL AND f.touched
UNION ALL
SELECT a.f, a.fact_id, a.k, a.object, a.valid_from,
       CASE WHEN a.action = 'close_existing' THEN f.valid_from ELSE a.valid_to END,
       a.valid_from_inferred,
       CASE WHEN a.action = 'retract_existing' THEN a.commit_time ELSE a.retracted_at END,
       CASE WHEN a.action = 'close_existing' THEN a.commit_time ELSE a.superseded_at END,
       CASE WHEN a.action = 'close_existing' THEN f.fact_id ELSE a.superseded_by END,
       CASE WHEN a.action = 'close_existing' THEN 'superseded' ELSE 'retracted' END,
       CASE WHEN a.action = 'close_existing' THEN format('superseded by fact {} ({})', f.fact_id, f.object)
            ELSE format('replaced by fact {} ({}) with the same valid_from', f.fact_id, f.object) END,
       a.artifacts, a.first_recorded_at, a.commit_time, true
FROM _tm_acts AS a
JOIN _tm_final AS f ON f.op = a.op
WHERE f.refused IS NULL AND a.action IN ('close_existing', 'retract_existing')
UNION ALL
SELECT s.f, s.fact_id, s.k, s.object, s.valid_from, s.valid_to, s.valid_from_inferred,
       c.commit_time, s.superseded_at, s.superseded_by, 'retracted', c.reason, s.artifacts, s.first_recorded_at,
       c.commit_time, true
FROM _tm_corrections AS c
JOIN _tm_state AS s ON s.f = c.f
WHERE c.refused IS NULL;

DELETE FROM _tm_state WHERE f IN (SELECT u.f FROM _tm_u AS u);

-- A retracted fact can take part in nothing more: only believed states stay.
INSERT INTO _tm_state SELECT * FROM _tm_u AS u WHERE u.status NOT IN ('retracted', 'erased');

INSERT INTO _tm_landed SELECT f.op, f.fact_id, f.f FROM _tm_final AS f WHERE f.refused IS NULL;

INSERT INTO _tm_refused
SELECT f.op, f.refused, f.fact_id, f.conflict_ids, f.conflict_objects FROM _tm_final AS f
WHERE f.refused IS NOT NULL
UNION ALL
SELECT c.op, c.refused, c.fact_id, NULL, NULL FROM _tm_corrections AS c WHERE c.refused IS NOT NULL;

-- @part output
-- One revision row per fact and commit: its state after the last round of that commit (within
-- one commit only each fact's final state is a belief), numbered after its stored revisions,
-- repeating the revision it follows in prev_* (the stored one, or the previous commit's), in
-- the store's sort order. The choice and the chaining are made on narrow rows (`i` is a
-- state's place in `_tm_emitted`): a window sorts every column it carries, and most of a
-- state's columns are only read once, at the end.
-- With $fold_new (a replay), the revisions of the facts the batch made (`f` ≥ 0, the operation
-- that made it; a stored fact's is below 0) are written folded, as a resolve=False load writes
-- its rows: each with its belief end, the next revision's recorded_at (revisions.sql's
-- tm__believed_until), which the chaining window has at hand. Left fresh, a large replayed log
-- was folded by the first small commit that merged files, inside that commit (14M revisions:
-- two minutes of one assert_fact), and until then every read derived its belief ends.
-- Revisions of stored facts stay fresh: their belief ends are derived with the stored rows'.
WITH last AS (
    SELECT e.f, e.last_recorded_at, arg_max(e.i, e.round) AS i
    FROM _tm_emitted AS e GROUP BY e.f, e.last_recorded_at
),
chained AS (
    SELECT l.i, row_number() OVER w AS nth, lag(l.i) OVER w AS prev_i,
           $fold_new AND l.f >= 0 AS folded,
           CASE WHEN folded THEN lead(l.last_recorded_at) OVER w END AS folded_until
    FROM last AS l
    WINDOW w AS (PARTITION BY l.f ORDER BY l.last_recorded_at)
)
SELECT c.fact_id, y.scope, y.subject, y.predicate, c.object, coalesce(o.text, p.text) AS text,
       c.valid_from, c.valid_to, c.valid_from_inferred, c.last_recorded_at AS recorded_at, c.retracted_at,
       c.superseded_at, c.superseded_by, c.status, c.reason, coalesce(o.source, p.source) AS source,
       coalesce(o.confidence, p.confidence) AS confidence,
       coalesce(CAST($origin AS VARCHAR), o.origin, p.origin) AS origin,
       CAST($ingested_at AS TIMESTAMPTZ) AS ingested_at, c.artifacts,
       CASE WHEN o.op IS NULL THEN p.attributes ELSE o.attributes END AS attributes,
       CASE WHEN o.op IS NULL THEN p.embedding ELSE o.embedding END AS embedding,
       coalesce(o.link_type, p.link_type) AS link_type, coalesce(o.weight, p.weight) AS weight,
       CAST(coalesce(p.revision, 0) + h.nth AS INTEGER) AS revision,
       CASE WHEN h.nth = 1 THEN p.object ELSE b.object END AS prev_object,
       CASE WHEN h.nth = 1 THEN p.valid_from ELSE b.valid_from END AS prev_valid_from,
       CASE WHEN h.nth = 1 THEN p.valid_to ELSE b.valid_to END AS prev_valid_to,
       CASE WHEN h.nth = 1 THEN p.recorded_at ELSE b.last_recorded_at END AS prev_recorded_at,
       CASE WHEN h.nth = 1 THEN p.retracted_at ELSE b.retracted_at END AS prev_retracted_at,
       CASE WHEN h.nth = 1 THEN p.superseded_at ELSE b.superseded_at END AS prev_superseded_at,
       CASE WHEN h.nth = 1 THEN p.superseded_by ELSE b.superseded_by END AS prev_superseded_by,
       CASE WHEN h.nth = 1 THEN p.status ELSE b.status END AS prev_status,
       c.first_recorded_at, h.folded, CAST(h.folded_until AS TIMESTAMPTZ) AS folded_until
FROM chained AS h
JOIN _tm_emitted AS c ON c.i = h.i
JOIN _tm_keys AS y ON y.k = c.k
LEFT JOIN _tm_emitted AS b ON b.i = h.prev_i
LEFT JOIN _tm_payload AS o ON o.op = c.f
LEFT JOIN _tm_stored AS p ON c.f < 0 AND p.fact_id = c.fact_id
ORDER BY c.k, c.fact_id, revision;
