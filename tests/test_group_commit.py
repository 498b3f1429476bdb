"""Group commit: threads that wait on the writer lock are applied together in one Delta commit,
each getting its own facts and its own errors (SPEC §1.4, §5)."""

from __future__ import annotations

import threading

import pytest

import tempomem as tm
from tempomem import engine


def _in_threads(count: int, work) -> list:
    results: list = [None] * count
    barrier = threading.Barrier(count)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except tm.TempomemError as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_threads_share_commits_and_each_gets_its_own_facts(tmp_path):
    mem = tm.open(tmp_path / "s", create=True)
    per = 15

    def work(i: int) -> list[tm.Fact]:
        return [mem.assert_fact(f"agent-{i}", "step", f"s{j}", valid_from=f"2025-01-{j + 1:02d}") for j in range(per)]

    results = _in_threads(8, work)
    for i, facts in enumerate(results):
        assert [f.object for f in facts] == [f"s{j}" for j in range(per)]
        assert {f.subject for f in facts} == {f"agent-{i}"}
    rows = mem.sql("SELECT recorded_at, count(*) AS n FROM revisions GROUP BY recorded_at").pl()
    assert rows["n"].sum() == 8 * per + 8 * (per - 1)  # each step after the first closes the one before
    commits = mem._storage.latest_version()
    assert commits < 8 * per, f"{commits} commits for {8 * per} writes: nothing was grouped"
    # one recorded_at per commit, strictly increasing: each agent's chain is in order
    for i in range(8):
        history = mem.history(f"agent-{i}", revisions=True)
        firsts = history.filter(history["revision"] == 1)["recorded_at"].to_list()
        assert firsts == sorted(firsts) and len(set(firsts)) == per
    assert mem.check().ok


def test_a_refused_request_fails_alone(tmp_path, monkeypatch):
    mem = tm.open(tmp_path / "s", create=True)
    mem.declare("owner", "single", policy="reject")
    mem.assert_fact("door", "owner", "ada", valid_from="2025-01-01")
    started = threading.Event()
    release = threading.Event()
    original = engine.Engine._commit_group

    def slow_first(self, group):  # hold the first commit so that the others queue behind it
        if not started.is_set():
            started.set()
            release.wait(5)
        return original(self, group)

    monkeypatch.setattr(engine.Engine, "_commit_group", slow_first)

    def work(i: int):
        if i == 0:
            return mem.assert_fact("warmup", "p", "x")
        started.wait(5)
        if i == 3:  # conflicts under reject: this request alone fails
            result = mem.assert_fact("door", "owner", "bob", valid_from="2025-06-01")
        else:
            result = mem.assert_fact(f"k{i}", "p", f"v{i}")
        return result

    threads = []
    results: dict[int, object] = {}

    def run(i: int) -> None:
        try:
            results[i] = work(i)
        except tm.TempomemError as exc:
            results[i] = exc

    for i in range(6):
        threads.append(threading.Thread(target=run, args=(i,)))
        threads[-1].start()
    started.wait(5)
    while len(mem._engine._pending) < 5 and not all(not t.is_alive() for t in threads[1:]):
        threading.Event().wait(0.01)
    release.set()
    for t in threads:
        t.join()
    assert isinstance(results[3], tm.ConflictError) and "overlapping value" in str(results[3])
    for i in (1, 2, 4, 5):
        assert isinstance(results[i], tm.Fact) and results[i].object == f"v{i}"
    assert mem.current("door")["object"].to_list() == ["ada"]
    # the four others were one commit: they share one recorded_at
    assert len({results[i].recorded_at for i in (1, 2, 4, 5)}) == 1


def test_a_large_batch_commits_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "SET_BASED_FROM", 4)
    mem = tm.open(tmp_path / "s", create=True)
    facts = mem.assert_many([{"subject": f"s{i}", "predicate": "p", "object": "x"} for i in range(10)])
    assert len({f.recorded_at for f in facts}) == 1 and len(facts) == 10
    with pytest.raises(tm.TempomemError, match="row 2, object"):
        mem.assert_many([{"subject": "a", "predicate": "p", "object": "x"}] * 2 + [{"subject": "a", "predicate": "p"}])
