-- The views of revisions.sql for rows that are all folded: a store with no row written since
-- its last fold (connection.bind_files), or a subject's rows that are (tempomem.pointread).
--
-- With no fresh row, `_tm_fresh` and `_tm_fresh_starts` are empty, so in revisions.sql every
-- LEFT JOIN finds nothing, the middle part of `_tm_belief_rows` and the fresh parts of the
-- unions are empty, and `coalesce(folded_until, NULL)` is `folded_until`. What is left is
-- below: the same rows and columns, in the same order, as one filtered scan each. DuckDB does
-- not see that the joins are empty until it runs them, and plans and runs them for every query:
-- at 10M revisions that union and anti-join were half the time of a snapshot `as_of`, and for a
-- point query over a subject's few rows most of the time of the query.
--
-- Load it after revisions.sql (it replaces three of its views); load revisions.sql again when
-- fresh rows appear. The other views of revisions.sql read these by name.

-- Every revision with its belief end, and the first recorded time of its fact.
CREATE OR REPLACE VIEW _tm_revisions AS
SELECT e.* EXCLUDE (first_recorded_at, folded, folded_until),
       e.folded_until AS believed_until, e.first_recorded_at
FROM _tm_events AS e
WHERE e.folded IS TRUE;

-- The same rows, read by the belief-window questions (memory_diff, probes, reports).
CREATE OR REPLACE VIEW _tm_belief_rows AS
SELECT * FROM _tm_revisions;

-- `facts` (SPEC §4): each fact's latest revision (its belief end not stored), with
-- `recorded_at` = when the fact was first recorded.
CREATE OR REPLACE VIEW facts AS
SELECT e.* EXCLUDE (revision, first_recorded_at, folded, folded_until, prev_object, prev_valid_from,
                    prev_valid_to, prev_recorded_at, prev_retracted_at, prev_superseded_at,
                    prev_superseded_by, prev_status)
       REPLACE (e.first_recorded_at AS recorded_at)
FROM _tm_events AS e
WHERE e.folded IS TRUE AND e.folded_until IS NULL;
