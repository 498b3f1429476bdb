-- tempomem: the temporal logic, as DuckDB SQL.
--
-- Load this file into any DuckDB session that already has a `revisions` table or view with
-- the columns of SPEC §4: one row per revision of a fact, `believed_until` being the next
-- revision's `recorded_at` (NULL while it is the current belief). tempomem's connect() does
-- exactly that over the Parquet files of a store, and nothing below depends on how `revisions`
-- was made.
--
-- Conventions, everywhere:
--   * every interval is half-open [lo, hi): lo is in it, hi is not;
--   * a NULL lo is minus infinity (an unknown start), a NULL hi plus infinity (still true).
--   * an interval with lo >= hi is empty: it contains no instant and overlaps nothing.
-- The macros use plain SQL (CASE, comparisons, windows) so they port to Spark SQL.


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


-- ============================================================================================
-- The facts view: each fact's latest revision, as currently believed
-- ============================================================================================
-- `recorded_at` here is when the store first learned the fact (its first revision), in
-- `revisions` it is when that revision became the belief. Every window is partitioned by the
-- whole key, so a filter on scope, subject or predicate is pushed down to the Parquet scan.
-- Columns are qualified in every view and macro: DuckDB 2 binds them with the parameters of
-- the calling table macro in scope, where `subject` would be ambiguous.

CREATE OR REPLACE VIEW facts AS
SELECT r.fact_id, r.scope, r.subject, r.predicate, r.object,
       r.text, r.valid_from, r.valid_to, r.valid_from_inferred,
       first_value(r.recorded_at) OVER (
           PARTITION BY r.scope, r.subject, r.predicate, r.fact_id ORDER BY r.revision
       ) AS recorded_at,
       r.retracted_at, r.superseded_at, r.superseded_by, r.status, r.reason,
       r.source, r.confidence, r.origin, r.ingested_at, r.artifacts,
       r.attributes, r.embedding, r.link_type, r.weight
FROM revisions AS r
QUALIFY r.believed_until IS NULL;


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
-- multi_predicates: the predicates declared multi-valued (a VARCHAR list).

CREATE OR REPLACE MACRO tm_problems(multi_predicates) AS TABLE
WITH believed AS (
    SELECT * FROM revisions
    WHERE retracted_at IS NULL AND status <> 'erased'
      AND NOT list_contains(multi_predicates, predicate)
),
-- Two values of one single-valued key sharing a valid instant in one belief snapshot.
overlapping AS (
    SELECT DISTINCT ON (a.fact_id, b.fact_id)
        'overlapping_values' AS kind, a.fact_id,
        format('{} and fact {} ({}) of key ({}, {}, {}) hold at one valid instant, believed at {}',
               coalesce(a.object, '∅'), b.fact_id, coalesce(b.object, '∅'),
               a.scope, a.subject, a.predicate,
               greatest(a.recorded_at, b.recorded_at)) AS detail
    FROM believed a JOIN believed b
      ON a.scope = b.scope AND a.subject = b.subject AND a.predicate = b.predicate
     AND a.fact_id < b.fact_id
     AND a.object IS DISTINCT FROM b.object
     AND tm_overlaps(a.recorded_at, a.believed_until, b.recorded_at, b.believed_until)
     AND tm_overlaps(a.valid_from, a.valid_to, b.valid_from, b.valid_to)
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
-- `revisions`, so this file needs nothing else; tempomem's own connection replaces them with
-- in-memory tables kept in step with the store (same rows) and the raw Parquet rows, which is
-- what makes recall over a million facts fit in a second.

CREATE OR REPLACE VIEW _tm_index_live AS
SELECT r.fact_id, r.revision, r.scope, r.subject, r.predicate, r.object, r.link_type, r.weight,
       r.source, r.confidence, r.valid_from, r.valid_to, r.recorded_at, r.believed_until,
       r.retracted_at, r.status
FROM revisions AS r;

CREATE OR REPLACE VIEW _tm_index AS SELECT i.* FROM _tm_index_live AS i;

CREATE OR REPLACE VIEW _tm_vectors_live AS
SELECT r.fact_id, r.revision, r.embedding FROM revisions AS r WHERE r.embedding IS NOT NULL;

CREATE OR REPLACE VIEW _tm_vectors AS SELECT v.* FROM _tm_vectors_live AS v;

-- Full revision rows, looked up for the few rows an answer returns.
CREATE OR REPLACE VIEW _tm_rows AS SELECT r.* EXCLUDE (believed_until) FROM revisions AS r;

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

-- recall(query_vec, k, valid_at, believed_at): the k facts in force at (valid_at, believed_at)
-- most similar to query_vec, best first, with a `score` column. The slice is taken first and
-- only its members are ranked, so a closed, retracted or not-yet-believed fact can never be
-- returned however well it matches. Optional filters (applied before the top k):
-- subject, predicate, and a trusted-source policy (sources: list of sources, NULL = any;
-- min_confidence, NULL = any). Ties are broken by fact_id so answers are reproducible.
-- Rows are revisions (as in as_believed): `recorded_at` is when that revision became the
-- belief, `believed_until` when it stopped being one (NULL: still believed).
CREATE OR REPLACE MACRO recall(query_vec, k, valid_at, believed_at, subject := NULL,
                               predicate := NULL, sources := NULL, min_confidence := NULL) AS TABLE
WITH slice AS (
    SELECT s.fact_id, s.revision, s.believed_until FROM tm_slice(valid_at, believed_at) AS s
    WHERE (subject IS NULL OR s.subject = subject)
      AND (predicate IS NULL OR s.predicate = predicate)
      AND (sources IS NULL OR list_contains(sources, s.source))
      AND (min_confidence IS NULL OR s.confidence >= min_confidence)
),
scored AS (
    SELECT v.fact_id, v.revision, sl.believed_until,
           tm_cosine(v.embedding, CAST(query_vec AS FLOAT[])) AS score
    FROM _tm_vectors AS v
    JOIN slice AS sl ON sl.fact_id = v.fact_id AND sl.revision = v.revision
),
ranked AS (
    SELECT sc.* FROM scored AS sc WHERE sc.score IS NOT NULL
    ORDER BY sc.score DESC, sc.fact_id
    LIMIT k
)
SELECT e.* EXCLUDE (revision), e.revision, rk.believed_until, rk.score
FROM ranked AS rk
JOIN _tm_rows AS e ON e.fact_id = rk.fact_id AND e.revision = rk.revision
ORDER BY rk.score DESC, rk.fact_id;
