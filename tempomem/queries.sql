-- tempomem: the facade's own queries over the macros of macros.sql: check (tempomem.queries),
-- diff (tempomem.diff), export (tempomem.export) and a fact's latest revision
-- (tempomem.staterows). The query forms of SPEC §6 are the macros themselves, with the
-- caller's key filters added by tempomem.queries.
--
-- Named parts, each starting at a line `-- @part <name>` (connection.sql_parts). Each part is
-- one whole statement over the views and macros of revisions.sql and macros.sql (a connection
-- of mem.connect() has them), or over the files it is given ($files), and runs there as it
-- stands, its values bound as `$name` parameters.

-- @part problems
-- Every invariant violation of mem.check: those the macro finds in the rows as they stand,
-- with $multi the multi-valued predicates, $busy the keys whose revisions were counted and
-- $suspects their facts that may overlap (busy_keys, overlap_candidates), and those the fold
-- recorded of rows it folded.
SELECT * FROM (SELECT * FROM tm_problems(CAST($multi AS VARCHAR[]), busy := CAST($busy AS UBIGINT[]),
                                         suspects := CAST($suspects AS VARCHAR[]))
               UNION ALL SELECT * FROM _tm_previous_problems)
ORDER BY kind, fact_id

-- @part busy_keys
-- The keys of more than $busy_from stored rows (hashed; $multi: the multi-valued predicates):
-- those whose believed revisions may be too many to pair. Counted on the raw rows, which is
-- cheap and can only count more.
SELECT hash(scope, subject, predicate) AS kh FROM _tm_events
WHERE NOT list_contains(CAST($multi AS VARCHAR[]), predicate)
GROUP BY kh HAVING count(*) > $busy_from

-- @part overlap_candidates
-- What tm_problems' overlap rule pairs on the busy keys ($busy), as tempomem.overlaps takes its
-- candidates: their believed revisions (not retracted, not erased; $multi: the multi-valued
-- predicates), each numbered `i`, its key `k` (the busy keys' revisions are few: ranking them
-- is cheap).
CREATE OR REPLACE TEMP TABLE _ov_candidates AS
SELECT row_number() OVER () AS i, dense_rank() OVER (ORDER BY r.scope, r.subject, r.predicate) AS k, r.* EXCLUDE (kh)
FROM (SELECT hash(scope, subject, predicate) AS kh, scope, subject, predicate, fact_id, object,
             valid_from, valid_to, recorded_at, believed_until
      FROM revisions
      WHERE retracted_at IS NULL AND status <> 'erased'
        AND NOT list_contains(CAST($multi AS VARCHAR[]), predicate)) AS r
WHERE r.kh IN (SELECT unnest(CAST($busy AS UBIGINT[])))

-- @part latest_revision
-- A fact's latest revision, whatever its status, found by $fact_id alone in the version's
-- data files ($files): what mem.get returns, and the state a writer changing a fact it does
-- not hold starts from (tempomem.staterows). It is the revision of highest `revision`, the one
-- revisions.sql leaves believed (`believed_until` NULL: every other revision ends where the
-- next one was recorded), and it never has a belief end a fold stored (`folded_until`: it was
-- the belief at the fold, or was written since), so the groups of ended revisions are skipped
-- by their statistics. Each other row group is tested by its Bloom filter of `fact_id`. No
-- view is read: through `revisions`, the joins and window deriving every other revision's end
-- were planned and run for one row, and the views bound to each new version first (a get
-- after each commit, on the 14M revisions of a replayed 10M-row log: 48 -> 23 ms, most of what
-- is left testing 881 groups' filters). The columns are a writer's (schema.WRITER_COLUMNS):
-- the previous revision's are left out.
SELECT e.* EXCLUDE (folded, folded_until, prev_object, prev_valid_from, prev_valid_to, prev_recorded_at,
                    prev_retracted_at, prev_superseded_at, prev_superseded_by, prev_status)
FROM read_parquet($files) AS e
WHERE e.fact_id = $fact_id AND e.folded_until IS NULL
ORDER BY e.revision DESC
LIMIT 1

-- @part diff
-- The events of mem.diff in [$from_at, $to_at), with the optional key filters ($subjects,
-- $predicates: NULL for all). Entity buckets have no predicate, so a predicate filter leaves
-- them alone. Forgotten subjects are stored hashed: the caller hashes the names it gives too.
SELECT * FROM memory_diff($from_at, $to_at) AS d
WHERE (CAST($subjects AS VARCHAR[]) IS NULL OR list_contains(CAST($subjects AS VARCHAR[]), d.subject))
  AND (CAST($predicates AS VARCHAR[]) IS NULL OR d.bucket IN ('new_entities', 'forgotten_entities')
       OR list_contains(CAST($predicates AS VARCHAR[]), d.predicate))

-- @part export_parquet
-- Every revision, in key order: the rows tm.export writes and backfill reads back.
SELECT r.* FROM revisions r ORDER BY r.scope, r.subject, r.predicate, r.fact_id, r.revision

-- @part export_csv
-- The same rows for CSV, which has no lists: artifacts and embeddings as JSON text, which
-- backfill reads.
SELECT r.* REPLACE (CAST(to_json(r.artifacts) AS VARCHAR) AS artifacts,
                    CAST(to_json(r.embedding) AS VARCHAR) AS embedding)
FROM revisions r ORDER BY r.scope, r.subject, r.predicate, r.fact_id, r.revision
