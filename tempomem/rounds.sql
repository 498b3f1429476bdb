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
-- once; then `runs` (the closed form), and while it pays, one `round` and `advance` before it is
-- tried again; then each statement of `round` once per round with $round bound; `output` once at
-- the end.

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

-- @part runs
-- Before the rounds, the two shapes most of a real log has, in closed form: a key with very many
-- operations then costs one pass over them, not one round each. A key's leading operations
-- qualify while each is an assertion with a known start and no end, recorded after every stored
-- revision of its key, and either
--   * single-valued under last_write_wins, starting no earlier than any fact of the key believed
--     so far, on a key whose stored facts are one open fact after ended ones. Each assertion then
--     meets only the key's open fact (every other ends before it starts): the same object is a
--     duplicate of it (`merge`); another object closes it, or retracts it at the same start
--     (`close_existing`, `retract_existing`), and is the new open fact. The operations fall in
--     runs of one object, one fact a run; or
--   * multi-valued, on a key whose stored facts are all open: every assertion overlaps every fact
--     of its object, so all of an object's merge into its earliest-recorded fact (the first
--     assertion's, if none is stored), and nothing else changes (`store`).
-- The rest of each key's operations, from the first that does not qualify, go to the rounds,
-- which start from the states this section leaves. `_tm_xe` is what it changed, in `_tm_u`'s
-- columns with the operation's `round`, as each round's `_tm_u` is kept.

-- What the believed facts of each key allow. Only a stored fact's revision holds the clock
-- back: a state this batch made is not yet a revision (the rounds' `behind` says the same).
CREATE OR REPLACE TEMP TABLE _tm_xk AS
SELECT s.k, max(s.last_recorded_at) FILTER (WHERE NOT s.emitted) AS last_at, max(s.valid_from) AS max_from,
       bool_or(s.valid_from IS NULL) AS unknown_start, count(*) FILTER (WHERE s.valid_to IS NULL) AS open_facts,
       max(s.valid_to) AS max_to, arg_max(s.f, s.valid_from) FILTER (WHERE s.valid_to IS NULL) AS open_f
FROM _tm_state AS s
GROUP BY s.k;

-- The operations the closed form takes: each key's longest qualifying prefix. Within such a
-- prefix the starts never go down, so "no earlier than every earlier start" is "no earlier
-- than the previous one" (`lag`, not a running max). The windows read narrow rows and the
-- prefix is joined back to the operations: a window sorts every column it carries.
CREATE OR REPLACE TEMP TABLE _tm_x AS
WITH keyed AS (
    SELECT o.op, o.k, o.rule, o.kind, o.valid_from, o.valid_to, o.commit_time, xk.last_at, xk.max_from, xk.open_f,
           xk.k IS NULL OR coalesce(CASE WHEN o.rule = 'multi' THEN NOT xk.unknown_start AND xk.max_to IS NULL
               ELSE NOT xk.unknown_start AND xk.open_facts = 1 AND xk.max_from = s.valid_from
                    AND coalesce(xk.max_to <= s.valid_from, true) END, false) AS key_ok,
           lag(o.valid_from) OVER (PARTITION BY o.k ORDER BY o.op) AS earlier_from
    FROM _tm_ops AS o
    LEFT JOIN _tm_xk AS xk ON xk.k = o.k
    LEFT JOIN _tm_state AS s ON s.f = xk.open_f
),
flagged AS (
    SELECT y.op, y.open_f,
           bool_and(y.key_ok AND y.kind = 'assert' AND y.rule IN ('single/last_write_wins', 'multi')
                    AND y.valid_from IS NOT NULL AND y.valid_to IS NULL AND coalesce(y.commit_time > y.last_at, true)
                    AND (y.rule = 'multi' OR (y.valid_from >= coalesce(y.earlier_from, y.valid_from)
                                              AND y.valid_from >= coalesce(y.max_from, y.valid_from))))
               OVER (PARTITION BY y.k ORDER BY y.op ROWS UNBOUNDED PRECEDING) AS qualifies
    FROM keyed AS y
)
SELECT o.*, g.open_f, s.object AS open_object
FROM flagged AS g
JOIN _tm_ops AS o ON o.op = g.op
LEFT JOIN _tm_state AS s ON s.f = g.open_f
WHERE g.qualifies;

-- Each operation's run: which fact it lands on. A run that `leads` makes the fact; the others
-- merge into it. A single-valued run starts where the object changes (run 0 continues the
-- stored open fact); a multi-valued run is one object, continuing its earliest-recorded stored
-- fact when there is one. Narrow rows again, joined back.
CREATE OR REPLACE TEMP TABLE _tm_xr AS
WITH single AS (
    SELECT x.op, x.k, x.object IS DISTINCT FROM coalesce(lag(x.object) OVER w, x.open_object) AS leads
    FROM _tm_x AS x WHERE x.rule <> 'multi'
    WINDOW w AS (PARTITION BY x.k ORDER BY x.op)
),
stored_multi AS (
    SELECT s.k, s.object, arg_min(s.f, (s.first_recorded_at, s.fact_id)) AS f
    FROM _tm_state AS s GROUP BY s.k, s.object
),
runs AS (
    SELECT y.op, y.leads, sum(CAST(y.leads AS INTEGER)) OVER (PARTITION BY y.k ORDER BY y.op ROWS UNBOUNDED PRECEDING)
               AS run, CAST(NULL AS BIGINT) AS stored_f
    FROM single AS y
    UNION ALL
    SELECT x.op, t.f IS NULL AND row_number() OVER (PARTITION BY x.k, x.object ORDER BY x.op) = 1,
           dense_rank() OVER (PARTITION BY x.k ORDER BY x.object), t.f
    FROM _tm_x AS x
    LEFT JOIN stored_multi AS t ON t.k = x.k AND t.object = x.object
    WHERE x.rule = 'multi'
)
SELECT x.*, r.leads, r.run, r.stored_f
FROM runs AS r JOIN _tm_x AS x ON x.op = r.op;

-- One row per run: its fact as it starts (made at `made_round`, or stored: round 0), and for a
-- single-valued key the next run's fact, which ends it.
CREATE OR REPLACE TEMP TABLE _tm_xruns AS
WITH made AS (
    SELECT r.k, r.run, r.rule, r.op AS f, r.new_id AS fact_id, r.object, r.valid_from,
           CAST(NULL AS TIMESTAMPTZ) AS valid_to, r.valid_from_inferred, CAST(NULL AS TIMESTAMPTZ) AS retracted_at,
           CAST(NULL AS TIMESTAMPTZ) AS superseded_at, CAST(NULL AS VARCHAR) AS superseded_by, 'live' AS status,
           r.reason, r.artifacts, r.commit_time AS first_recorded_at, r.round AS made_round
    FROM _tm_xr AS r WHERE r.leads
    UNION ALL
    SELECT s.k, t.run, t.rule, s.f, s.fact_id, s.object, s.valid_from, s.valid_to,
           s.valid_from_inferred, s.retracted_at, s.superseded_at, s.superseded_by, s.status, s.reason, s.artifacts,
           s.first_recorded_at, 0
    FROM (SELECT DISTINCT x.k, x.rule, 0 AS run, x.open_f AS f FROM _tm_x AS x
          WHERE x.rule <> 'multi' AND x.open_f IS NOT NULL
          UNION
          SELECT DISTINCT r.k, r.rule, r.run, r.stored_f FROM _tm_xr AS r
          WHERE r.rule = 'multi' AND r.stored_f IS NOT NULL) AS t
    JOIN _tm_state AS s ON s.f = t.f
)
SELECT m.*,
       CASE WHEN m.rule <> 'multi' THEN lead(m.fact_id) OVER w END AS next_id,
       CASE WHEN m.rule <> 'multi' THEN lead(m.object) OVER w END AS next_object,
       CASE WHEN m.rule <> 'multi' THEN lead(m.valid_from) OVER w END AS next_from,
       CASE WHEN m.rule <> 'multi' THEN lead(m.first_recorded_at) OVER w END AS next_at,
       CASE WHEN m.rule <> 'multi' THEN lead(m.made_round) OVER w END AS next_round
FROM made AS m
WINDOW w AS (PARTITION BY m.k ORDER BY m.run);

-- Each artifact of a run where it first appears: a duplicate adds the artifacts its fact lacks,
-- first occurrence first, as tm_merged_artifacts does one assertion at a time.
CREATE OR REPLACE TEMP TABLE _tm_xa AS
WITH listed AS (
    SELECT r.k, r.run, r.made_round AS round, r.artifacts FROM _tm_xruns AS r
    UNION ALL
    SELECT x.k, x.run, x.round, x.artifacts FROM _tm_xr AS x WHERE NOT x.leads
),
items AS (
    SELECT l.k, l.run, l.round, unnest(l.artifacts) AS artifact, unnest(range(len(l.artifacts))) AS pos
    FROM listed AS l WHERE len(l.artifacts) > 0
)
SELECT * FROM items AS i
QUALIFY row_number() OVER (PARTITION BY i.k, i.run, i.artifact ORDER BY i.round, i.pos) = 1;

-- Every state the closed form changes: a run's fact as made, after each duplicate that added an
-- artifact (a new revision), and as the next run's fact closes or retracts it.
CREATE OR REPLACE TEMP TABLE _tm_xe AS
WITH grown AS (
    SELECT a.k, a.run, g.round, list(a.artifact ORDER BY a.round, a.pos) AS artifacts
    FROM (SELECT DISTINCT k, run, round FROM _tm_xa) AS g
    JOIN _tm_xruns AS r ON r.k = g.k AND r.run = g.run
    JOIN _tm_xa AS a ON a.k = g.k AND a.run = g.run AND a.round <= g.round
    WHERE g.round > r.made_round
    GROUP BY a.k, a.run, g.round
),
final AS (
    SELECT r.*, coalesce(g.artifacts, r.artifacts) AS final_artifacts
    FROM _tm_xruns AS r
    LEFT JOIN (SELECT * FROM grown QUALIFY row_number() OVER (PARTITION BY k, run ORDER BY round DESC) = 1) AS g
           ON g.k = r.k AND g.run = r.run
)
SELECT r.made_round AS round, r.f, r.fact_id, r.k, r.object, r.valid_from, r.valid_to,
       r.valid_from_inferred, r.retracted_at, r.superseded_at, r.superseded_by, r.status, r.reason, r.artifacts,
       r.first_recorded_at, r.first_recorded_at AS last_recorded_at, true AS emitted
FROM _tm_xruns AS r WHERE r.made_round > 0
UNION ALL
SELECT g.round, r.f, r.fact_id, r.k, r.object, r.valid_from, r.valid_to,
       r.valid_from_inferred, r.retracted_at, r.superseded_at, r.superseded_by, r.status, r.reason, g.artifacts,
       r.first_recorded_at, x.commit_time, true
FROM grown AS g
JOIN _tm_xruns AS r ON r.k = g.k AND r.run = g.run
JOIN _tm_xr AS x ON x.k = g.k AND x.round = g.round
UNION ALL
SELECT f.next_round, f.f, f.fact_id, f.k, f.object, f.valid_from,
       CASE WHEN f.same_start THEN f.valid_to ELSE f.next_from END, f.valid_from_inferred,
       CASE WHEN f.same_start THEN f.next_at ELSE f.retracted_at END,
       CASE WHEN f.same_start THEN f.superseded_at ELSE f.next_at END,
       CASE WHEN f.same_start THEN f.superseded_by ELSE f.next_id END,
       CASE WHEN f.same_start THEN 'retracted' ELSE 'superseded' END,
       CASE WHEN f.same_start THEN format('replaced by fact {} ({}) with the same valid_from', f.next_id, f.next_object)
            ELSE format('superseded by fact {} ({})', f.next_id, f.next_object) END,
       f.final_artifacts, f.first_recorded_at, f.next_at, true
FROM (SELECT final.*, final.valid_from = final.next_from AS same_start FROM final) AS f
WHERE f.next_id IS NOT NULL;

-- The rounds go on from here: the operations taken are landed, their facts' states replaced,
-- and each key's remaining operations renumbered from round 1.
INSERT INTO _tm_landed
SELECT x.op, r.fact_id, r.f FROM _tm_xr AS x
JOIN _tm_xruns AS r ON r.k = x.k AND r.run = x.run;

DELETE FROM _tm_state WHERE f IN (SELECT e.f FROM _tm_xe AS e);

-- each fact's last state (a fact changes at most once a round)
INSERT INTO _tm_state
SELECT e.* EXCLUDE (round) FROM _tm_xe AS e
SEMI JOIN (SELECT f, max(round) AS round FROM _tm_xe GROUP BY f) AS m ON m.f = e.f AND m.round = e.round
WHERE e.status <> 'retracted';

-- stored in round order, so that each round's `round = $round` skips the others' row groups
CREATE OR REPLACE TEMP TABLE _tm_ops AS
SELECT o.* REPLACE (CAST(o.round - coalesce(t.taken, 0) AS INTEGER) AS round)
FROM _tm_ops AS o
LEFT JOIN (SELECT x.k, count(*) AS taken FROM _tm_x AS x GROUP BY x.k) AS t ON t.k = o.k
WHERE o.round > coalesce(t.taken, 0)
ORDER BY round;

-- Facts of keys with no operation left can change no more: the rounds need only the others.
CREATE OR REPLACE TEMP TABLE _tm_state AS
SELECT s.* FROM _tm_state AS s
SEMI JOIN (SELECT DISTINCT o.k FROM _tm_ops AS o) AS t ON t.k = s.k;

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
WITH last AS (
    SELECT e.f, e.last_recorded_at, arg_max(e.i, e.round) AS i
    FROM _tm_emitted AS e GROUP BY e.f, e.last_recorded_at
),
chained AS (
    SELECT l.i, row_number() OVER w AS nth, lag(l.i) OVER w AS prev_i
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
       c.first_recorded_at, false AS folded, CAST(NULL AS TIMESTAMPTZ) AS folded_until
FROM chained AS h
JOIN _tm_emitted AS c ON c.i = h.i
JOIN _tm_keys AS y ON y.k = c.k
LEFT JOIN _tm_emitted AS b ON b.i = h.prev_i
LEFT JOIN _tm_payload AS o ON o.op = c.f
LEFT JOIN _tm_stored AS p ON c.f < 0 AND p.fact_id = c.fact_id
ORDER BY c.k, c.fact_id, revision;
