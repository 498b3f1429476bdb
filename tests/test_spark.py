"""tempomem on Spark against tempomem on DuckDB, row for row (SPEC §13).

One Spark session, a real `local-cluster[2,1,1024]` (two executor JVMs) started from the
pyspark wheel, over one store that holds every status: superseded, ended, retracted, erased,
multi-valued, an unknown start, rows written after a fold and a backfilled part. Each
registered view and function and both analytics run on a grid of valid and belief times that
includes every instant a belief was replaced (and the microsecond before it; for memory_diff,
sequenced and coalesced, whose queries cost Spark tens of seconds each, the default run takes
the deciding points and TEMPOMEM_HEAVY=1 all of them); each grid is one Spark query, compared
with the same query on DuckDB.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import tempomem as tm

pyspark = pytest.importorskip("pyspark", reason="the [spark] extra (pyspark) is not installed")

from tests.conftest import HEAVY, TestClock  # noqa: E402

if shutil.which("java") is None:
    pytest.skip("no Java runtime (java not on PATH): Spark cannot start; .ci/run installs "
                "openjdk-17-jre-headless where apt is available", allow_module_level=True)

import tempomem.spark as tms  # noqa: E402

VALID = ["2025-01-15", "2025-06-15", "2025-11-15", "2025-12-15", "2026-01-15", "2026-06-01"]


def build_store(path: Path) -> tm.Memory:
    """A store with every status, rows before and after a fold, and a backfilled part."""
    clock = TestClock("2026-01-01T00:00:00Z")
    mem = tm.open(path, create=True, clock=clock, predicates={"works_on": "multi"})
    a = mem.assert_fact("acct", "iban", "FR-A", valid_from="2025-06-01", source="tool_verified")
    clock.advance(days=1)
    mem.assert_fact("acct", "iban", "FR-B", valid_from="2025-12-01", source="user")     # supersedes A
    m5 = mem.assert_fact("svc", "instance_type", "m5", valid_from="2025-01-01")
    clock.advance(hours=6)
    mem.invalidate(m5.fact_id, at="2025-11-01", reason="decommissioned")                # ended
    eu = mem.assert_fact("svc", "region", "eu", valid_from="2025-02-01")
    clock.advance(hours=6)
    mem.correct(eu.fact_id, reason="was never in eu")                                    # retracted
    mem.assert_many([{"subject": "alice", "predicate": "works_on", "object": "p1", "valid_from": "2025-03-01"},
                     {"subject": "alice", "predicate": "works_on", "object": "p2", "valid_from": "2025-05-01"}])
    mem.assert_fact("bob", "role", "eng")                                                # unknown start
    mem.assert_fact("carol", "email", "c@x", valid_from="2025-04-01")
    clock.advance(days=1)
    mem.forget("carol", reason="gdpr request")                                           # erased
    with mem._engine.exclusive():
        mem._storage.fold()
    clock.advance(days=2)
    mem.assert_fact("acct", "iban", "FR-C", valid_from="2026-01-02")                     # after the fold
    mem.assert_fact("alice", "works_on", "p1", valid_from="2025-09-01")                  # p1 again: merges
    mem.invalidate(a.fact_id, at="2025-10-01", reason="closed earlier")                  # a folded row revised
    clock.advance(days=1)
    mem.backfill([
        {"subject": "dave", "predicate": "phone", "object": "111", "valid_from": "2024-01-01",
         "valid_to": "2025-08-01", "recorded_at": "2025-01-10"},
        {"subject": "dave", "predicate": "phone", "object": "222", "valid_from": "2025-08-01",
         "recorded_at": "2025-09-10"},
        {"subject": "dave", "predicate": "phone", "object": "222", "valid_from": "2025-10-01",
         "recorded_at": "2025-10-10"},
        {"subject": "erin", "predicate": "city", "object": "Oslo", "valid_from": "2025-02-01",
         "recorded_at": "2025-03-01", "retracted_at": "2025-07-01", "retraction_reason": "wrong erin"},
    ])
    return mem


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tm.Memory:
    return build_store(tmp_path_factory.mktemp("spark") / "store")


@pytest.fixture(scope="module")
def spark(store: tm.Memory) -> Any:
    from pyspark.sql import SparkSession

    # The store is tiny: compiling whole-stage code for each of the many plans cost more than
    # running them interpreted (the module 350 -> 223 s on 2 cores); the answers are the same.
    session = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("tempomem-test")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
               .config("spark.executor.memory", "512m").config("spark.sql.codegen.wholeStage", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    tms.register(session, str(store.path))
    yield session
    session.stop()


def believed_times(store: tm.Memory) -> list[datetime]:
    """Every instant a belief started or ended, the microsecond before it, and one far after."""
    instants = store.sql("SELECT DISTINCT recorded_at FROM revisions").fetchall()
    out = set()
    for (t,) in instants:
        out.update({t, t - timedelta(microseconds=1)})
    out.add(datetime(2027, 1, 1, tzinfo=UTC))
    return sorted(out)


def _lit(t: Any) -> str:
    return "NULL" if t is None else f"TIMESTAMP '{t.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def _rows(table: Any) -> list[tuple]:
    """Arrow rows as sorted, comparable tuples (lists as tuples, NULLs ordered first)."""
    def norm(v: Any) -> Any:
        if isinstance(v, list):
            return tuple(norm(x) for x in v)
        if isinstance(v, datetime):
            return v.astimezone(UTC)
        return v
    rows = [tuple(norm(v) for v in row.values()) for row in table.to_pylist()]
    return sorted(rows, key=lambda r: tuple((x is not None, str(x)) for x in r))


def same(spark: Any, store: tm.Memory, query: str) -> int:
    """Run ``query`` on both engines; assert the same column names and the same rows."""
    duck = store.sql(query).to_arrow_table()
    theirs = spark.sql(query).toArrow()
    assert sorted(theirs.column_names) == sorted(duck.column_names)
    theirs = theirs.select(duck.column_names)
    assert _rows(theirs) == _rows(duck)
    return duck.num_rows


def union(points: list[tuple[str, ...]], call: str) -> str:
    """The grid as one DuckDB query: a UNION ALL of ``call`` at each point, numbered."""
    return " UNION ALL ".join(f"SELECT {i} AS grid, * FROM {call.format(*p)}" for i, p in enumerate(points))


def lateral(points: list[tuple[str, ...]], call: str) -> str:
    """The grid as one Spark query: the points as a VALUES table, ``call`` applied to each row
    with LATERAL, so that Spark plans the function once (a UNION ALL of hundreds of inlined
    functions takes Spark minutes to plan)."""
    args = [f"g.a{j}" for j in range(len(points[0]))]
    values = ", ".join(f"({i}, {', '.join(p)})" for i, p in enumerate(points))
    return (f"SELECT g.grid, r.* FROM VALUES {values} AS g(grid, {', '.join(a[2:] for a in args)}), "
            f"LATERAL {call.format(*args)} AS r")


def same_grid(spark: Any, store: tm.Memory, points: list[tuple[str, ...]], call: str) -> int:
    """``call`` at every point of the grid on both engines: the same columns, the same rows."""
    duck = store.sql(union(points, call)).to_arrow_table()
    theirs = spark.sql(lateral(points, call)).toArrow()
    assert sorted(theirs.column_names) == sorted(duck.column_names)
    assert _rows(theirs.select(duck.column_names)) == _rows(duck)
    return duck.num_rows


def same_chunks(spark: Any, store: tm.Memory, points: list[tuple[str, ...]], call: str, size: int = 10) -> int:
    """``call`` at every point, ``size`` points to a Spark query (a UNION ALL): for the functions
    Spark cannot decorrelate under LATERAL (windows and aggregates over their parameters)."""
    return sum(same(spark, store, union(points[i:i + size], call)) for i in range(0, len(points), size))


def test_views(spark: Any, store: tm.Memory) -> None:
    assert same(spark, store, "SELECT * FROM facts") >= 12
    assert same(spark, store, "SELECT * FROM revisions") >= 18
    statuses = {r[0] for r in spark.sql("SELECT DISTINCT status FROM facts").collect()}
    assert statuses == {"live", "ended", "superseded", "retracted", "erased"}


def test_scalar_functions(spark: Any, store: tm.Memory) -> None:
    bounds = [None, *(datetime.fromisoformat(v).replace(tzinfo=UTC) for v in VALID[:4])]
    pairs = [(lo, hi) for lo in bounds for hi in bounds]
    values = ", ".join(f"({_lit(a)}, {_lit(b)}, {_lit(c)}, {_lit(d)})" for a, b in pairs for c, d in pairs)
    query = (f"SELECT a, b, c, d, tm_is_empty(a, b) AS e, tm_contains(a, b, c) AS k, "
             f"tm_overlaps(a, b, c, d) AS o, tm_allen(a, b, c, d) AS r "
             f"FROM (VALUES {values}) AS t(a, b, c, d)")
    assert same(spark, store, query) == len(pairs) ** 2


def test_query_forms(spark: Any, store: tm.Memory) -> None:
    valid = [datetime.fromisoformat(v).replace(tzinfo=UTC) for v in VALID]
    believed = believed_times(store)
    assert same_grid(spark, store, [(_lit(v),) for v in valid], "as_of({})") > 0
    points = [(_lit(v), _lit(b)) for v in valid for b in believed]
    assert same_grid(spark, store, points, "as_believed({}, {})") > 0
    assert same(spark, store, "SELECT * FROM current_facts()") > 0


def test_audit_views(spark: Any, store: tm.Memory) -> None:
    subjects = [r[0] for r in store.sql("SELECT DISTINCT subject FROM facts").fetchall()]
    keys = [("'acct'", "'iban'"), ("'svc'", "NULL"), ("'alice'", "'works_on'"), ("'nobody'", "NULL")]
    keys += [(f"'{s}'", "NULL") for s in subjects if s.startswith("erased:")]
    assert same_grid(spark, store, keys, "history({}, {})") > 0
    assert same(spark, store, "SELECT * FROM history('acct')") == 3
    assert same_grid(spark, store, [(f"'{s}'",) for s in subjects], "timeline({})") > 0


def test_memory_diff(spark: Any, store: tm.Memory) -> None:
    # the two windows either side of the instant FR-B replaced FR-A (events split between
    # them; new_entities depends on the window's start); heavy runs add the whole history and
    # the day after the instant
    replaced = _replaced_at(store)
    windows = [("NULL", _lit(replaced)), (_lit(replaced), "NULL")]
    if HEAVY:
        windows += [("NULL", "NULL"), (_lit(replaced), _lit(replaced + timedelta(days=1)))]
    assert same_chunks(spark, store, windows, "memory_diff({}, {})") > 0


def _replaced_at(store: tm.Memory) -> datetime:
    """The instant acct's FR-B replaced FR-A (the belief in FR-A ended then)."""
    return store.sql("SELECT min(recorded_at) FROM revisions WHERE subject = 'acct' AND status = 'superseded'"
                     ).fetchall()[0][0]


def test_sequenced_and_coalesced(spark: Any, store: tm.Memory) -> None:
    replaced = _replaced_at(store)
    believed = [None, replaced]
    if HEAVY:
        believed += [replaced - timedelta(microseconds=1), datetime(2027, 1, 1, tzinfo=UTC)]
    points = [("TIMESTAMP '2025-01-01'", "TIMESTAMP '2026-02-01'", "INTERVAL '30' DAY", _lit(b)) for b in believed]
    points += [("TIMESTAMP '2025-05-01 12:00:00'", "TIMESTAMP '2025-06-01'", "INTERVAL '7' DAY", "NULL")]
    assert same_chunks(spark, store, points, "sequenced({}, {}, {}, {})") > 0
    assert same_chunks(spark, store, [(_lit(b),) for b in believed], "coalesced({})") > 0


def test_divergence(spark: Any, store: tm.Memory) -> None:
    believed = believed_times(store)
    keys = [("acct", "iban", None), ("svc", "instance_type", "default"), ("svc", "region", None),
            ("alice", "works_on", None), ("dave", "phone", None), ("erin", "city", None), ("bob", "role", None)]
    probes = pl.DataFrame(
        [{"probe_id": f"p{i}", "scope": sc, "subject": s, "predicate": p,
          "valid_at": datetime.fromisoformat(v).replace(tzinfo=UTC), "believed_at": b}
         for i, ((s, p, sc), v, b) in enumerate((k, v, b) for k in keys for v in VALID for b in believed[::2])],
        schema_overrides={"scope": pl.String})
    duck = tm.probes.divergence(store, probes)
    theirs = pl.from_arrow(tms.divergence(spark, spark.createDataFrame(probes.to_arrow())).toArrow())
    assert theirs.columns == duck.columns
    assert theirs.with_columns(pl.col("valid_at", "believed_at").dt.replace_time_zone("UTC")).equals(duck)
    assert set(duck["kind"]) == {"same", "not_yet_known", "corrected", "learned_late"}
    generated = tm.probes.generate(store)
    theirs = pl.from_arrow(tms.divergence(spark, spark.createDataFrame(generated.to_arrow())).toArrow())
    assert theirs.drop("valid_at", "believed_at").equals(tm.probes.divergence(store).drop("valid_at", "believed_at"))


@pytest.mark.parametrize(("by", "threshold"), [(("predicate",), "1d"), (("scope", "source"), "30d"), ((), "6h")])
def test_ingestion_lag(spark: Any, store: tm.Memory, by: tuple[str, ...], threshold: str) -> None:
    duck = tm.reports.ingestion_lag(store, by=by, threshold=threshold)
    theirs = pl.from_arrow(tms.ingestion_lag(spark, by=by, threshold=threshold).toArrow())
    assert theirs.columns == duck.columns
    assert theirs.to_dicts() == duck.to_dicts()


def test_older_version(spark: Any, store: tm.Memory) -> None:
    """version= reads the Delta table as it was: the version before the backfill."""
    from deltalake import DeltaTable

    version = DeltaTable(str(store.path)).version() - 1
    tms.register(spark, str(store.path), version=version)
    try:
        con = store.connect()
        from tempomem.connection import bind_files
        bind_files(con, tuple(_files(store.path, version)), first=False)
        duck = con.sql("SELECT * FROM revisions").to_arrow_table()
        theirs = spark.sql("SELECT * FROM revisions").toArrow().select(duck.column_names)
        assert _rows(theirs) == _rows(duck)
        assert 0 < duck.num_rows < store.sql("SELECT count(*) FROM revisions").fetchall()[0][0]
        assert spark.sql("SELECT count(*) FROM facts WHERE subject = 'dave'").collect()[0][0] == 0
    finally:
        tms.register(spark, str(store.path))


def _files(path: Path, version: int | None) -> list[str]:
    from tempomem.spark.delta import snapshot_files
    return snapshot_files(str(path), version)


def test_a_data_file_missing_from_the_newest_version_is_damage_not_a_fold(tmp_path: Path) -> None:
    mem = tm.open(tmp_path / "s", create=True)
    mem.assert_fact("svc", "tier", "gold")
    [gone] = _files(tmp_path / "s", None)
    Path(gone).unlink()
    with pytest.raises(tm.TempomemError, match=r"store: 1 data file\(s\) of the newest version of .* are missing "
                                               r"from disk \(first: .*\); check\(\) \(tempomem check\) lists them"):
        _files(tmp_path / "s", None)


def test_bad_input(spark: Any, store: tm.Memory, tmp_path: Path) -> None:
    with pytest.raises(tm.TempomemError, match="path"):
        tms.register(spark, str(tmp_path / "nowhere"))
    with pytest.raises(tm.TempomemError, match="version"):
        tms.register(spark, str(store.path), version=-1)
    with pytest.raises(tm.TempomemError, match="version: the files of version 1"):
        tms.register(spark, str(store.path), version=1)  # its files went with the fold
    with pytest.raises(tm.TempomemError, match="probes: no 'believed_at'"):
        tms.divergence(spark, spark.createDataFrame([("a", "b", "2025")], "subject string, predicate string, "
                                                                            "valid_at string"))
    with pytest.raises(tm.TempomemError, match="by"):
        tms.ingestion_lag(spark, by=("object",))
    with pytest.raises(tm.TempomemError, match="threshold"):
        tms.ingestion_lag(spark, threshold="soon")
