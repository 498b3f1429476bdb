-- A large assert_many, one row per assertion, read as writepath.new_assertion reads one row
-- (driven by tempomem/assertion_columns.py, which makes `_tm_assertions_in`: the batch's
-- columns, each time as `<name>_text` or `<name>_time`, and `op`, the row's place).
-- `accepted` is false for a row any check refuses; the driver then validates row by row,
-- which names the row, the field and the reason. A string is blank here when it holds only
-- characters of a superset of Python's whitespace (tm__blank), so this never accepts what
-- Python refuses.
-- Needs the macro tm__text_time(x): the time grammar of SPEC §2 over text (timegrammar.time_sql).

-- @part macros
-- Whether a string holds only characters of a superset of Python's whitespace (str.isspace):
-- ASCII blanks, the separators \x1c-\x1f, NEL and every Unicode separator.
CREATE OR REPLACE MACRO tm__blank(s) AS regexp_full_match(s, '[\t\n\x0b\x0c\r\x1c-\x1f \x{85}\p{Z}]*');

-- @part assertions
WITH i AS (
    SELECT i.*,
           list_concat(CASE WHEN i.artifact IS NULL THEN [] ELSE [i.artifact] END,
                       coalesce(i.artifacts, [])) AS given_artifacts,
           coalesce(i.valid_from_time, tm__text_time(i.valid_from_text)) AS vf,
           coalesce(i.valid_to_time, tm__text_time(i.valid_to_text)) AS vt,
           coalesce(i.reference_time_time, tm__text_time(i.reference_time_text)) AS rt
    FROM _tm_assertions_in AS i
),
checked AS (
    SELECT i.*,
           list_transform([i.subject, i.predicate, i.object], lambda s: s IS NULL
               OR tm__blank(s) OR contains(s, chr(0))) AS required_bad,
           -- an optional string of white space is no value for writepath too (its default), but
           -- tm__blank may hold more than Python's whitespace: such a row is left to writepath
           list_transform([i.scope, i.source, i.text], lambda s: s IS NOT NULL AND s <> ''
               AND (tm__blank(s) OR contains(s, chr(0)))) AS default_bad,
           list_filter(i.given_artifacts, lambda s: s IS NULL
               OR tm__blank(s) OR contains(s, chr(0))) AS artifacts_bad
    FROM i
)
SELECT c.op,
       coalesce(nullif(c.scope, ''), 'default') AS scope, c.subject, c.predicate, c.object,
       c.vf AS valid_from, c.vt AS valid_to, c.vf IS NULL AS valid_from_inferred, c.rt AS reference_time,
       list_filter(c.given_artifacts, lambda a, k: list_position(c.given_artifacts, a) = k) AS artifacts,
       CAST(NULL AS VARCHAR) AS reason,
       coalesce(nullif(c.text, ''), concat_ws(' ', c.subject, c.predicate, c.object)) AS text,
       coalesce(nullif(c.source, ''), 'user') AS source, coalesce(c.confidence, 0.9) AS confidence,
       'api' AS origin, CAST(NULL AS VARCHAR) AS attributes, TRY_CAST(c.embedding AS FLOAT[]) AS embedding,
       coalesce(nullif(c.link_type, ''), 'entity') AS link_type, coalesce(c.weight, 1.0) AS weight,
       NOT (list_bool_or(c.required_bad) OR list_bool_or(c.default_bad) OR len(c.artifacts_bad) > 0
            OR coalesce(c.link_type <> '' AND NOT list_contains($link_types, c.link_type), false)
            OR coalesce(isnan(c.confidence) OR c.confidence NOT BETWEEN 0 AND 1, false)
            OR coalesce(isnan(c.weight) OR c.weight NOT BETWEEN 0 AND $max_weight, false)
            OR (c.valid_from_text IS NOT NULL AND c.vf IS NULL)
            OR (c.valid_to_text IS NOT NULL AND c.vt IS NULL)
            OR (c.reference_time_text IS NOT NULL AND c.rt IS NULL)
            OR coalesce(c.vf > c.vt, false)
            -- an embedding's number: finite and within FLOAT's range ($float32_max), where a larger one
            -- would become an infinity
            OR coalesce(len(list_filter(c.embedding, lambda x: x IS NULL OR NOT isfinite(x) OR abs(x) > $float32_max))
                        > 0, false)) AS accepted
FROM checked AS c
ORDER BY c.op
