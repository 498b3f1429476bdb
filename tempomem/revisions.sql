-- The `revisions` view over a store's raw revision rows (`_tm_events`, one row per revision
-- as written to Parquet). A revision is the belief from its `recorded_at` until the next
-- revision of the same fact was recorded. The window is partitioned by the whole key so a
-- filter on scope, subject or predicate reaches the Parquet scan.
-- Every column is qualified: DuckDB 2 binds a view inside a table macro with the macro's
-- parameters in scope, so an unqualified `subject` would clash with history(subject).
CREATE OR REPLACE VIEW revisions AS
SELECT e.fact_id, e.scope, e.subject, e.predicate, e.object,
       e.text, e.valid_from, e.valid_to, e.valid_from_inferred, e.recorded_at,
       e.retracted_at, e.superseded_at, e.superseded_by, e.status, e.reason,
       e.source, e.confidence, e.origin, e.ingested_at, e.artifacts,
       e.attributes, e.embedding, e.link_type, e.weight, e.revision,
       lead(e.recorded_at) OVER (
           PARTITION BY e.scope, e.subject, e.predicate, e.fact_id ORDER BY e.revision
       ) AS believed_until
FROM _tm_events AS e;
