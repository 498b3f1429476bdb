-- tempomem: the probes of SPEC §10 that tempomem.probes makes itself (the answers to probes are
-- in analytics.sql, which Spark runs too).
--
-- Named parts, each starting at a line `-- @part <name>` (connection.sql_parts). Each part is
-- one whole statement over the views and macros of revisions.sql and macros.sql (a connection
-- of mem.connect() has them) and runs there as it stands.

-- @part generated
-- The probes divergence uses when given none, one inside each window of a wrong belief: one
-- per fact recorded after its (known) start, halfway between its start and its recording,
-- about its start; one per retraction, halfway through the belief window [recorded_at,
-- retracted_at), about an instant inside the retracted fact's valid interval. The facts are
-- the rows of `facts`: each fact's latest revision (read as the still-believed rows of
-- `_tm_belief_rows`, a filtered scan) with `recorded_at` = when it was first recorded.
WITH f AS (
    SELECT r.* EXCLUDE (recorded_at), r.first_recorded_at AS recorded_at
    FROM _tm_belief_rows AS r WHERE r.believed_until IS NULL
)
SELECT 'learned_late:' || f.fact_id AS probe_id, f.scope, f.subject, f.predicate,
       f.valid_from AS valid_at,
       f.valid_from + to_microseconds((epoch_us(f.recorded_at) - epoch_us(f.valid_from)) // 2) AS believed_at
FROM f
WHERE f.status NOT IN ('retracted', 'erased') AND f.valid_from IS NOT NULL AND NOT f.valid_from_inferred
  AND f.recorded_at > f.valid_from AND NOT tm_is_empty(f.valid_from, f.valid_to)
UNION ALL
SELECT 'retraction:' || g.fact_id, g.scope, g.subject, g.predicate,
       coalesce(g.valid_from, g.valid_to - INTERVAL 1 MICROSECOND, g.believed_at), g.believed_at
FROM (
    SELECT f.*,
           f.recorded_at + to_microseconds((epoch_us(f.retracted_at) - epoch_us(f.recorded_at)) // 2) AS believed_at
    FROM f
    WHERE f.status = 'retracted' AND f.retracted_at > f.recorded_at AND NOT tm_is_empty(f.valid_from, f.valid_to)
) AS g
ORDER BY probe_id
