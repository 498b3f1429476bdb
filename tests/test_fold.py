"""Folding: stored belief ends (revisions.sql, Storage.fold) never change an answer.

Every check compares the `revisions` and `facts` views with the plain definition of SPEC §4
computed by a window over the raw rows, before and after folds, with facts revised on both
sides of a fold.
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from analytics_helpers import PLAIN_REVISIONS, assert_previous_columns
from conftest import ts

import tempomem as tm
from tempomem.storage import delta, footer
from tempomem.storage import folder as storage_module

_PLAIN_REVISIONS = f"""
SELECT COLUMNS(lambda c: NOT starts_with(c, 'prev_')) FROM ({PLAIN_REVISIONS}) ORDER BY fact_id, revision
"""
_PLAIN_FACTS = """
SELECT * EXCLUDE (revision, believed_until) REPLACE (min(recorded_at) OVER (PARTITION BY fact_id) AS recorded_at)
FROM (""" + _PLAIN_REVISIONS + """) QUALIFY believed_until IS NULL ORDER BY fact_id
"""


def _same_as_plain_definition(mem: tm.Memory) -> None:
    con = mem.reader.connection()
    plain = con.sql(_PLAIN_REVISIONS).pl()
    assert con.sql("SELECT * FROM revisions ORDER BY fact_id, revision").pl().equals(plain)
    assert con.sql("SELECT * FROM facts ORDER BY fact_id").pl().equals(con.sql(_PLAIN_FACTS).pl())
    assert_previous_columns(mem)


def _folded_share(mem: tm.Memory) -> tuple[int, int]:
    rows = mem.reader.connection().sql("SELECT count(*) FILTER (WHERE folded), count(*) FROM _tm_events").fetchall()
    return rows[0]


def test_views_equal_the_plain_definition_across_folds(mem: tm.Memory, clock) -> None:
    clock.set("2026-01-01")
    a = mem.assert_fact("ada", "city", "Helsinki", valid_from="2020")
    clock.set("2026-02-01")
    mem.assert_fact("ada", "city", "Berlin", valid_from="2025")          # closes Helsinki: rev 2
    mem.assert_fact("bob", "city", "Oslo", valid_from="2021")
    _same_as_plain_definition(mem)
    assert _folded_share(mem) == (0, 4)

    mem._storage.fold()
    assert _folded_share(mem) == (4, 4)
    _same_as_plain_definition(mem)

    # Revisions after the fold: Helsinki's folded latest revision is followed by a fresh one.
    clock.set("2026-03-01")
    mem.correct(a.fact_id, reason="she never lived there")               # Helsinki rev 3
    clock.set("2026-04-01")
    berlin = mem.as_of("2025-06", "ada")["fact_id"][0]
    mem.invalidate(berlin, at="2026-03-15", reason="moved")              # Berlin rev 2
    mem.assert_fact("cy", "city", "Rome")
    _same_as_plain_definition(mem)
    hel = mem.timeline("ada").filter(pl.col("fact_id") == a.fact_id).sort("revision")
    assert hel.select("revision", "recorded_at", "believed_until", "status").rows() == [
        (1, ts("2026-01-01"), ts("2026-02-01"), "live"),
        (2, ts("2026-02-01"), ts("2026-03-01"), "superseded"),
        (3, ts("2026-03-01"), None, "retracted")]
    # What was believed at each belief time is unchanged by the fold.
    assert mem.as_believed("2022", believed_at="2026-02-15", subject="ada")["object"].to_list() == ["Helsinki"]
    assert mem.as_believed("2022", believed_at="2026-03-15", subject="ada")["object"].to_list() == []
    assert mem.history("ada").select("object", "recorded_at", "status").rows() == [
        ("Helsinki", ts("2026-01-01"), "retracted"), ("Berlin", ts("2026-02-01"), "ended")]

    mem._storage.fold()
    assert _folded_share(mem) == (7, 7)
    _same_as_plain_definition(mem)
    assert mem.check().ok


def test_erasure_after_a_fold_keeps_the_other_answers(mem: tm.Memory, clock) -> None:
    clock.set("2026-01-01")
    mem.assert_fact("ada", "city", "Helsinki", valid_from="2020")
    mem.assert_fact("bob", "city", "Oslo", valid_from="2021")
    clock.set("2026-02-01")
    mem.assert_fact("ada", "city", "Berlin", valid_from="2025")
    mem._storage.fold()
    clock.set("2026-03-01")
    mem.forget("ada", reason="erasure request")
    _same_as_plain_definition(mem)
    assert mem.as_of("2025-06")["object"].to_list() == ["Oslo"]
    assert mem.check().ok


def test_compaction_folds_once_fresh_rows_are_a_large_share(mem: tm.Memory, clock, monkeypatch) -> None:
    monkeypatch.setattr(storage_module, "_SMALL_FILES_BEFORE_COMPACTION", 4)
    clock.set("2026-01-01")
    for i in range(4):
        clock.advance(hours=1)
        mem.assert_fact("ada", "city", f"city-{i}")                       # each closes the one before
    # the fourth commit made four small files of fresh rows: the compaction was a fold
    assert len(mem._storage.snapshot().files) == 1
    assert _folded_share(mem) == (7, 7)
    _same_as_plain_definition(mem)
    assert mem.current("ada")["object"].to_list() == ["city-3"]


def test_fresh_rows_are_read_from_footers_or_counted_once_a_file(tmp_path) -> None:
    def write(name: str, folded: list[bool | None], **options: object) -> str:
        path = str(tmp_path / name)
        pq.write_table(pa.table({"folded": pa.array(folded, pa.bool_())}), path, **options)
        return path

    files = (write("commit", [False, False, None]),                         # fresh, NULL counts as not folded
             write("fold", [True, True]),
             write("mixed", [True, False, None]),                           # one group: counted
             write("groups", [True, False], row_group_size=1),              # each group tells
             write("bare", [True, None, False], write_statistics=False))    # no statistics: counted
    known: dict[str, tuple[int, int]] = {}
    assert delta.fresh_rows(files, known) == (3 + 0 + 2 + 1 + 2, 13)
    assert known[files[2]] == (2, 3) and known[files[4]] == (2, 3)
    # files that left the table are forgotten
    assert delta.fresh_rows(files[:2], known) == (3, 5) and set(known) == set(files[:2])


def test_a_footer_tells_each_groups_folding_or_leaves_it_open(tmp_path) -> None:
    t = pa.scalar(1, pa.timestamp("us", "UTC"))
    folded = [None, None, False, False, True, True, True, True, True, False, True, None]
    until = [None, None, None, None, t, t, t, None, None, None, t, t]
    table = pa.table({"folded": pa.array(folded, pa.bool_()),
                      "folded_until": pa.array([None if u is None else u.value for u in until],
                                               pa.timestamp("us", "UTC"))})
    pq.write_table(table, tmp_path / "groups", row_group_size=2)
    # two NULL, two false, folded with every end stored, folded with an end missing, mixed, a NULL
    assert footer.groups_folding(pq.read_metadata(tmp_path / "groups")) == [
        footer.FRESH, footer.FRESH, footer.ENDED, footer.FOLDED, footer.MIXED, footer.MIXED]
    pq.write_table(table, tmp_path / "bare", row_group_size=6, write_statistics=False)
    assert footer.groups_folding(pq.read_metadata(tmp_path / "bare")) == [footer.MIXED] * 2
    pq.write_table(table.select(["folded"]).slice(4, 2), tmp_path / "no_until")
    assert footer.groups_folding(pq.read_metadata(tmp_path / "no_until")) == [footer.FOLDED]
    pq.write_table(pa.table({"subject": ["ada"]}), tmp_path / "no_folded")
    assert footer.groups_folding(pq.read_metadata(tmp_path / "no_folded")) == [footer.FRESH]


def test_a_files_footer_is_read_once_by_all_its_readers(store_path, clock, monkeypatch) -> None:
    clock.set("2026-01-01")
    tm.open(store_path, create=True, clock=clock).assert_many(
        [{"subject": s, "predicate": "city", "object": "Oslo", "valid_from": "2020"} for s in ("ada", "bob")])
    reads: list[str] = []
    read_metadata = pq.read_metadata
    monkeypatch.setattr(pq, "read_metadata", lambda path: reads.append(path) or read_metadata(path))
    monkeypatch.setattr(tm.connection, "_HAS_FRESH_ROWS", {})
    footer._read.cache_clear()
    mem = tm.open(store_path, clock=clock)                   # as a new process would
    assert mem.as_of("2025-01")["subject"].to_list() == ["ada", "bob"]   # the connection binds the file
    assert mem.as_of("2025-01", "bob")["object"].to_list() == ["Oslo"]  # the key index finds bob in it
    assert delta.fresh_rows(mem._storage.snapshot().files, {}) == (2, 2)  # a compaction counts it
    assert reads == list(mem._storage.snapshot().files)


def test_a_fold_stores_the_believed_rows_first_each_part_in_key_order(mem: tm.Memory, clock) -> None:
    clock.set("2026-01-01")
    mem.assert_fact("bob", "city", "Oslo", valid_from="2020")
    mem.assert_fact("ada", "city", "Helsinki", valid_from="2020")
    clock.set("2026-02-01")
    mem.assert_fact("ada", "city", "Berlin", valid_from="2025")          # closes Helsinki: rev 2
    mem.assert_fact("bob", "city", "Bergen", valid_from="2024")          # closes Oslo: rev 2
    mem._storage.fold()
    (path,) = mem._storage.snapshot().files
    rows = pl.read_parquet(path).select("subject", "object", "revision", believed=pl.col("folded_until").is_null())
    # Every latest revision is believed, each closed one's predecessor has a stored end; within
    # a part: scope, subject, predicate, fact_id (a generated id begins with its recording time).
    assert rows.rows() == [
        ("ada", "Helsinki", 2, True), ("ada", "Berlin", 1, True), ("bob", "Oslo", 2, True), ("bob", "Bergen", 1, True),
        ("ada", "Helsinki", 1, False), ("bob", "Oslo", 1, False)]


def _codecs(mem: tm.Memory) -> set[str]:
    files = list(mem._storage.snapshot().files)
    return {c for (c,) in mem.sql("SELECT DISTINCT compression FROM parquet_metadata($files)",
                                  params={"files": files}).fetchall()}


def test_a_store_written_in_zstd_reads_the_same_and_a_fold_rewrites_it_in_lz4(mem: tm.Memory, clock,
                                                                                tmp_path) -> None:
    clock.set("2026-01-01")
    mem.assert_fact("ada", "city", "Helsinki", valid_from="2020")
    clock.set("2026-02-01")
    mem.assert_fact("ada", "city", "Berlin", valid_from="2025")
    mem.assert_fact("bob", "city", "Oslo", valid_from="2021")
    assert _codecs(mem) == {"LZ4_RAW"}
    # the same rows in one file as tempomem wrote its files until issue 20: ZSTD
    old = tm.open(tmp_path / "old", create=True)
    path = old._storage.new_file_path()
    pq.write_table(mem.sql("SELECT * FROM _tm_events").to_arrow_table(), path, compression="zstd")
    old._storage.add_files([path])
    assert _codecs(old) == {"ZSTD"}
    expected = mem.sql("SELECT * FROM revisions ORDER BY fact_id, revision").pl()
    assert old.sql("SELECT * FROM revisions ORDER BY fact_id, revision").pl().equals(expected)
    old._storage.fold()
    assert _codecs(old) == {"LZ4_RAW"}
    assert old.sql("SELECT * FROM revisions ORDER BY fact_id, revision").pl().equals(expected)
    assert old.as_of("2025-06", "ada")["object"].to_list() == ["Berlin"]


def _excluded(mem: tm.Memory, fact_id: str) -> list[bool]:
    """For each row group of the store's files, whether its Bloom filter of ``fact_id``
    excludes the value (a group with no filter never does)."""
    rows = mem.sql("SELECT bloom_filter_excludes FROM parquet_bloom_probe($files, 'fact_id', $id)",
                   params={"files": list(mem._storage.snapshot().files), "id": fact_id}).fetchall()
    return [excludes for (excludes,) in rows]


def test_every_writer_leaves_fact_id_bloom_filters_that_skip_the_groups_without_the_fact(mem: tm.Memory, clock,
                                                                                          tmp_path) -> None:
    """A lookup by fact id (correct, invalidate, get) can skip a row group by its filter: the
    files are sorted by key, so the ids' min/max statistics skip nothing."""

    def only_its_group_may_hold(*fact_ids: str) -> None:
        for fact_id in fact_ids:
            assert _excluded(mem, fact_id).count(False) == 1
            assert all(_excluded(mem, fact_id + "x"))

    clock.set("2026-01-01")
    ada = mem.assert_fact("ada", "city", "Helsinki", valid_from="2020").fact_id  # a commit's append
    bob = mem.assert_fact("bob", "city", "Oslo", valid_from="2021").fact_id
    log = tmp_path / "log.csv"
    log.write_text("subject,predicate,object,valid_from,recorded_at\ncyd,city,Rome,2022-01-01,2025-01-01\n")
    mem.backfill(str(log))                                                        # a backfill's file
    cyd = mem.as_of("2025-06", "cyd")["fact_id"][0]
    assert len(_excluded(mem, cyd)) == 3
    only_its_group_may_hold(ada, bob, cyd)
    mem._storage.compact()                                                        # a merge of files
    assert len(_excluded(mem, cyd)) == 1
    assert not any(_excluded(mem, ada) + _excluded(mem, bob) + _excluded(mem, cyd))
    assert all(_excluded(mem, ada + "x"))
    clock.set("2026-02-01")
    mem.assert_fact("bob", "city", "Bergen", valid_from="2024")
    mem._storage.fold()                                                           # a fold
    assert len(_excluded(mem, bob)) == 1 and not any(_excluded(mem, bob)) and all(_excluded(mem, bob + "x"))
    mem.forget("ada", reason="asked")                                             # deltalake's rewrite
    only_its_group_may_hold(cyd)
    assert mem.get(cyd).object == "Rome" and mem.get(bob).object == "Oslo"
