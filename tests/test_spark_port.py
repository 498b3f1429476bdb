"""The DuckDB-to-Spark port without a JVM: every statement of the .sql files is derived (or left
out by name, with a reason), and what comes out is Spark SQL with no DuckDB-only construct."""

from __future__ import annotations

import re

import pytest

sqlglot = pytest.importorskip("sqlglot", reason="the [spark] extra (sqlglot) is not installed")

from tempomem.connection import sql_file  # noqa: E402
from tempomem.probes import ANALYTICS  # noqa: E402
from tempomem.reports import lag_report_sql  # noqa: E402
from tempomem.spark import port, rules  # noqa: E402

#: The statements left out of the port. Adding one is a decision: this list and rules.LEFT_OUT
#: must then both change.
EXPECTED_LEFT_OUT = {
    ("revisions.sql", "_tm_folded"), ("revisions.sql", "_tm_previous_problems"),
    ("revisions.sql", "tm__believed_until"),
    ("macros.sql", "tm_problems"), ("macros.sql", "_tm_revisions_plus"), ("macros.sql", "_tm_index_live"),
    ("macros.sql", "_tm_index"), ("macros.sql", "_tm_vectors"), ("macros.sql", "_tm_rows"),
    ("macros.sql", "tm_in_slice"), ("macros.sql", "tm_slice"), ("macros.sql", "tm_cosine"),
    ("macros.sql", "tm_scores"), ("macros.sql", "recall"), ("macros.sql", "tm_edges"),
    ("macros.sql", "_tm_entities_live"), ("macros.sql", "_tm_entities"), ("macros.sql", "_tm_links"),
    ("macros.sql", "tm_out_links"), ("macros.sql", "tm_traverse"), ("macros.sql", "dependency_changes"),
    ("macros.sql", "tm_bin_count"),
}

#: What SPEC §13 names: these must be among the ported statements.
SPEC_13 = {"facts", "revisions", "tm_contains", "tm_overlaps", "tm_allen", "tm_is_empty", "current_facts",
           "as_of", "as_believed", "history", "timeline", "memory_diff", "sequenced", "coalesced"}

# DuckDB spellings that Spark would refuse or read differently
_DUCKDB_ONLY = re.compile(r"\bEXCLUDE\b|\bREPLACE\s*\(|BY NAME|\bCOLUMNS\s*\(|query_table|:=|\bLENGTH\(|"
                          r"\bEPOCH(_US)?\(|UNIX_TIMESTAMP|QUANTILE|\bERROR\(|\$\w|CAST\([^()]* AS INTERVAL\)|"
                          r"MAKE_TIMESTAMPTZ", re.I)


def _creates(file: str) -> int:
    text = "\n".join(line for line in sql_file(file).splitlines() if not line.lstrip().startswith("--"))
    return len(re.findall(r"\bCREATE\s+OR\s+REPLACE\s+(?:VIEW|MACRO)\b", text, re.I))


@pytest.mark.parametrize("file", port.FILES)
def test_every_statement_is_ported_or_left_out_by_name(file: str) -> None:
    found = port.statements(file)
    assert len(found) == _creates(file)  # the splitter drops no statement
    assert all(name.isidentifier() for st in found for name, _ in st.params)  # a list or map default stays whole
    ported = {p.statement.name for p in port.port_file(file)}
    left_out = {name for (f, name) in rules.LEFT_OUT if f == file}
    assert ported | left_out == {s.name for s in found}
    assert not ported & left_out


def test_the_left_out_list_does_not_grow() -> None:
    assert set(rules.LEFT_OUT) == EXPECTED_LEFT_OUT
    assert all(reason.strip() for reason in rules.LEFT_OUT.values())
    names = {p.statement.name for f in port.FILES for p in port.port_file(f)}
    assert names >= SPEC_13


@pytest.mark.parametrize("ported", [p for f in port.FILES for p in port.port_file(f)],
                         ids=lambda p: p.statement.name)
def test_each_port_is_spark_sql(ported: port.Ported) -> None:
    sqlglot.parse_one(ported.body, read="spark")
    assert not _DUCKDB_ONLY.search(ported.spark), _DUCKDB_ONLY.search(ported.spark)
    kind = "VIEW" if ported.statement.kind == "view" else "FUNCTION"
    assert ported.spark.startswith(f"CREATE OR REPLACE TEMPORARY {kind} {ported.statement.name}")


def test_the_rewrite_table_names_each_rewrite_once() -> None:
    names = [name for name, _ in rules.REWRITES]
    assert names == list(port.REWRITES)
    assert all(why for _, why in rules.REWRITES)


def _spark(name: str) -> str:
    return next(p.spark for f in port.FILES for p in port.port_file(f) if p.statement.name == name)


def test_rewrites_by_example() -> None:
    # parameter_names: the column `r.subject` against the parameter, never itself
    assert "WHERE r.subject = p_subject" in _spark("timeline")
    assert "history(p_subject STRING, p_predicate STRING DEFAULT NULL) RETURNS TABLE" in _spark("history")
    # star_replace: `facts` spells the columns out, first_recorded_at in recorded_at's place
    assert "e.valid_from_inferred, e.first_recorded_at AS recorded_at, e.retracted_at" in _spark("facts")
    # query_table_default: memory_diff reads _tm_belief_rows and has the two SPEC parameters only
    diff = _spark("memory_diff")
    assert "memory_diff(p_from_at TIMESTAMP, p_to_at TIMESTAMP) RETURNS TABLE" in diff
    assert "FROM _tm_belief_rows AS w" in diff and "QUALIFY" in diff
    # union_by_name: a branch without a column selects NULL for it
    assert "NULL AS before_fact_id" in diff
    # named_arguments: positional, in the callee's order
    assert "TM_SEQUENCED(p_from_at, p_to_at, p_every, p_believed_at)" in _spark("sequenced")
    # ordered_list: fact_ids sorted by (valid_from NULLS FIRST, fact_id)
    coalesced = _spark("coalesced")
    assert "SORT_ARRAY(COLLECT_LIST(NAMED_STRUCT('n0', NOT n.valid_from IS NULL" in coalesced
    # error, epoch
    seq = _spark("tm_sequenced")
    assert "RAISE_ERROR('sequenced: from_at must be before to_at')" in seq and "UNIX_MICROS(t.bin_from)" in seq
    # timestamp_micros: the fixed-length bins' bounds, made from integer micros
    assert "TIMESTAMP_MICROS(x.from_us) AS bin_from" in seq


def test_analytics_port() -> None:
    divergence = port.port_query(ANALYTICS["answers"] + ANALYTICS["objects"] + ANALYTICS["divergence"])
    sqlglot.parse_one(divergence, read="spark")
    assert not _DUCKDB_ONLY.search(divergence)
    assert "SIZE(a.known_objects) > 0" in divergence
    lag = port.port_query(lag_report_sql(("predicate", "source")))
    sqlglot.parse_one(lag, read="spark")
    assert "CAST(PERCENTILE_DISC(0.50) WITHIN GROUP (ORDER BY l.lag_us NULLS LAST) AS BIGINT) AS p50" in lag
    assert ":limit_us" in lag and "UNIX_MICROS(f.first_recorded_at)" in lag


def test_a_statement_that_cannot_be_ported_is_an_error() -> None:
    bad = port.Statement("macros.sql", "tm_fake", "macro", (("weird", None),), True, "SELECT weird")
    with pytest.raises(port.PortError, match="weird"):
        port._create(bad, {})
    scalar = port.Statement("macros.sql", "tm_fake", "macro", (("lo", None),), False, "lo IS NULL")
    with pytest.raises(port.PortError, match="return type"):
        port._create(scalar, {})
