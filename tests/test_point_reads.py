"""Point reads (tempomem.pointread) and the folded views (folded.sql) never change an answer.

Random stores take random commits (assertions, batches, invalidations, corrections, erasures,
backfills, embeddings, folds and compactions); after each step every query form that names a
subject is asked with the point path on and off (the point path keeping decoded row groups
across steps), and a fully folded store's views are compared with those of revisions.sql.
Small files are indexed by hashes, so some runs index every file by its statistics, in row
groups of a few rows, to exercise that path too.
"""

from __future__ import annotations

import random
from datetime import timedelta

import polars as pl
import pyarrow.parquet as pq
import pytest
from conftest import HEAVY
from polars.testing import assert_frame_equal

import tempomem as tm
from tempomem import keyindex
from tempomem.connection import sql_file, use_views
from tempomem.errors import TempomemError
from tempomem.storage import writer as storage_writer

SUBJECTS = ["ada", "bob", "cy", "é-unicode", "s\x1fx"]
PREDICATES = ["city", "role", "tag"]  # tag is multi-valued
OBJECTS = ["a", "b", "c", "ada"]
SCOPES = ["default", "team"]
# Each run is a random store of 30 commits; the default run takes three seeds, each path once
# or twice, and TEMPOMEM_HEAVY=1 every seed on both paths.
_RUNS = [(s, st) for s in range(3) for st in (False, True)] if HEAVY else [(0, False), (1, True), (2, True)]


def _instant(rng: random.Random, clock) -> object:
    return clock.now - timedelta(days=rng.randrange(0, 400), hours=rng.randrange(24))


def _live_ids(mem: tm.Memory) -> list[str]:
    return [r[0] for r in mem.sql("SELECT fact_id FROM facts WHERE status NOT IN ('retracted', 'erased') "
                                  "ORDER BY fact_id").fetchall()]


def _fact_row(rng: random.Random, clock) -> dict:
    row = {"subject": rng.choice(SUBJECTS), "predicate": rng.choice(PREDICATES), "object": rng.choice(OBJECTS),
           "scope": rng.choice(SCOPES)}
    if rng.random() < 0.7:
        row["valid_from"] = _instant(rng, clock)
        if rng.random() < 0.4:
            row["valid_to"] = row["valid_from"] + timedelta(days=rng.randrange(1, 90))
    return row


def _step(mem: tm.Memory, clock, rng: random.Random) -> None:
    """One random commit (or fold); one the write path refuses changes nothing, which is fine."""
    clock.advance(hours=rng.randrange(1, 72))
    kind = rng.choice(["assert", "assert", "many", "invalidate", "correct", "forget", "backfill", "fold",
                       "compact", "embed"])
    try:
        if kind == "assert":
            mem.assert_fact(**_fact_row(rng, clock))
        elif kind == "many":
            mem.assert_many([_fact_row(rng, clock) for _ in range(rng.randrange(1, 5))])
        elif kind in ("invalidate", "correct") and (ids := _live_ids(mem)):
            if kind == "invalidate":
                mem.invalidate(rng.choice(ids), at=_instant(rng, clock), reason="ended")
            else:
                mem.correct(rng.choice(ids), reason="wrong")
        elif kind == "forget" and rng.random() < 0.3:
            mem.forget(rng.choice(SUBJECTS), reason="asked")
        elif kind == "backfill":
            rows = [{**_fact_row(rng, clock), "recorded_at": _instant(rng, clock)} for _ in range(rng.randrange(1, 6))]
            for row in rows:
                if rng.random() < 0.2:
                    row["retracted_at"] = row["recorded_at"] + timedelta(hours=1)
            mem.backfill(rows, progress=False)
        elif kind == "embed":  # rewrites files through deltalake, whose strings read back as views
            mem.embed()
        elif kind in ("fold", "compact"):
            with mem._engine.exclusive():
                mem._storage.fold() if kind == "fold" else mem._storage.compact()
    except TempomemError:
        pass


def _queries(mem: tm.Memory, clock, rng: random.Random) -> list:
    """Every query form naming a subject, on random keys, instants and filters."""
    out = []
    for _ in range(4):
        s, p, scope = rng.choice([*SUBJECTS, "nobody"]), rng.choice([*PREDICATES, None]), rng.choice([*SCOPES, None])
        t, b = _instant(rng, clock), _instant(rng, clock)
        trusted = rng.choice([None, ["user"], {"min_confidence": 0.5}])
        out += [
            lambda s=s, p=p, scope=scope, trusted=trusted: mem.current(s, p, scope=scope, trusted=trusted),
            lambda s=s, p=p, scope=scope, t=t, trusted=trusted: mem.as_of(t, s, p, scope=scope, trusted=trusted),
            lambda s=s, p=p, scope=scope, t=t, b=b: mem.as_believed(t, b, s, p, scope=scope),
            lambda s=s, p=p, scope=scope: mem.history(s, p, scope=scope),
            lambda s=s, p=p, scope=scope: mem.history(s, p, scope=scope, revisions=True),
            lambda s=s, scope=scope: mem.timeline(s, scope=scope),
        ]
    return out


def _same_with_and_without_point_reads(mem: tm.Memory, clock, rng: random.Random) -> None:
    for query in _queries(mem, clock, rng):
        mem.reader.point_reads = True
        fast = query()
        mem.reader.point_reads = False
        whole = query()
        mem.reader.point_reads = True
        assert_frame_equal(fast, whole)


def _columns_change_no_answer(mem: tm.Memory, clock, rng: random.Random) -> None:
    """``columns=`` gives the full frame's columns it names, in that order, on both read paths."""
    for point_reads in (True, False):
        mem.reader.point_reads = point_reads
        s, t, b = rng.choice([*SUBJECTS, None]), _instant(rng, clock), _instant(rng, clock)
        picked = rng.sample(tm.schema.FACT_COLUMNS, rng.randrange(1, 5))
        assert_frame_equal(mem.as_of(t, s, columns=picked), mem.as_of(t, s).select(picked))
        assert_frame_equal(mem.current(s, columns=picked), mem.current(s).select(picked))
        picked = [*picked, "believed_until"]
        assert_frame_equal(mem.as_believed(t, b, s, columns=picked), mem.as_believed(t, b, s).select(picked))
    mem.reader.point_reads = True


_VIEW_QUERIES = [
    "SELECT * FROM facts ORDER BY fact_id",
    "SELECT * FROM revisions ORDER BY fact_id, revision",
    "SELECT * FROM _tm_revisions ORDER BY fact_id, revision",
    "SELECT * FROM _tm_belief_rows ORDER BY fact_id, revision",
    "SELECT * FROM as_of($t) ORDER BY fact_id",
    "SELECT * FROM as_believed($t, $b) ORDER BY fact_id",
    "SELECT * FROM memory_diff($b, $t) ORDER BY ALL",  # entity rows have no fact_id
    "SELECT * FROM coalesced() ORDER BY ALL",
]


def _folded_views_answer_as_revisions_sql(mem: tm.Memory, clock, rng: random.Random, *, folded: bool = False) -> None:
    """When the connection reads through folded.sql (``folded``: it must), forced back to
    revisions.sql every view and macro answers the same. (A file deltalake rewrote, as embed
    does, may lack the statistics that show it folded: it then counts as fresh.)"""
    con = mem.reader.connection()
    if not con.sql("SELECT getvariable('tm_folded_views')").fetchall()[0][0]:
        assert not folded
        return
    general = mem.connect()
    use_views(general, folded=False, first=False)
    assert general.sql("SELECT getvariable('tm_folded_views')").fetchall()[0][0] is False
    params = {"t": _instant(rng, clock), "b": _instant(rng, clock)}
    for query in _VIEW_QUERIES:
        wanted = {k: v for k, v in params.items() if f"${k}" in query}
        assert_frame_equal(con.sql(query, params=wanted).pl(), general.sql(query, params=wanted).pl())


@pytest.mark.parametrize(("seed", "statistics"), _RUNS)
def test_point_reads_and_folded_views_never_change_an_answer(store_path, clock, monkeypatch, seed, statistics):
    if statistics:  # every file indexed by its footer's statistics, in row groups of a few rows
        monkeypatch.setattr(keyindex, "_HASHED_FILE_ROWS", 0)
        monkeypatch.setattr(storage_writer, "ROW_GROUP_ROWS", 3)
    rng = random.Random(seed)
    mem = tm.open(store_path, create=True, clock=clock, predicates={"tag": "multi"})
    for step in range(30):
        _step(mem, clock, rng)
        if step % 5 == 4:
            _same_with_and_without_point_reads(mem, clock, rng)
            _columns_change_no_answer(mem, clock, rng)
            _folded_views_answer_as_revisions_sql(mem, clock, rng)
    with mem._engine.exclusive():
        mem._storage.fold()
    _same_with_and_without_point_reads(mem, clock, rng)
    _columns_change_no_answer(mem, clock, rng)
    _folded_views_answer_as_revisions_sql(mem, clock, rng, folded=True)
    # the point reads above went through row groups kept decoded across the commits (keyindex._Groups)
    assert mem.reader._points._index._groups._kept


def test_a_point_read_reads_only_the_row_groups_of_its_subject(store_path, clock, monkeypatch):
    monkeypatch.setattr(keyindex, "_HASHED_FILE_ROWS", 0)
    monkeypatch.setattr(storage_writer, "ROW_GROUP_ROWS", 2)
    mem = tm.open(store_path, create=True, clock=clock)
    mem.assert_many([{"subject": f"s{i:02d}", "predicate": "p", "object": str(i)} for i in range(20)])
    with mem._engine.exclusive():
        mem._storage.fold()
    (path,) = mem._storage.snapshot().files
    assert pq.read_metadata(path).num_row_groups == 10
    read = []
    real = keyindex._Groups.read
    monkeypatch.setattr(keyindex._Groups, "read", lambda self, entry, group, columns:
                        read.append((entry.path, group, len(columns))) or real(self, entry, group, columns))
    assert mem.as_of(clock.now, "s07")["object"].to_list() == ["7"]
    decoded = [r for r in read if r[2] > 3]
    assert len(decoded) == 1  # one group of 2 rows, of 10, decoded whole
    # asked again, the group is kept decoded; from then on it is never read from its file again
    assert mem.as_of(clock.now, "s07")["object"].to_list() == ["7"]
    with monkeypatch.context() as patched:
        # the file, once opened, is kept open (keyindex._File.source): it is its reads that must not come
        patched.setattr(pq.ParquetFile, "read_row_group", lambda *a, **k: pytest.fail("a kept group was read again"))
        assert mem.as_of(clock.now, "s07")["object"].to_list() == ["7"]
    assert mem.as_of(clock.now, "nobody").height == 0
    assert pl.DataFrame(mem.history("s07")).height == 1
    assert sql_file("folded.sql")  # shipped with the package
