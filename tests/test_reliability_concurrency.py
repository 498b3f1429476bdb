"""Concurrent writers and readers in separate processes (SPEC §3: no write lost, invariants hold).

Every writer commit is one ``assert_many`` of the same object on two keys (``svc`` and
``svc-mirror``), so a reader that ever sees the keys differ has seen half a batch.
``TEMPOMEM_HEAVY=1`` scales the process and commit counts up.
"""

from __future__ import annotations

import itertools
import multiprocessing
import queue

import pytest
import reliability_workers as workers
from conftest import HEAVY

import tempomem as tm


def _run_writers(path: str, ctx: multiprocessing.context.BaseContext, writers: int, revisions: int,
                 readers: int) -> tuple[list[tuple], list[tuple]]:
    """Start readers, then writers released together; return (writer results, reader results)."""
    results, reads = ctx.Queue(), ctx.Queue()
    start, stop = ctx.Event(), ctx.Event()
    reader_procs = [ctx.Process(target=workers.reader, args=(path, stop, reads)) for _ in range(readers)]
    writer_procs = [ctx.Process(target=workers.writer, args=(path, i, revisions, start, results))
                    for i in range(writers)]
    for p in reader_procs + writer_procs:
        p.start()
    start.set()
    got = []
    try:
        for _ in range(writers * revisions):
            item = results.get(timeout=240)
            got.append(item)
            if item[0] == "error":
                break
    except queue.Empty:
        pass
    stop.set()
    reader_out = [reads.get(timeout=120) for _ in reader_procs]
    for p in writer_procs + reader_procs:
        p.join(timeout=120)
    return got, reader_out


def _assert_one_chain(mem: tm.Memory, subject: str, tokens: set[str]) -> list[str]:
    """The key holds exactly the committed values, each superseded by the next one in belief order."""
    hist = mem.history(subject, "instance_type")
    objects = hist["object"].to_list()
    assert set(objects) == tokens and len(objects) == len(tokens)
    recorded = hist["recorded_at"].to_list()
    assert recorded == sorted(recorded) and len(set(recorded)) == len(recorded), "belief times must be distinct"
    rows = hist.to_dicts()
    for before, after in itertools.pairwise(rows):
        assert before["status"] == "superseded"
        assert before["superseded_by"] == after["fact_id"]
        assert before["valid_to"] == after["valid_from"]
    assert rows[-1]["status"] == "live" and rows[-1]["valid_to"] is None
    current = mem.current(subject)
    assert current["fact_id"].to_list() == [rows[-1]["fact_id"]]
    # every commit was, for a while, the one believed value
    for row in rows:
        believed = mem.as_believed(row["recorded_at"], row["recorded_at"], subject)
        assert believed["fact_id"].to_list() == [row["fact_id"]]
    return [r["fact_id"] for r in rows]


def _assert_all_landed(path: str, results: list[tuple], writers: int, revisions: int,
                       earlier: frozenset[str] = frozenset()) -> None:
    """All commits returned; the keys hold exactly them (plus ``earlier`` tokens); check() is clean."""
    errors = [r for r in results if r[0] == "error"]
    assert not errors, errors
    assert len(results) == writers * revisions
    mem = tm.open(path)
    tokens = {r[3] for r in results}
    assert len(tokens) == writers * revisions
    tokens |= earlier
    svc_ids = _assert_one_chain(mem, "svc", tokens)
    mirror_ids = _assert_one_chain(mem, "svc-mirror", tokens)
    # the earlier facts were recorded first; every other stored fact is one a writer got back
    skip = len(earlier)
    assert set(svc_ids[skip:]) == {r[4][0] for r in results}
    assert set(mirror_ids[skip:]) == {r[4][1] for r in results}
    # each writer's own commits are believed in the order it made them
    for index in range(writers):
        mine = sorted((r for r in results if r[1] == index), key=lambda r: r[2])
        stamps = [r[5][0] for r in mine]
        assert stamps == sorted(stamps)
    report = mem.check()
    assert report.ok, report


@pytest.mark.parametrize("readers", [2])
def test_spawned_writers_lose_nothing_and_readers_never_see_half_a_batch(tmp_path, readers):
    writers, revisions = (8, 40) if HEAVY else (6, 10)
    path = str(tmp_path / "store")
    tm.open(path, create=True)
    results, reader_out = _run_writers(path, multiprocessing.get_context("spawn"), writers, revisions, readers)
    _assert_all_landed(path, results, writers, revisions)
    for tag, reads, problems, last_count, distinct_counts in reader_out:
        assert tag == "reader" and reads > 0
        assert problems == []
        assert last_count == writers * revisions, "a read after the writes sees every commit"
        assert distinct_counts > 1, "readers saw the store grow while it was written"


def test_forked_writers_after_the_parent_used_the_store(tmp_path):
    """deltalake panics in a forked child of a process that used it; storage routes to a spawned worker."""
    writers, revisions = (8, 15) if HEAVY else (3, 4)
    path = str(tmp_path / "store")
    parent = tm.open(path, create=True)
    parent.assert_many(workers.pair_rows("parent"))
    assert parent.current("svc")["object"].to_list() == ["parent"]
    results, reader_out = _run_writers(path, multiprocessing.get_context("fork"), writers, revisions, readers=1)
    _assert_all_landed(path, results, writers, revisions, earlier=frozenset({"parent"}))
    assert reader_out[0][2] == [] and reader_out[0][3] == writers * revisions + 1
    # the parent keeps working after its children wrote
    after = parent.assert_many(workers.pair_rows("parent-again"))
    assert parent.current("svc")["fact_id"].to_list() == [after[0].fact_id]


def _write_one(path: str, token: str) -> None:
    tm.open(path).assert_many(workers.pair_rows(token))


def test_an_open_store_sees_commits_made_by_another_process(tmp_path):
    """Regression: a store object that had read version v kept answering from v forever."""
    path = str(tmp_path / "store")
    mem = tm.open(path, create=True)
    mem.assert_many(workers.pair_rows("first"))
    assert mem.current("svc")["object"].to_list() == ["first"]
    child = multiprocessing.get_context("spawn").Process(target=_write_one, args=(path, "second"))
    child.start()
    child.join(120)
    assert child.exitcode == 0
    assert mem.current("svc")["object"].to_list() == ["second"]
    assert mem.history("svc")["object"].to_list() == ["first", "second"]
    # and its next commit builds on the other process's commit instead of the stale state
    mem.assert_many(workers.pair_rows("third"))
    assert mem.history("svc")["status"].to_list() == ["superseded", "superseded", "live"]
    assert mem.check().ok
