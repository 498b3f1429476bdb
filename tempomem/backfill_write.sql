-- tempomem: the revision rows a backfill writes as given (tempomem.backfill.write), over the
-- load's rows `_bf_rows` (backfill_checks.sql), in the store's sort order (scope, subject,
-- predicate, fact_id, revision).
--
-- Named parts, each starting at a line `-- @part <name>` (connection.sql_parts). A load runs
-- `absent` and `common`, then one part of each pair below (the two define the same macros two
-- ways), `revision_rows`, then `revisions` once per key range; a load that adds revisions to
-- stored facts runs `split_onto` before the ranges and `onto_stored` after them:
--   * `ids_given` or `ids_generated`: how a fact id is made and what the sort compares;
--   * `one_row_per_fact` or `rows_share_facts`: how a fact's revisions are numbered.
-- Ids are all generated only when the input has no fact_id column: then every fact is one row.
--
-- One revision per row from recorded_at; a row retracted later also gives a retracted revision
-- at retracted_at (a row retracted at the instant it was recorded is one retracted revision).
-- Sorting moves every column a row carries, so the rows are sorted while they are narrow: the
-- columns the input lacks ($absent) are left out until after it (`_bf_absent`, put back as
-- NULLs), and so are the columns computed from the row (a generated fact id, the default text,
-- the constants, the prev_* of a retraction).

-- @part absent
-- The columns the input lacks ($absent), as one row of NULLs of their types, and a marker
-- column, so that the table has a column when the input lacks none (the marker is among the
-- columns chosen: DuckDB refuses a COLUMNS that chooses none).
CREATE OR REPLACE TEMP TABLE _bf_absent AS
SELECT COLUMNS(lambda c: c = '_absent_' OR list_contains($absent, c))
FROM (SELECT true AS _absent_, * FROM _bf_checked LIMIT 1);

-- @part key_range
-- A row of a key range [from, to) in (scope, subject) order; a NULL bound is unbounded
-- (write.key_ranges). A large load is written range by range, so that each sort fits in
-- memory; a replay is applied chunk by chunk (backfill_replay.sql), so that its rounds do.
CREATE OR REPLACE TEMP MACRO tm__bf_in_range(scope_, subject_, from_scope, from_subject, to_scope, to_subject) AS
    (from_scope IS NULL OR scope_ > from_scope OR (scope_ = from_scope AND subject_ >= from_subject))
    AND (to_scope IS NULL OR scope_ < to_scope OR (scope_ = to_scope AND subject_ < to_subject));

-- @part common
-- A range's rows (tm__bf_ranged, below) leave out the columns the input lacks.

-- A row's supersession time: superseded when the row was recorded, unless it says when.
CREATE OR REPLACE TEMP MACRO tm__bf_superseded_at(superseded_at, superseded_by, recorded_at) AS
    coalesce(superseded_at, CASE WHEN superseded_by IS NOT NULL THEN recorded_at END);

-- Every row of `rows` as its revisions: part 0 is the row as recorded, part 1 its retraction
-- when that came later. One scan makes both (a UNION of two reads would materialise the rows
-- first). `first_recorded_at_` is the row's own recorded_at; `folded_until_` the belief end of
-- part 0 when the fact is this one row: its retraction, the fact's next revision.
CREATE OR REPLACE TEMP MACRO tm__bf_parts(rows) AS TABLE
SELECT * REPLACE (
           CASE WHEN part = 1 THEN retracted_at ELSE recorded_at END AS recorded_at,
           CASE WHEN part = 1 OR born_retracted THEN retracted_at END AS retracted_at,
           CASE WHEN part = 1 OR born_retracted THEN 'retracted' ELSE belief_status END AS status,
           CASE WHEN part = 1 OR born_retracted THEN coalesce(retraction_reason, reason) ELSE reason END AS reason,
           -- both parts agree
           tm__bf_superseded_at(superseded_at, superseded_by, recorded_at) AS superseded_at),
       recorded_at AS first_recorded_at_,
       CASE WHEN part = 0 AND retracted_at > recorded_at THEN retracted_at END AS folded_until_
FROM (SELECT r.* REPLACE (tm__bf_fact_id(r.fact_id, r.recorded_at, r.__row, r.nonce) AS fact_id,
                          coalesce(r.scope, 'default') AS scope),
             r.retracted_at = r.recorded_at AS born_retracted,
             CASE WHEN r.status IN ('live', 'ended', 'superseded') THEN r.status
                  WHEN r.superseded_by IS NOT NULL THEN 'superseded'
                  WHEN r.valid_to IS NOT NULL THEN 'ended' ELSE 'live' END AS belief_status,
             unnest(CASE WHEN r.retracted_at > r.recorded_at THEN [0, 1] ELSE [0] END) AS part
      FROM (SELECT * EXCLUDE (_absent_) FROM query_table(rows) CROSS JOIN _bf_absent) r);

-- Every row of `rows` (a table's name) in the key range [from, to) (tm__bf_in_range) but the
-- columns the input lacks, sorted while narrow, in the order its revisions are written: by key,
-- by fact (ids_given or
-- ids_generated says what the sort compares), and a fact's rows by belief time. Within a fact
-- every recorded_at is distinct (backfill_checks.sql refuses a repeat and a row after the
-- retraction), so this is the order of its revision numbers, and a row's retraction (part 1,
-- tm__bf_parts) is its fact's last revision: the revisions come out of tm__bf_parts in order.
CREATE OR REPLACE TEMP MACRO tm__bf_ranged(rows, from_scope, from_subject, to_scope, to_subject, absent) AS TABLE
SELECT COLUMNS(lambda c: c NOT IN ('_fixed', '_no_start') AND NOT list_contains(absent, c))
FROM query_table(rows) r
WHERE tm__bf_in_range(coalesce(r.scope, 'default'), r.subject, from_scope, from_subject, to_scope, to_subject)
ORDER BY coalesce(r.scope, 'default'), r.subject, r.predicate, tm__bf_fact_order(r.fact_id, r.recorded_at, r.__row, r.nonce),
         r.recorded_at;

-- @part ids_given
-- The input has fact ids: a row's id is the given one or one tm__fact_id makes, and the id is
-- what the sort compares.
CREATE OR REPLACE TEMP MACRO tm__bf_fact_id(given, recorded_at, row_, nonce) AS
    tm__fact_id(given, recorded_at, row_, nonce);
CREATE OR REPLACE TEMP MACRO tm__bf_fact_order(given, recorded_at, row_, nonce) AS
    tm__fact_id(given, recorded_at, row_, nonce);

-- @part ids_generated
-- The input has none: every id is generated, and sorts like the number tm__fact_id writes in
-- hex, (recorded_at clamped) << 60 + row (the nonce is the same for every row), which the sort
-- compares instead of the text. The text is made from `_id_us` and `_id_serial` while the batch
-- is written (ids.generated_ids: a quarter of the query's CPU when made here).
CREATE OR REPLACE TEMP MACRO tm__bf_fact_id(given, recorded_at, row_, nonce) AS CAST(NULL AS VARCHAR);
CREATE OR REPLACE TEMP MACRO tm__bf_fact_order(given, recorded_at, row_, nonce) AS
    (CAST(tm__id_us(recorded_at) AS HUGEINT) << 60) + row_;

-- @part one_row_per_fact
-- How a fact's revisions are numbered, with its first recorded time, its belief end and the
-- previous revision's columns (prev_*), when every fact is one input row: from the row itself.
-- Its parts are the row as recorded, then its retraction, whose prev_* are the row as recorded.
CREATE OR REPLACE TEMP MACRO tm__bf_numbered(revs) AS TABLE
SELECT r.*, 1 + r.part AS revision, r.first_recorded_at_ AS first_recorded_at, r.folded_until_ AS folded_until,
       CASE WHEN r.part = 1 THEN r.object END AS prev_object,
       CASE WHEN r.part = 1 THEN r.valid_from END AS prev_valid_from,
       CASE WHEN r.part = 1 THEN r.valid_to END AS prev_valid_to,
       CASE WHEN r.part = 1 THEN r.first_recorded_at_ END AS prev_recorded_at,
       CASE WHEN r.part = 1 THEN CAST(NULL AS TIMESTAMPTZ) END AS prev_retracted_at,
       CASE WHEN r.part = 1 THEN r.superseded_at END AS prev_superseded_at,
       CASE WHEN r.part = 1 THEN r.superseded_by END AS prev_superseded_by,
       CASE WHEN r.part = 1 THEN r.belief_status END AS prev_status
FROM query_table(revs) r;

-- @part rows_share_facts
-- The same when rows share fact ids (`_bf_shared_facts`, backfill_checks.sql; ids are given):
-- a fact's revisions are adjacent and in order in the stream (tm__bf_ranged), so each is
-- numbered against the row before it and after it, by windows over the stream in its order
-- (`OVER ()`, which DuckDB computes streaming, in order, with no sort; a window partitioned by
-- fact sorted every wide row again: mem0's 1.8M revisions 3.5 s against 2.4 s). `same_`: the
-- row before is of the same fact. The belief end is tm__believed_until's (revisions.sql): the
-- next revision's recorded_at, when the row after is of the same fact. The first recorded
-- time and the number count from the fact's first row, the last row not `same_` so far.
CREATE OR REPLACE TEMP MACRO tm__bf_numbered(revs) AS TABLE
WITH s AS (
    SELECT r.*, row_number() OVER () AS at_,
           coalesce(lag(r.fact_id) OVER () = r.fact_id, false) AS same_,
           CASE WHEN lead(r.fact_id) OVER () = r.fact_id THEN lead(r.recorded_at) OVER () END AS folded_until,
           lag(r.object) OVER () AS object_, lag(r.valid_from) OVER () AS valid_from_,
           lag(r.valid_to) OVER () AS valid_to_, lag(r.recorded_at) OVER () AS recorded_at_,
           lag(r.retracted_at) OVER () AS retracted_at_, lag(r.superseded_at) OVER () AS superseded_at_,
           lag(r.superseded_by) OVER () AS superseded_by_, lag(r.status) OVER () AS status_
    FROM query_table(revs) r
)
SELECT s.* EXCLUDE (at_, same_, object_, valid_from_, valid_to_, recorded_at_, retracted_at_, superseded_at_,
                    superseded_by_, status_),
       at_ + 1 - max(CASE WHEN NOT same_ THEN at_ END) OVER (ROWS UNBOUNDED PRECEDING) AS revision,
       last_value(CASE WHEN NOT same_ THEN recorded_at END IGNORE NULLS) OVER (ROWS UNBOUNDED PRECEDING)
           AS first_recorded_at,
       CASE WHEN same_ THEN object_ END AS prev_object, CASE WHEN same_ THEN valid_from_ END AS prev_valid_from,
       CASE WHEN same_ THEN valid_to_ END AS prev_valid_to, CASE WHEN same_ THEN recorded_at_ END AS prev_recorded_at,
       CASE WHEN same_ THEN retracted_at_ END AS prev_retracted_at,
       CASE WHEN same_ THEN superseded_at_ END AS prev_superseded_at,
       CASE WHEN same_ THEN superseded_by_ END AS prev_superseded_by, CASE WHEN same_ THEN status_ END AS prev_status
FROM s;

-- @part revision_rows
-- The stored rows of the rows of `rows` (a table's name) in one key range (from_scope,
-- from_subject, to_scope, to_subject), in EVENT_SCHEMA's order then `_id_us` and `_id_serial`
-- (what ids_generated's text is made of) and `_row`, the input row (what the overlap flag
-- names). Defined after the pairs above: it calls their macros.
CREATE OR REPLACE TEMP MACRO tm__bf_revisions(rows, from_scope, from_subject, to_scope, to_subject, absent,
                                              origin, ingested_at) AS TABLE
WITH ranged AS (
    SELECT * FROM tm__bf_ranged(rows, from_scope, from_subject, to_scope, to_subject, absent)
),
revs AS (
    SELECT * FROM tm__bf_parts('ranged')
),
numbered AS (
    SELECT * FROM tm__bf_numbered('revs')
)
SELECT fact_id, scope, subject, predicate, object,
       coalesce(text, subject || ' ' || predicate || ' ' || object) AS text,
       valid_from, valid_to, valid_from_inferred, recorded_at, retracted_at, superseded_at,
       superseded_by, status, reason, source, confidence,
       CAST(origin AS VARCHAR) AS origin, CAST(ingested_at AS TIMESTAMPTZ) AS ingested_at,
       coalesce(artifacts, CAST([] AS VARCHAR[])) AS artifacts, attributes, embedding,
       coalesce(link_type, 'entity') AS link_type, coalesce(weight, 1.0) AS weight,
       CAST(revision AS INTEGER) AS revision, prev_object, prev_valid_from, prev_valid_to, prev_recorded_at,
       prev_retracted_at, prev_superseded_at, prev_superseded_by, prev_status,
       first_recorded_at, true AS folded, folded_until,
       tm__id_us(first_recorded_at_) AS _id_us, nonce + __row AS _id_serial, __row AS _row
FROM numbered;

-- @part split_onto
-- The load's rows that add revisions to stored facts (`_bf_stored_facts`, backfill_checks.sql),
-- written apart (onto_stored), and the others, the new facts (revisions).
CREATE OR REPLACE TEMP VIEW _bf_new_rows AS
SELECT r.* FROM _bf_rows AS r ANTI JOIN _bf_stored_facts AS s ON s.fact_id = r.fact_id;
-- A late retraction (backfill_checks.sql) loads as its retraction: recorded then, and retracted.
CREATE OR REPLACE TEMP VIEW _bf_onto_rows AS
SELECT r.* REPLACE (tm__bf_late_recorded_at(r.recorded_at, r.retracted_at, l.__row) AS recorded_at,
                    tm__bf_superseded_at(r.superseded_at, r.superseded_by, r.recorded_at) AS superseded_at)
FROM _bf_rows AS r SEMI JOIN _bf_stored_facts AS s ON s.fact_id = r.fact_id
LEFT JOIN _bf_late_retractions AS l ON l.__row = r.__row AND l.recorded_at = r.recorded_at;

-- @part revisions
-- The new facts' revisions ($rows: `_bf_rows`, or `_bf_new_rows` when the load also adds to
-- stored facts) of one key range ($from_scope, $from_subject, $to_scope, $to_subject).
SELECT * FROM tm__bf_revisions($rows, $from_scope, $from_subject, $to_scope, $to_subject, $absent,
                               $origin, $ingested_at);

-- @part onto_stored
-- The revisions the load adds to stored facts, numbered on from each fact's latest stored
-- revision (`_bf_stored_facts`): the first follows it (its prev_*), and all carry the fact's
-- first recorded time. They are written as a commit writes revisions, fresh (not folded, no
-- belief end stored), so that the reads end the stored revision where the first of them starts
-- (revisions.sql): the stored rows are never rewritten. Few rows, in one range, sorted again
-- after the join.
SELECT r.* REPLACE (
           CAST(r.revision + s.revision AS INTEGER) AS revision,
           CASE WHEN r.revision = 1 THEN s.object ELSE r.prev_object END AS prev_object,
           CASE WHEN r.revision = 1 THEN s.valid_from ELSE r.prev_valid_from END AS prev_valid_from,
           CASE WHEN r.revision = 1 THEN s.valid_to ELSE r.prev_valid_to END AS prev_valid_to,
           CASE WHEN r.revision = 1 THEN s.recorded_at ELSE r.prev_recorded_at END AS prev_recorded_at,
           CASE WHEN r.revision = 1 THEN s.retracted_at ELSE r.prev_retracted_at END AS prev_retracted_at,
           CASE WHEN r.revision = 1 THEN s.superseded_at ELSE r.prev_superseded_at END AS prev_superseded_at,
           CASE WHEN r.revision = 1 THEN s.superseded_by ELSE r.prev_superseded_by END AS prev_superseded_by,
           CASE WHEN r.revision = 1 THEN s.status ELSE r.prev_status END AS prev_status,
           s.first_recorded_at AS first_recorded_at, false AS folded,
           CAST(NULL AS TIMESTAMPTZ) AS folded_until)
FROM tm__bf_revisions('_bf_onto_rows', NULL, NULL, NULL, NULL, $absent, $origin, $ingested_at) AS r
JOIN _bf_stored_facts AS s ON s.fact_id = r.fact_id
ORDER BY r.scope, r.subject, r.predicate, r.fact_id, r.revision;
