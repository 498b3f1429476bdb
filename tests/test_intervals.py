"""tm_contains, tm_overlaps and tm_allen against a plain-Python reference (SPEC §1, §6)."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempomem.connection import new_connection, sql_file
from tempomem.schema import FACT_FIELDS

INF = float("inf")


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = new_connection()
    # the macro file needs the `revisions` and `facts` tables to exist; empty ones will do
    c.register("_empty", pa.schema(FACT_FIELDS).empty_table())
    c.execute("CREATE TABLE facts AS SELECT * FROM _empty")
    c.execute("CREATE TABLE revisions AS SELECT *, 1 AS revision, NULL::TIMESTAMPTZ AS believed_until FROM _empty")
    c.execute(sql_file("macros.sql"))
    return c


def _lo(x):
    return -INF if x is None else x


def _hi(x):
    return INF if x is None else x


def ref_empty(lo, hi):
    return lo is not None and hi is not None and lo >= hi


def ref_contains(lo, hi, t):
    return _lo(lo) <= t < _hi(hi)


def ref_overlaps(alo, ahi, blo, bhi):
    if ref_empty(alo, ahi) or ref_empty(blo, bhi):
        return False
    return max(_lo(alo), _lo(blo)) < min(_hi(ahi), _hi(bhi))


def ref_allen(alo, ahi, blo, bhi):
    """The 13 relations from their textbook definitions on extended reals."""
    if ref_empty(alo, ahi) or ref_empty(blo, bhi):
        return None
    a0, a1, b0, b1 = _lo(alo), _hi(ahi), _lo(blo), _hi(bhi)
    table = [
        ("before", a1 < b0), ("meets", a1 == b0 and a1 != INF), ("after", b1 < a0),
        ("met_by", b1 == a0 and b1 != INF), ("equals", a0 == b0 and a1 == b1),
        ("starts", a0 == b0 and a1 < b1), ("started_by", a0 == b0 and a1 > b1),
        ("finishes", a1 == b1 and a0 > b0), ("finished_by", a1 == b1 and a0 < b0),
        ("during", a0 > b0 and a1 < b1), ("contains", a0 < b0 and a1 > b1),
        ("overlaps", a0 < b0 < a1 < b1), ("overlapped_by", b0 < a0 < b1 < a1),
    ]
    hits = [name for name, holds in table if holds]
    assert len(hits) == 1, (alo, ahi, blo, bhi, hits)
    return hits[0]


CASES = [
    ((1, 2), (3, 4), "before"), ((1, 3), (3, 4), "meets"), ((1, 3), (2, 4), "overlaps"),
    ((1, 2), (1, 4), "starts"), ((2, 3), (1, 4), "during"), ((2, 4), (1, 4), "finishes"),
    ((1, 4), (1, 4), "equals"), ((1, 4), (2, 4), "finished_by"), ((1, 4), (2, 3), "contains"),
    ((1, 4), (1, 2), "started_by"), ((2, 4), (1, 3), "overlapped_by"), ((3, 4), (1, 3), "met_by"),
    ((3, 4), (1, 2), "after"),
    # open bounds are the infinities
    ((None, 2), (1, None), "overlaps"), ((None, None), (1, 2), "contains"), ((None, 1), (1, None), "meets"),
    ((None, None), (None, None), "equals"), ((None, 3), (None, 5), "starts"),
]


@pytest.mark.parametrize(("a", "b", "expected"), CASES)
def test_each_allen_relation(con, a, b, expected):
    got = con.execute("SELECT tm_allen($1, $2, $3, $4)", [*a, *b]).fetchall()[0][0]
    assert got == expected


def test_allen_of_an_empty_interval_is_null(con):
    assert con.sql("SELECT tm_allen(2, 2, 1, 5), tm_allen(1, 5, 3, 3)").fetchall() == [(None, None)]


def test_all_thirteen_names_are_covered():
    assert len({c[2] for c in CASES}) == 13


bound = st.one_of(st.none(), st.integers(0, 8))


@settings(max_examples=300, deadline=None)
@given(alo=bound, ahi=bound, blo=bound, bhi=bound, t=st.integers(0, 8))
def test_macros_match_the_reference(con, alo, ahi, blo, bhi, t):
    row = con.execute(
        "SELECT tm_contains($1, $2, $5), tm_overlaps($1, $2, $3, $4), tm_allen($1, $2, $3, $4)",
        [alo, ahi, blo, bhi, t],
    ).fetchall()[0]
    assert row == (ref_contains(alo, ahi, t), ref_overlaps(alo, ahi, blo, bhi), ref_allen(alo, ahi, blo, bhi))


def test_macros_work_on_timestamps(con):
    got = con.sql("""SELECT tm_contains(TIMESTAMPTZ '2024-06-01', NULL, TIMESTAMPTZ '2024-06-01'),
                            tm_contains(NULL, TIMESTAMPTZ '2024-06-01', TIMESTAMPTZ '2024-06-01')""").fetchall()
    assert got == [(True, False)]
