-- tempomem: stage 1 of a backfill (tempomem.backfill.checks), how one input value is read.
--
-- Named parts, each starting at a line `-- @part <name>` (connection.sql_parts). The input's
-- columns have the types its source gave them (a CSV's text, a Parquet file's timestamps, a
-- frame's lists), and DuckDB binds a function to one type: so each reading below is a macro per
-- kind of source type, and checks.Loader picks one per column from its type (checks._READERS),
-- then runs one statement over the input with them and the reject rules. Times are read by
-- the time grammar (timegrammar.time_sql).

-- @part macros
-- Text that is empty or only spaces (what trim() removes) is given as no value: a blank time is
-- a missing one. trim() copies the text, so it only runs on the rare values starting with a space.
CREATE OR REPLACE TEMP MACRO tm__bf_blank(v) AS (v = '' OR (starts_with(v, ' ') AND trim(v) = ''));
-- A text field (subject, object, source, ...) of white space alone is no value either, white
-- space being what the write path's str.strip() removes (a superset of Python's, as
-- assertion_columns.sql reads it: ASCII blanks, \x1c-\x1f, NEL and every Unicode separator). The
-- pattern only runs on the rare values whose first character is one (or a control character).
CREATE OR REPLACE TEMP MACRO tm__bf_white(v) AS (v = '' OR (
    (unicode(v) <= 32 OR unicode(v) IN (133, 160, 5760, 8232, 8233, 8239, 8287, 12288)
     OR unicode(v) BETWEEN 8192 AND 8202)
    AND regexp_full_match(v, '[\t\n\x0b\x0c\r\x1c-\x1f \x85\pZ]*')));
CREATE OR REPLACE TEMP MACRO tm__bf_text(v) AS CASE WHEN tm__bf_white(v) THEN NULL ELSE v END;
-- A value of another type, as text: a nested one (a JSON object or list read from JSON Lines,
-- a struct, map or list column) as its JSON text, never as DuckDB's own text form of it.
CREATE OR REPLACE TEMP MACRO tm__bf_text_of(v) AS
    CASE WHEN typeof(v) LIKE 'STRUCT%' OR typeof(v) LIKE 'MAP%' OR typeof(v) LIKE '%]'
         THEN CAST(to_json(v) AS VARCHAR)
         ELSE nullif(trim(CAST(v AS VARCHAR)), '') END;

-- Whether the source gave a value: blank text counts as none.
CREATE OR REPLACE TEMP MACRO tm__bf_given_text(v) AS coalesce(NOT tm__bf_blank(v), false);
CREATE OR REPLACE TEMP MACRO tm__bf_given(v) AS v IS NOT NULL;

-- Numbers, flags and lists of another type: what casts, else NULL (a rule then rejects it).
-- A true or false is not a number (DuckDB would cast it to 1 or 0), as the write path reads it.
CREATE OR REPLACE TEMP MACRO tm__bf_number(v) AS CASE WHEN typeof(v) <> 'BOOLEAN' THEN TRY_CAST(v AS DOUBLE) END;
CREATE OR REPLACE TEMP MACRO tm__bf_flag(v) AS TRY_CAST(v AS BOOLEAN);
CREATE OR REPLACE TEMP MACRO tm__bf_strings(v) AS TRY_CAST(v AS VARCHAR[]);
CREATE OR REPLACE TEMP MACRO tm__bf_floats(v) AS TRY_CAST(v AS FLOAT[]);

-- Lists given as text: a JSON list ('["a","b"]') or a DuckDB list literal; artifacts may also
-- be one bare value.
CREATE OR REPLACE TEMP MACRO tm__bf_strings_text(v) AS
    CASE WHEN trim(v) = '' THEN NULL
         WHEN starts_with(trim(v), '[') THEN coalesce(try(from_json(v, '["VARCHAR"]')), TRY_CAST(v AS VARCHAR[]))
         ELSE [v] END;
CREATE OR REPLACE TEMP MACRO tm__bf_floats_text(v) AS
    CASE WHEN trim(v) = '' THEN NULL
         WHEN starts_with(trim(v), '[') THEN coalesce(try(from_json(v, '["FLOAT"]')), TRY_CAST(v AS FLOAT[]))
         END;

-- A given `attributes` column as a JSON object's text: text that is JSON stays as it is, other
-- text and values of other types become JSON.
CREATE OR REPLACE TEMP MACRO tm__bf_attributes_text(v) AS
    CASE WHEN v IS NULL OR trim(v) = '' THEN NULL WHEN json_valid(v) THEN v ELSE CAST(to_json(v) AS VARCHAR) END;
CREATE OR REPLACE TEMP MACRO tm__bf_attributes(v) AS CAST(to_json(v) AS VARCHAR);

-- The input's other columns, as one JSON object over the given attributes: `members` is the
-- object's members as text joined by commas (concat_ws, which leaves out a row's null fields),
-- what json_object then json_merge_patch onto {} make, without parsing every object again (a
-- list of the members filtered took half as long again: 0.31 against 0.20 s for 1.8M rows of
-- three members).
CREATE OR REPLACE TEMP MACRO tm__bf_extra(members) AS '{' || nullif(members, '') || '}';
CREATE OR REPLACE TEMP MACRO tm__bf_member(name, v) AS to_json(name) || ':' || to_json(v);
CREATE OR REPLACE TEMP MACRO tm__bf_merged(given, extra) AS
    CASE WHEN extra IS NULL THEN given WHEN given IS NULL THEN extra
         ELSE CAST(json_merge_patch(given, extra) AS VARCHAR) END;
