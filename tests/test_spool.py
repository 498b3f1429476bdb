"""Group commit across processes (tempomem.spool): while one process holds the writer lock,
other processes' assertions ride its commit, each answered with its own facts or its own
error; an answer whose commit never happened is never taken (SPEC §1.4, §5)."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import reliability_workers as workers
from conftest import ts

import tempomem as tm
from tempomem.spool import Spool, dumps, loads

_CTX = multiprocessing.get_context("spawn")


def _offers(spool: Path, count: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if spool.exists() and sum(n.endswith(".req") for n in os.listdir(spool)) >= count:
            return
        time.sleep(0.01)
    raise AssertionError(f"{count} offers never came")


def _offered_while_held(mem: tm.Memory, writes: list[tuple[str, str, str]],
                        own: tuple[str, str, str, str]) -> tuple[tm.Fact, list[tuple]]:
    """Start a writer process per ``writes`` while holding the writer lock, so that each offers
    its assertion; once all wait, assert ``own`` (subject, predicate, object, valid_from) in this
    process: its commit takes the offers. Returns that fact and each writer's report."""
    out = _CTX.Queue()
    procs = [_CTX.Process(target=workers.offering_writer, args=(str(mem.path), *w, out)) for w in writes]
    with mem._engine.exclusive():
        for p in procs:
            p.start()
        _offers(mem._storage.spool_path(), len(procs))
        fact = mem.assert_fact(*own[:3], valid_from=own[3])
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
    return fact, results


def _last_commit_info(path: Path) -> dict:
    entries = sorted((path / "_delta_log").glob("*.json"))
    return next(json.loads(line)["commitInfo"] for line in entries[-1].read_text().splitlines()
                if "commitInfo" in line)


def test_other_processes_assertions_ride_the_lock_holders_commit(tmp_path):
    path = tmp_path / "store"
    mem = tm.open(path, create=True)
    version = mem._storage.latest_version()
    own, results = _offered_while_held(mem, [(f"agent-{i}", "step", f"s{i}") for i in range(3)],
                                       ("main", "step", "m", "2026-01-01"))
    assert all(tag == "ok" for tag, *_ in results), results
    facts = {fact.subject: fact for _, fact in results}
    assert sorted(facts) == ["agent-0", "agent-1", "agent-2"]
    # one commit: one recorded_at for all four, the log one version longer, naming its group
    assert mem._storage.latest_version() == version + 1
    assert {f.recorded_at for f in facts.values()} == {own.recorded_at}
    assert "tempomemGroup" in _last_commit_info(path)
    for subject, fact in facts.items():
        assert fact.object == f"s{subject[-1]}" and fact.status == "live"
        current = mem.current(subject)
        assert current["fact_id"].to_list() == [fact.fact_id]
        assert current["recorded_at"].to_list() == [own.recorded_at]
    assert os.listdir(mem._storage.spool_path()) == []
    assert mem.check().ok


def test_a_refused_offer_fails_alone_and_an_offer_on_a_key_taken_waits(tmp_path):
    path = tmp_path / "store"
    mem = tm.open(path, create=True)
    mem.declare("owner", "single", policy="reject")
    mem.assert_fact("door", "owner", "ada", valid_from="2025-01-01")
    # a conflict under reject, a plain assertion, and one on the key the holder asserts too
    own, results = _offered_while_held(mem, [("door", "owner", "bob"), ("k1", "p", "v1"), ("main", "step", "later")],
                                       ("main", "step", "first", "2025-06-01"))
    errors = [r for r in results if r[0] == "error"]
    assert [(kind, "overlapping value" in why) for _, kind, why in errors] == [("ConflictError", True)]
    landed = {r[1].subject: r[1] for r in results if r[0] == "ok"}
    assert landed["k1"].recorded_at == own.recorded_at  # rode the holder's commit
    # the offer on the holder's key was left for a commit of its own, after the holder's
    assert landed["main"].recorded_at > own.recorded_at
    assert mem.history("main")["object"].to_list() == ["first", "later"]
    assert mem.current("door")["object"].to_list() == ["ada"]
    assert mem.check().ok


def test_a_leader_dead_before_its_commit_leaves_answers_no_one_takes(tmp_path):
    path = tmp_path / "store"
    tm.open(path, create=True)
    ready, out = _CTX.Event(), _CTX.Queue()
    leader = _CTX.Process(target=workers.dying_leader, args=(str(path), ready, out))
    leader.start()
    assert ready.wait(120)
    writer = _CTX.Process(target=workers.offering_writer, args=(str(path), "offerer", "step", "once", out))
    writer.start()
    tag, fact = out.get(timeout=120)
    leader.join(60)
    writer.join(60)
    assert leader.exitcode == 3  # died inside the commit, after answering the offer
    assert tag == "ok" and fact.object == "once"
    mem = tm.open(path)
    # applied exactly once, by the offerer itself; nothing of the dead leader's group
    assert mem.history("offerer")["fact_id"].to_list() == [fact.fact_id]
    assert mem.history("leader").height == 0
    assert os.listdir(mem._storage.spool_path()) == []
    assert mem.check().ok


def test_an_answer_holds_only_once_its_commit_is_there(tmp_path):
    commits: set[tuple[int, str]] = set()
    spool = Spool(tmp_path / "spool", lambda version, group: (version, group) in commits)
    a = {"scope": "default", "subject": "a", "predicate": "p", "valid_from": datetime(2026, 1, 1, tzinfo=UTC)}
    b = {"scope": "default", "subject": "b", "predicate": "p"}
    first, second, third = spool.offer([[a]]), spool.offer([[b], [a]]), spool.offer([[b]])
    # a commit touching b takes the first offer only: the others touch b too, and wait
    assert spool.take({("default", "b", "p")}) == [(first, [[a]])]
    assert [name for name, _ in spool.offers()] == [second, third]
    spool.answer(first, [{"error": "ConflictError", "message": "no"}], "g1", version=7)
    assert spool.poll(first) is None  # answered, but its commit is not there yet: wait
    commits.add((7, "g1"))
    assert spool.poll(first) == [{"error": "ConflictError", "message": "no"}]
    # under the lock an answer without its commit is void, and removed with its offer
    spool.answer(second, [[], []], "g2", version=8)
    assert spool.collect(second) is None
    assert spool.collect(third) is None
    assert os.listdir(tmp_path / "spool") == []


def test_times_cross_the_spool_exactly():
    early = datetime(1969, 7, 20, 20, 17, 40, 123456, tzinfo=UTC)
    value = {"at": early, "list": [1.5, float("inf")], "none": None, "nested": {"$us": 5, "x": 1}}
    assert loads(dumps(value)) == value


def test_writers_taking_turns_keep_each_others_keys_up_to_date(tmp_path):
    """Two open stores (two engines, two state caches) on one folder, committing in turn on the
    same keys: each learns the other's commits from the files appended since, never from a stale
    state, and the history is the one a single writer makes."""
    one = tm.open(tmp_path / "s", create=True, predicates={"tags": "multi"})
    two = tm.open(tmp_path / "s")
    a = one.assert_fact("svc", "owner", "ada", valid_from="2026-01-01")
    one.assert_fact("svc", "tags", "x", valid_from="2026-01-01")
    b = two.assert_fact("svc", "owner", "bob", valid_from="2026-02-01")  # closes ada
    c = one.assert_fact("svc", "owner", "cy", valid_from="2026-03-01")  # one must see bob to close him
    assert [f.object for f in (a, b, c)] == ["ada", "bob", "cy"]
    history = one.history("svc", "owner")
    assert history["object"].to_list() == ["ada", "bob", "cy"]
    assert history["status"].to_list() == ["superseded", "superseded", "live"]
    assert history["superseded_by"].to_list() == [b.fact_id, c.fact_id, None]
    tag = two.assert_fact("svc", "tags", "y", valid_from="2026-01-01")
    two.correct(tag.fact_id, reason="not a tag")  # retracted by two: one must drop it
    one.assert_fact("svc", "tags", "z", valid_from="2026-01-01")
    assert sorted(one.current("svc", "tags")["object"].to_list()) == ["x", "z"]
    d = two.assert_fact("svc", "owner", "cy", valid_from="2026-04-01")  # a duplicate of one's live fact
    assert d.fact_id == c.fact_id
    assert one.check().ok


def test_a_writer_learns_its_keys_from_another_writers_large_batch(tmp_path):
    """Another writer's batch of more rows than the keys a writer holds is read for those keys
    alone (states.StateCache.sync); the rows of its keys in it must still reach the writer. Here
    two's batch of 2,001 rows closes one's ada and retracts one's tag among 2,000 other rows."""
    one = tm.open(tmp_path / "s", create=True, predicates={"tags": "multi"})
    two = tm.open(tmp_path / "s")
    ada = one.assert_fact("svc", "owner", "ada", valid_from="2026-01-01")
    tag = one.assert_fact("svc", "tags", "x", valid_from="2026-01-01")
    others = [{"subject": f"host-{i}", "predicate": "zone", "object": "a"} for i in range(2000)]
    [bob] = two.assert_many([{"subject": "svc", "predicate": "owner", "object": "bob",
                              "valid_from": ts("2026-02-01")}, *others])[:1]
    two.correct(tag.fact_id, reason="not a tag")
    cy = one.assert_fact("svc", "owner", "cy", valid_from="2026-03-01")  # one must close bob, not ada again
    one.assert_fact("svc", "tags", "z", valid_from="2026-01-01")
    history = one.history("svc", "owner")
    assert history.select("object", "valid_to", "status", "superseded_by").rows() == [
        ("ada", ts("2026-02-01"), "superseded", bob.fact_id),
        ("bob", ts("2026-03-01"), "superseded", cy.fact_id),
        ("cy", None, "live", None),
    ]
    assert ada.fact_id == history["fact_id"][0]
    assert one.current("svc", "tags")["object"].to_list() == ["z"]
    assert one.check().ok


def test_a_commit_through_deltalake_names_its_group_too(tmp_path):
    """A table whose protocol needs deltalake's writer commits through it; the group must still
    be found in that commit's commitInfo, or every answer of that commit would be void."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tempomem.schema import EVENT_SCHEMA
    from tempomem.storage import delta

    storage = tm.open(tmp_path / "s", create=True)._storage
    file = storage.new_file_path()
    pq.write_table(pa.Table.from_pylist([], schema=EVENT_SCHEMA), file)
    entry = (file.name, file.stat().st_size, file.stat().st_mtime_ns // 1_000_000, delta.parquet_stats(file))
    delta.op_add_files(str(storage.path), [entry], "append", None, {"tempomemGroup": "g-1"})
    version = storage.latest_version()
    assert storage.has_commit_info(version, "tempomemGroup", "g-1")
    assert not storage.has_commit_info(version, "tempomemGroup", "g-2")
