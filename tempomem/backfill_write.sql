-- tempomem: the revision rows a backfill writes as given (tempomem.backfill.write), over the
-- load's rows `_bf_rows` (backfill_checks.sql), in the store's sort order (scope, subject,
-- predicate, fact_id, revision).
--
-- Named parts, each starting at a line `-- @part <name>` (connection.sql_parts). A load runs
-- `absent` and `common`, then one part of each pair below (the two define the same macros two
-- ways), then `revisions` once per key range:
--   * `ids_given` or `ids_generated`: how a fact id is made and what the sort compares;
--   * `one_row_per_fact` or `rows_share_facts` (then `few_rows_share_facts` when those rows are
--     a minority): how a fact's revisions are numbered.
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
           -- superseded when the row was recorded, unless it says when: both parts agree
           coalesce(superseded_at, CASE WHEN superseded_by IS NOT NULL THEN recorded_at END) AS superseded_at),
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

-- How a fact's revisions are numbered, with its first recorded time, its belief end and the
-- previous revision's columns (prev_*): `tm__bf_one_row` for a fact that is one input row (its
-- parts: the row as recorded, then its retraction, whose prev_* are the row as recorded; all
-- come from the row itself), `tm__bf_windowed` for one of several rows,
-- whose revisions interleave by belief time (a window over the fact). Within a fact every
-- recorded_at is distinct (backfill_checks.sql refuses a repeat and a row after the retraction),
-- so recorded_at orders its revisions as their numbers do, and the belief end is
-- tm__believed_until's (revisions.sql), computed in the same window; so is the first recorded
-- time, the first row's (a min over the fact would be a window of its own).
CREATE OR REPLACE TEMP MACRO tm__bf_one_row(revs) AS TABLE
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

CREATE OR REPLACE TEMP MACRO tm__bf_windowed(revs) AS TABLE
SELECT r.*, CAST(row_number() OVER w AS INTEGER) AS revision,
       first_value(r.recorded_at) OVER w AS first_recorded_at,
       tm__believed_until(r.recorded_at, r.scope, r.subject, r.predicate, r.fact_id, r.recorded_at) AS folded_until,
       lag(r.object) OVER w AS prev_object, lag(r.valid_from) OVER w AS prev_valid_from,
       lag(r.valid_to) OVER w AS prev_valid_to, lag(r.recorded_at) OVER w AS prev_recorded_at,
       lag(r.retracted_at) OVER w AS prev_retracted_at, lag(r.superseded_at) OVER w AS prev_superseded_at,
       lag(r.superseded_by) OVER w AS prev_superseded_by, lag(r.status) OVER w AS prev_status
FROM query_table(revs) r
WINDOW w AS (PARTITION BY r.scope, r.subject, r.predicate, r.fact_id ORDER BY r.recorded_at);

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
-- Every fact is one input row: the rows are sorted before they become revisions (a row's
-- retraction shares its fact id and follows it), and numbered by their parts (tm__bf_one_row).
CREATE OR REPLACE TEMP MACRO tm__bf_ranged(from_scope, from_subject, to_scope, to_subject, absent) AS TABLE
SELECT COLUMNS(lambda c: c NOT IN ('_fixed', '_no_start') AND NOT list_contains(absent, c))
FROM _bf_rows r
WHERE tm__bf_in_range(coalesce(r.scope, 'default'), r.subject, from_scope, from_subject, to_scope, to_subject)
ORDER BY coalesce(r.scope, 'default'), r.subject, r.predicate, tm__bf_fact_order(r.fact_id, r.recorded_at, r.__row, r.nonce);

CREATE OR REPLACE TEMP MACRO tm__bf_numbered(revs) AS TABLE SELECT * FROM tm__bf_one_row(revs);

-- @part rows_share_facts
-- Rows share fact ids (`_bf_shared_facts`, backfill_checks.sql): a fact's revisions interleave
-- by belief time, so they are numbered by the window (tm__bf_windowed) and sorted after it.
CREATE OR REPLACE TEMP MACRO tm__bf_ranged(from_scope, from_subject, to_scope, to_subject, absent) AS TABLE
SELECT COLUMNS(lambda c: c NOT IN ('_fixed', '_no_start') AND NOT list_contains(absent, c))
FROM _bf_rows r
WHERE tm__bf_in_range(coalesce(r.scope, 'default'), r.subject, from_scope, from_subject, to_scope, to_subject);

CREATE OR REPLACE TEMP MACRO tm__bf_numbered(revs) AS TABLE
SELECT * FROM tm__bf_windowed(revs) ORDER BY scope, subject, predicate, fact_id, revision;

-- @part few_rows_share_facts
-- After rows_share_facts, when the rows of shared facts are a minority (Graphiti's expired
-- edges among edges of one row each): only those go through the window, the other facts are
-- numbered by their parts (tm__bf_one_row), and all are sorted after. At 1M edges, a tenth of
-- them expired, the write took 1.54 s against 1.99 s; where most rows share facts (a mem0
-- history) splitting cost more than it saved (3.66 s against 3.18 s), so the caller chooses.
CREATE OR REPLACE TEMP MACRO tm__bf_numbered(revs) AS TABLE
WITH flagged AS (
    SELECT r.*, r.fact_id IN (SELECT s.fact_id FROM _bf_shared_facts AS s) AS _shared FROM query_table(revs) AS r
),
one AS (SELECT * EXCLUDE (_shared) FROM flagged WHERE NOT _shared),
many AS (SELECT * EXCLUDE (_shared) FROM flagged WHERE _shared)
SELECT * FROM tm__bf_one_row('one')
UNION ALL BY NAME
SELECT * FROM tm__bf_windowed('many')
ORDER BY scope, subject, predicate, fact_id, revision;

-- @part revisions
-- The stored rows of one key range ($from_scope, $from_subject, $to_scope, $to_subject), in
-- EVENT_SCHEMA's order then `_id_us` and `_id_serial` (what ids_generated's text is made of).
WITH ranged AS (
    SELECT * FROM tm__bf_ranged($from_scope, $from_subject, $to_scope, $to_subject, $absent)
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
       CAST($origin AS VARCHAR) AS origin, CAST($ingested_at AS TIMESTAMPTZ) AS ingested_at,
       coalesce(artifacts, CAST([] AS VARCHAR[])) AS artifacts, attributes, embedding,
       coalesce(link_type, 'entity') AS link_type, coalesce(weight, 1.0) AS weight,
       CAST(revision AS INTEGER) AS revision, prev_object, prev_valid_from, prev_valid_to, prev_recorded_at,
       prev_retracted_at, prev_superseded_at, prev_superseded_by, prev_status,
       first_recorded_at, true AS folded, folded_until,
       tm__id_us(first_recorded_at_) AS _id_us, nonce + __row AS _id_serial
FROM numbered;
