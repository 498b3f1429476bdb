-- The closed form of SPEC §5 for the shapes most of a real log has (driven by tempomem/rounds.py,
-- on the tables rounds.sql describes). A key with very many operations then costs one pass over
-- them, not one round each. The rounds go on from the states this file leaves.
--
-- A key's leading operations qualify while each is an assertion with a known start and no end,
-- recorded after every stored revision of its key, and either
--   * single-valued under last_write_wins, on a key whose believed facts have known starts, do not
--     overlap, and end with one open fact. An operation is
--       - in order when it starts no earlier than every operation before it and the open fact. It
--         meets only the key's open fact (every other ends before it starts): the same object is
--         a duplicate of it (`merge`); another object closes it, or retracts it at the same start
--         (`close_existing`, `retract_existing`), and is the new open fact. In-order operations
--         fall in runs of one object, one fact a run, each closed by the next;
--       - late otherwise. It overlaps exactly the believed facts that end after its start, all
--         of them (its end is open). If one of those has its object, it merges into the
--         earliest-recorded such fact, whose period meets no other fact's: nothing else changes.
--         If none has (the late assertion would cut into the timeline), the key's prefix ends
--         there and the rounds apply it;
--   * multi-valued, on a key whose stored facts are all open: every assertion overlaps every fact
--     of its object, so all of an object's merge into its earliest-recorded fact (the first
--     assertion's, if none is stored), and nothing else changes (`store`).
-- `_tm_xe` is what the pass changed, in `_tm_u`'s columns with the operation's `round`, as each
-- round's `_tm_u` is kept. Every window below reads narrow rows, joined back to the operations
-- after: a window sorts every column it carries.

-- @part runs
-- What the believed facts of each key allow. Only a stored fact's revision holds the clock
-- back: a state this batch made is not yet a revision (the rounds' `behind` says the same).
-- `disjoint`: in start order, each fact ends by the next one's start, and none is empty. An
-- empty fact overlaps nothing, so no assertion changes it or is changed by it (SPEC §5, "incl.
-- empty spans"); the lookups below, which find facts by their start and end, would take its
-- start for the next fact's, and its end for one an assertion merges into.
CREATE OR REPLACE TEMP TABLE _tm_xk AS
WITH ordered AS (
    SELECT s.k, s.f, s.valid_from, s.valid_to, s.last_recorded_at, s.emitted,
           lag(s.f) OVER w IS NOT NULL AND coalesce(lag(s.valid_to) OVER w > s.valid_from, true) AS overlaps_before
    FROM _tm_state AS s
    WINDOW w AS (PARTITION BY s.k ORDER BY s.valid_from, s.f)
)
SELECT s.k, max(s.last_recorded_at) FILTER (WHERE NOT s.emitted) AS last_at, max(s.valid_from) AS max_from,
       bool_or(s.valid_from IS NULL) AS unknown_start, count(*) FILTER (WHERE s.valid_to IS NULL) AS open_facts,
       max(s.valid_to) AS max_to, arg_max(s.f, s.valid_from) FILTER (WHERE s.valid_to IS NULL) AS open_f,
       NOT bool_or(s.overlaps_before OR s.valid_to <= s.valid_from) AS disjoint
FROM ordered AS s
GROUP BY s.k;

-- Each key's operations up to the first that cannot be in the closed form whatever the facts
-- (`fits`), with whether each is in order and, for single-valued keys, the in-order runs: an
-- in-order operation of another object than the last in-order one `leads` a run (run 0 is the
-- stored open fact), and `cur_run` is the run that is open when the operation comes.
CREATE OR REPLACE TEMP TABLE _tm_xb AS
WITH keyed AS (
    SELECT o.op, o.k, o.rule, o.object, o.valid_from, o.commit_time, o.new_id, xk.open_f, s.object AS open_object,
           xk.max_from,
           (xk.k IS NULL OR coalesce(CASE WHEN o.rule = 'multi' THEN NOT xk.unknown_start AND xk.max_to IS NULL
               ELSE NOT xk.unknown_start AND xk.open_facts = 1 AND xk.max_from = s.valid_from AND xk.disjoint END,
               false))
           AND o.kind = 'assert' AND o.rule IN ('single/last_write_wins', 'multi') AND o.valid_from IS NOT NULL
           AND o.valid_to IS NULL AND coalesce(o.commit_time > xk.last_at, true) AS fits
    FROM _tm_ops AS o
    LEFT JOIN _tm_xk AS xk ON xk.k = o.k
    LEFT JOIN _tm_state AS s ON s.f = xk.open_f
    WHERE o.round <= $window
),
misfits AS (SELECT y.k, min(y.op) AS op FROM keyed AS y WHERE NOT y.fits GROUP BY y.k),
-- Over the operations before each: the latest start, and the object of the last operation that
-- started there. An operation is in order when it starts no earlier than that and the open
-- fact, so that operation was the last in-order one unless the open fact starts later.
-- The last is the greatest (valid_from, op), compared as one HUGEINT, valid_from's µs · 2^64 + op:
-- valid_from is known here, and two BIGINT ops differ by less than 2^64, so the number orders as
-- the pair does (a shift would refuse the negative µs before 1970). DuckDB's framed arg_max over
-- it takes a seventh less time than over the pair as a struct.
seen AS (
    SELECT y.* EXCLUDE (fits), max(y.valid_from) OVER earlier AS high,
           arg_max(y.object, CAST(epoch_us(y.valid_from) AS HUGEINT) * 18446744073709551616 + y.op)
               OVER earlier AS high_object
    FROM keyed AS y
    LEFT JOIN misfits AS m ON m.k = y.k
    WHERE y.op < coalesce(m.op, y.op + 1)
    WINDOW earlier AS (PARTITION BY y.k ORDER BY y.op ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
led AS (
    SELECT y.* EXCLUDE (max_from, high, high_object),
           y.rule = 'multi' OR y.valid_from >= coalesce(greatest(y.high, y.max_from), y.valid_from) AS in_order,
           y.rule <> 'multi' AND y.valid_from >= coalesce(greatest(y.high, y.max_from), y.valid_from)
           AND y.object IS DISTINCT FROM CASE WHEN y.high >= coalesce(y.max_from, y.high) THEN y.high_object
                                              ELSE y.open_object END AS leads
    FROM seen AS y
)
SELECT l.*, CAST(sum(CAST(l.leads AS INTEGER)) OVER (PARTITION BY l.k ORDER BY l.op ROWS UNBOUNDED PRECEDING)
                 AS INTEGER) AS cur_run
FROM led AS l;

-- The runs of the single-valued keys: the stored open fact (run 0) and each leading
-- operation's fact, with the next run's start and operation. A run whose next one starts where
-- it starts is retracted by it; any other is closed at that start.
CREATE OR REPLACE TEMP TABLE _tm_xc AS
WITH chain AS (
    SELECT b.k, b.cur_run AS run, b.object, b.valid_from, b.op AS lead_op, b.commit_time AS first_recorded_at,
           b.new_id AS fact_id
    FROM _tm_xb AS b WHERE b.leads
    UNION ALL
    SELECT s.k, 0, s.object, s.valid_from, NULL, s.first_recorded_at, s.fact_id
    FROM (SELECT DISTINCT b.open_f FROM _tm_xb AS b WHERE b.rule <> 'multi') AS t
    JOIN _tm_state AS s ON s.f = t.open_f
)
SELECT c.*, lead(c.valid_from) OVER w AS next_from, lead(c.lead_op) OVER w AS next_op
FROM chain AS c
WINDOW w AS (PARTITION BY c.k ORDER BY c.run);

-- Each late operation against the timeline the pass has built when it comes. Ended facts get
-- run numbers below 0, in start order, so that one can be landed on or cut beside the runs.
--   * Where it merges, if anywhere: the earliest-recorded fact of its object that ends after
--     its start, among the key's ended facts as the pass found them (of those ending after the
--     start, the earliest-recorded: `first`, each fact's over the facts of its object ending no
--     earlier) and the runs: a run closed before the operation, the first of its object to end
--     after the start (runs end in order), else the open run if it is of the object.
--   * Else what it cuts: the fact holding its start is closed there, or retracted if it starts
--     there (`close_existing`, `retract_existing`); the new fact is closed at the next fact's
--     start (`close_new`). Among runs of one start only the latest is believed, and no run
--     before the operation starts after the latest start it has seen, nor any after it before.
CREATE OR REPLACE TEMP TABLE _tm_xt AS
WITH late AS (
    SELECT b.op, b.k, b.object, b.valid_from, b.cur_run FROM _tm_xb AS b WHERE NOT b.in_order
),
lows AS (SELECT l.k, min(l.valid_from) AS low FROM late AS l GROUP BY l.k),
chain AS MATERIALIZED (SELECT c.* FROM _tm_xc AS c SEMI JOIN lows AS t ON t.k = c.k),
-- Only facts ending after the key's earliest late start can be looked up below. In start
-- order ends rise too (the facts are disjoint), so these are the latest-starting ones, and
-- `first` and `run` come out as over all of them.
ended AS (
    SELECT s.k, s.f, s.object, s.valid_from, s.valid_to, s.fact_id,
           min({'at': s.first_recorded_at, 'id': s.fact_id, 'f': s.f}) OVER (
               PARTITION BY s.k, s.object ORDER BY s.valid_to DESC ROWS UNBOUNDED PRECEDING) AS first,
           CAST(-row_number() OVER (PARTITION BY s.k ORDER BY s.valid_from DESC) AS INTEGER) AS run
    FROM _tm_state AS s
    JOIN lows AS t ON t.k = s.k
    WHERE s.valid_to > t.low
),
starts AS (
    SELECT c.k, c.valid_from, min(c.run) AS first_run, max(c.run) AS last_run FROM chain AS c GROUP BY ALL
),
found AS (
    SELECT l.op, l.k, l.valid_from, e.first AS by_ended,
           CASE WHEN c.next_op < l.op THEN c.run WHEN cur.object = l.object THEN cur.run END AS by_run,
           CASE WHEN sc.k IS NOT NULL THEN least(sc.last_run, l.cur_run) END AS in_run,
           CASE WHEN ec.valid_to > l.valid_from THEN ec.run END AS in_ended,
           CASE WHEN sn.first_run <= l.cur_run THEN least(sn.last_run, l.cur_run) END AS next_run,
           en.run AS next_ended, en.valid_from AS next_ended_from, en.fact_id AS next_ended_id,
           en.object AS next_ended_object
    FROM late AS l
    ASOF LEFT JOIN ended AS e ON e.k = l.k AND e.object = l.object AND l.valid_from < e.valid_to
    ASOF LEFT JOIN (SELECT * FROM chain WHERE next_from > valid_from) AS c
         ON c.k = l.k AND c.object = l.object AND l.valid_from < c.next_from
    LEFT JOIN chain AS cur ON cur.k = l.k AND cur.run = l.cur_run
    ASOF LEFT JOIN starts AS sc ON sc.k = l.k AND l.valid_from >= sc.valid_from
    ASOF LEFT JOIN starts AS sn ON sn.k = l.k AND l.valid_from < sn.valid_from
    ASOF LEFT JOIN ended AS ec ON ec.k = l.k AND l.valid_from >= ec.valid_from
    ASOF LEFT JOIN ended AS en ON en.k = l.k AND l.valid_from < en.valid_from
),
chosen AS (
    SELECT d.*, d.by_ended IS NOT NULL AND (r.run IS NULL OR d.by_ended < {'at': r.first_recorded_at,
                                                                       'id': r.fact_id, 'f': 0}) AS to_ended,
           r.run AS to_run
    FROM found AS d
    LEFT JOIN chain AS r ON r.k = d.k AND r.run = d.by_run
)
SELECT d.op,
       CASE WHEN d.to_ended THEN n.run ELSE d.to_run END AS run,
       CASE WHEN d.to_ended THEN d.by_ended.f END AS stored_f,
       coalesce(d.in_run, d.in_ended) AS cut_run,
       ce.f AS cut_f,
       coalesce(ci.valid_from, ce.valid_from) = d.valid_from AS cut_same_start,
       coalesce(d.next_ended_from, nc.valid_from) AS next_from,
       CASE WHEN d.next_ended IS NOT NULL THEN d.next_ended_id ELSE nc.fact_id END AS next_id,
       CASE WHEN d.next_ended IS NOT NULL THEN d.next_ended_object ELSE nc.object END AS next_object
FROM chosen AS d
LEFT JOIN ended AS n ON n.f = d.by_ended.f
LEFT JOIN chain AS ci ON ci.k = d.k AND ci.run = d.in_run
LEFT JOIN ended AS ce ON ce.k = d.k AND ce.run = d.in_ended AND d.in_run IS NULL
LEFT JOIN chain AS nc ON nc.k = d.k AND nc.run = d.next_run;

-- The operations the closed form takes: each key's longest prefix of in-order operations, late
-- ones that merge, and late ones that cut into the timeline (`cuts`), with the run each lands
-- on. Every decision above was made against the timeline as the pass found it, plus the runs; a
-- cut changes the timeline from its start to the next fact's, so the prefix holds only
-- operations that start at or after the end of every cut before them (then nothing they look
-- at, the facts ending after their start, was changed). A multi-valued run is one object,
-- continuing its earliest-recorded stored fact when there is one.
CREATE OR REPLACE TEMP TABLE _tm_xr AS
WITH flagged AS (
    SELECT b.op, b.k, b.valid_from, b.leads, b.open_f, CASE WHEN b.in_order THEN b.cur_run ELSE t.run END AS run,
           NOT b.in_order AND t.run IS NULL AS cuts, t.next_from
    FROM _tm_xb AS b
    LEFT JOIN _tm_xt AS t ON t.op = b.op
),
unclear AS (  -- on the keys with a cut: each key's first operation that starts before a cut's end
    SELECT g.k, min(g.op) AS op
    FROM (SELECT g.k, g.op, g.valid_from < max(CASE WHEN g.cuts THEN coalesce(g.next_from, 'infinity'::TIMESTAMPTZ) END)
                     OVER (PARTITION BY g.k ORDER BY g.op ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS blocked
          FROM flagged AS g SEMI JOIN (SELECT DISTINCT c.k FROM flagged AS c WHERE c.cuts) AS t ON t.k = g.k) AS g
    WHERE g.blocked
    GROUP BY g.k
),
taken AS (
    SELECT g.* FROM flagged AS g LEFT JOIN unclear AS u ON u.k = g.k WHERE g.op < coalesce(u.op, g.op + 1)
),
stored_multi AS (
    SELECT s.k, s.object, arg_min(s.f, (s.first_recorded_at, s.fact_id)) AS f
    FROM _tm_state AS s GROUP BY s.k, s.object
),
multi AS (
    SELECT x.op, t.f IS NULL AND row_number() OVER (PARTITION BY x.k, x.object ORDER BY x.op) = 1 AS leads,
           CAST(dense_rank() OVER (PARTITION BY x.k ORDER BY x.object) AS INTEGER) AS run, t.f AS stored_f
    FROM _tm_xb AS x
    LEFT JOIN stored_multi AS t ON t.k = x.k AND t.object = x.object
    WHERE x.rule = 'multi'
)
SELECT o.*, g.open_f, s.object AS open_object, coalesce(m.leads, g.leads) AS leads, coalesce(m.run, g.run) AS run,
       coalesce(m.stored_f, t.stored_f) AS stored_f, g.cuts,
       t.cut_run, t.cut_f, t.cut_same_start, t.next_from, t.next_id, t.next_object
FROM taken AS g
JOIN _tm_ops AS o ON o.op = g.op
LEFT JOIN _tm_xt AS t ON t.op = g.op
LEFT JOIN multi AS m ON m.op = g.op
LEFT JOIN _tm_state AS s ON s.f = g.open_f;

-- One row per run: its fact as it starts (made at `made_round`, or stored: round 0), and for a
-- single-valued key's in-order run the next run's fact, which ends it at `next_round`.
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
    FROM (SELECT DISTINCT x.k, x.rule, 0 AS run, x.open_f AS f FROM _tm_xr AS x
          WHERE x.rule <> 'multi' AND x.open_f IS NOT NULL
          UNION
          SELECT DISTINCT r.k, r.rule, r.run, r.stored_f FROM _tm_xr AS r WHERE r.stored_f IS NOT NULL
          UNION
          SELECT r.k, r.rule, r.cut_run, r.cut_f FROM _tm_xr AS r WHERE r.cut_f IS NOT NULL) AS t
    JOIN _tm_state AS s ON s.f = t.f
)
SELECT m.*,
       CASE WHEN m.rule <> 'multi' AND m.run >= 0 THEN lead(m.fact_id) OVER w END AS next_id,
       CASE WHEN m.rule <> 'multi' AND m.run >= 0 THEN lead(m.object) OVER w END AS next_object,
       CASE WHEN m.rule <> 'multi' AND m.run >= 0 THEN lead(m.valid_from) OVER w END AS next_from,
       CASE WHEN m.rule <> 'multi' AND m.run >= 0 THEN lead(m.first_recorded_at) OVER w END AS next_at,
       CASE WHEN m.rule <> 'multi' AND m.run >= 0 THEN lead(m.made_round) OVER w END AS next_round
FROM made AS m
WINDOW w AS (PARTITION BY m.k, m.run >= 0 ORDER BY m.run);

-- Each artifact of a run where it first appears: a duplicate adds the artifacts its fact lacks,
-- first occurrence first, as tm_merged_artifacts does one assertion at a time.
CREATE OR REPLACE TEMP TABLE _tm_xa AS
WITH listed AS (
    SELECT r.k, r.run, r.made_round AS round, r.artifacts FROM _tm_xruns AS r
    UNION ALL
    SELECT x.k, x.run, x.round, x.artifacts FROM _tm_xr AS x WHERE NOT x.leads AND NOT x.cuts
),
items AS (
    SELECT l.k, l.run, l.round, unnest(l.artifacts) AS artifact, unnest(range(len(l.artifacts))) AS pos
    FROM listed AS l WHERE len(l.artifacts) > 0
)
SELECT * FROM items AS i
QUALIFY row_number() OVER (PARTITION BY i.k, i.run, i.artifact ORDER BY i.round, i.pos) = 1;

-- Every state the closed form changes, one per event of a run: its fact made, a duplicate that
-- added an artifact (a new revision), the next run closing or retracting it, and a late
-- operation cutting it. Each state has the artifacts of its run's latest growth up to then, and
-- is closed from the next run on (a late duplicate can come after it). Then the facts the late
-- operations that cut made.
CREATE OR REPLACE TEMP TABLE _tm_xe AS
WITH grown AS (
    SELECT a.k, a.run, g.round, list(a.artifact ORDER BY a.round, a.pos) AS artifacts
    FROM (SELECT DISTINCT k, run, round FROM _tm_xa) AS g
    JOIN _tm_xruns AS r ON r.k = g.k AND r.run = g.run
    JOIN _tm_xa AS a ON a.k = g.k AND a.run = g.run AND a.round <= g.round
    WHERE g.round > r.made_round
    GROUP BY a.k, a.run, g.round
),
events AS (  -- each with its run's state, its operation's commit time, and for a cut the operation
    SELECT r.*, r.made_round AS round, r.first_recorded_at AS event_at, CAST(NULL AS BIGINT) AS cut_op
    FROM _tm_xruns AS r WHERE r.made_round > 0
    UNION ALL
    SELECT r.*, r.next_round, r.next_at, NULL FROM _tm_xruns AS r WHERE r.next_id IS NOT NULL
    UNION ALL
    SELECT r.*, g.round, x.commit_time, NULL
    FROM grown AS g JOIN _tm_xruns AS r ON r.k = g.k AND r.run = g.run JOIN _tm_xr AS x ON x.k = g.k AND x.round = g.round
    UNION ALL
    SELECT r.*, x.round, x.commit_time, x.op
    FROM _tm_xr AS x JOIN _tm_xruns AS r ON r.k = x.k AND r.run = x.cut_run WHERE x.cuts
),
stamped AS (  -- the artifacts of the run's latest growth up to the event
    SELECT e.*, CAST(NULL AS VARCHAR[]) AS grown_artifacts
    FROM events AS e ANTI JOIN (SELECT DISTINCT g.k, g.run FROM grown AS g) AS g ON g.k = e.k AND g.run = e.run
    UNION ALL
    SELECT e.*, g.artifacts
    FROM (SELECT e.* FROM events AS e SEMI JOIN grown AS g ON g.k = e.k AND g.run = e.run) AS e
    ASOF LEFT JOIN grown AS g ON g.k = e.k AND g.run = e.run AND e.round >= g.round
),
states AS (
    SELECT t.* EXCLUDE (grown_artifacts, event_at), coalesce(t.grown_artifacts, t.artifacts) AS now_artifacts,
           t.event_at AS commit_time, coalesce(t.round >= t.next_round, false) AS closed,
           t.valid_from = t.next_from AS same_start,
           x.op IS NOT NULL AS cut, x.cut_same_start, x.valid_from AS cut_from, x.new_id AS cut_id,
           x.object AS cut_object
    FROM stamped AS t
    LEFT JOIN (SELECT * FROM _tm_xr WHERE cuts) AS x ON x.op = t.cut_op
),
ruled AS (  -- what the state's event did to its fact, each decided once: what supersedes it (its
            -- end, time and successor) and what retracts it. A cut supersedes the fact, or
            -- retracts it and keeps what the next run's closing set before.
    SELECT s.*,
           CASE WHEN s.cut AND NOT s.cut_same_start
                     THEN {'valid_to': s.cut_from, 'at': s.commit_time, 'id': s.cut_id, 'object': s.cut_object}
                WHEN s.closed AND NOT s.same_start
                     THEN {'valid_to': s.next_from, 'at': s.next_at, 'id': s.next_id, 'object': s.next_object}
           END AS superseding,
           CASE WHEN s.cut AND s.cut_same_start THEN {'at': s.commit_time, 'id': s.cut_id, 'object': s.cut_object}
                WHEN NOT s.cut AND s.closed AND s.same_start
                     THEN {'at': s.next_at, 'id': s.next_id, 'object': s.next_object}
           END AS retracting
    FROM states AS s
)
SELECT s.round, s.f, s.fact_id, s.k, s.object, s.valid_from,
       CASE WHEN s.superseding IS NULL THEN s.valid_to ELSE s.superseding.valid_to END AS valid_to,
       s.valid_from_inferred,
       CASE WHEN s.retracting IS NULL THEN s.retracted_at ELSE s.retracting.at END AS retracted_at,
       CASE WHEN s.superseding IS NULL THEN s.superseded_at ELSE s.superseding.at END AS superseded_at,
       CASE WHEN s.superseding IS NULL THEN s.superseded_by ELSE s.superseding.id END AS superseded_by,
       CASE WHEN s.retracting IS NOT NULL THEN 'retracted' WHEN s.superseding IS NOT NULL THEN 'superseded'
            ELSE s.status END AS status,
       CASE WHEN s.retracting IS NOT NULL
                 THEN format('replaced by fact {} ({}) with the same valid_from', s.retracting.id, s.retracting.object)
            WHEN s.superseding IS NOT NULL
                 THEN format('superseded by fact {} ({})', s.superseding.id, s.superseding.object)
            ELSE s.reason END AS reason,
       s.now_artifacts AS artifacts, s.first_recorded_at, s.commit_time AS last_recorded_at, true AS emitted
FROM ruled AS s
UNION ALL
SELECT x.round, x.op, x.new_id, x.k, x.object, x.valid_from, x.next_from, x.valid_from_inferred,
       CAST(NULL AS TIMESTAMPTZ), CASE WHEN x.next_id IS NOT NULL THEN x.commit_time END, x.next_id,
       CASE WHEN x.next_id IS NULL THEN 'live' ELSE 'superseded' END,
       CASE WHEN x.next_id IS NULL THEN x.reason ELSE format('superseded by fact {} ({})', x.next_id, x.next_object) END,
       x.artifacts, x.commit_time, x.commit_time, true
FROM _tm_xr AS x WHERE x.cuts;

-- The rounds go on from here: the operations taken are landed, their facts' states replaced
-- (`keep_states`), and each key's remaining operations renumbered from round 1.
INSERT INTO _tm_landed
SELECT x.op, r.fact_id, r.f FROM _tm_xr AS x
JOIN _tm_xruns AS r ON r.k = x.k AND r.run = x.run
UNION ALL
SELECT x.op, x.new_id, x.op FROM _tm_xr AS x WHERE x.cuts;

-- How many operations the pass took off each key: for the driver's next window and for
-- renumbering what is left (either part below).
CREATE OR REPLACE TEMP TABLE _tm_xtaken AS SELECT x.k, count(*) AS taken FROM _tm_xr AS x GROUP BY x.k;

-- @part keep_states
-- After a pass (this file's or closedform_busy.sql's): the states it changed (`_tm_xe`) replace
-- their facts' in `_tm_state`, each fact's last (a fact changes at most once a round); a
-- retracted fact is no longer believed.
DELETE FROM _tm_state WHERE f IN (SELECT e.f FROM _tm_xe AS e);

INSERT INTO _tm_state
SELECT e.* EXCLUDE (round) FROM _tm_xe AS e
SEMI JOIN (SELECT f, max(round) AS round FROM _tm_xe GROUP BY f) AS m ON m.f = e.f AND m.round = e.round
WHERE e.status <> 'retracted';

-- @part next_sorted
-- After a pass that took most of what was left: the rest, each key's renumbered from round 1,
-- stored in round order, so that each round's `round = $round` and each pass's window skip the
-- others' row groups.
CREATE OR REPLACE TEMP TABLE _tm_ops AS
SELECT o.* REPLACE (CAST(o.round - coalesce(t.taken, 0) AS INTEGER) AS round)
FROM _tm_ops AS o
LEFT JOIN _tm_xtaken AS t ON t.k = o.k
WHERE o.round > coalesce(t.taken, 0)
ORDER BY round;

-- Facts of keys with no operation left can change no more: the rounds need only the others.
CREATE OR REPLACE TEMP TABLE _tm_state AS
SELECT s.* FROM _tm_state AS s
SEMI JOIN (SELECT DISTINCT o.k FROM _tm_ops AS o) AS t ON t.k = s.k;

-- @part next_in_place
-- After a pass that took a few operations off many left (one key with very many operations,
-- cutting into its timeline every few dozen): the same, changing the rows in place, since
-- sorting all that is left again cost more than the pass.
-- A pass takes each key's leading operations: its rounds 1 to `taken`.
DELETE FROM _tm_ops USING _tm_xtaken AS t WHERE t.k = _tm_ops.k AND _tm_ops.round <= t.taken;

UPDATE _tm_ops SET round = CAST(_tm_ops.round - t.taken AS INTEGER)
FROM _tm_xtaken AS t
WHERE t.k = _tm_ops.k;

DELETE FROM _tm_state WHERE k NOT IN (SELECT DISTINCT o.k FROM _tm_ops AS o);
