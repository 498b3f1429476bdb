-- tempomem: the reports of SPEC §10 that DuckDB alone runs (tempomem.reports): exposure windows,
-- the decision audit and the displacements of trusted facts. Ingestion lag is in analytics.sql,
-- which Spark runs too.
--
-- Named parts, each starting at a line `-- @part <name>` (connection.sql_parts). Each part is
-- one whole statement over the views and macros of revisions.sql and macros.sql (a connection
-- of mem.connect() has them) and runs there as it stands, its values bound as `$name`
-- parameters; `audit` follows the `answers` part of analytics.sql.

-- @part exposure
-- For each superseded or retracted fact, the belief window in which it was served though
-- wrong: from the later of its successor's start and its own recording (a retraction: its
-- recording) to when the successor was recorded (a retraction: when it was retracted). The
-- caller drops windows of no length and orders them.
SELECT CASE WHEN f.status = 'retracted' THEN f.recorded_at
            ELSE greatest(s.valid_from, f.recorded_at) END AS exposure_from,
       CASE WHEN f.status = 'retracted' THEN f.retracted_at ELSE s.recorded_at END AS exposure_to,
       f.*
FROM facts AS f
LEFT JOIN facts AS s ON s.fact_id = f.superseded_by
WHERE f.status = 'retracted' OR (f.status <> 'erased' AND f.superseded_by IS NOT NULL)

-- @part decision_probes
-- The decisions of `_tm_decisions` (tempomem.inputs.register) as the probes `answers` reads: a
-- decision is a probe about its own instant, what held then and what was believed then.
CREATE OR REPLACE TEMP VIEW _tm_probes AS
SELECT d._tm_row, d.scope, d.subject, d.predicate, d.decided_at AS valid_at, d.decided_at AS believed_at
FROM _tm_decisions AS d

-- @part audit
-- The verdict on each decision, decided in order: nothing believed, the value used not
-- believed, believed but later retracted, believed but the world had already changed (recorded
-- later), else ok. Follows `answers` (analytics.sql) over `decision_probes`.
SELECT d._tm_row,
       CASE WHEN len(a.believed_objects) > 0 THEN array_to_string(a.believed_objects, ' | ') END AS believed_object,
       CASE WHEN len(a.known_objects) > 0 THEN array_to_string(a.known_objects, ' | ') END AS true_object,
       CASE WHEN coalesce(len(a.believed_objects), 0) = 0 THEN 'unknown'
            WHEN NOT list_contains(a.believed_objects, d.object_used) THEN 'mismatch'
            WHEN list_contains(a.believed_retracted_objects, d.object_used) THEN 'wrong'
            WHEN NOT coalesce(list_contains(a.known_objects, d.object_used), false) THEN 'stale'
            ELSE 'ok' END AS verdict
FROM _tm_decisions AS d LEFT JOIN believed_then AS a ON a._tm_row = d._tm_row

-- @part displacements
-- Facts of a less trusted source (or lower confidence) that superseded a trusted fact of a
-- single-valued key. Trusted: `source` in $trusted and `confidence` >= $min_confidence; $multi
-- lists the multi-valued predicates (a new value there displaces nothing).
SELECT n.fact_id, n.scope, n.subject, n.predicate, n.object, n.source, n.confidence,
       n.valid_from, n.recorded_at, n.status,
       d.fact_id AS displaced_fact_id, d.object AS displaced_object, d.source AS displaced_source,
       d.confidence AS displaced_confidence, d.valid_from AS displaced_valid_from,
       d.recorded_at AS displaced_recorded_at
FROM facts AS d
JOIN facts AS n ON n.fact_id = d.superseded_by
WHERE list_contains(CAST($trusted AS VARCHAR[]), d.source) AND d.confidence >= $min_confidence
  AND NOT (list_contains(CAST($trusted AS VARCHAR[]), n.source) AND n.confidence >= $min_confidence)
  AND NOT list_contains(CAST($multi AS VARCHAR[]), d.predicate)
  AND d.status <> 'erased' AND n.status NOT IN ('retracted', 'erased')
ORDER BY n.recorded_at, n.fact_id
