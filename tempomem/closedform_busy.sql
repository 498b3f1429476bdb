-- The closed form of SPEC §5 for a busy single-valued key: one with very many operations, most
-- of them late (driven by tempomem/rounds.py, on the tables rounds.sql describes).
-- closedform.sql takes a key's late operations only until one cuts into its timeline; a status
-- re-asserted every few minutes with a reporting lag cuts every few dozen operations, and a pass
-- each cut made such a key quadratic. Here all of a key's leading operations are decided at once.
--
-- A key qualifies when its believed facts are not empty and do not overlap (a NULL start is the
-- earliest: -infinity here). Its leading operations are taken while each is an assertion of a
-- non-empty interval, recorded after every stored revision of its key, that starts where no
-- other object has started before (a shared start with another object retracts a fact: the
-- rounds apply it). An operation with no start takes its reference time (SPEC §5 "Unknown
-- starts": the key has a believed fact, unless it is the key's first operation and nothing is
-- stored, which the rounds apply); one with a start given, of the object of the key's fact of
-- unknown start, could fill that start, and ends the operations taken too.
-- Then no fact is ever retracted, a fact is never emptied, and the believed facts stay
-- disjoint, so that an operation N of object A over [s, e) (e: its end, or none):
--   * merges (`merge`) exactly when a believed fact of A overlaps it: the fact holding s, or any
--     fact starting in [s, e) (each ends after its start). It lands on the earliest recorded of
--     them; nothing else changes but its artifacts, unless N has an end and that fact has none:
--     it takes N's end (`fills`), which only the key's latest fact can, once;
--   * else, under last_write_wins, is a new fact, closed at the next start if that is before e
--     (`close_new`), and closes the fact holding s there (`close_existing`);
--   * else, under reject, is refused (`refuse`) when any fact overlaps it, and is a new fact
--     when none does. Nothing else changes.
-- What N meets is the set of facts made before it: the stored ones and the operations before it
-- that did not merge. Number them in that order (`p`: the stored facts by first recorded_at,
-- then the operations): the fact holding s is the latest-starting earlier p starting at or
-- before s, the next start the earliest-starting earlier p after s, the earliest recorded fact
-- of A the least earlier p of object A starting at or after s (`first_p`). With an end e, that
-- least p starts before e when it is less than the least starting at or after e; when it is not
-- and some fact of A starts in [s, e), which one is earliest recorded is not known here, and the
-- rounds apply the operation (`settled` is false). Each is a two-dimensional question (earlier,
-- and by start), answered offline level by level: at level m, p's blocks of 2^(m+1) are halved,
-- and each operation in a block's second half asks the first half's facts with an ASOF join;
-- every earlier p is in exactly one such half. n log n rows.
--
-- Which operations merged, and which gave the latest fact its end (`fill_p`, `fill_to`: from
-- then on that fact ends there), is what is being decided, so the driver iterates: from a guess,
-- each operation is decided against the guess, and the decisions are the next guess. An operation
-- decided against a guess right about every operation before it is right, so a key's
-- operations up to its first that changed in the last iteration are right, and the pass takes
-- them. The rest wait for the next pass.
-- The guess starts right about the operations that decide the most: those starting at or after
-- every fact made before them (the frontier), whose own decisions depend on nothing else. One
-- that starts at or after the latest start F made, of another object, is made next; all in
-- between merge into F's fact (same object) or start before F. (Under reject nothing is made
-- after an open fact: the frontier is its first new fact.) So the frontier's new facts are
-- a chain, each operation's `nxt` the first later one starting at or after it of another
-- object, followed from each key's first by pointer doubling (log n joins). The other
-- operations are guessed to merge: nearly all do when a key has few values, and with many
-- values few decisions depend on another.
-- The output is closedform.sql's: `_tm_xe` (which closedform.sql's `keep_states` then puts in
-- `_tm_state`), `_tm_landed`, `_tm_xtaken`, and the refused in `_tm_refused`, as the rounds write
-- them.

-- @part busy_setup
-- The busy keys this pass can take, with the latest recorded_at of their stored revisions,
-- whether they have a believed fact, and the object of the one of unknown start.
CREATE OR REPLACE TEMP TABLE _tm_yk AS
WITH ordered AS (
    SELECT s.k, s.object, s.valid_from, s.valid_to, s.last_recorded_at, s.emitted,
           lag(s.f) OVER w IS NOT NULL AND coalesce(lag(s.valid_to) OVER w > s.valid_from, true) AS overlaps_before
    FROM _tm_state AS s
    SEMI JOIN _tm_busy AS b ON b.k = s.k
    WINDOW w AS (PARTITION BY s.k ORDER BY s.valid_from NULLS FIRST, s.f)
),
judged AS (
    SELECT o.k, max(o.last_recorded_at) FILTER (WHERE NOT o.emitted) AS last_at,
           any_value(o.object) FILTER (WHERE o.valid_from IS NULL) AS unknown_object,
           bool_or(coalesce(o.valid_to <= o.valid_from, false) OR o.overlaps_before) AS unfit
    FROM ordered AS o GROUP BY o.k
)
SELECT b.k, j.last_at, j.k IS NOT NULL AS believed, j.unknown_object
FROM _tm_busy AS b
LEFT JOIN judged AS j ON j.k = b.k
WHERE NOT coalesce(j.unfit, false) AND b.k IN (SELECT o.k FROM _tm_ops AS o);

-- Each key's leading operations that qualify. A start is first taken by a stored fact (round 0)
-- or the earliest operation starting there; an operation of another object starting there
-- ends its key's operations.
CREATE OR REPLACE TEMP TABLE _tm_yo AS
WITH keyed AS (
    SELECT o.op, o.k, o.round, o.rule, o.object, coalesce(o.valid_from, o.reference_time, o.commit_time) AS s,
           o.valid_to AS e,
           o.kind = 'assert' AND o.rule IN ('single/last_write_wins', 'single/reject')
           AND coalesce(o.valid_to > s, true)
           AND (o.valid_from IS NOT NULL OR y.believed OR o.round > 1)
           AND (o.valid_from_inferred OR o.object IS DISTINCT FROM y.unknown_object)
           AND coalesce(o.commit_time > y.last_at, true) AS fits
    FROM _tm_ops AS o
    JOIN _tm_yk AS y ON y.k = o.k
),
starts AS (
    SELECT s.k, coalesce(s.valid_from, '-infinity') AS s, s.object, 0 AS round
    FROM _tm_state AS s SEMI JOIN _tm_yk AS y ON y.k = s.k
    UNION ALL
    SELECT y.k, y.s, y.object, y.round FROM keyed AS y WHERE y.fits
),
misfits AS (
    SELECT m.k, min(m.round) AS round
    FROM (SELECT y.k, y.round FROM keyed AS y WHERE NOT y.fits
          UNION ALL
          SELECT t.k, t.round FROM starts AS t
          QUALIFY t.object IS DISTINCT FROM first_value(t.object) OVER (PARTITION BY t.k, t.s ORDER BY t.round)
         ) AS m
    GROUP BY m.k
)
SELECT y.op, y.k, y.round, y.rule, y.s, y.e
FROM keyed AS y
LEFT JOIN misfits AS m ON m.k = y.k
WHERE y.round < coalesce(m.round, y.round + 1);

-- The facts and operations of the taken keys as points `p` (see the top); `made` is the guess,
-- `reject` an operation's rule. `own_to` is a believed fact's end, an operation's the end it
-- gives; a fact also ends where a later start cuts it, which the fact holding a start never
-- has yet.
CREATE OR REPLACE TEMP TABLE _tm_yp AS
WITH stored AS (
    SELECT s.k, s.f, s.fact_id, s.object, coalesce(s.valid_from, '-infinity') AS s, s.valid_to AS own_to,
           CAST(row_number() OVER (PARTITION BY s.k ORDER BY s.first_recorded_at, s.fact_id) - 1 AS INTEGER) AS p
    FROM _tm_state AS s
    SEMI JOIN _tm_yo AS o ON o.k = s.k
),
counted AS (SELECT s.k, count(*) AS n FROM stored AS s GROUP BY s.k)
SELECT s.k, s.p, s.f, s.fact_id, s.object, s.s, s.own_to, CAST(NULL AS INTEGER) AS round, true AS made,
       CAST(NULL AS BOOLEAN) AS reject, CAST(NULL AS INTEGER) AS fill_p, CAST(NULL AS TIMESTAMPTZ) AS fill_to
FROM stored AS s
UNION ALL
SELECT y.k, CAST(coalesce(c.n, 0) + y.round - 1 AS INTEGER), o.op, o.new_id, o.object, y.s, y.e, y.round, true,
       y.rule = 'single/reject', NULL, NULL
FROM _tm_yo AS y
JOIN _tm_ops AS o ON o.op = y.op
LEFT JOIN counted AS c ON c.k = y.k;

CREATE OR REPLACE TEMP TABLE _tm_ylevels AS
SELECT CAST(r.m AS INTEGER) AS m
FROM range(0, (SELECT coalesce(CAST(ceil(log2(max(p.p) + 1)) AS BIGINT), 0) FROM _tm_yp AS p)) AS r(m);

-- @part busy_frontier
-- `nxt` of each operation: the first later one starting at or after it of another object.
-- Level by level as above, the later half's operations taken in start order from the latest:
-- `i1` the least p so far and `o1` its object, `i2` the least p so far of another object than
-- `o1` (over a segment where `o1` holds: the least p before it, of another object, or one in
-- it). An operation's answer is `i1` unless `o1` is its own object, then `i2`. Operations
-- sharing a start share an object (busy_setup), so a start is one row.
CREATE OR REPLACE TEMP TABLE _tm_yj AS
WITH ops AS (SELECT q.k, q.p, q.s, q.object FROM _tm_yp AS q WHERE q.round IS NOT NULL AND NOT q.reject),
later AS (
    SELECT o.k, l.m, o.p >> (l.m + 1) AS blk, o.s, any_value(o.object) AS object, min(o.p) AS p
    FROM ops AS o
    JOIN _tm_ylevels AS l ON (o.p >> l.m) & 1 = 1
    GROUP BY o.k, l.m, blk, o.s
),
ranked AS (
    SELECT x.*, min(x.p) OVER w AS i1, arg_min(x.object, x.p) OVER w AS o1
    FROM later AS x
    WINDOW w AS (PARTITION BY x.k, x.m, x.blk ORDER BY x.s DESC ROWS UNBOUNDED PRECEDING)
),
segmented AS (
    SELECT r.*, lag(r.i1) OVER w AS i1_before,
           CAST(r.o1 IS DISTINCT FROM lag(r.o1) OVER w AS INTEGER) AS opens
    FROM ranked AS r
    WINDOW w AS (PARTITION BY r.k, r.m, r.blk ORDER BY r.s DESC)
),
numbered AS (
    SELECT g.*, sum(g.opens) OVER (PARTITION BY g.k, g.m, g.blk ORDER BY g.s DESC ROWS UNBOUNDED PRECEDING) AS seg
    FROM segmented AS g
),
summed AS (
    SELECT n.k, n.m, n.blk, n.s, n.i1, n.o1,
           least(first_value(n.i1_before) OVER w, min(n.p) FILTER (WHERE n.object <> n.o1) OVER w) AS i2
    FROM numbered AS n
    WINDOW w AS (PARTITION BY n.k, n.m, n.blk, n.seg ORDER BY n.s DESC ROWS UNBOUNDED PRECEDING)
),
asked AS (
    SELECT o.k, l.m, o.p >> (l.m + 1) AS blk, o.p, o.s, o.object
    FROM ops AS o
    JOIN _tm_ylevels AS l ON (o.p >> l.m) & 1 = 0
)
SELECT q.k, q.p, min(CASE WHEN x.o1 <> q.object THEN x.i1 ELSE x.i2 END) AS nxt
FROM asked AS q
ASOF JOIN summed AS x ON x.k = q.k AND x.m = q.m AND x.blk = q.blk AND q.s <= x.s
GROUP BY q.k, q.p
HAVING min(CASE WHEN x.o1 <> q.object THEN x.i1 ELSE x.i2 END) IS NOT NULL;

-- Each key's first new fact of the frontier: its first operation starting at or after its
-- latest-starting stored fact, of another object (under last_write_wins) or at or after that
-- fact's end; with no stored fact, its first operation. The chain grows from it.
CREATE OR REPLACE TEMP TABLE _tm_ychain AS
WITH top AS (
    SELECT t.k, max_by({'s': t.s, 'object': t.object, 'own_to': t.own_to}, t.s) AS f
    FROM _tm_yp AS t WHERE t.round IS NULL GROUP BY t.k
)
SELECT o.k, min(o.p) AS p
FROM _tm_yp AS o
LEFT JOIN top AS t ON t.k = o.k
WHERE o.round IS NOT NULL
  AND (t.k IS NULL OR (o.s >= t.f.s AND ((o.object <> t.f.object AND NOT o.reject)
                                           OR coalesce(o.s >= t.f.own_to, false))))
GROUP BY o.k;

-- @part busy_double
-- Pointer doubling: `_tm_ychain` holds the chain's first 2^i facts and `_tm_yj` the 2^i-th
-- next of each operation; the chain's next 2^i are the jumps from those.
INSERT INTO _tm_ychain SELECT j.k, j.nxt FROM _tm_ychain AS c JOIN _tm_yj AS j ON j.k = c.k AND j.p = c.p;

CREATE OR REPLACE TEMP TABLE _tm_yj AS
SELECT a.k, a.p, b.nxt FROM _tm_yj AS a JOIN _tm_yj AS b ON b.k = a.k AND b.p = a.nxt;

-- @part busy_seed
UPDATE _tm_yp SET made = round IS NULL;

UPDATE _tm_yp SET made = true FROM _tm_ychain AS c WHERE c.k = _tm_yp.k AND c.p = _tm_yp.p;

-- @part busy_decide
-- Each operation against the guess: the facts holding its start (`holder_p`), starting next
-- after it (`next_p`), and the earliest recorded of its object overlapping it (`target_p`: it
-- merges there when there is one); whether it `makes` a new fact or `fills` the
-- end of the key's latest fact (open, starting at the latest start made before it, `latest`),
-- whether that is `settled` (see the top), and whether it `agrees` with the guess.
CREATE OR REPLACE TEMP TABLE _tm_yd AS
WITH made AS MATERIALIZED (  -- the made facts, each in the first half of a block at every level
    SELECT p.k, l.m, p.p >> (l.m + 1) AS blk, p.p, p.s, p.object
    FROM _tm_yp AS p
    JOIN _tm_ylevels AS l ON (p.p >> l.m) & 1 = 0
    WHERE p.made
),
asked AS (  -- the operations, each in the second half of a block at every level
    SELECT q.k, l.m, q.p >> (l.m + 1) AS blk, q.p, q.s, q.own_to AS e, q.object
    FROM _tm_yp AS q
    JOIN _tm_ylevels AS l ON (q.p >> l.m) & 1 = 1
    WHERE q.round IS NOT NULL
),
firsts AS (  -- over the facts of an object starting at or after each one's start, the least p
    SELECT x.*, min(x.p) OVER (PARTITION BY x.k, x.m, x.blk, x.object ORDER BY x.s DESC) AS first_p FROM made AS x
),
found AS (
    SELECT q.k, q.p, b.p AS below_p, b.s AS below_s, a.p AS above_p, a.s AS above_s, o.first_p,
           o.s AS first_from, z.first_p AS beyond_p
    FROM asked AS q
    ASOF LEFT JOIN made AS b ON b.k = q.k AND b.m = q.m AND b.blk = q.blk AND q.s >= b.s
    ASOF LEFT JOIN made AS a ON a.k = q.k AND a.m = q.m AND a.blk = q.blk AND q.s < a.s
    ASOF LEFT JOIN firsts AS o ON o.k = q.k AND o.m = q.m AND o.blk = q.blk AND o.object = q.object AND q.s <= o.s
    ASOF LEFT JOIN firsts AS z ON z.k = q.k AND z.m = q.m AND z.blk = q.blk AND z.object = q.object AND q.e <= z.s
),
near AS (
    SELECT f.k, f.p, arg_max(f.below_p, f.below_s) AS below_p, arg_min(f.above_p, f.above_s) AS next_p,
           min(f.first_p) AS first_p, min(f.first_from) AS first_from, min(f.beyond_p) AS beyond_p
    FROM found AS f GROUP BY f.k, f.p
),
latest AS (
    SELECT q.k, q.p, max(q.s) FILTER (WHERE q.made) OVER (
               PARTITION BY q.k ORDER BY q.p ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS latest
    FROM _tm_yp AS q
),
judged AS (
    SELECT q.k, q.p, q.f, q.round, q.s, q.own_to AS e, q.object, q.made, q.reject, h.p AS holder_p, n.next_p,
           x.s AS next_from, w.latest,
           least(CASE WHEN h.object = q.object THEN h.p END,
                 CASE WHEN q.own_to IS NULL OR n.first_p < coalesce(n.beyond_p, 2147483647) THEN n.first_p END) AS target_p,
           NOT coalesce(n.first_from < q.own_to AND n.first_p >= coalesce(n.beyond_p, 2147483647), false) AS known
    FROM _tm_yp AS q
    LEFT JOIN near AS n ON n.k = q.k AND n.p = q.p
    LEFT JOIN _tm_yp AS h
           ON h.k = q.k AND h.p = n.below_p
          AND coalesce(CASE WHEN h.fill_p < q.p THEN h.fill_to ELSE h.own_to END > q.s, true)
    LEFT JOIN _tm_yp AS x ON x.k = q.k AND x.p = n.next_p
    JOIN latest AS w ON w.k = q.k AND w.p = q.p
    WHERE q.round IS NOT NULL
),
decided AS (
    SELECT j.* EXCLUDE (known, latest),
           j.target_p IS NULL
               AND NOT (j.reject AND (j.holder_p IS NOT NULL OR coalesce(j.next_from < coalesce(j.e, 'infinity'), false)))
               AS makes,
           coalesce(j.e IS NOT NULL AND t.own_to IS NULL AND coalesce(t.fill_p >= j.p, true) AND t.s = j.latest,
                    false) AS fills,
           t.fill_p AS target_fill_p, j.known AS settled
    FROM judged AS j
    LEFT JOIN _tm_yp AS t ON t.k = j.k AND t.p = j.target_p
)
SELECT d.* EXCLUDE (target_fill_p),
       d.made = d.makes AND d.fills = (g.p IS NOT NULL) AND (NOT d.fills OR d.target_fill_p = d.p) AS agrees
FROM decided AS d
LEFT JOIN _tm_yp AS g ON g.k = d.k AND g.fill_p = d.p;

-- @part busy_next
-- The decisions are the next guess: a fact's end given by the first operation that fills it.
UPDATE _tm_yp SET made = d.makes
FROM _tm_yd AS d
WHERE d.k = _tm_yp.k AND d.p = _tm_yp.p;

UPDATE _tm_yp SET fill_p = NULL, fill_to = NULL WHERE fill_p IS NOT NULL;

UPDATE _tm_yp SET fill_p = g.p, fill_to = g.e
FROM (SELECT d.k, d.target_p, min(d.p) AS p, arg_min(d.e, d.p) AS e FROM _tm_yd AS d WHERE d.fills
      GROUP BY d.k, d.target_p) AS g
WHERE g.k = _tm_yp.k AND g.target_p = _tm_yp.p;

-- @part busy_emit
-- The operations taken: each key's up to its first whose decision the last guess got wrong,
-- or that is not settled.
CREATE OR REPLACE TEMP TABLE _tm_yt AS
SELECT d.*, o.op, o.commit_time, o.valid_from_inferred, o.reason, o.artifacts, o.new_id
FROM _tm_yd AS d
JOIN _tm_ops AS o ON o.op = d.f
LEFT JOIN (SELECT d.k, min(d.round) AS round FROM _tm_yd AS d WHERE NOT (d.agrees AND d.settled) GROUP BY d.k)
          AS w
       ON w.k = d.k
WHERE d.round < coalesce(w.round, d.round + 1);

-- Every state the pass changes, one per event of a fact: made by an operation (closed at the
-- next start), given its end by a duplicate, closed by a later one starting inside it, or grown
-- by a duplicate's artifacts. Each state is the fact as made (or stored), closed by its latest
-- closing up to the event (which comes after its end is given, if ever) or else ended there,
-- with the artifacts of its latest growth up to then.
CREATE OR REPLACE TEMP TABLE _tm_xe AS
WITH base AS (  -- each fact an event touches, as made or stored (`made_round` 0)
    SELECT t.f, t.new_id AS fact_id, t.k, t.object, t.s AS valid_from,
           CASE WHEN n.p IS NULL THEN t.e ELSE n.s END AS valid_to,
           t.valid_from_inferred, CAST(NULL AS TIMESTAMPTZ) AS retracted_at,
           CASE WHEN n.p IS NOT NULL THEN t.commit_time END AS superseded_at, n.fact_id AS superseded_by,
           CASE WHEN n.p IS NOT NULL THEN 'superseded' WHEN t.e IS NULL THEN 'live' ELSE 'ended' END AS status,
           CASE WHEN n.p IS NULL THEN t.reason ELSE format('superseded by fact {} ({})', n.fact_id, n.object) END AS reason,
           t.artifacts, t.commit_time AS first_recorded_at, t.round AS made_round
    FROM _tm_yt AS t
    LEFT JOIN _tm_yp AS n ON n.k = t.k AND n.p = t.next_p AND n.s < coalesce(t.e, 'infinity')  -- closes it
    WHERE t.makes
    UNION ALL
    SELECT s.f, s.fact_id, s.k, s.object, s.valid_from, s.valid_to, s.valid_from_inferred, s.retracted_at,
           s.superseded_at, s.superseded_by, s.status, s.reason, s.artifacts, s.first_recorded_at, 0
    FROM _tm_state AS s
    SEMI JOIN (SELECT h.f FROM _tm_yt AS t JOIN _tm_yp AS h ON h.k = t.k AND h.p = coalesce(t.target_p, t.holder_p)
               WHERE h.round IS NULL) AS h ON h.f = s.f
),
filled AS (  -- a duplicate with an end giving it to the open fact it merges into
    SELECT h.f, t.round, t.e AS fill_to, t.commit_time AS at
    FROM _tm_yt AS t
    JOIN _tm_yp AS h ON h.k = t.k AND h.p = t.target_p
    WHERE t.fills
),
closings AS (  -- a new fact closing the fact holding its start
    SELECT h.f, t.round, t.s AS valid_to, t.commit_time AS at, t.new_id AS by_id, t.object AS by_object
    FROM _tm_yt AS t
    JOIN _tm_yp AS h ON h.k = t.k AND h.p = t.holder_p
    WHERE t.makes
),
items AS (  -- each artifact of a fact where it first appears: as made, or added by a duplicate
    SELECT i.* FROM (
        SELECT b.f, b.made_round AS round, unnest(b.artifacts) AS artifact, unnest(range(len(b.artifacts))) AS pos
        FROM base AS b WHERE len(b.artifacts) > 0
        UNION ALL
        SELECT h.f, t.round, unnest(t.artifacts), unnest(range(len(t.artifacts)))
        FROM _tm_yt AS t JOIN _tm_yp AS h ON h.k = t.k AND h.p = t.target_p
        WHERE len(t.artifacts) > 0) AS i
    QUALIFY row_number() OVER (PARTITION BY i.f, i.artifact ORDER BY i.round, i.pos) = 1
),
grown AS (
    SELECT g.f, g.round, list(i.artifact ORDER BY i.round, i.pos) AS artifacts
    FROM (SELECT DISTINCT i.f, i.round FROM items AS i) AS g
    JOIN base AS b ON b.f = g.f AND g.round > b.made_round
    JOIN items AS i ON i.f = g.f AND i.round <= g.round
    GROUP BY g.f, g.round
),
events AS (
    SELECT b.f, b.made_round AS round, b.first_recorded_at AS at FROM base AS b WHERE b.made_round > 0
    UNION ALL
    SELECT c.f, c.round, c.at FROM closings AS c
    UNION  -- a duplicate that gives an end may add artifacts too: one state
    SELECT x.f, x.round, x.at FROM filled AS x
    UNION
    SELECT g.f, g.round, t.commit_time  -- the commit of the duplicate that grew it
    FROM grown AS g JOIN base AS b ON b.f = g.f JOIN _tm_yt AS t ON t.k = b.k AND t.round = g.round
),
stamped AS (
    SELECT e.round, e.at, b.*, c.f IS NOT NULL AS closed, c.valid_to AS closed_to, c.at AS closed_at,
           c.by_id, c.by_object, x.f IS NOT NULL AS ended, x.fill_to, g.artifacts AS grown_artifacts
    FROM events AS e
    JOIN base AS b ON b.f = e.f
    ASOF LEFT JOIN closings AS c ON c.f = e.f AND e.round >= c.round
    ASOF LEFT JOIN filled AS x ON x.f = e.f AND e.round >= x.round
    ASOF LEFT JOIN grown AS g ON g.f = e.f AND e.round >= g.round
)
SELECT s.round, s.f, s.fact_id, s.k, s.object, s.valid_from,
       CASE WHEN s.closed THEN s.closed_to WHEN s.ended THEN s.fill_to ELSE s.valid_to END AS valid_to,
       s.valid_from_inferred, s.retracted_at,
       CASE WHEN s.closed THEN s.closed_at ELSE s.superseded_at END AS superseded_at,
       CASE WHEN s.closed THEN s.by_id ELSE s.superseded_by END AS superseded_by,
       CASE WHEN s.closed THEN 'superseded' WHEN s.ended THEN 'ended' ELSE s.status END AS status,
       CASE WHEN s.closed THEN format('superseded by fact {} ({})', s.by_id, s.by_object) ELSE s.reason END AS reason,
       coalesce(s.grown_artifacts, s.artifacts) AS artifacts, s.first_recorded_at, s.at AS last_recorded_at,
       true AS emitted
FROM stamped AS s;

INSERT INTO _tm_landed
SELECT t.op, h.fact_id, h.f FROM _tm_yt AS t JOIN _tm_yp AS h ON h.k = t.k AND h.p = coalesce(t.target_p, t.p)
WHERE t.makes OR t.target_p IS NOT NULL;

-- Refused (reject): the facts its value overlaps (the one holding its start and those made
-- before it starting inside it), earliest recorded first.
INSERT INTO _tm_refused
SELECT t.op, 'conflict', t.new_id,
       string_agg(c.fact_id, ', ' ORDER BY c.p), string_agg(format('''{}''', c.object), ', ' ORDER BY c.p)
FROM _tm_yt AS t
JOIN _tm_yp AS c ON c.k = t.k AND c.made AND c.p < t.p
               AND ((c.s > t.s AND c.s < coalesce(t.e, 'infinity')) OR c.p = t.holder_p)
WHERE NOT t.makes AND t.target_p IS NULL
GROUP BY t.op, t.new_id;

CREATE OR REPLACE TEMP TABLE _tm_xtaken AS SELECT t.k, count(*) AS taken FROM _tm_yt AS t GROUP BY t.k;
