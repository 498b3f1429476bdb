-- The `revisions` view over a store's raw revision rows (`_tm_events`, one row per revision
-- as written to Parquet). A revision is the belief from its `recorded_at` until the next
-- revision of the same fact was recorded (`believed_until`, NULL while it is the belief):
-- `tm__believed` below derives it.
--
-- Files are append-only, so a row cannot be updated when its successor arrives. Instead the
-- store now and then *folds* itself (storage/folder.py): it rewrites every row with `folded = true`
-- and `folded_until` = its `believed_until` at that moment. Rows written since (`folded` not
-- true) are few, and only they need a window. `_tm_fresh_events` is the part of `_tm_events`
-- that may hold them (connection.py binds it to the files that do; `_tm_events` itself will do):
--   * a fresh row ends where the next fresh revision of its fact starts (lead());
--   * a folded row ends at `folded_until`, or, when that is NULL (it was the belief at the
--     fold), where the first fresh revision of its fact starts, if there is one.
-- A fact's fresh revisions always come after its folded ones (a fold takes every row), so
-- this is the same `believed_until` a window over all rows would give, without sorting them.
-- Every row also carries `first_recorded_at`, so `facts` needs no aggregate either.
--
-- Every column is qualified: DuckDB 2 binds a view inside a table macro with the macro's
-- parameters in scope, so an unqualified `subject` would clash with history(subject).

-- Rows written since the last fold.
CREATE OR REPLACE VIEW _tm_fresh_rows AS
SELECT e.* FROM _tm_fresh_events AS e WHERE e.folded IS NOT TRUE;

-- The one derivation of belief time: a revision is believed until the next revision of its fact
-- (its key and fact_id, in the order of `revision`) was recorded; NULL while it is the belief.
-- A window expression, so that a replay computes it in the window that chains the revisions
-- it writes (rounds.sql), with no sort of its own. A backfill written as given applies the
-- same rule to rows it already streams in fact and belief-time order (backfill_write.sql).
CREATE OR REPLACE MACRO tm__believed_until(recorded_at, scope, subject, predicate, fact_id, revision) AS
    lead(recorded_at) OVER (PARTITION BY scope, subject, predicate, fact_id ORDER BY revision);

-- Every row of `revs` (a table of revision rows, named) with its `believed_until`. The views
-- below read it over the fresh rows; the backfill's overlap flag over the revisions a load
-- writes (backfill_flags.sql). A filter on the key or the fact reaches below the window (it
-- partitions by them).
CREATE OR REPLACE MACRO tm__believed(revs := '_tm_fresh_rows') AS TABLE
SELECT r.*, tm__believed_until(r.recorded_at, r.scope, r.subject, r.predicate, r.fact_id, r.revision) AS believed_until
FROM query_table(revs) AS r;

-- Rows written since the last fold, with their belief end among themselves.
CREATE OR REPLACE VIEW _tm_fresh AS
SELECT f.* FROM tm__believed() AS f;

-- When each fact's first fresh revision was recorded: the end of its last folded one.
CREATE OR REPLACE VIEW _tm_fresh_starts AS
SELECT s.scope, s.subject, s.predicate, s.fact_id, min(s.recorded_at) AS recorded_at
FROM _tm_fresh_rows AS s
GROUP BY s.scope, s.subject, s.predicate, s.fact_id;

-- The stored rows' columns are the facts columns, `revision`, the previous revision's columns
-- (`prev_*`, which memory_diff reads), then the three storage columns (schema.EVENT_SCHEMA),
-- so `* EXCLUDE (...)` below leaves the facts columns, `revision` and `prev_*`; the public
-- views leave `prev_*` out too.

-- Every revision with its belief end, and the first recorded time of its fact.
CREATE OR REPLACE VIEW _tm_revisions AS
SELECT e.* EXCLUDE (first_recorded_at, folded, folded_until),
       coalesce(e.folded_until, s.recorded_at) AS believed_until, e.first_recorded_at
FROM _tm_events AS e
LEFT JOIN _tm_fresh_starts AS s
       ON s.scope = e.scope AND s.subject = e.subject AND s.predicate = e.predicate
      AND s.fact_id = e.fact_id AND e.folded_until IS NULL
WHERE e.folded IS TRUE
UNION ALL
SELECT f.* EXCLUDE (first_recorded_at, folded, folded_until, believed_until),
       f.believed_until, f.first_recorded_at
FROM _tm_fresh AS f;

-- The same rows as `_tm_revisions`, in three parts so that a filter on `believed_until` reaches
-- the Parquet scan of the folded rows (the coalesce() above hides it): folded rows whose end the
-- fold stored or that are still the belief; folded rows that were the belief at the fold and
-- were revised since (they end where their fact's first fresh revision starts); the fresh rows.
-- The belief-window questions (memory_diff, probes, reports) read this one: the still-believed
-- rows of a 10M store are a filtered scan, not a join of every row. The query forms read
-- `_tm_revisions`: DuckDB builds the middle part's join on the folded side, which doubles a
-- point as_believed.
CREATE OR REPLACE VIEW _tm_belief_rows AS
SELECT e.* EXCLUDE (first_recorded_at, folded, folded_until),
       e.folded_until AS believed_until, e.first_recorded_at
FROM _tm_events AS e
LEFT JOIN _tm_fresh_starts AS s
       ON s.scope = e.scope AND s.subject = e.subject AND s.predicate = e.predicate
      AND s.fact_id = e.fact_id
WHERE e.folded IS TRUE AND (e.folded_until IS NOT NULL OR s.fact_id IS NULL)
UNION ALL
SELECT e.* EXCLUDE (first_recorded_at, folded, folded_until),
       s.recorded_at AS believed_until, e.first_recorded_at
FROM _tm_events AS e
JOIN _tm_fresh_starts AS s
  ON s.scope = e.scope AND s.subject = e.subject AND s.predicate = e.predicate
 AND s.fact_id = e.fact_id
WHERE e.folded IS TRUE AND e.folded_until IS NULL
UNION ALL
SELECT f.* EXCLUDE (first_recorded_at, folded, folded_until, believed_until),
       f.believed_until, f.first_recorded_at
FROM _tm_fresh AS f;

-- SPEC §4: the facts columns, `revision` and `believed_until`.
CREATE OR REPLACE VIEW revisions AS
SELECT r.* EXCLUDE (first_recorded_at, prev_object, prev_valid_from, prev_valid_to, prev_recorded_at,
                    prev_retracted_at, prev_superseded_at, prev_superseded_by, prev_status)
FROM _tm_revisions AS r;

-- `facts` (SPEC §4): each fact's latest revision, with `recorded_at` = when the fact was first
-- recorded. The latest revision is the one still believed (`believed_until` NULL); spelled
-- out per part so that the folded rows are a plain filtered scan with an anti-join against the
-- (few) facts revised since the fold.
CREATE OR REPLACE VIEW facts AS
SELECT e.* EXCLUDE (revision, first_recorded_at, folded, folded_until, prev_object, prev_valid_from,
                    prev_valid_to, prev_recorded_at, prev_retracted_at, prev_superseded_at,
                    prev_superseded_by, prev_status)
       REPLACE (e.first_recorded_at AS recorded_at)
FROM _tm_events AS e
-- an anti-join spelled as a left join: DuckDB 2 plans NOT EXISTS here as a delim join that
-- groups every still-believed row by its key first (3-4x slower for a snapshot)
LEFT JOIN _tm_fresh_starts AS s
       ON s.scope = e.scope AND s.subject = e.subject AND s.predicate = e.predicate
      AND s.fact_id = e.fact_id
WHERE e.folded IS TRUE AND e.folded_until IS NULL AND s.fact_id IS NULL
UNION ALL
SELECT f.* EXCLUDE (revision, first_recorded_at, folded, folded_until, believed_until, prev_object,
                    prev_valid_from, prev_valid_to, prev_recorded_at, prev_retracted_at,
                    prev_superseded_at, prev_superseded_by, prev_status)
       REPLACE (f.first_recorded_at AS recorded_at)
FROM _tm_fresh AS f
WHERE f.believed_until IS NULL;

-- The rows of a fold (storage/folder.py): every revision with its belief end stored, in the stored
-- column order. After a fold no row is fresh and no read needs a window.
CREATE OR REPLACE VIEW _tm_folded AS
SELECT r.* EXCLUDE (believed_until, first_recorded_at), r.first_recorded_at,
       true AS folded, r.believed_until AS folded_until
FROM _tm_revisions AS r;

-- check()'s storage rule (the others are tm_problems, macros.sql): a row whose stored copy of
-- the revision it follows (prev_*) is not that revision would make memory_diff misread the
-- change. Only a writer other than tempomem makes one.
CREATE OR REPLACE VIEW _tm_previous_problems AS
SELECT 'previous_mismatch' AS kind, p.fact_id,
       format('revision {}: its stored prev_* columns are not those of the revision before it', p.revision) AS detail
FROM (SELECT r.fact_id, r.revision,
             r.prev_object IS DISTINCT FROM lag(r.object) OVER w
             OR r.prev_valid_from IS DISTINCT FROM lag(r.valid_from) OVER w
             OR r.prev_valid_to IS DISTINCT FROM lag(r.valid_to) OVER w
             OR r.prev_recorded_at IS DISTINCT FROM lag(r.recorded_at) OVER w
             OR r.prev_retracted_at IS DISTINCT FROM lag(r.retracted_at) OVER w
             OR r.prev_superseded_at IS DISTINCT FROM lag(r.superseded_at) OVER w
             OR r.prev_superseded_by IS DISTINCT FROM lag(r.superseded_by) OVER w
             OR r.prev_status IS DISTINCT FROM lag(r.status) OVER w AS differs
      FROM _tm_revisions AS r
      WINDOW w AS (PARTITION BY r.fact_id ORDER BY r.revision)) AS p
WHERE p.differs;
