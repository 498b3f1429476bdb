-- tempomem: the temporal logic, as DuckDB SQL.
--
-- Load this file into any DuckDB session that already has the two views of SPEC §4:
-- `revisions` (one row per revision of a fact, `believed_until` being the next revision's
-- `recorded_at`, NULL while it is the current belief) and `facts` (each fact's latest
-- revision, `recorded_at` being when the fact was first recorded). tempomem's connect() makes
-- them over the Parquet files of a store (revisions.sql); nothing below depends on how. Over a
-- plain `revisions` table, `facts` is its rows with `believed_until IS NULL`, `recorded_at`
-- replaced by the fact's `min(recorded_at)`.
--
-- Conventions, everywhere:
--   * every interval is half-open [lo, hi): lo is in it, hi is not;
--   * a NULL lo is minus infinity (an unknown start), a NULL hi plus infinity (still true).
--   * an interval with lo >= hi is empty: it contains no instant and overlaps nothing.
-- The macros use plain SQL (CASE, comparisons, windows) so they port to Spark SQL.
-- Two parts: `intervals` needs no view (the write engine loads it alone), `views` does.

-- @part intervals
-- ============================================================================================
-- Interval predicates
-- ============================================================================================

-- Empty: both bounds known and the end not after the start.
CREATE OR REPLACE MACRO tm_is_empty(lo, hi) AS
    coalesce(lo >= hi, false);

-- [lo, hi) contains the instant t.
CREATE OR REPLACE MACRO tm_contains(lo, hi, t) AS
    (lo IS NULL OR lo <= t) AND (hi IS NULL OR t < hi);

-- [a_lo, a_hi) and [b_lo, b_hi) share at least one instant.
CREATE OR REPLACE MACRO tm_overlaps(a_lo, a_hi, b_lo, b_hi) AS
    NOT tm_is_empty(a_lo, a_hi) AND NOT tm_is_empty(b_lo, b_hi)
    AND (a_lo IS NULL OR b_hi IS NULL OR a_lo < b_hi)
    AND (b_lo IS NULL OR a_hi IS NULL OR b_lo < a_hi);

-- Three-way comparisons of interval bounds under the infinity convention: -1, 0 or 1.
-- Two starts (NULL = minus infinity):
CREATE OR REPLACE MACRO tm__cmp_starts(x, y) AS CASE
    WHEN x IS NULL AND y IS NULL THEN 0
    WHEN x IS NULL THEN -1
    WHEN y IS NULL THEN 1
    WHEN x < y THEN -1
    WHEN x > y THEN 1
    ELSE 0 END;

-- Two ends (NULL = plus infinity):
CREATE OR REPLACE MACRO tm__cmp_ends(x, y) AS CASE
    WHEN x IS NULL AND y IS NULL THEN 0
    WHEN x IS NULL THEN 1
    WHEN y IS NULL THEN -1
    WHEN x < y THEN -1
    WHEN x > y THEN 1
    ELSE 0 END;

-- An end against a start: an open end is after everything, an unknown start before it.
CREATE OR REPLACE MACRO tm__cmp_end_start(e, s) AS CASE
    WHEN e IS NULL OR s IS NULL THEN 1
    WHEN e < s THEN -1
    WHEN e > s THEN 1
    ELSE 0 END;

-- The Allen relation of interval a to interval b, one of 13 names, NULL if either is empty.
-- With half-open intervals `meets` means a ends exactly where b starts.
CREATE OR REPLACE MACRO tm_allen(a_lo, a_hi, b_lo, b_hi) AS CASE
    WHEN tm_is_empty(a_lo, a_hi) OR tm_is_empty(b_lo, b_hi) THEN NULL
    WHEN tm__cmp_end_start(a_hi, b_lo) < 0 THEN 'before'
    WHEN tm__cmp_end_start(a_hi, b_lo) = 0 THEN 'meets'
    WHEN tm__cmp_end_start(b_hi, a_lo) < 0 THEN 'after'
    WHEN tm__cmp_end_start(b_hi, a_lo) = 0 THEN 'met_by'
    -- from here on the two intervals share at least one instant
    WHEN tm__cmp_starts(a_lo, b_lo) = 0 AND tm__cmp_ends(a_hi, b_hi) = 0 THEN 'equals'
    WHEN tm__cmp_starts(a_lo, b_lo) = 0 THEN
        CASE WHEN tm__cmp_ends(a_hi, b_hi) < 0 THEN 'starts' ELSE 'started_by' END
    WHEN tm__cmp_ends(a_hi, b_hi) = 0 THEN
        CASE WHEN tm__cmp_starts(a_lo, b_lo) > 0 THEN 'finishes' ELSE 'finished_by' END
    WHEN tm__cmp_starts(a_lo, b_lo) < 0 THEN
        CASE WHEN tm__cmp_ends(a_hi, b_hi) > 0 THEN 'contains' ELSE 'overlaps' END
    ELSE
        CASE WHEN tm__cmp_ends(a_hi, b_hi) < 0 THEN 'during' ELSE 'overlapped_by' END
    END;

-- @part views
-- ============================================================================================
-- The three query forms
-- ============================================================================================
-- Retracted facts never answer a query. An erased fact has every revision marked `erased`,
-- so it is hidden from every belief time, past ones included.

-- Valid now and believed now (a future-dated fact is not current).
CREATE OR REPLACE MACRO current_facts() AS TABLE
    SELECT * FROM facts
    WHERE status NOT IN ('retracted', 'erased')
      AND tm_contains(valid_from, valid_to, now());

-- What was true at valid_at, as best we know today.
CREATE OR REPLACE MACRO as_of(valid_at) AS TABLE
    SELECT * FROM facts
    WHERE status NOT IN ('retracted', 'erased')
      AND tm_contains(valid_from, valid_to, CAST(valid_at AS TIMESTAMPTZ));

-- What we believed at believed_at about valid_at: the revision that was the belief then.
CREATE OR REPLACE MACRO as_believed(valid_at, believed_at) AS TABLE
    SELECT * FROM revisions
    WHERE tm_contains(recorded_at, believed_until, CAST(believed_at AS TIMESTAMPTZ))
      AND retracted_at IS NULL
      AND status <> 'erased'
      AND tm_contains(valid_from, valid_to, CAST(valid_at AS TIMESTAMPTZ));

-- ============================================================================================
-- Audit views: retracted and erased facts included, labelled by `status`
-- ============================================================================================

-- Every fact ever recorded on a key, one row per fact, in belief order.
CREATE OR REPLACE MACRO history(subject, predicate := NULL) AS TABLE
    SELECT * FROM facts f
    WHERE f.subject = subject
      AND (predicate IS NULL OR f.predicate = predicate)
    ORDER BY f.recorded_at, f.fact_id;

-- Every revision of every fact of a subject, in belief order.
CREATE OR REPLACE MACRO timeline(subject) AS TABLE
    SELECT * FROM revisions r
    WHERE r.subject = subject
    ORDER BY r.recorded_at, r.fact_id, r.revision;

-- ============================================================================================
-- Invariants (check()): one row per problem, (kind, fact_id, detail)
-- ============================================================================================
-- multi_predicates: the predicates declared multi-valued (a VARCHAR list). busy: NULL, or hashes of
-- keys whose revisions check() counted (overlaps.sql): of theirs only the `suspects` are paired.
CREATE OR REPLACE MACRO tm_problems(multi_predicates, busy := NULL, suspects := NULL) AS TABLE
WITH believed AS (
    SELECT * FROM revisions
    WHERE retracted_at IS NULL AND status <> 'erased'
      AND NOT list_contains(multi_predicates, predicate)
),
paired AS (
    SELECT * FROM believed WHERE busy IS NULL OR hash(scope, subject, predicate) NOT IN (SELECT unnest(busy))
                                 OR fact_id IN (SELECT unnest(suspects))
),
-- Two values of one single-valued key sharing a valid instant in one belief snapshot.
overlapping AS (
    SELECT DISTINCT ON (a.fact_id, b.fact_id)
        'overlapping_values' AS kind, a.fact_id,
        format('{} and fact {} ({}) of key ({}, {}, {}) hold at one valid instant, believed at {}',
               coalesce(a.object, '∅'), b.fact_id, coalesce(b.object, '∅'), a.scope, a.subject, a.predicate,
               greatest(a.recorded_at, b.recorded_at)) AS detail
    FROM paired a JOIN paired b
      ON a.scope = b.scope AND a.subject = b.subject AND a.predicate = b.predicate
     AND a.fact_id < b.fact_id
     AND a.object IS DISTINCT FROM b.object
     AND tm_overlaps(a.recorded_at, a.believed_until, b.recorded_at, b.believed_until)
     AND tm_overlaps(a.valid_from, a.valid_to, b.valid_from, b.valid_to)
    ORDER BY a.fact_id, b.fact_id, greatest(a.recorded_at, b.recorded_at)  -- a pair's first shared belief
),
ordered AS (
    SELECT fact_id, revision, recorded_at,
           lag(recorded_at) OVER (PARTITION BY r.fact_id ORDER BY r.revision, r.recorded_at) AS prev_recorded_at,
           lag(revision) OVER (PARTITION BY r.fact_id ORDER BY r.revision, r.recorded_at) AS prev_revision
    FROM revisions AS r
)
SELECT * FROM overlapping
UNION ALL
SELECT 'belief_overlap', fact_id,
       format('revision {} recorded at {} does not follow revision {} recorded at {}',
              revision, recorded_at, prev_revision, prev_recorded_at)
FROM ordered
WHERE recorded_at <= prev_recorded_at OR revision = prev_revision
UNION ALL
SELECT 'valid_from_after_valid_to', fact_id,
       format('revision {}: valid_from {} is after valid_to {}', revision, valid_from, valid_to)
FROM revisions WHERE valid_from > valid_to
UNION ALL
SELECT 'recorded_after_ingested', fact_id,
       format('revision {}: recorded_at {} is after ingested_at {}', revision, recorded_at, ingested_at)
FROM revisions WHERE recorded_at > ingested_at;

-- ============================================================================================
-- memory_diff(from_at, to_at): what the store learned in the belief window [from_at, to_at)
-- ============================================================================================
-- One row per event, labelled by `bucket` (SPEC §8):
--   created             a fact first recorded in the window that closed or retracted no other
--   changed             (a) a new fact that closed or retracted an existing fact in the same
--                       commit: before = that fact's previous revision, after = the new fact,
--                       and the closing revision is part of this row, not an event of its own;
--                       (b) a later revision that moved a fact's valid interval or status other
--                       than by retraction: before = previous revision, after = this one
--   retracted           a correction (a retraction not caused by a new fact of the same commit)
--   new_entities        a (scope, subject) whose first fact was recorded in the window
--   forgotten_entities  an erasure (subject hashed), placed at its earliest tombstone
-- Every revision is placed by its own `recorded_at` (its belief time), so each event lies in
-- exactly one window and the diffs of adjacent windows concatenate to the diff of their union.
-- A revision that changed nothing but artifacts (a duplicate merge) is no event. Erased facts
-- are gone from every belief time, so only their erasure is reported.
-- `event_at` is when the event became the belief; for created and retracted rows the fact
-- columns are the fact as of the event, with `recorded_at` = when the fact was first recorded.
-- A NULL bound is open.
--
-- `source` is a table of revision rows with `believed_until` and the columns of each row's
-- previous revision, `prev_*` (schema.PREVIOUS; NULL on revision 1). The default,
-- `_tm_belief_rows` (revisions.sql), is the `revisions` rows with those stored columns, spelled
-- so that filters on `recorded_at` and `believed_until` reach the Parquet scan. A revision and
-- the one it follows are then one row: the window's events are a scan of the rows recorded in
-- it, with no search for each one's predecessor among every row before it (at 10M revisions
-- that search was half the work of a one-week diff). A subject had a fact before the window iff
-- one of its revisions was believed at `from_at`, again a filter.

CREATE OR REPLACE MACRO memory_diff(from_at, to_at, source := '_tm_belief_rows') AS TABLE
WITH win AS (           -- the revisions that became a belief inside the window
    SELECT COLUMNS(lambda c: c NOT IN ('believed_until', 'first_recorded_at', 'folded', 'folded_until'))
    FROM query_table(source) AS w
    WHERE tm_contains(CAST(from_at AS TIMESTAMPTZ), CAST(to_at AS TIMESTAMPTZ), w.recorded_at)
      AND w.status <> 'erased'
),
step AS (               -- each of them compared with the revision it follows (none for a new fact)
    SELECT COLUMNS(lambda c: NOT starts_with(c, 'prev_')),
           w.revision = 1 AS is_new,
           w.revision > 1 AND w.retracted_at IS NOT NULL AND w.prev_retracted_at IS NULL AS is_retraction,
           w.revision > 1 AND w.superseded_by IS NOT NULL AND w.superseded_at = w.recorded_at
               AND (w.prev_superseded_by IS DISTINCT FROM w.superseded_by
                    OR w.prev_superseded_at IS DISTINCT FROM w.superseded_at) AS is_closing,
           w.revision > 1
               AND (w.prev_valid_from IS DISTINCT FROM w.valid_from OR w.prev_valid_to IS DISTINCT FROM w.valid_to
                    OR w.prev_status IS DISTINCT FROM w.status) AS is_move,
           w.prev_object AS p_object, w.prev_valid_from AS p_valid_from, w.prev_valid_to AS p_valid_to,
           w.prev_recorded_at < CAST(from_at AS TIMESTAMPTZ) AND w.prev_status <> 'erased' AS p_before
    FROM win AS w
),
-- (a): an existing fact closed by, or retracted for, a fact born in the same commit. A
-- retraction through a change keeps the retracted fact's start, which the new fact shares;
-- when two new facts qualify, the one the write path named in the reason wins.
pairs AS (
    SELECT c.fact_id AS before_fact_id, c.revision AS closing_revision, c.p_object AS before_object,
           c.p_valid_from AS before_valid_from, c.p_valid_to AS before_valid_to,
           c.reason AS closing_reason, n.fact_id AS new_fact_id
    FROM step AS c JOIN step AS n
      ON n.scope = c.scope AND n.subject = c.subject AND n.predicate = c.predicate
     AND n.recorded_at = c.recorded_at AND n.is_new AND NOT c.is_new AND n.fact_id <> c.fact_id
     AND ((c.is_closing AND c.superseded_by = n.fact_id)
          OR (c.is_retraction AND c.valid_from IS NOT DISTINCT FROM n.valid_from))
    QUALIFY row_number() OVER (PARTITION BY c.fact_id, c.revision
                               ORDER BY contains(coalesce(c.reason, ''), n.fact_id) DESC, n.fact_id) = 1
),
first_seen AS (         -- when each fact of a created or retracted row was first recorded
    SELECT f.fact_id, f.recorded_at FROM query_table(source) AS f
    WHERE f.revision = 1 AND f.fact_id IN (SELECT s.fact_id FROM step AS s WHERE s.is_retraction)
      AND tm_contains(NULL, CAST(to_at AS TIMESTAMPTZ), f.recorded_at)
),
born_rows AS (          -- each new fact, next to the fact it closed or retracted if it did
    SELECT s.*, q.before_fact_id, q.before_object, q.before_valid_from, q.before_valid_to, q.closing_reason
    FROM step AS s LEFT JOIN pairs AS q ON q.new_fact_id = s.fact_id
    WHERE s.is_new
),
later_rows AS (         -- later revisions that moved or retracted a fact, but not as half of a pair
    SELECT s.*
    FROM step AS s LEFT JOIN pairs AS q ON q.before_fact_id = s.fact_id AND q.closing_revision = s.revision
    WHERE (s.is_move OR s.is_retraction) AND q.before_fact_id IS NULL
),
events AS (
    SELECT CASE WHEN b.before_fact_id IS NULL THEN 'created' ELSE 'changed' END AS bucket,
           b.recorded_at AS event_at,
           b.* EXCLUDE (reason, closing_reason, is_new, is_retraction, is_closing, is_move,
                        p_object, p_valid_from, p_valid_to, p_before),
           CASE WHEN b.before_fact_id IS NULL THEN b.reason ELSE b.closing_reason END AS reason
    FROM born_rows AS b
    UNION ALL BY NAME
    SELECT 'changed' AS bucket, s.recorded_at AS event_at, s.*
           EXCLUDE (is_new, is_retraction, is_closing, is_move, p_object, p_valid_from, p_valid_to, p_before),
           s.fact_id AS before_fact_id, s.p_object AS before_object,
           s.p_valid_from AS before_valid_from, s.p_valid_to AS before_valid_to
    FROM later_rows AS s
    WHERE NOT s.is_retraction
    UNION ALL BY NAME
    SELECT 'retracted' AS bucket, s.recorded_at AS event_at, s.*
           EXCLUDE (recorded_at, is_new, is_retraction, is_closing, is_move, p_object, p_valid_from, p_valid_to, p_before),
           fs.recorded_at
    FROM later_rows AS s JOIN first_seen AS fs ON fs.fact_id = s.fact_id
    WHERE s.is_retraction
),
born AS (               -- subjects of new facts in the window not known to be older: a revision
                        -- in the window that follows one recorded before it proves the opposite
    SELECT s.scope, s.subject, min(s.recorded_at) AS recorded_at
    FROM step AS s
    LEFT JOIN (SELECT DISTINCT o.scope, o.subject FROM step AS o WHERE o.p_before) AS k
           ON k.scope = s.scope AND k.subject = s.subject
    WHERE s.is_new AND k.subject IS NULL
    GROUP BY s.scope, s.subject
),
older AS (              -- those of them with a fact recorded before the window (usually few rows)
    SELECT DISTINCT o.scope, o.subject
    FROM query_table(source) AS o JOIN born AS b ON b.scope = o.scope AND b.subject = o.subject
    WHERE o.status <> 'erased' AND o.recorded_at < CAST(from_at AS TIMESTAMPTZ)
),
-- an anti-join spelled as a left join, not NOT EXISTS: a Spark SQL function cannot read its
-- parameters inside a correlated subquery (tempomem.spark ports this file)
new_entities AS (       -- the others
    SELECT 'new_entities' AS bucket, b.recorded_at AS event_at, b.scope, b.subject, b.recorded_at
    FROM born AS b LEFT JOIN older AS k ON k.scope = b.scope AND k.subject = b.subject
    WHERE k.subject IS NULL
),
tombstones AS (         -- the last revision of each erased fact of a forgotten (hashed) subject
    SELECT t.scope, t.subject, t.recorded_at, t.reason, t.ingested_at FROM query_table(source) AS t
    WHERE t.status = 'erased' AND starts_with(t.subject, 'erased:')
    QUALIFY t.revision = max(t.revision) OVER (PARTITION BY t.fact_id)
),
forgotten AS (          -- one erasure = the tombstones one forget() wrote (same ingested_at)
    SELECT 'forgotten_entities' AS bucket, min(t.recorded_at) AS event_at, t.scope, t.subject,
           min(t.recorded_at) AS recorded_at, min(t.reason) AS reason
    FROM tombstones AS t
    GROUP BY t.scope, t.subject, t.ingested_at
)
SELECT e.* EXCLUDE (revision),
       CASE WHEN e.bucket = 'changed' THEN e.fact_id END AS after_fact_id,
       CASE WHEN e.bucket = 'changed' THEN e.object END AS after_object,
       CASE WHEN e.bucket = 'changed' THEN e.valid_from END AS after_valid_from,
       CASE WHEN e.bucket = 'changed' THEN e.valid_to END AS after_valid_to
FROM events AS e
UNION ALL BY NAME SELECT * FROM new_entities
UNION ALL BY NAME
SELECT * FROM forgotten AS g
WHERE tm_contains(CAST(from_at AS TIMESTAMPTZ), CAST(to_at AS TIMESTAMPTZ), g.event_at);

-- ============================================================================================
-- Recall and traversal in time (issue 7)
-- ============================================================================================
-- Both start from one time slice: the revisions believed at `believed_at` whose valid interval
-- contains `valid_at`, retracted and erased ones left out. This is exactly as_believed; with
-- believed_at = now it is also as_of/current (the revision believed now is each fact's latest
-- one), except that it refuses a revision stamped after `believed_at` (a backfilled belief
-- from the future), which nobody could have believed yet. One definition serves every belief
-- time, so a rewound query and a present one cannot disagree on what "in force" means.
-- NULL valid_at / believed_at mean now().
--
-- `_tm_index` is a slim copy of `revisions` (no text, no vectors), `_tm_vectors` holds
-- (fact_id, revision, embedding) and `_tm_rows` the full rows. Here they are plain views over
-- `revisions`, so this file needs nothing else; tempomem's own connection replaces
-- `_tm_index` with an in-memory table kept in step with the store (same rows), `_tm_rows`
-- with the raw Parquet rows and `tm_scores` (below) with NumPy, which is what makes recall
-- over a million facts fit in a second.

-- `row_key` identifies a revision row for the final lookup of an answer's few rows (here a
-- hash; in tempomem's connection the row id of its in-memory copy, which DuckDB fetches
-- directly instead of scanning every row).
CREATE OR REPLACE VIEW _tm_revisions_plus AS
SELECT r.*,
       -- an edge's target must be an entity: the subject of some non-erased fact (traversal)
       r.object IN (SELECT x.subject FROM revisions AS x WHERE x.status <> 'erased') AS object_is_entity
FROM revisions AS r;

CREATE OR REPLACE VIEW _tm_index_live AS
SELECT hash(r.fact_id, r.revision) AS row_key, r.fact_id, r.revision, r.scope, r.subject, r.predicate,
       r.object, r.link_type, r.weight, r.source, r.confidence, r.valid_from, r.valid_to, r.recorded_at,
       r.believed_until, r.retracted_at, r.status, r.object_is_entity
FROM _tm_revisions_plus AS r;

CREATE OR REPLACE VIEW _tm_index AS SELECT i.* FROM _tm_index_live AS i;

CREATE OR REPLACE VIEW _tm_vectors AS
SELECT r.fact_id, r.revision, r.embedding FROM revisions AS r WHERE r.embedding IS NOT NULL;

-- Full revision rows, looked up for the few rows an answer returns.
CREATE OR REPLACE VIEW _tm_rows AS
SELECT hash(r.fact_id, r.revision) AS row_key, r.* EXCLUDE (believed_until) FROM revisions AS r;

-- The revision (of a fact) is in the slice (valid_at, believed_at): as_believed's test.
CREATE OR REPLACE MACRO tm_in_slice(valid_from, valid_to, recorded_at, believed_until, retracted_at,
                                    status, valid_at, believed_at) AS
    tm_contains(recorded_at, believed_until, coalesce(CAST(believed_at AS TIMESTAMPTZ), now()))
    AND retracted_at IS NULL AND status <> 'erased'
    AND tm_contains(valid_from, valid_to, coalesce(CAST(valid_at AS TIMESTAMPTZ), now()));

-- The slim time slice: one row per fact in force, keys and provenance only.
CREATE OR REPLACE MACRO tm_slice(valid_at, believed_at) AS TABLE
    SELECT i.* FROM _tm_index AS i
    WHERE tm_in_slice(i.valid_from, i.valid_to, i.recorded_at, i.believed_until, i.retracted_at,
                      i.status, valid_at, believed_at);

-- Cosine similarity; a zero vector (a text with no word) is similar to nothing (0, not NaN),
-- and vectors of another length than the query are not comparable (NULL: never ranked).
CREATE OR REPLACE MACRO tm_cosine(a, b) AS CASE
    WHEN len(a) <> len(b) THEN NULL
    ELSE coalesce(nullif(CAST(list_cosine_similarity(a, b) AS DOUBLE), 'NaN'::DOUBLE), 0.0) END;

-- The similarity of query_vec to every stored vector: (fact_id, revision, score). tempomem's
-- own connection swaps this one macro for the same numbers computed by NumPy over vectors it
-- keeps in memory (DuckDB's list arithmetic is several times slower than a matrix product).
CREATE OR REPLACE MACRO tm_scores(query_vec) AS TABLE
    SELECT v.fact_id, v.revision, tm_cosine(v.embedding, CAST(query_vec AS FLOAT[])) AS score
    FROM _tm_vectors AS v;

-- recall(query_vec, k, valid_at, believed_at): the k facts in force at (valid_at, believed_at)
-- most similar to query_vec, best first, with a `score` column. Only members of the slice are
-- ranked, so a closed, retracted or not-yet-believed fact can never be returned however well
-- it matches. Optional filters (applied before the top k): subject, predicate, and the
-- trusted-source policy (sources: list of sources, NULL = any; min_confidence, NULL = any).
-- Ties are broken by fact_id so answers are reproducible. Rows are revisions, as in
-- as_believed (`recorded_at` is when that revision became the belief, `believed_until` when
-- it stopped being one), without the `embedding` column: a million-row scan of vectors to
-- return k of them would cost more than the search (read them from `revisions` if needed).
CREATE OR REPLACE MACRO recall(query_vec, k, valid_at, believed_at, subject := NULL,
                               predicate := NULL, sources := NULL, min_confidence := NULL) AS TABLE
WITH slice AS (
    SELECT s.row_key, s.fact_id, s.revision, s.believed_until FROM tm_slice(valid_at, believed_at) AS s
    WHERE (subject IS NULL OR s.subject = subject)
      AND (predicate IS NULL OR s.predicate = predicate)
      AND (sources IS NULL OR list_contains(sources, s.source))
      AND (min_confidence IS NULL OR s.confidence >= min_confidence)
),
ranked AS (
    SELECT sl.row_key, sc.fact_id, sc.revision, sl.believed_until, sc.score
    FROM tm_scores(query_vec) AS sc
    JOIN slice AS sl ON sl.fact_id = sc.fact_id AND sl.revision = sc.revision
    WHERE sc.score IS NOT NULL
    ORDER BY sc.score DESC, sc.fact_id
    LIMIT k
)
SELECT e.* EXCLUDE (row_key, embedding, revision), e.revision, rk.believed_until, rk.score
FROM ranked AS rk
JOIN _tm_rows AS e ON e.row_key = rk.row_key AND e.fact_id = rk.fact_id AND e.revision = rk.revision
ORDER BY rk.score DESC, rk.fact_id;

-- Typed-link traversal -----------------------------------------------------------------------
-- An edge is a fact in the slice whose object is an entity, i.e. the subject of some
-- (non-erased) fact of the store: "checkout-api depends_on payments-db" is an edge when we
-- hold any fact about payments-db, "checkout-api replicas 4" never is. Edges are directed
-- subject -> object and walked forwards only: backwards, every widely shared object (a
-- region, a team) would become a hub joining unrelated entities, and "what X depends on"
-- would mix with "what depends on X". Walk from the other end to ask the reverse question.
-- A hop is worth weight × the multiplier of its link_type (a type missing from the map: 1).

-- The links of one slice with the value of one hop: what tm_traverse walks, to inspect it.
CREATE OR REPLACE MACRO tm_edges(valid_at, believed_at, multipliers, predicates := NULL) AS TABLE
    SELECT s.fact_id, s.subject AS src, s.object AS dst, s.predicate, s.link_type,
           s.weight * coalesce(multipliers[s.link_type], 1.0) AS hop
    FROM tm_slice(valid_at, believed_at) AS s
    WHERE (predicates IS NULL OR list_contains(predicates, s.predicate)) AND s.object_is_entity;

-- The walk does not join the whole edge slice at every hop (DuckDB would hash a million links
-- per query for a walk that follows a few hundred): each hop asks `tm_out_links` for the
-- links out of the entities it stands on, then keeps those in the slice. Entities are
-- numbered (`entity_id`, by name) so a walk carries small integers; `_tm_links` lists every
-- revision that can be a link (object an entity, not retracted, not erased) with both ends
-- numbered. Which of them are in force is decided per hop by tm_in_slice, the same test for
-- every hop. tempomem's own connection keeps `_tm_entities` in memory and answers
-- `tm_out_links` from an in-memory adjacency array (tempomem/graph.py): the same lists, so a
-- hop costs the links it follows, not a scan of every link.
CREATE OR REPLACE VIEW _tm_entities_live AS
SELECT CAST(row_number() OVER (ORDER BY x.name) - 1 AS INTEGER) AS entity_id, x.name
FROM (SELECT DISTINCT i.subject AS name FROM _tm_index AS i WHERE i.status <> 'erased') AS x;

CREATE OR REPLACE VIEW _tm_entities AS SELECT n.* FROM _tm_entities_live AS n;

CREATE OR REPLACE VIEW _tm_links AS
SELECT s.entity_id AS src_id, d.entity_id AS dst_id, i.object AS dst, i.fact_id, i.predicate, i.link_type,
       i.weight, i.valid_from, i.valid_to, i.recorded_at, i.believed_until, i.retracted_at, i.status
FROM _tm_index AS i
JOIN _tm_entities AS s ON s.name = i.subject
JOIN _tm_entities AS d ON d.name = i.object
WHERE i.status <> 'erased' AND i.retracted_at IS NULL;

-- The candidate links out of one entity (every revision; the caller applies the slice), as a
-- list of `_tm_links` rows without `src_id`; NULL when there is none.
CREATE OR REPLACE MACRO tm_out_links(entity_id) AS (
    SELECT list(o) FROM (SELECT l.* EXCLUDE (src_id) FROM _tm_links AS l WHERE l.src_id = entity_id) AS o
);

-- tm_traverse(start, depth, valid_at, believed_at): weighted spreading activation from
-- `start` over the slice, up to `depth` hops; every hop uses the same slice. One row per
-- reached entity (start excluded): `depth` = fewest hops, `score` = best path (product of
-- hop values), `path` = that best path's fact_ids. Paths never revisit an entity, so a
-- multiplier above 1 cannot make a cycle pay. Ties between equal-scoring paths go to the
-- shorter one, then to the lexicographically greatest path, so answers are reproducible.
CREATE OR REPLACE MACRO tm_traverse(start, depth, valid_at, believed_at,
        multipliers := MAP {'causal': 1.5, 'entity': 1.2, 'temporal': 1.0, 'semantic': 0.8},
        predicates := NULL) AS TABLE
WITH RECURSIVE
walk(entity_id, entity, hops, score, path, seen) AS (
    SELECT n.entity_id, n.name, 0, CAST(1.0 AS DOUBLE), CAST([] AS VARCHAR[]), [n.entity_id]
    FROM _tm_entities AS n WHERE n.name = CAST(start AS VARCHAR)
    UNION ALL
    SELECT o.link.dst_id, o.link.dst, w.hops + 1,
           w.score * (o.link.weight * coalesce(multipliers[o.link.link_type], 1.0)),
           list_append(w.path, o.link.fact_id), list_append(w.seen, o.link.dst_id)
    FROM (SELECT f.*, tm_out_links(f.entity_id) AS links FROM walk AS f WHERE f.hops < depth) AS w,
         unnest(w.links) AS o(link)
    WHERE tm_in_slice(o.link.valid_from, o.link.valid_to, o.link.recorded_at, o.link.believed_until,
                      o.link.retracted_at, o.link.status, valid_at, believed_at)
      AND (predicates IS NULL OR list_contains(predicates, o.link.predicate))
      AND NOT list_contains(w.seen, o.link.dst_id)
)
SELECT w.entity, CAST(min(w.hops) AS INTEGER) AS depth, max(w.score) AS score,
       arg_max(w.path, (w.score, -w.hops, array_to_string(w.path, ','))) AS path
FROM walk AS w
WHERE w.hops > 0
GROUP BY w.entity
ORDER BY max(w.score) DESC, min(w.hops), w.entity;

-- dependency_changes(root, at_time, lookback): the multi-hop question in time. Dependencies of
-- `root` at `at_time` (entities reached over `depends_on` edges, up to `depth` hops, in the slice
-- at `at_time` as known at `believed_at`, NULL = now) whose facts started or ended in the window
-- [at_time - lookback, at_time); one row per change, with `learned_at` (when the store first held the
-- revision showing that change) and `known_at_time` (learned_at <= at_time: the agent could have
-- known it when `at_time` came). Changes are read from `facts` (what we know today), retracted and
-- erased facts left out; a value that replaced another shows as one `ended` and one `started`.
CREATE OR REPLACE MACRO dependency_changes(root, at_time, lookback, depth := 3, believed_at := NULL,
                                           predicates := ['depends_on']) AS TABLE
WITH deps AS (
    SELECT t.entity, t.depth, t.path
    FROM tm_traverse(root, depth, at_time, believed_at, predicates := predicates) AS t
),
bounds AS (
    SELECT CAST(at_time AS TIMESTAMPTZ) - CAST(lookback AS INTERVAL) AS lo, CAST(at_time AS TIMESTAMPTZ) AS hi
),
changes AS (
    SELECT f.fact_id, f.subject, f.predicate, f.object, 'started' AS change, f.valid_from AS changed_at
    FROM facts AS f, bounds AS b
    WHERE f.valid_from >= b.lo AND f.valid_from < b.hi AND NOT f.valid_from_inferred
    UNION ALL
    SELECT f.fact_id, f.subject, f.predicate, f.object, 'ended', f.valid_to
    FROM facts AS f, bounds AS b
    WHERE f.valid_to >= b.lo AND f.valid_to < b.hi
),
learned AS (   -- the first revision that already showed the change
    SELECT c.fact_id, c.change, min(r.recorded_at) AS learned_at
    FROM changes AS c JOIN revisions AS r ON r.fact_id = c.fact_id
    WHERE r.status NOT IN ('retracted', 'erased')
      AND ((c.change = 'started' AND r.valid_from = c.changed_at)
        OR (c.change = 'ended' AND r.valid_to = c.changed_at))
    GROUP BY c.fact_id, c.change
)
SELECT d.entity AS dependency, d.depth, d.path AS via, c.fact_id, c.predicate, c.object, c.change,
       c.changed_at, l.learned_at, coalesce(l.learned_at <= b.hi, false) AS known_at_time
FROM deps AS d
JOIN changes AS c ON c.subject = d.entity
JOIN facts AS f ON f.fact_id = c.fact_id AND f.status NOT IN ('retracted', 'erased')
LEFT JOIN learned AS l ON l.fact_id = c.fact_id AND l.change = c.change
CROSS JOIN bounds AS b
ORDER BY d.depth, d.entity, c.changed_at, c.fact_id, c.change;

-- ============================================================================================
-- Sequenced analytics (SPEC §12): the valid-time history of one belief, on bins or coalesced
-- ============================================================================================
-- "Believed at believed_at" is what as_believed reads, for every valid instant at once; a NULL
-- believed_at is the current belief (`facts`). NULL valid bounds are the infinities, and an
-- empty valid interval takes part in nothing.

-- The facts believed at `believed_at` (NULL: now), retracted and erased ones left out, reduced
-- to what the sequenced forms need. One branch answers, the other is filtered to nothing by
-- its parameter test: the current belief is read from `facts`, which a store answers with a
-- filtered scan, and a past one from `revisions`, exactly as as_believed reads it.
CREATE OR REPLACE MACRO tm_believed(believed_at) AS TABLE
SELECT f.fact_id, f.scope, f.subject, f.predicate, f.object, f.valid_from, f.valid_to
FROM facts AS f
WHERE believed_at IS NULL AND f.status NOT IN ('retracted', 'erased')
UNION ALL
SELECT r.fact_id, r.scope, r.subject, r.predicate, r.object, r.valid_from, r.valid_to
FROM revisions AS r
WHERE believed_at IS NOT NULL
  AND tm_contains(r.recorded_at, r.believed_until, CAST(believed_at AS TIMESTAMPTZ))
  AND r.retracted_at IS NULL AND r.status <> 'erased';

-- tm_bins(from_at, to_at, every): the bins that cut [from_at, to_at), one row each: `bin`
-- (0, 1, …), `bin_from` = from_at + bin·every, `bin_to` = the next bound clipped at to_at, and
-- `next_from` = the next bound unclipped. Each bound is one addition to from_at, never the
-- previous bound plus every, so month bins from 2024-01-31 start on 01-31, 02-29, 03-31 (a
-- running sum, as generate_series over timestamps does, would drift to 03-29).
-- Bin numbers are drawn from 0 up to a bound on the count: epoch() counts a month as 30 days and
-- no month is shorter than 28, so span / (epoch(every)·28/30) + 1 is never too few. The bound
-- is capped at 1,000,001, one past the limit, so that a request for too many bins is seen (and
-- refused by sequenced) without being generated. No bins when the window or the step is not
-- positive.
CREATE OR REPLACE MACRO tm_bins(from_at, to_at, every) AS TABLE
WITH w AS (
    SELECT CAST(from_at AS TIMESTAMPTZ) AS lo, CAST(to_at AS TIMESTAMPTZ) AS hi, CAST(every AS INTERVAL) AS step
),
n AS (
    SELECT w.lo, w.hi, w.step,
           CASE WHEN w.lo < w.hi AND epoch(w.step) > 0
                THEN least(1000001, CAST(ceil((epoch(w.hi) - epoch(w.lo)) / (epoch(w.step) * 28 / 30)) AS BIGINT) + 1)
                ELSE 0 END AS candidates
    FROM w
),
numbered AS (
    SELECT n.lo, n.hi, n.step, unnest(range(0, n.candidates)) AS bin FROM n
)
SELECT b.bin, b.lo + b.bin * b.step AS bin_from, least(b.lo + (b.bin + 1) * b.step, b.hi) AS bin_to,
       b.lo + (b.bin + 1) * b.step AS next_from
FROM numbered AS b
WHERE b.lo + b.bin * b.step < b.hi;

-- How many bins tm_bins makes (1,000,001 standing for "more than 1,000,000").
CREATE OR REPLACE MACRO tm_bin_count(from_at, to_at, every) AS (
    SELECT count(*) FROM tm_bins(from_at, to_at, every)
);

-- tm_sequenced(from_at, to_at, every, believed_at := NULL): the rows of `sequenced` in no
-- particular order, for a query that aggregates them (an ORDER BY inside a macro is kept by
-- DuckDB even under a GROUP BY, and sorting a year of daily rows of every key costs more than
-- making them). One row per bin and per believed fact whose valid interval overlaps the bin.
--
-- A fact's bins are consecutive, from the bin holding its first instant in the window to the
-- bin holding its last, so each fact is expanded into the run of bin numbers it spans: the work
-- is the rows returned, however many bins there are (an interval join of facts and bins
-- compares each fact with most bins). The numbers come from dividing by the mean length M of
-- the window's unclipped bins, all in integer microseconds. If D is the furthest any bound lies
-- from where equal bins would put it, a division can be off by at most P = ceil(D / M) bins.
--
-- Fixed-length bins (P = 0: any step without months, in a UTC session) are both the common case
-- and the costly one (a year of days over every key is 65 rows per fact), so their rows are made
-- with nothing looked up and nothing tested per row: bin k is [W + k·M, min(W + (k+1)·M, H)) for
-- the window [W, H), and only the first and last bins of a fact can be partly covered, so those
-- rows are made from the fact itself and the bins between them are a bare run of numbers with
-- coverage 1. (At 10M revisions the same rows took 3.7 times the CPU with a join of every row to
-- its bin, and 1.8 times with a CASE on every row.) Other steps take the general path: calendar
-- months (P = 1, their bounds stray about three days) and days across a daylight-saving change
-- in a session that is not UTC.
-- There each fact's run is widened by P on each side and joined to the bins on the bin number,
-- and the overlap test keeps the true pairs.
--
-- A bad window raises an error here (SQL callers get one too); tempomem's Python checks the same
-- first and raises TempomemError naming the argument.
CREATE OR REPLACE MACRO tm_sequenced(from_at, to_at, every, believed_at := NULL) AS TABLE
WITH bins AS (
    SELECT t.bin, t.bin_from, t.bin_to, epoch_us(t.bin_from) AS from_us, epoch_us(t.bin_to) AS to_us,
           epoch_us(t.next_from) AS next_us
    FROM tm_bins(from_at, to_at, every) AS t
),
span AS (               -- the window in µs, its bin count and the mean length of an unclipped bin
    SELECT min(b.from_us) AS lo_us, max(b.to_us) AS hi_us, count(*) AS bins,
           (max(b.next_us) - min(b.from_us)) // count(*) AS mean_us,
           bool_or(b.next_us <= b.from_us) AS not_increasing
    FROM bins AS b
),
checked AS (            -- the window, or an error naming what is wrong with it
    SELECT CASE
        WHEN from_at IS NULL OR to_at IS NULL OR every IS NULL
            THEN error('sequenced: from_at, to_at and every must not be NULL')
        WHEN NOT CAST(from_at AS TIMESTAMPTZ) < CAST(to_at AS TIMESTAMPTZ)
            THEN error('sequenced: from_at must be before to_at')
        WHEN epoch(CAST(every AS INTERVAL)) <= 0 OR s.not_increasing
            THEN error('sequenced: every must be a positive interval')
        WHEN s.bins > 1000000
            THEN error('sequenced: more than 1,000,000 bins; use a longer every or a shorter window')
        END AS failed,
        s.*
    FROM span AS s
),
stray AS (              -- P: how many bins a division by the mean length can be off
    SELECT c.lo_us, c.hi_us, c.mean_us,
           (max(greatest(abs(b.from_us - (c.lo_us + b.bin * c.mean_us)),
                         abs(b.next_us - (c.lo_us + (b.bin + 1) * c.mean_us)))) + c.mean_us - 1) // c.mean_us AS pad
    FROM checked AS c, bins AS b
    WHERE c.failed IS NULL
    GROUP BY c.lo_us, c.hi_us, c.mean_us
),
clipped AS (            -- each believed fact overlapping the window, cut to it (µs; NULL bounds are its edges)
    SELECT f.fact_id, f.scope, f.subject, f.predicate, f.object,
           greatest(coalesce(epoch_us(f.valid_from), s.lo_us), s.lo_us) AS lo_us,
           least(coalesce(epoch_us(f.valid_to), s.hi_us), s.hi_us) AS hi_us,
           s.lo_us AS window_us, s.hi_us AS window_end, s.mean_us, s.pad
    FROM tm_believed(believed_at) AS f, stray AS s
    WHERE NOT tm_is_empty(f.valid_from, f.valid_to)
      AND (f.valid_from IS NULL OR epoch_us(f.valid_from) < s.hi_us)
      AND (f.valid_to IS NULL OR epoch_us(f.valid_to) > s.lo_us)
),
ends AS (               -- fixed-length bins: the bins of each fact's first and last instant
    SELECT c.*, (c.lo_us - c.window_us) // c.mean_us AS first_bin,
           (c.hi_us - 1 - c.window_us) // c.mean_us AS last_bin
    FROM clipped AS c
    WHERE c.pad = 0
),
edges AS (              -- ... as rows: the first bin, and the last if it is another one, with their bounds
    SELECT d.*, d.window_us + d.bin * d.mean_us AS from_us,
           least(d.window_us + (d.bin + 1) * d.mean_us, d.window_end) AS to_us
    FROM (SELECT e.*, e.first_bin AS bin FROM ends AS e
          UNION ALL
          SELECT e.*, e.last_bin AS bin FROM ends AS e WHERE e.last_bin > e.first_bin) AS d
),
inner_bins AS (         -- ... and the bins strictly between them, each wholly covered
    SELECT e.fact_id, e.scope, e.subject, e.predicate, e.object, e.window_us, e.mean_us,
           unnest(range(e.first_bin + 1, e.last_bin)) AS bin
    FROM ends AS e
    WHERE e.last_bin > e.first_bin + 1
),
spans AS (              -- other bins: the run of bin numbers each fact may overlap
    SELECT c.fact_id, c.scope, c.subject, c.predicate, c.object, c.lo_us, c.hi_us,
           unnest(range((c.lo_us - c.window_us) // c.mean_us - c.pad,
                        (c.hi_us - 1 - c.window_us) // c.mean_us + c.pad + 1)) AS bin
    FROM clipped AS c
    WHERE c.pad > 0
)
SELECT make_timestamptz(x.from_us) AS bin_from, make_timestamptz(x.to_us) AS bin_to,
       x.fact_id, x.scope, x.subject, x.predicate, x.object,
       CAST(least(x.hi_us, x.to_us) - greatest(x.lo_us, x.from_us) AS DOUBLE)
           / CAST(x.to_us - x.from_us AS DOUBLE) AS coverage
FROM edges AS x
UNION ALL
-- an inner bin ends where the next bin, at most the last one, starts: before H, so unclipped
SELECT make_timestamptz(x.window_us + x.bin * x.mean_us), make_timestamptz(x.window_us + (x.bin + 1) * x.mean_us),
       x.fact_id, x.scope, x.subject, x.predicate, x.object, CAST(1 AS DOUBLE)
FROM inner_bins AS x
UNION ALL
SELECT b.bin_from, b.bin_to, x.fact_id, x.scope, x.subject, x.predicate, x.object,
       CASE WHEN x.lo_us <= b.from_us AND b.to_us <= x.hi_us THEN 1.0      -- the whole bin
            ELSE CAST(least(x.hi_us, b.to_us) - greatest(x.lo_us, b.from_us) AS DOUBLE)
                 / CAST(b.to_us - b.from_us AS DOUBLE) END
FROM spans AS x
JOIN bins AS b ON b.bin = x.bin
WHERE b.from_us < x.hi_us AND x.lo_us < b.to_us;

-- sequenced(from_at, to_at, every, believed_at := NULL) (SPEC §12): the window [from_at, to_at)
-- cut into half-open bins [from_at + i·every, min(from_at + (i+1)·every, to_at)); one row per
-- bin and per fact believed at believed_at (NULL: now) whose valid interval overlaps the bin,
-- with `coverage` = the share of the bin it covers, in (0, 1]. Ordered by bin_from, scope,
-- subject, predicate, object, fact_id.
CREATE OR REPLACE MACRO sequenced(from_at, to_at, every, believed_at := NULL) AS TABLE
SELECT s.* FROM tm_sequenced(from_at, to_at, every, believed_at := believed_at) AS s
ORDER BY s.bin_from, s.scope, s.subject, s.predicate, s.object, s.fact_id;

-- coalesced's input: the facts believed at `believed_at` with a non-empty valid interval, and
-- hashes of their key (scope, subject, predicate) and value (key and object). Equal keys or
-- values hash alike; unequal ones may too, which costs time, never an answer (below).
CREATE OR REPLACE MACRO tm_coalesce_input(believed_at) AS TABLE
SELECT f.*, hash(f.scope, f.subject, f.predicate) AS key_hash,
       hash(f.scope, f.subject, f.predicate, f.object) AS value_hash
FROM tm_believed(believed_at) AS f
WHERE NOT tm_is_empty(f.valid_from, f.valid_to);

-- coalesced(believed_at := NULL) (SPEC §12): the believed facts with the valid intervals of one
-- value, (scope, subject, predicate, object), that overlap or meet merged into maximal periods
-- (Teradata's NORMALIZE ON MEETS OR OVERLAPS), never across a gap. `facts` counts the merged
-- facts, `fact_ids` lists them by valid_from (NULL first), then fact_id. Ordered by scope,
-- subject, predicate, valid_from (NULL first), object.
-- A value held by one fact is one period as it is, and that is nearly every value (the write
-- path merges a repeated assertion that overlaps the fact it repeats). Finding the values of
-- several facts is what costs: counting per value is a hash aggregate of one group per fact,
-- each a cache miss. Counting per key is nearly free (a key's facts arrive together), and a key
-- can prove its values all differ: each fact sets the bit of a 63-bit mask picked by its value
-- hash, so if a mask has as many bits set as the key has facts, no two values are equal (two
-- masks, from different bits of the hash). Only `crowded` keys, those with a repeated value
-- and some 2% of keys of five values whose bits collide, have their facts counted per value.
-- The facts of a shared hash go through gaps and islands by their value itself. `believed` is
-- read four times; DuckDB materializes it once, so the files are read once.
-- Gaps and islands: in start order, a fact opens a period unless an earlier fact of its value
-- reaches its start (ends at or after it, or never ends; an unknown start is reached by any
-- earlier fact). `reach` looks at every earlier fact, not just the previous one, which may lie
-- inside a longer one and end sooner. The running count of openings numbers the periods.
CREATE OR REPLACE MACRO coalesced(believed_at := NULL) AS TABLE
WITH believed AS (SELECT i.* FROM tm_coalesce_input(believed_at) AS i),
crowded AS (            -- the keys whose facts may not all have different values
    SELECT b.key_hash FROM believed AS b
    GROUP BY b.key_hash
    HAVING bit_count(bit_or(CAST(1 AS BIGINT) << CAST(b.value_hash % 63 AS INTEGER))) < count(*)
       AND bit_count(bit_or(CAST(1 AS BIGINT) << CAST((b.value_hash // 63) % 63 AS INTEGER))) < count(*)
),
shared AS (             -- the value hashes of more than one fact (all of them are in crowded keys)
    SELECT b.value_hash FROM believed AS b
    WHERE b.key_hash IN (SELECT c.key_hash FROM crowded AS c)
    GROUP BY b.value_hash
    HAVING count(*) > 1
),
several AS (            -- their facts
    SELECT b.* FROM believed AS b
    WHERE b.value_hash IN (SELECT s.value_hash FROM shared AS s)
),
reached AS (
    SELECT s.*,
           count(*) OVER earlier AS earlier_facts,
           max(s.valid_to) OVER earlier AS reach,
           bool_or(s.valid_to IS NULL) OVER earlier AS reach_open
    FROM several AS s
    WINDOW earlier AS (PARTITION BY s.scope, s.subject, s.predicate, s.object
                       ORDER BY s.valid_from NULLS FIRST, s.fact_id
                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
numbered AS (
    SELECT r.*,
           sum(CASE WHEN r.earlier_facts = 0 THEN 1
                    WHEN r.reach_open OR r.valid_from IS NULL OR r.reach >= r.valid_from THEN 0
                    ELSE 1 END)
               OVER (PARTITION BY r.scope, r.subject, r.predicate, r.object
                     ORDER BY r.valid_from NULLS FIRST, r.fact_id ROWS UNBOUNDED PRECEDING) AS period
    FROM reached AS r
),
periods AS (
    SELECT b.scope, b.subject, b.predicate, b.object, b.valid_from, b.valid_to, CAST(1 AS BIGINT) AS facts,
           [b.fact_id] AS fact_ids
    FROM believed AS b
    WHERE b.value_hash NOT IN (SELECT s.value_hash FROM shared AS s)
    UNION ALL
    SELECT n.scope, n.subject, n.predicate, n.object,
           CASE WHEN bool_or(n.valid_from IS NULL) THEN NULL ELSE min(n.valid_from) END,
           CASE WHEN bool_or(n.valid_to IS NULL) THEN NULL ELSE max(n.valid_to) END,
           count(*), list(n.fact_id ORDER BY n.valid_from NULLS FIRST, n.fact_id)
    FROM numbered AS n
    GROUP BY n.scope, n.subject, n.predicate, n.object, n.period
)
SELECT p.* FROM periods AS p
ORDER BY p.scope, p.subject, p.predicate, p.valid_from NULLS FIRST, p.object;
