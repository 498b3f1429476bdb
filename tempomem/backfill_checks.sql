-- tempomem: stage 2 of a backfill (tempomem.backfill.checks): exact repeats loaded once, spans
-- fixed, fact-level rejections found, over `_bf_checked` (stage 1: every input row parsed, with
-- its first bad field and, when good, the hash `_h` of its values).
--
-- Named parts, each starting at a line `-- @part <name>` (connection.sql_parts), each one
-- whole statement, run in file order. The columns two rows must share to be exact repeats
-- (artifacts aside: they are merged) are those of checks.ROW_VALUES, spelled out below.

-- @part nonce
-- A fresh random number per load ($nonce): generated fact ids are recorded_at plus (nonce +
-- row), so they are unique in the load, unlikely to meet another load's, and the same each
-- time the view is read (uuid() would differ between reads).
CREATE TEMP TABLE _bf_const AS SELECT CAST($nonce AS BIGINT) AS nonce;

-- @part repeated
-- The hashes shared by more than one row (`_bf_repeated_hashes`, found by the caller).
CREATE TEMP TABLE _bf_repeated AS SELECT _h FROM _bf_repeated_hashes;

-- @part merged
-- Exact repeats: rows equal in every normalised column but artifacts share a hash; only the
-- rows whose hash repeats are grouped in full and merged (artifacts in order of first
-- appearance). Rows with a unique hash pass through untouched (candidates).
CREATE TEMP TABLE _bf_merged AS
SELECT * REPLACE (list_filter(artifacts, lambda a, i: list_position(artifacts, a) = i) AS artifacts)
FROM (SELECT min(__row) AS __row, fact_id, scope, subject, predicate, object, text, reason, retraction_reason,
             source, superseded_by, link_type, status, valid_from, valid_to, recorded_at, retracted_at,
             superseded_at, confidence, weight, valid_from_inferred, embedding, attributes,
             flatten(list(coalesce(artifacts, []) ORDER BY __row)) AS artifacts
      FROM _bf_checked SEMI JOIN _bf_repeated USING (_h)
      GROUP BY ALL);

-- @part candidates
-- The loadable rows before fact-level checks. An end before its start keeps the end and moves
-- the start back to it. `fact_id` stays as given (NULL when none): a generated id is made
-- only where it is needed (tm__fact_id), so that the write can sort the rows before it.
CREATE TEMP VIEW _bf_candidates AS
SELECT * REPLACE (
           CASE WHEN valid_to < valid_from THEN valid_to ELSE valid_from END AS valid_from,
           coalesce(valid_from_inferred, false) OR valid_from IS NULL OR coalesce(valid_to < valid_from, false)
               AS valid_from_inferred),
       coalesce(valid_to < valid_from, false) AS _fixed,
       valid_from IS NULL AS _no_start
FROM (SELECT __row, fact_id, scope, subject, predicate, object, text, reason, retraction_reason, source,
             superseded_by, link_type, status, valid_from, valid_to, recorded_at, retracted_at, superseded_at,
             confidence, weight, valid_from_inferred, embedding, attributes, artifacts
      FROM _bf_checked
      WHERE _h IS NOT NULL AND _h NOT IN (SELECT r._h FROM _bf_repeated r)
      UNION ALL
      SELECT __row, fact_id, scope, subject, predicate, object, text, reason, retraction_reason, source,
             superseded_by, link_type, status, valid_from, valid_to, recorded_at, retracted_at, superseded_at,
             confidence, weight, valid_from_inferred, embedding, attributes, artifacts
      FROM _bf_merged) k
CROSS JOIN _bf_const;

-- @part fact_rejects_table
-- The fact-level rejections, as the report's rejected rows.
CREATE TEMP TABLE _bf_fact_rejects (row BIGINT, field VARCHAR, value VARCHAR, reason VARCHAR);

-- @part stored_matches
-- Rows that repeat what the store already holds (a file loaded twice, a notebook cell or an
-- import run again): a row without a fact id, a stored fact's first revision of the same key,
-- value, valid interval and belief time; a row with one, the stored revision of that fact
-- recorded at its recorded_at, with the same key, value and valid interval ($stored: the store
-- has rows and the load is not replayed, which finds the stored facts itself). A row is named
-- by `__row` and `recorded_at`: an importer's source row that becomes two revisions gives two
-- rows of one `__row`, which a fact's distinct belief times tell apart (fact_rejects refuses a
-- repeat of one). `given` is the row's retraction; for a row with one, `stored` is the stored
-- fact's (NULL: none) and `latest` when its latest revision was recorded.
CREATE TEMP TABLE _bf_stored_matches AS
WITH matched AS (
    -- one join on what both kinds of row compare, the fact id (or a first revision) checked after it
    SELECT c.__row, c.recorded_at, c.retracted_at AS given, c.fact_id IS NOT NULL AS named, s.fact_id
    FROM _bf_candidates AS c
    JOIN (SELECT fact_id, scope, subject, predicate, object, valid_from, valid_to, recorded_at, revision
          FROM _tm_events WHERE $stored) AS s
      ON s.scope = coalesce(c.scope, 'default') AND s.subject = c.subject AND s.predicate = c.predicate
     AND s.object = c.object AND s.recorded_at = c.recorded_at
     AND s.valid_from IS NOT DISTINCT FROM c.valid_from AND s.valid_to IS NOT DISTINCT FROM c.valid_to
    WHERE CASE WHEN c.fact_id IS NULL THEN s.revision = 1 ELSE s.fact_id = c.fact_id END
),
ends AS (  -- what a row's retraction is compared with (stored_repeats, late_retractions)
    SELECT e.fact_id, max(e.retracted_at) AS retracted_at, max(e.recorded_at) AS latest FROM _tm_events AS e
    SEMI JOIN matched AS m ON m.fact_id = e.fact_id AND m.given IS NOT NULL
    GROUP BY e.fact_id
)
SELECT m.__row, m.recorded_at, m.given, m.named, m.fact_id, r.retracted_at AS stored, r.latest
FROM matched AS m LEFT JOIN ends AS r ON r.fact_id = m.fact_id;

-- @part stored_repeats
-- Those rows are loaded once, that is not again: counted with the exact repeats and named by
-- the flag already_stored. A row without a retraction repeats the fact whatever became of it
-- since (corrected, say); a row with one repeats it only when the store holds that retraction.
CREATE TEMP TABLE _bf_stored_repeats AS
SELECT DISTINCT __row, recorded_at FROM _bf_stored_matches WHERE given IS NULL OR given = stored;

-- @part late_retractions
-- A row naming its fact that repeats a stored revision and retracts it after the fact's latest
-- stored revision, the fact not retracted: the retraction is new (an edge expired since the
-- export was loaded). Only it loads: as a row recorded, and retracted, at its retraction
-- (tm__bf_late_recorded_at), a revision added to the stored fact (stored_facts).
CREATE TEMP TABLE _bf_late_retractions AS
SELECT DISTINCT __row, recorded_at FROM _bf_stored_matches
WHERE named AND stored IS NULL AND given > latest;
-- The recorded_at a candidate row loads with: its retraction's when it is a late retraction
-- (`late_row`: its __row in _bf_late_retractions, NULL when it is not one).
CREATE OR REPLACE TEMP MACRO tm__bf_late_recorded_at(recorded_at, retracted_at, late_row) AS
    CASE WHEN late_row IS NULL THEN recorded_at ELSE retracted_at END;

-- @part stored_retractions
-- A row that repeats a stored fact but retracts it otherwise would rewrite that fact: refused.
INSERT INTO _bf_fact_rejects
SELECT DISTINCT m.__row, 'retracted_at', CAST(m.given AS VARCHAR),
       'repeats stored fact ' || m.fact_id || ' and retracts it: backfill never rewrites a stored fact '
       || '(mem.correct retracts it)'
FROM _bf_stored_matches AS m
ANTI JOIN _bf_stored_repeats AS r ON r.__row = m.__row AND r.recorded_at = m.recorded_at
ANTI JOIN _bf_late_retractions AS l ON l.__row = m.__row AND l.recorded_at = m.recorded_at;

-- @part stored_fact_ids
-- The stored facts the rows name by fact id (but the rows that repeat a stored revision), with
-- their latest revision's number: a row of one adds a later revision to it, which fact_rejects
-- allows when the row follows that revision (an export loaded before and grown since: a mem0
-- ADD updated since, a Graphiti edge expired since). Found on two columns of the store ($stored
-- as in stored_matches); the latest revisions' other columns are read only for the facts found
-- (stored_facts), which most loads name none of.
CREATE TEMP TABLE _bf_stored_fact_ids AS
SELECT e.fact_id, max(e.revision) AS revision FROM _tm_events AS e
SEMI JOIN (SELECT c.fact_id FROM _bf_candidates AS c
           ANTI JOIN _bf_stored_repeats AS r ON r.__row = c.__row AND r.recorded_at = c.recorded_at
           WHERE c.fact_id IS NOT NULL AND $stored) AS n ON n.fact_id = e.fact_id
GROUP BY e.fact_id;

-- @part stored_facts
-- Each of those facts' latest revision: what a revision the load adds follows (fact_rejects)
-- and numbers itself after (backfill_write.sql, onto_stored).
CREATE TEMP TABLE _bf_stored_facts AS
SELECT e.fact_id, e.scope, e.subject, e.predicate, e.object, e.valid_from, e.valid_to, e.recorded_at,
       e.retracted_at, e.superseded_at, e.superseded_by, e.status, e.revision, e.first_recorded_at
FROM _tm_events AS e SEMI JOIN _bf_stored_fact_ids AS f ON f.fact_id = e.fact_id AND f.revision = e.revision
WHERE $found;

-- @part shared_facts
-- The fact ids given to more than one loadable row (only when the input has fact ids and the
-- load is not replayed): the facts whose rows are revisions numbered by belief time, which the
-- checks between rows (fact_rejects) take, and no other row; the write numbers revisions
-- against their neighbours when there is one (backfill_write.sql, rows_share_facts). Most facts
-- of an export are one row each (edges each with its uuid, a few expired).
CREATE TEMP TABLE _bf_shared_facts AS
SELECT fact_id FROM _bf_candidates WHERE fact_id IS NOT NULL GROUP BY fact_id HAVING count(*) > 1;

-- @part between_rows
-- Each row of `rows` (a table's name: rows with a fact id, scope, subject, predicate,
-- recorded_at and retracted_at) beside what the rules between a fact's rows compare: its fact's
-- first row's key, the belief time of the row before it, and the latest retraction before it.
CREATE OR REPLACE TEMP MACRO tm__bf_between_rows(rows) AS TABLE
SELECT r.*, first_value(r.scope) OVER w AS first_scope, first_value(r.subject) OVER w AS first_subject,
       first_value(r.predicate) OVER w AS first_predicate, lag(r.recorded_at) OVER w AS prev_recorded_at,
       max(r.retracted_at) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_retracted_at
FROM query_table(rows) AS r
WINDOW w AS (PARTITION BY r.fact_id ORDER BY r.recorded_at, r.__row);

-- @part fact_rejects
-- Rows sharing a fact_id are revisions of one fact: they must share its key, have distinct
-- belief times and not follow its retraction. A row of a stored fact (stored_facts) adds a
-- revision to it: it must have the fact's key and come after its latest revision, which must
-- not be a retraction or an erasure; backfill adds to a stored fact's history, it never rewrites
-- it. (Only when the input has fact ids and the load is not replayed: a replay's rows are
-- assertions, which replayed_before_stored and the write path check.) The rules between rows
-- are tested over the rows of the shared facts (shared_facts) and of the stored facts: a window
-- over every row, when most facts are one row, was most of this; the stored facts' columns are
-- joined to their own rows only (most loads name none).
INSERT INTO _bf_fact_rejects
WITH given AS (  -- but the rows that repeat a stored revision (stored_repeats): they load once, not again
    SELECT c.__row, c.fact_id, coalesce(c.scope, 'default') AS scope, c.subject, c.predicate, c.recorded_at,
           c.retracted_at
    FROM _bf_candidates AS c
    ANTI JOIN _bf_stored_repeats AS r ON r.__row = c.__row AND r.recorded_at = c.recorded_at
    WHERE c.fact_id IS NOT NULL
),
onto AS (  -- the rows of stored facts, a late retraction (late_retractions) at its time
    SELECT g.* REPLACE (tm__bf_late_recorded_at(g.recorded_at, g.retracted_at, l.__row) AS recorded_at),
           true AS stored, s.scope AS stored_scope, s.subject AS stored_subject, s.predicate AS stored_predicate,
           s.recorded_at AS stored_recorded_at, s.retracted_at AS stored_retracted_at, s.status AS stored_status
    FROM given AS g
    JOIN _bf_stored_facts AS s ON s.fact_id = g.fact_id
    LEFT JOIN _bf_late_retractions AS l ON l.__row = g.__row AND l.recorded_at = g.recorded_at
),
-- the rules between rows, over the rows of the new facts of several rows and over the rows of the
-- stored facts apart: the stored facts' columns carried through the sort of every row cost as much
new_shared AS (
    SELECT g.* FROM given AS g SEMI JOIN _bf_shared_facts AS h ON h.fact_id = g.fact_id
    ANTI JOIN _bf_stored_facts AS s ON s.fact_id = g.fact_id
),
tested AS (
    SELECT * FROM tm__bf_between_rows('new_shared') UNION ALL BY NAME SELECT * FROM tm__bf_between_rows('onto')
),
judged AS (
    SELECT __row, fact_id,
           CASE WHEN stored_status = 'erased'
                    THEN 'names an erased fact: its content is gone, and backfill adds nothing to it'
                WHEN stored AND (scope <> stored_scope OR subject <> stored_subject OR predicate <> stored_predicate)
                    THEN 'the stored fact of this id has another key: (' || stored_scope || ', ' || stored_subject
                         || ', ' || stored_predicate || ')'
                WHEN recorded_at <= stored_recorded_at
                    THEN 'already in the store, its latest revision recorded at ' || CAST(stored_recorded_at AS VARCHAR)
                         || ': backfill adds later revisions to a stored fact, it never rewrites its history'
                WHEN stored_retracted_at IS NOT NULL
                    THEN 'the stored fact was retracted at ' || CAST(stored_retracted_at AS VARCHAR)
                         || ': backfill adds nothing after a retraction'
                WHEN scope <> first_scope OR subject <> first_subject OR predicate <> first_predicate
                    THEN 'an earlier row of this fact has another scope, subject or predicate'
                WHEN recorded_at = prev_recorded_at
                    THEN 'another row of this fact has the same recorded_at'
                WHEN recorded_at >= prev_retracted_at
                    THEN 'this fact was already retracted at ' || CAST(prev_retracted_at AS VARCHAR) END AS reason
    FROM tested
)
SELECT __row, 'fact_id', fact_id, reason FROM judged WHERE reason IS NOT NULL;

-- @part replayed_before_stored
-- A replay applies its rows in belief-time order through the write path, after what the store
-- believes: a row recorded no later than the latest stored revision of its key would be applied
-- against beliefs it precedes (a source replayed again, a late row replayed a day on), so it is
-- refused, naming that revision's time. ($stored: the store has rows and the load is a replay.)
INSERT INTO _bf_fact_rejects
WITH keys AS (
    SELECT e.scope, e.subject, e.predicate, max(e.recorded_at) AS latest FROM _tm_events AS e
    SEMI JOIN (SELECT coalesce(c.scope, 'default') AS scope, c.subject, c.predicate FROM _bf_candidates AS c
               WHERE $stored) AS k
           ON k.scope = e.scope AND k.subject = e.subject AND k.predicate = e.predicate
    GROUP BY ALL
)
SELECT c.__row, 'recorded_at', CAST(c.recorded_at AS VARCHAR),
       'the store already holds beliefs of this key up to ' || CAST(k.latest AS VARCHAR)
       || ': a replay applies rows after them (a source that grew since it was loaded loads as given, '
       || 'resolve=False)'
FROM _bf_candidates AS c
JOIN keys AS k ON k.scope = coalesce(c.scope, 'default') AND k.subject = c.subject AND k.predicate = c.predicate
WHERE c.recorded_at <= k.latest;

-- @part rows
-- The rows that load: `_bf_rows`, a view, so that a load is held once (in `_bf_checked`).
CREATE TEMP VIEW _bf_rows AS
SELECT c.* FROM _bf_candidates AS c
ANTI JOIN _bf_stored_repeats AS r ON r.__row = c.__row AND r.recorded_at = c.recorded_at
WHERE c.__row NOT IN (SELECT f.row FROM _bf_fact_rejects f);
