-- `_tm_belief_rows`: the rows of `revisions` with their belief ends, plus `first_recorded_at`,
-- spelled for the analytics helpers (memory_diff's source, probes, the lag report) over a
-- store's raw rows. It needs revisions.sql (`_tm_events`, `_tm_fresh`, `_tm_fresh_starts`), so
-- it is not part of macros.sql, which loads over any `revisions` table; analytics.py creates it
-- on the store's connection.
--
-- The same rows and belief ends as `_tm_revisions`, in three parts:
--   * folded rows whose belief end the fold stored, or that are still the belief: a scan, so a
--     filter on `believed_until` (= `folded_until`) reaches the Parquet reader and skips row
--     groups (the join with the fresh starts only tells a still-believed row from one revised
--     since the fold);
--   * folded rows that were the belief at the fold and have been revised since: they end where
--     their fact's first fresh revision starts;
--   * rows written since the fold (`_tm_fresh`, with their belief ends among themselves).
-- `_tm_revisions` spells the first two as one left join whose belief end is a coalesce(), which
-- no filter can reach through: a filter on it reads every older row.
CREATE OR REPLACE VIEW _tm_belief_rows AS
SELECT e.* EXCLUDE (first_recorded_at, folded, folded_until),
       e.folded_until AS believed_until, e.first_recorded_at
FROM _tm_events AS e
LEFT JOIN _tm_fresh_starts AS s
       ON s.scope = e.scope AND s.subject = e.subject AND s.predicate = e.predicate AND s.fact_id = e.fact_id
WHERE e.folded IS TRUE AND (e.folded_until IS NOT NULL OR s.fact_id IS NULL)
UNION ALL BY NAME
SELECT e.* EXCLUDE (first_recorded_at, folded, folded_until),
       s.recorded_at AS believed_until, e.first_recorded_at
FROM _tm_events AS e
JOIN _tm_fresh_starts AS s
  ON s.scope = e.scope AND s.subject = e.subject AND s.predicate = e.predicate AND s.fact_id = e.fact_id
WHERE e.folded IS TRUE AND e.folded_until IS NULL
UNION ALL BY NAME
SELECT f.* EXCLUDE (folded, folded_until) FROM _tm_fresh AS f;
