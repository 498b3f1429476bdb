"""A writer killed with SIGKILL at random points of its commits (SPEC §3: a commit is all or nothing).

A zygote process (it imported tempomem but never called deltalake) forks a writer for each
round; the writer commits in a loop from three threads whose requests the engine groups into
shared commits (paired values on two keys, 40-row batches, invalidations, corrections, and
the compactions they trigger) and logs ``begin``/``done`` around each commit. Once its first
commit returned, the test kills it after a random 0-0.5 s and then checks the store.

Decision on orphan files: a writer killed after writing a Parquet file but before its log
entry leaves a file the log never referenced. The data is never read (readers only see files
of the log), so no answer changes; but it is garbage on disk, and SPEC §8 says ``check()``
reports such a file. So after a kill we accept exactly one kind of problem,
``unreferenced_file``, and require that such files are absent from the current snapshot.

Default: 12 kills (about 35 s); ``TEMPOMEM_HEAVY=1``: 60 kills.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import reliability_workers as workers
from conftest import HEAVY

import tempomem as tm

KILLS = 60 if HEAVY else 12


class _Zygote:
    def __init__(self) -> None:
        here = Path(__file__).parent
        self.proc = subprocess.Popen([sys.executable, str(here / "reliability_workers.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=here)

    def ask(self, line: str) -> str:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(30)


def _log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    # the last line may be cut by the kill
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def _verify(path: str, records: list[dict]) -> None:
    mem = tm.open(path)  # the store always opens
    report = mem.check()
    kinds = set(report.problems["kind"].to_list())
    assert kinds <= {"unreferenced_file"}, report
    live_files = set(mem._storage.snapshot().files)
    for detail in report.problems["detail"].to_list():
        assert detail.split(" is not in the Delta log")[0] not in live_files

    con = mem.connect()
    pairs = con.sql("""SELECT subject, list(object ORDER BY object) FROM facts
                       WHERE subject IN ('svc', 'svc-mirror') GROUP BY subject""").fetchall()
    by_key = dict(pairs)
    # nothing half-written: both keys of a paired commit, all rows of a batch, or none
    assert by_key.get("svc", []) == by_key.get("svc-mirror", [])
    bulk = dict(con.sql("""SELECT object, count(*) FROM facts WHERE predicate = 'status'
                           GROUP BY object""").fetchall())
    assert all(n == workers.BULK_ROWS for n in bulk.values()), bulk
    facts = {r[0]: r[1:] for r in con.sql("SELECT fact_id, valid_to, status, reason FROM facts").fetchall()}

    done = [r for r in records if r["state"] == "done"]
    begun = {(r["op"], r.get("token") or r.get("id")) for r in records if r["state"] == "begin"}
    for r in done:  # every commit that returned before the kill is there
        if r["op"] == "pair":
            assert r["token"] in by_key["svc"]
        elif r["op"] == "bulk":
            assert bulk.get(r["token"]) == workers.BULK_ROWS
        elif r["op"] == "invalidate":
            assert facts[r["id"]][0] is not None and facts[r["id"]][1] == "ended"
        elif r["op"] == "correct":
            assert facts[r["id"]][1] == "retracted"
    # and nothing appears that no writer began
    assert {("pair", t) for t in by_key.get("svc", [])} <= begun
    assert {("bulk", t) for t in bulk} <= begun
    # exactly one current value of the paired key once anything was written
    if by_key.get("svc"):
        assert mem.current("svc").height == 1
    con.close()


@pytest.mark.parametrize("writers", [1, 2])
def test_killed_writers_leave_a_consistent_store(tmp_path, writers):
    """With two writer processes, one holds the lock while the other offers its assertions
    (tempomem.spool): the kills land in commits that carry another process's requests, and in
    processes whose requests wait in the spool."""
    rng = random.Random(20261130 + writers)
    path = str(tmp_path / "store")
    tm.open(path, create=True)
    log = tmp_path / "commits.jsonl"
    zygote = _Zygote()
    killed_mid_commit = 0
    rounds = KILLS // writers
    try:
        for round_no in range(rounds):
            before = len(_log(log))
            pids = [int(zygote.ask(f"fork {path} {round_no * writers + w} {log}")) for w in range(writers)]
            # wait until a writer's first commit returned (its start-up time depends on the
            # machine's load), then kill the writers at random points of their next commits
            deadline = time.monotonic() + 60
            while not any(r["state"] == "done" for r in _log(log)[before:]) and time.monotonic() < deadline:
                time.sleep(0.005)
            for pid in rng.sample(pids, len(pids)):
                time.sleep(rng.uniform(0, 0.5 / writers))
                os.kill(pid, signal.SIGKILL)
            for pid in pids:
                status = int(zygote.ask(f"reap {pid}"))
                assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
            records = _log(log)
            if records[before:] and records[-1]["state"] == "begin":
                killed_mid_commit += 1
            _verify(path, records)
    finally:
        zygote.close()
    done = sum(1 for r in _log(log) if r["state"] == "done")
    assert done >= rounds, "every round got commits through before its kills"
    assert killed_mid_commit >= rounds // 4, f"only {killed_mid_commit} kills landed inside a commit"


def test_an_orphan_file_is_reported_never_read_and_cleaned_by_compaction(tmp_path):
    """What a writer killed between writing its Parquet file and its log entry leaves behind."""
    path = tmp_path / "store"
    mem = tm.open(path, create=True)
    kept = mem.assert_fact("svc", "instance_type", "m5.xlarge", valid_from="2026-01-01")
    # a complete Parquet file of a commit that never happened (another value of the same key)
    ghost = mem.reader.connection().sql("SELECT * REPLACE ('ghost' AS object) FROM _tm_events").to_arrow_table()
    orphan = path / "part-00000-killed-writer-c000.zstd.parquet"
    pq.write_table(ghost, orphan)
    report = mem.check()
    assert report.problems["kind"].to_list() == ["unreferenced_file"]
    assert str(orphan) in report.problems["detail"][0]
    assert mem.as_of("2026-06-01", "svc")["fact_id"].to_list() == [kept.fact_id]
    assert mem.history("svc")["object"].to_list() == ["m5.xlarge"]
    # a young orphan survives compaction (it could belong to a write in flight); an old one goes
    hours_ago = time.time() - 2 * 3600
    os.utime(orphan, (hours_ago, hours_ago))
    young = path / "part-00000-in-flight-c000.zstd.parquet"
    pq.write_table(ghost, young)
    for i in range(32):  # enough small commits to trigger compaction
        mem.assert_fact(f"filler-{i}", "status", "ok")
    assert len(mem._storage.snapshot().files) < 32, "compaction ran"
    assert not orphan.exists() and young.exists()
    assert mem.check().problems["detail"].to_list() == [f"{young} is not in the Delta log; it is never read"]
    young.unlink()
    assert mem.check().ok
    assert mem.as_of("2026-06-01", "svc")["fact_id"].to_list() == [kept.fact_id]
