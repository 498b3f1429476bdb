-- tempomem: the analytics of SPEC §10 as SQL, run by DuckDB (tempomem.probes, tempomem.reports)
-- and, ported by tempomem.spark, by Spark: one text for both engines.
--
-- Not statements but named parts of queries: each part starts at a line `-- @part <name>` and
-- runs to the next one. tempomem.probes.ANALYTICS maps the names to their text; the Python
-- modules join the parts into queries (`answers` is a WITH prefix that divergence, at_events and
-- the decision audit share). `{...}` holds a list of fixed identifiers chosen by the caller
-- among a fixed set (never user text); `$name` is a bound parameter.

-- @part answers
-- The answers to each probe of the table `_tm_probes` (_tm_row, scope, subject, predicate,
-- valid_at, believed_at), shared with the decision audit. Probes with no scope (or a NULL one)
-- match every scope. A revision valid at valid_at answers `as_believed` when it was the belief
-- at believed_at, not retracted and not erased; it answers `as_of` when it is the fact's latest
-- revision and the fact is neither retracted nor erased. A believed value counts as corrected
-- when its fact's latest revision is a retraction. Most probes get one value of each kind, so
-- the sorted lists are built only for those that get several (a multi-valued key). One
-- interval join of the probes against the revision rows with their belief ends
-- (`_tm_belief_rows`, revisions.sql: a filtered scan of a folded store, no window and no
-- in-memory copy).
WITH hits AS (         -- the revisions of each probe's key that answer it or were retracted
    SELECT h.* FROM (
        SELECT p._tm_row, r.fact_id, r.object, r.source,
               tm_contains(r.recorded_at, r.believed_until, p.believed_at) AND r.retracted_at IS NULL
                   AND r.status <> 'erased' AND tm_contains(r.valid_from, r.valid_to, p.valid_at) AS believed,
               r.believed_until IS NULL AND r.status NOT IN ('retracted', 'erased')
                   AND tm_contains(r.valid_from, r.valid_to, p.valid_at) AS known,
               r.believed_until IS NULL AND r.status = 'retracted' AS retracted_now
        FROM _tm_probes AS p
        JOIN _tm_belief_rows AS r
          ON r.subject = p.subject AND r.predicate = p.predicate AND (p.scope IS NULL OR r.scope = p.scope)
    ) AS h
    WHERE h.believed OR h.known OR h.retracted_now
),
marked AS (             -- a believed value is corrected when its fact's latest revision is a retraction
    SELECT h.*, x._tm_row IS NOT NULL AS corrected
    FROM hits AS h
    LEFT JOIN (SELECT k._tm_row, k.fact_id FROM hits AS k WHERE k.retracted_now) AS x
           ON x._tm_row = h._tm_row AND x.fact_id = h.fact_id AND h.believed
    WHERE h.believed OR h.known
),
firsts AS (             -- per probe: the least and greatest value of each kind, and the sources
    SELECT h._tm_row,
           min(h.object) FILTER (WHERE h.known) AS known_min, max(h.object) FILTER (WHERE h.known) AS known_max,
           min(h.object) FILTER (WHERE h.believed) AS believed_min,
           max(h.object) FILTER (WHERE h.believed) AS believed_max,
           min(h.object) FILTER (WHERE h.corrected) AS corrected_min,
           max(h.object) FILTER (WHERE h.corrected) AS corrected_max,
           coalesce(arg_min(h.source, h.object) FILTER (WHERE h.believed AND NOT h.known),
                    arg_min(h.source, h.object) FILTER (WHERE h.believed AND h.known)) AS believed_source,
           arg_min(h.source, h.object) FILTER (WHERE h.known) AS known_source
    FROM marked AS h
    GROUP BY h._tm_row
),
several AS (            -- the sorted lists, for the few probes with more than one value of a kind
    SELECT h._tm_row,
           list_sort(list_distinct(list(h.object) FILTER (WHERE h.known))) AS known_objects,
           list_sort(list_distinct(list(h.object) FILTER (WHERE h.believed))) AS believed_objects,
           list(h.object) FILTER (WHERE h.corrected) AS believed_retracted_objects
    FROM marked AS h
    WHERE h._tm_row IN (SELECT f._tm_row FROM firsts AS f
                        WHERE f.known_min <> f.known_max OR f.believed_min <> f.believed_max
                           OR f.corrected_min <> f.corrected_max)
    GROUP BY h._tm_row
),
believed_then AS (
    SELECT f._tm_row, f.believed_source, f.known_source,
           coalesce(s.known_objects, CASE WHEN f.known_min IS NOT NULL THEN [f.known_min] END) AS known_objects,
           coalesce(s.believed_objects, CASE WHEN f.believed_min IS NOT NULL THEN [f.believed_min] END)
               AS believed_objects,
           coalesce(s.believed_retracted_objects,
                    CASE WHEN f.corrected_min IS NOT NULL THEN [f.corrected_min] END) AS believed_retracted_objects
    FROM firsts AS f LEFT JOIN several AS s ON s._tm_row = f._tm_row
)

-- @part objects
-- The two answers of each probe as single values, and whether they differ (NULL counting as a
-- value): what divergence and at_events both report. Follows `answers`.
, joined AS (
    SELECT p._tm_row,
           coalesce(a.believed_source, a.known_source) AS source,
           CASE WHEN len(a.known_objects) > 0 THEN array_to_string(a.known_objects, ' | ') END AS as_of_object,
           CASE WHEN len(a.believed_objects) > 0 THEN array_to_string(a.believed_objects, ' | ') END
               AS as_believed_object,
           coalesce(len(a.believed_retracted_objects) > 0, false) AS was_retracted
    FROM _tm_probes AS p LEFT JOIN believed_then AS a ON a._tm_row = p._tm_row
),
answered AS (
    SELECT j.*, j.as_of_object IS DISTINCT FROM j.as_believed_object AS diverged FROM joined AS j
)

-- @part divergence
-- The divergence of each probe (SPEC §10), its kind decided in order. Follows `objects`.
SELECT a._tm_row, a.source, a.as_of_object, a.as_believed_object, a.diverged,
       CASE WHEN NOT a.diverged THEN 'same'
            WHEN a.as_believed_object IS NULL THEN 'not_yet_known'
            WHEN a.was_retracted THEN 'corrected'
            ELSE 'learned_late' END AS kind
FROM answered AS a

-- @part lags
-- The population of ingestion lag, the one both the report and tm.plot.ingestion_lag count:
-- one row per fact of `facts` (each fact's latest revision, with the time it was first
-- recorded) that is not retracted or erased, i.e. the `_tm_belief_rows` rows that are still
-- believed, a filtered scan of a folded store. `lag_us` is NULL for a fact whose start is
-- unknown or inferred (counted as `inferred`, never as a lag). The first braces hold the group columns.
SELECT {groups},
       epoch_us(f.first_recorded_at)
           - epoch_us(CASE WHEN NOT f.valid_from_inferred THEN f.valid_from END) AS lag_us
FROM _tm_belief_rows AS f
WHERE f.believed_until IS NULL AND f.status NOT IN ('retracted', 'erased')

-- @part lag_report
-- The ingestion-lag report. The braces hold, in order, the `lags` part and the group columns as a
-- select list, a GROUP BY and an ORDER BY (empty for one group of all facts).
-- quantile_disc is the nearest-rank percentile, the ceil(q·n)-th smallest value (checked
-- against a direct implementation for n = 1..1000 in the tests). One call per fraction, not one
-- call with a list of three: Spark's percentile_disc takes one fraction, and the list form
-- saved little (the groups are sorted per call either way).
WITH lags AS ({lags}),
report AS (
    SELECT {keys}
           count(l.lag_us) AS count,
           quantile_disc(l.lag_us, 0.50) AS p50,
           quantile_disc(l.lag_us, 0.90) AS p90,
           quantile_disc(l.lag_us, 0.99) AS p99,
           max(l.lag_us) AS max,
           CASE WHEN count(l.lag_us) > 0
                THEN count(*) FILTER (WHERE l.lag_us > $limit_us) / count(l.lag_us) END AS share_over_threshold,
           count(*) - count(l.lag_us) AS inferred
    FROM lags AS l
    {group_by}
)
SELECT r.* FROM report AS r
{order_by}
