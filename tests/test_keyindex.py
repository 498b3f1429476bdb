"""The key index finds exactly the rows a scan finds, and the writes that feed it keep stores
sorted and their log readable by deltalake."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import tempomem as tm
from tempomem import keyindex
from tempomem.schema import EVENT_SCHEMA
from tempomem.staterows import latest_believed
from tempomem.storage import folder

_ROW = {n: None for n in EVENT_SCHEMA.names}


def _rows(rng: random.Random, count: int) -> list[dict]:
    subjects = [f"s{i}" for i in range(40)] + ["é-unicode", "s1\x1fx"]  # a name holding the separator
    out = []
    for i in range(count):
        out.append(dict(_ROW, fact_id=f"f{rng.randrange(60)}", scope=rng.choice(["default", "team"]),
                        subject=rng.choice(subjects), predicate=rng.choice(["p", "q", "q\x1f"]), object=str(i),
                        status=rng.choice(["live", "superseded", "retracted"]), revision=rng.randrange(1, 5)))
    return out


def _scan(files: list[str]) -> dict[tuple[str, str, str], set[tuple]]:
    """Each key's (fact_id, revision, object), by DuckDB reading every row."""
    out: dict[tuple[str, str, str], set[tuple]] = {}
    with duckdb.connect() as con:
        for row in con.sql("SELECT scope, subject, predicate, fact_id, revision, object FROM read_parquet($f)",
                           params={"f": files}).fetchall():
            out.setdefault(row[:3], set()).add(row[3:])
    return out


@pytest.mark.parametrize("hashed_rows", [0, 10_000])  # every file by statistics / by hashes
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_index_reads_exactly_the_rows_of_the_keys(tmp_path, monkeypatch, seed, hashed_rows):
    monkeypatch.setattr(keyindex, "_HASHED_FILE_ROWS", hashed_rows)
    rng = random.Random(seed)
    files = []
    for n in range(4):
        table = pa.Table.from_pylist(_rows(rng, rng.randrange(0, 300)), schema=EVENT_SCHEMA)
        if n % 2:  # sorted by key in small row groups (a fold's shape), or as written (a commit's)
            table = table.sort_by([("scope", "ascending"), ("subject", "ascending"), ("predicate", "ascending")])
        path = str(tmp_path / f"{n}.parquet")
        pq.write_table(table, path, row_group_size=rng.choice([7, 50, 1000]))
        files.append(path)
    index = keyindex.KeyIndex()
    expected = _scan(files)
    keys = set(expected) | {("default", "nobody", "p"), ("team", "s1", "q\x1f"), ("", "", "")}
    for key in sorted(keys):
        found = index.rows(files, [key])
        assert {(r["fact_id"], r["revision"], r["object"]) for r in found.to_pylist()} == expected.get(key, set())
    several = sorted(keys)[:5]
    assert index.rows(files, several).num_rows == sum(len(expected.get(k, ())) for k in several)
    # a file that left the table is forgotten, and its rows are not read
    assert index.rows(files[:1], [several[0]]).num_rows == len(_scan(files[:1]).get(several[0], ()))


def test_keys_that_read_alike_joined_are_told_apart(tmp_path, monkeypatch):
    # joined by the separator alone, both keys read "a\x1fc\x1fc\x1fd"
    mine, other = ("a\x1fc", "c", "d"), ("a", "c", "c\x1fd")
    rows = [dict(_ROW, fact_id=f"f{i}", scope=k[0], subject=k[1], predicate=k[2], object=str(i), revision=1)
            for i, k in enumerate([mine, other, other])]
    path = str(tmp_path / "keys.parquet")
    pq.write_table(pa.Table.from_pylist(rows, schema=EVENT_SCHEMA), path)
    for hashed_rows in (0, 10_000):  # by statistics / by hashes
        index = keyindex.KeyIndex()
        monkeypatch.setattr(keyindex, "_HASHED_FILE_ROWS", hashed_rows)
        assert index.rows([path], [mine])["fact_id"].to_pylist() == ["f0"]
        assert sorted(index.rows([path], [other])["fact_id"].to_pylist()) == ["f1", "f2"]


@pytest.mark.parametrize("hashed_rows", [0, 10_000])  # a large file (statistics) / a small one (hashes)
def test_facts_only_skips_the_groups_of_ended_revisions(tmp_path, monkeypatch, hashed_rows):
    # a fold's layout, in groups of two rows: the revisions still believed, then those whose
    # belief ended (folded_until stored); a key's latest revisions are all in the first
    monkeypatch.setattr(keyindex, "_HASHED_FILE_ROWS", hashed_rows)
    ended_at = datetime(2025, 3, 1, tzinfo=UTC)
    key = {"scope": "default", "subject": "s", "predicate": "p"}
    rows = [dict(_ROW, **key, fact_id="f1", object="new", revision=2, status="live", folded=True),
            dict(_ROW, **key, fact_id="f2", object="other", revision=1, status="retracted", folded=True),
            dict(_ROW, **key, fact_id="f1", object="old", revision=1, status="live", folded=True,
                 folded_until=ended_at),
            dict(_ROW, **key, fact_id="f2", object="other", revision=0, status="live", folded=True,
                 folded_until=ended_at)]
    path = str(tmp_path / "folded.parquet")
    pq.write_table(pa.Table.from_pylist(rows, schema=EVENT_SCHEMA), path, row_group_size=2)
    index = keyindex.KeyIndex()
    both = index.rows([path], [("default", "s", "p")])
    believed = index.rows([path], [("default", "s", "p")], facts_only=True)
    def revisions(table: pa.Table) -> list[tuple[str, int]]:
        return sorted(zip(table["fact_id"].to_pylist(), table["revision"].to_pylist(), strict=True))

    assert revisions(both) == [("f1", 1), ("f1", 2), ("f2", 0), ("f2", 1)]
    assert revisions(believed) == [("f1", 2), ("f2", 1)]
    assert revisions(index.subject_rows([path], "s", facts_only=True)) == [("f1", 2), ("f2", 1)]
    assert revisions(index.subject_rows([path], "s")) == revisions(both)
    # what the write path keeps of them is the same: f1's latest revision (f2's is retracted)
    assert latest_believed(believed)["object"].to_pylist() == latest_believed(both)["object"].to_pylist() == ["new"]


def test_latest_believed_keeps_each_facts_last_revision_unless_retracted():
    rows = pa.Table.from_pylist([
        dict(_ROW, fact_id="a", revision=1, status="live"), dict(_ROW, fact_id="a", revision=2, status="ended"),
        dict(_ROW, fact_id="b", revision=1, status="live"), dict(_ROW, fact_id="b", revision=2, status="retracted"),
        dict(_ROW, fact_id="c", revision=3, status="superseded"), dict(_ROW, fact_id="c", revision=1, status="live"),
    ], schema=EVENT_SCHEMA)
    kept = latest_believed(rows).to_pylist()
    assert [(r["fact_id"], r["revision"], r["status"]) for r in kept] == [("a", 2, "ended"), ("c", 3, "superseded")]


def test_compaction_merges_only_small_files_sorted_by_key(mem, clock, monkeypatch):
    monkeypatch.setattr(folder, "_SMALL_FILES_BEFORE_COMPACTION", 1 << 30)  # compact by hand below
    mem.assert_many([{"subject": f"big-{i:03d}", "predicate": "p", "object": "x"} for i in range(600)])
    big = mem._storage.snapshot().files
    monkeypatch.setattr(folder, "_TIER_BYTES", (min(os.path.getsize(f) for f in big),))  # big is not small
    for subject in ["zeta", "alpha", "mid", "alpha"]:
        clock.advance(hours=1)
        mem.assert_fact(subject, "p", f"v-{clock.now:%H}")
    everything = "SELECT * EXCLUDE (ingested_at) FROM revisions ORDER BY fact_id, revision"
    before = mem.sql(everything).fetchall()
    version = mem._storage.compact()
    files = mem._storage.snapshot().files
    assert set(big) <= set(files) and len(files) == len(big) + 1  # the large file is left alone
    merged = pq.read_table(next(f for f in files if f not in big)).to_pylist()
    assert [r["subject"] for r in merged] == ["alpha", "alpha", "alpha", "mid", "zeta"]  # 2 revisions + 1
    assert mem.sql(everything).fetchall() == before
    # deltalake reads the same files at that version, and sees a commit that changed no data
    assert sorted(DeltaTable(str(mem.path)).file_uris()) == sorted(files)
    entry = (mem.path / "_delta_log" / f"{version:020d}.json").read_text()
    assert '"dataChange":false' in entry.replace(" ", "") and '"remove"' in entry
    assert mem.check().ok


def test_plain_log_appends_are_what_deltalake_reads(mem, clock):
    for i in range(105):  # past a checkpoint (every 100 versions)
        clock.advance(minutes=1)
        mem.assert_fact(f"svc-{i % 7}", "replicas", str(i))
    table = DeltaTable(str(mem.path))
    assert table.version() == mem._storage.latest_version() >= 105  # and the compactions
    assert sorted(table.file_uris()) == sorted(mem._storage.snapshot().files)
    assert any(".checkpoint." in p.name for p in (mem.path / "_delta_log").iterdir())
    assert not [p for p in (mem.path / "_delta_log").iterdir() if p.name.endswith(".tmp")]
    rows = table.to_pyarrow_table(columns=["subject", "object", "status"]).to_pylist()
    assert sum(r["status"] in ("live", "superseded") for r in rows) == len(rows)
    assert sorted(tm.open(mem.path).current("svc-3")["object"].to_list()) == ["101"]


def test_another_writers_commits_move_the_file_list_through_the_log(store_path, clock):
    first = tm.open(store_path, create=True, clock=clock)
    second = tm.open(store_path, clock=clock)
    first.assert_fact("svc", "replicas", "1")
    clock.advance(minutes=1)
    second.assert_fact("svc", "replicas", "2")  # second reads first's commit from the log
    clock.advance(minutes=1)
    first.assert_fact("svc", "replicas", "3")
    assert sorted(first._storage.snapshot().files) == sorted(DeltaTable(str(store_path)).file_uris())
    assert second.current("svc")["object"].to_list() == ["3"]
    assert [r["object"] for r in second.history("svc", revisions=True).sort("recorded_at").to_dicts()][-1] == "3"
