"""What the DuckDB-to-Spark port needs besides sqlglot, as data: parameter types, the named
rewrites, and the statements deliberately left out.

DuckDB macros are untyped and Spark SQL functions are not, so every parameter name used by a
ported macro has a type here (one name, one meaning, across the ``.sql`` files). The rewrites
are applied in the order listed to each statement's sqlglot tree (DuckDB dialect) before
sqlglot writes it as Spark SQL; each says why sqlglot alone does not carry it. Statements of
the ``.sql`` files not in :data:`LEFT_OUT` are ported, and a statement that fails to port is an
error, never a silent omission (tests/test_spark_port.py).
"""

from __future__ import annotations

#: Parameter name -> (Spark type, DuckDB type used when DuckDB binds a body to list its columns).
PARAM_TYPES: dict[str, tuple[str, str]] = {
    **{name: ("TIMESTAMP", "TIMESTAMPTZ") for name in (
        "lo", "hi", "t", "a_lo", "a_hi", "b_lo", "b_hi", "x", "y", "e", "s",
        "valid_at", "believed_at", "from_at", "to_at")},
    "subject": ("STRING", "VARCHAR"),
    "predicate": ("STRING", "VARCHAR"),
    # Spark's INTERVAL types are either day-time or year-month, never both; a SQL function
    # parameter must be one of them. Day-time it is: calendar-month bins stay DuckDB's.
    "every": ("INTERVAL DAY TO SECOND", "INTERVAL"),
}

#: Columns that hold a day-time interval (for the `epoch` rewrite, which must tell them from
#: timestamps): tm_bins's `step`.
INTERVAL_COLUMNS = frozenset({"step"})

#: Scalar macro -> the Spark type it returns (table macros return TABLE).
SCALAR_RETURNS: dict[str, str] = {
    "tm_is_empty": "BOOLEAN",
    "tm_contains": "BOOLEAN",
    "tm_overlaps": "BOOLEAN",
    "tm__cmp_starts": "INT",
    "tm__cmp_ends": "INT",
    "tm__cmp_end_start": "INT",
    "tm_allen": "STRING",
}

#: Spark names a parameter ``p_<name>``: in a Spark SQL function a column of the same name
#: shadows a parameter (``timeline('x')`` returned every row: ``r.subject = subject`` compared a
#: column with itself), where DuckDB binds the macro parameter first.
PARAM_PREFIX = "p_"

#: (file, statement) -> why it is not ported. The test of the port fails when this grows.
LEFT_OUT: dict[tuple[str, str], str] = {
    ("revisions.sql", "_tm_folded"): "the fold rewrites the store; writes stay with tempomem's engine (SPEC §13)",
    ("revisions.sql", "_tm_previous_problems"): "check() is not part of SPEC §13; format() has no Spark twin",
    ("revisions.sql", "tm__believed_until"): "a window expression, which a Spark SQL function cannot hold: it is "
                                              "written out where it is called (rewrite window_macros)",
    ("macros.sql", "tm_problems"): "check() is not part of SPEC §13; DISTINCT ON and format() have no Spark twin",
    ("macros.sql", "_tm_revisions_plus"): "recall and traversal (SPEC §7) are not part of SPEC §13",
    ("macros.sql", "_tm_index_live"): "recall's slim index: not part of SPEC §13",
    ("macros.sql", "_tm_index"): "recall's slim index: not part of SPEC §13",
    ("macros.sql", "_tm_vectors"): "recall's vectors: not part of SPEC §13",
    ("macros.sql", "_tm_rows"): "recall's row lookup: not part of SPEC §13",
    ("macros.sql", "tm_in_slice"): "recall and traversal's slice: not part of SPEC §13",
    ("macros.sql", "tm_slice"): "recall and traversal's slice: not part of SPEC §13",
    ("macros.sql", "tm_cosine"): "recall: list_cosine_similarity has no Spark twin",
    ("macros.sql", "tm_scores"): "recall: not part of SPEC §13",
    ("macros.sql", "recall"): "recall: not part of SPEC §13",
    ("macros.sql", "tm_edges"): "traversal: MAP parameters, not part of SPEC §13",
    ("macros.sql", "_tm_entities_live"): "traversal: not part of SPEC §13",
    ("macros.sql", "_tm_entities"): "traversal: not part of SPEC §13",
    ("macros.sql", "_tm_links"): "traversal: not part of SPEC §13",
    ("macros.sql", "tm_out_links"): "traversal: a list of structs per entity, not part of SPEC §13",
    ("macros.sql", "tm_traverse"): "traversal: a recursive CTE, which Spark SQL functions cannot hold",
    ("macros.sql", "dependency_changes"): "built on tm_traverse",
    ("macros.sql", "tm_bin_count"): "tempomem.sequenced's check before a DuckDB query; Spark's sequenced "
                                    "raises its own error for too many bins",
}

#: The named rewrites, in the order port.py applies them: (name, why). port.REWRITES pairs each
#: name with its transform; a test checks the two lists agree.
REWRITES: tuple[tuple[str, str], ...] = (
    ("query_table_default",
     "DuckDB's query_table(param) reads a table named by a parameter; a Spark SQL function cannot, "
     "so the parameter is dropped and its default table read"),
    ("named_arguments",
     "DuckDB passes `name := value`; Spark takes them by position, in the callee's order"),
    ("window_macros",
     "a Spark SQL function cannot hold a window function: a macro that is one window expression "
     "(tm__believed_until) is written out where it is called, its parameters replaced by the arguments"),
    ("star_replace",
     "Spark has `* EXCEPT` but no `* REPLACE`: the star is spelled out, with DuckDB listing its columns"),
    ("columns_lambda",
     "Spark has no COLUMNS(lambda): the columns it selects are spelled out, with DuckDB listing them"),
    ("union_by_name",
     "Spark SQL has no UNION ALL BY NAME: each branch selects the union's columns in one order, "
     "NULL where it has none"),
    ("parameter_names",
     "a column shadows a parameter of the same name in a Spark SQL function: parameters become p_<name>"),
    ("list_length",
     "sqlglot writes DuckDB's len() as LENGTH, a string length in Spark; every len() of the ported "
     "files measures a list, which is size() (NULL for NULL under ANSI mode)"),
    ("epoch",
     "epoch_us() is unix_micros(); epoch() of a timestamp is unix_micros()/1e6 (sqlglot writes "
     "UNIX_TIMESTAMP, whole seconds) and of a day-time interval its micros from the epoch / 1e6"),
    ("timestamp_micros",
     "DuckDB's make_timestamptz(us) (an instant from integer micros, with no time-zone arithmetic) is "
     "Spark's timestamp_micros(us); sqlglot would keep the DuckDB name"),
    ("interval_cast",
     "CAST(x AS INTERVAL) would make a legacy calendar interval; the Spark parameter is already a "
     "day-time interval, so the cast goes"),
    ("error",
     "DuckDB's error(msg) is Spark's raise_error(msg)"),
    ("quantile_disc",
     "Spark's percentile_disc takes the fraction and an ORDER BY (WITHIN GROUP) and returns a double; "
     "the lags it ranks are integer micros, so the answer is cast back to BIGINT"),
    ("ordered_list",
     "sqlglot writes list(x ORDER BY k) as collect_list(x), which drops the order: the values are "
     "sorted by their keys (NULL keys first as DuckDB's NULLS FIRST) and the keys dropped"),
    ("qualify",
     "sqlglot's Spark writer turns QUALIFY into a subquery whose outer filter still names the inner "
     "table alias (`t.revision` out of scope); Spark 4 has QUALIFY, so port.SparkSQL keeps it"),
)
