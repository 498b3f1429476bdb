-- tempomem: other memory systems' exports mapped to backfill's input columns (SPEC §11), for
-- tempomem.sources.
--
-- Named parts, each starting at a line `-- @part <name>` (connection.sql_parts), each one
-- whole statement over `src` (the source's rows as one table, every optional column present,
-- `__row` its 0-based position). Times given as text are read with the macro tm__text_time(x):
-- the time grammar of SPEC §2 (timegrammar.TEXT_TIME_MACRO). A source row that becomes two
-- revisions gives two input rows with the same `fact_id` and `__row`. The rows come in no
-- particular order: backfill reads a row's place from `__row` (sorting a million mapped rows by
-- it took two thirds of the Graphiti mapping).

-- @part graphiti_edges
-- In the graphiti_* parts, $format is DuckDB's JSON format: 'array' for a file whose text starts
-- with '[' (DuckDB's own finding takes one that starts with a byte-order mark for something else
-- and refuses it), 'auto' for any other.
-- A Graphiti export ($path) as read: a JSON array of edges or JSON Lines, one row per edge and
-- every field as JSON (maximum_depth 1), so that no value is read as another type; the reader
-- makes text of them. $sample edges show the fields (-1: all; an edge with a field the sample
-- did not show is an error, and the reader reads again with all).
SELECT * FROM read_json($path, format = $format, records = 'true', maximum_depth = 1, sample_size = $sample);

-- @part typed_times
-- How an importer's mapping gives the times backfill reads, `tm__import_time(t, raw)` over each
-- time as read (`t`) and its text (`raw`; NULL for one the mapping computed). Every time was
-- read: the mapping gives them as read (backfill parses none again).
CREATE OR REPLACE TEMP MACRO tm__import_time(t, raw) AS t;

-- @part text_times
-- Some could not be read: the times go to backfill as text, so that it rejects (or, lenient,
-- drops and flags) the unreadable ones naming the text. A time read gives its text, a computed
-- one its full ISO form (which the check reads on its fast path; DuckDB's own text form, '+00'
-- for the offset, takes the slow one).
CREATE OR REPLACE TEMP MACRO tm__import_time(t, raw) AS coalesce(raw, strftime(t, '%Y-%m-%dT%H:%M:%S.%fZ'));

-- @part graphiti_list
-- An edge's episodes (a JSON value) as a list of text: a JSON list's items as text, any other
-- value as a list of its one text (as backfill reads one bare artifact), JSON null as NULL.
CREATE OR REPLACE TEMP MACRO tm__graphiti_list(j) AS
    CASE WHEN json_type(j) = 'ARRAY' THEN from_json(j, '["VARCHAR"]')
         WHEN json_type(j) <> 'NULL' THEN [json_extract_string(j, '$')] END;

-- @part graphiti_fields
-- A Graphiti export ($path: a JSON array of edges or JSON Lines) read for the fields the mapping
-- reads, declared: each as text (a number's or a nested value's as its JSON text, as
-- json_extract_string gives it), `episodes` and `episode_uuids` as lists of text
-- (tm__graphiti_list), `attributes` as JSON text. A field the mapping does not read is not read
-- (sampling the fields and reading each as JSON first was a third of the reading).
SELECT * REPLACE (CAST(attributes AS VARCHAR) AS attributes, tm__graphiti_list(episodes) AS episodes,
                  tm__graphiti_list(episode_uuids) AS episode_uuids)
FROM read_json($path, format = $format, records = 'true', columns = {
    uuid: 'VARCHAR', name: 'VARCHAR', source_node_uuid: 'VARCHAR', target_node_uuid: 'VARCHAR',
    group_id: 'VARCHAR', source_name: 'VARCHAR', target_name: 'VARCHAR', fact: 'VARCHAR',
    episodes: 'JSON', episode_uuids: 'JSON', expired_at: 'VARCHAR', valid_at: 'VARCHAR',
    invalid_at: 'VARCHAR', reference_time: 'VARCHAR', attributes: 'JSON', created_at: 'VARCHAR'});

-- @part graphiti_values
-- How many JSON values a file ($path) holds that is not a list of objects: none is an empty export.
SELECT count(*) FROM read_json($path, format = $format, records = 'false');

-- @part graphiti_wrapped
-- The same for an export that is one object holding the edges under `edges`.
SELECT unnest(edges, recursive := true)
FROM read_json($path, format = $format, records = 'true', maximum_depth = 3, sample_size = $sample);

-- @part graphiti_times
-- Each edge's times read once (by `__row`): what the mapping and the defaulted flag both read,
-- as `edges`, the edges beside their times (tempomem.sources puts the two side by side).
SELECT __row, tm__text_time(valid_at) AS valid_t, tm__text_time(invalid_at) AS invalid_t,
       tm__text_time(created_at) AS created_t, tm__text_time(expired_at) AS expired_t,
       tm__text_time(reference_time) AS reference_t
FROM src;

-- @part graphiti_unreadable
-- Whether a time backfill reads cannot be read: then it must see the edges' times as text.
-- (`reference_time` is not one of them: it goes to `attributes` as given, like any other field
-- backfill does not read.)
SELECT count(*) > 0 FROM edges
WHERE (valid_at IS NOT NULL AND valid_t IS NULL) OR (invalid_at IS NOT NULL AND invalid_t IS NULL)
   OR (created_at IS NOT NULL AND created_t IS NULL) OR (expired_at IS NOT NULL AND expired_t IS NULL);

-- @part graphiti
-- Graphiti / Zep edges, over `edges` (graphiti_times), with times as tm__import_time gives them
-- (typed_times or text_times). Graphiti edits an edge in place: expired_at is
-- when the end became known. Before it the edge was believed open-ended; from it, closed at
-- invalid_at. Expired with no invalid_at, it stopped being believed with no end: a retraction.
WITH e AS (
    SELECT *, coalesce(source_name, source_node_uuid) AS subject_, coalesce(target_name, target_node_uuid) AS object_,
           coalesce(episodes, episode_uuids) AS artifacts_, expired_t > created_t AS later_end
    FROM edges
)
SELECT __row, uuid AS fact_id, group_id AS scope, subject_ AS subject, name AS predicate, object_ AS object,
       fact AS text, tm__import_time(valid_t, valid_at) AS valid_from,
       CASE WHEN later_end THEN NULL ELSE tm__import_time(invalid_t, invalid_at) END AS valid_to,
       tm__import_time(created_t, created_at) AS recorded_at,
       CASE WHEN later_end AND invalid_at IS NULL THEN tm__import_time(expired_t, expired_at) END AS retracted_at,
       CASE WHEN later_end AND invalid_at IS NULL THEN 'expired in Graphiti with no invalid_at' END
           AS retraction_reason,
       artifacts_ AS artifacts, attributes, source_node_uuid, target_node_uuid,
       reference_time
FROM e
UNION ALL BY NAME
SELECT __row, uuid AS fact_id, group_id AS scope, subject_ AS subject, name AS predicate, object_ AS object,
       fact AS text, tm__import_time(valid_t, valid_at) AS valid_from,
       tm__import_time(invalid_t, invalid_at) AS valid_to, tm__import_time(expired_t, expired_at) AS recorded_at,
       'expired in Graphiti' AS reason, artifacts_ AS artifacts, attributes, source_node_uuid, target_node_uuid,
       reference_time
FROM e WHERE later_end AND invalid_at IS NOT NULL;

-- @part graphiti_defaulted
-- The importer's flag: edges whose valid_at is their episode's reference_time (Graphiti's
-- default when the text gave no time).
SELECT 'valid_at_is_reference_time' AS flag, count(*) AS count, min(__row) AS example_row
FROM edges WHERE valid_t = reference_t
HAVING count(*) > 0;

-- @part mem0_events
-- A mem0 history's events with their parsed times, as `events`: what the mapping and the
-- orphan flag both read (each time parsed once).
CREATE TEMP TABLE events AS
WITH h AS (
    SELECT __row, CAST(coalesce(id, memory_id || ':' || __row) AS VARCHAR) AS eid, CAST(memory_id AS VARCHAR) AS mid,
           CAST(coalesce(new_memory, new_value) AS VARCHAR) AS memory_text, upper(CAST(event AS VARCHAR)) AS ev,
           -- the event time: ADD may only have created_at; an UPDATE or DELETE's created_at is the
           -- memory's creation, so only updated_at (or an old file's timestamp) dates it.
           CAST(CASE WHEN upper(CAST(event AS VARCHAR)) = 'ADD'
                     THEN coalesce(updated_at, created_at, "timestamp")
                     ELSE coalesce(updated_at, "timestamp") END AS VARCHAR) AS event_raw,
           CAST(actor_id AS VARCHAR) AS actor_id, CAST(role AS VARCHAR) AS role
    FROM src
)
SELECT *, tm__text_time(event_raw) AS event_t FROM h;

-- @part mem0_unreadable
-- Whether an ADD or UPDATE has a time that cannot be read: then backfill must see its text.
SELECT count(*) > 0 FROM events WHERE event_t IS NULL AND ev IN ('ADD', 'UPDATE');

-- @part mem0_chain
-- Each memory's events that take part, in the order the mapping applies them (by event time,
-- then ADD < UPDATE < DELETE, then row), with the next one and whether a value was believed just
-- before: what the mapping and the orphan flag both read (a macro: made a table once for both,
-- its million wide rows cost more than computing it twice).
CREATE TEMP MACRO mem0_chain() AS TABLE
SELECT *, lead(ev) OVER w AS next_ev, lead(event_t) OVER w AS next_t, lead(eid) OVER w AS next_id,
       coalesce(lag(ev) OVER w IN ('ADD', 'UPDATE'), false) AS follows_belief
FROM events WHERE event_t IS NOT NULL AND ev IN ('ADD', 'UPDATE', 'DELETE')
WINDOW w AS (PARTITION BY mid ORDER BY event_t, CASE ev WHEN 'ADD' THEN 0 WHEN 'UPDATE' THEN 1 ELSE 2 END, __row);

-- @part mem0
-- mem0's events as facts of the key (memory_id, 'memory'), over mem0_chain(), with
-- belief times as tm__import_time gives them (typed_times or text_times).
WITH opened AS (
    -- A belief opened while another value was believed starts at the event (inferred), as
    -- the write path would place it; otherwise its start is unknown.
    SELECT *, CASE WHEN follows_belief THEN event_t END AS start_t
    FROM mem0_chain() WHERE ev IN ('ADD', 'UPDATE')
)
SELECT __row, eid AS fact_id, mid AS subject, 'memory' AS predicate, memory_text AS object,
       start_t AS valid_from, true AS valid_from_inferred, tm__import_time(event_t, event_raw) AS recorded_at,
       CASE WHEN next_ev = 'DELETE' OR next_t = event_t THEN next_t END AS retracted_at,
       CASE WHEN next_ev = 'DELETE' THEN 'deleted in mem0'
            WHEN next_t = event_t THEN 'replaced by mem0 event ' || next_id || ' at the same instant' END
           AS retraction_reason,
       CAST(NULL AS VARCHAR) AS superseded_by, CAST(NULL AS VARCHAR) AS status,
       CAST(NULL AS TIMESTAMPTZ) AS valid_to, CAST(NULL AS VARCHAR) AS reason, ev AS mem0_event, actor_id, role
FROM opened
UNION ALL BY NAME
-- the next ADD/UPDATE closes this value where it begins: a supersession, learned then
SELECT __row, eid AS fact_id, mid AS subject, 'memory' AS predicate, memory_text AS object,
       start_t AS valid_from, true AS valid_from_inferred, tm__import_time(next_t, NULL) AS recorded_at,
       next_t AS valid_to, next_id AS superseded_by, 'superseded' AS status,
       'updated in mem0 by event ' || next_id AS reason, ev AS mem0_event, actor_id, role
FROM opened WHERE next_ev IN ('ADD', 'UPDATE') AND next_t > event_t
UNION ALL BY NAME
-- ADD/UPDATE events without a readable time: backfill rejects them and says why
SELECT __row, eid AS fact_id, mid AS subject, 'memory' AS predicate, memory_text AS object,
       tm__import_time(event_t, event_raw) AS recorded_at, ev AS mem0_event, actor_id, role
FROM events WHERE event_t IS NULL AND ev IN ('ADD', 'UPDATE');

-- @part mem0_orphans
-- The importer's flag: a DELETE with no value to delete when the mapping applies it (mem0_chain),
-- an unknown event, or a DELETE whose time cannot be read.
SELECT 'unmatched_mem0_event' AS flag, count(*) AS count, min(__row) AS example_row
FROM (SELECT __row FROM mem0_chain() WHERE ev = 'DELETE' AND NOT follows_belief
      UNION ALL
      SELECT __row FROM events
      WHERE ev NOT IN ('ADD', 'UPDATE', 'DELETE') OR ev IS NULL OR (ev = 'DELETE' AND event_t IS NULL))
HAVING count(*) > 0;

-- @part sqlite4ts
-- A four-timestamp SQLite table (times as epoch seconds, read with epoch_unit='s').
SELECT f.__row, CAST(f.id AS VARCHAR) AS fact_id, f.scope, f.subject, f.predicate, f.object, f.text,
       f.valid_from, f.valid_to, f.asserted_at AS recorded_at, f.retracted_at, f.source, f.confidence,
       f.valid_from_inferred,
       -- `supersedes` on the newer fact names the older one: the older one's superseded_by,
       -- known from when the newer one was asserted.
       CAST(n.id AS VARCHAR) AS superseded_by, n.asserted_at AS superseded_at_epoch
FROM src f
LEFT JOIN (SELECT DISTINCT ON (supersedes) id, supersedes, asserted_at FROM src
           WHERE supersedes IS NOT NULL ORDER BY supersedes, asserted_at, id) n
       ON CAST(n.supersedes AS VARCHAR) = CAST(f.id AS VARCHAR);
