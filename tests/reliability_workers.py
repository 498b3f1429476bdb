"""Child-process bodies for the reliability tests (concurrent writers, readers, killed writers).

They live in a plain module, not a test file, so that ``spawn`` children can import them by
name. Every child reports what it saw or did to its parent; the assertions stay in the tests.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

#: The two keys every paired write touches; one commit writes both or neither.
PAIR_KEYS = (("svc", "instance_type"), ("svc-mirror", "instance_type"))
BULK_ROWS = 40
#: Threads of one crash writer: their commits are grouped, so a kill lands inside group commits.
CRASH_THREADS = 3


def pair_rows(token: str) -> list[dict[str, Any]]:
    """One assert_many batch: the same object on both pair keys."""
    return [{"subject": s, "predicate": p, "object": token} for s, p in PAIR_KEYS]


# -- concurrent writers and readers (multiprocessing targets) ---------------------------------

def writer(path: str, index: int, revisions: int, start: Any, results: Any) -> None:
    """Make ``revisions`` paired commits as fast as possible once ``start`` is set."""
    import tempomem as tm

    try:
        mem = tm.open(path)
        start.wait(60)
        for j in range(revisions):
            token = f"w{index}r{j}"
            facts = mem.assert_many(pair_rows(token))
            results.put(("ok", index, j, token, [f.fact_id for f in facts],
                         [f.recorded_at.isoformat() for f in facts]))
    except BaseException as exc:  # the parent asserts that nothing lands here
        results.put(("error", index, -1, repr(exc), [], []))


def reader(path: str, stop: Any, results: Any) -> None:
    """Read both pair keys in one snapshot, over and over, until ``stop`` is set.

    Reports how many reads it made, the violations, the fact count of its last read (made
    after ``stop``) and how many different counts it saw. A violation: the two keys differ
    (half a batch visible), more than one value of ``svc`` is current, or a later read sees
    fewer facts than an earlier one.
    """
    import tempomem as tm

    reads, problems, last_count, seen = 0, [], 0, set()
    try:
        mem = tm.open(path)
        while True:
            final = stop.is_set()  # the read after the writers finished must see every commit
            con = mem.connect()  # one connection = one committed version
            rows = con.sql(
                "SELECT subject, object, recorded_at FROM facts WHERE subject IN ('svc', 'svc-mirror')"
            ).fetchall()
            live = con.sql("SELECT count(*) FROM current_facts() WHERE subject = 'svc'").fetchall()[0][0]
            con.close()
            by_key: dict[str, set[tuple[Any, Any]]] = {"svc": set(), "svc-mirror": set()}
            for subject, obj, recorded in rows:
                by_key[subject].add((obj, recorded))
            if by_key["svc"] != by_key["svc-mirror"]:
                problems.append(f"half a batch: {sorted(by_key['svc'] ^ by_key['svc-mirror'])[:4]}")
            if live > 1:
                problems.append(f"{live} current values of svc")
            if len(by_key["svc"]) < last_count:
                problems.append(f"went back from {last_count} to {len(by_key['svc'])} facts")
            last_count = len(by_key["svc"])
            seen.add(last_count)
            reads += 1
            if final:
                break
    except BaseException as exc:
        problems.append(repr(exc))
    results.put(("reader", reads, problems, last_count, len(seen)))


# -- writers of other processes, handed to the lock holder's commit (tempomem.spool) ---------

def offering_writer(path: str, subject: str, predicate: str, obj: str, out: Any) -> None:
    """One assert_fact while another process holds the writer lock: it is offered, and answered."""
    import tempomem as tm

    try:
        out.put(("ok", tm.open(path).assert_fact(subject, predicate, obj, valid_from="2026-01-01")))
    except tm.TempomemError as exc:
        out.put(("error", type(exc).__name__, str(exc)))


def dying_leader(path: str, ready: Any, out: Any) -> None:
    """Hold the writer lock until one offer waits, then commit it with an assertion of its own,
    dying after the offer's answer is written and before the commit (``os._exit``)."""
    import tempomem as tm
    from tempomem import engine

    def die(self: Any, table: Any, recorded_at: Any, group: Any = None) -> int:
        os._exit(3)

    engine.Engine.commit = die  # type: ignore[method-assign]
    mem = tm.open(path)
    spool = mem._storage.spool_path()
    with mem._engine.exclusive():
        ready.set()
        while not (spool.exists() and any(n.endswith(".req") for n in os.listdir(spool))):
            time.sleep(0.01)
        mem.assert_fact("leader", "step", "never", valid_from="2026-01-01")
    out.put("not dead")


# -- a writer that gets killed: forked from a zygote that never touched deltalake -------------

def _log(fd: int, record: dict[str, Any]) -> None:
    os.write(fd, (json.dumps(record) + "\n").encode())


def crash_writer(path: str, seed: int, log_path: str, threads: int = CRASH_THREADS) -> None:
    """Commit forever from ``threads`` threads of one store (pairs, bulk batches, invalidations,
    corrections), logging each return; the threads' requests meet in group commits.

    ``begin`` is logged before a commit and ``done`` after it returned, so the parent knows
    which commits must be present (done) and which may be present or absent (begun only).
    """
    import threading

    import tempomem as tm

    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    mem = tm.open(path)
    workers = [threading.Thread(target=_crash_loop, args=(mem, f"{seed}t{t}", random.Random(seed * 100 + t), fd),
                                daemon=True) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def _crash_loop(mem: Any, seed: str, rng: random.Random, fd: int) -> None:
    bulk_ids: list[str] = []
    for j in range(10_000):
        token = f"s{seed}c{j}"
        roll = rng.random()
        if roll < 0.15 and bulk_ids:
            fact_id = bulk_ids.pop(rng.randrange(len(bulk_ids)))
            at = f"2026-{rng.randint(6, 11):02d}-01"
            _log(fd, {"op": "invalidate", "id": fact_id, "at": at, "state": "begin"})
            mem.invalidate(fact_id, at=at, reason=f"ended {token}")
            _log(fd, {"op": "invalidate", "id": fact_id, "at": at, "state": "done"})
        elif roll < 0.25 and bulk_ids:
            fact_id = bulk_ids.pop(rng.randrange(len(bulk_ids)))
            _log(fd, {"op": "correct", "id": fact_id, "state": "begin"})
            mem.correct(fact_id, reason=f"wrong {token}")
            _log(fd, {"op": "correct", "id": fact_id, "state": "done"})
        elif roll < 0.45:
            rows = [{"subject": f"bulk-{token}-{i}", "predicate": "status", "object": token,
                     "valid_from": "2026-01-01"} for i in range(BULK_ROWS)]
            _log(fd, {"op": "bulk", "token": token, "state": "begin"})
            facts = mem.assert_many(rows)
            bulk_ids.extend(f.fact_id for f in facts[:3])
            _log(fd, {"op": "bulk", "token": token, "state": "done"})
        else:
            _log(fd, {"op": "pair", "token": token, "state": "begin"})
            mem.assert_many(pair_rows(token))
            _log(fd, {"op": "pair", "token": token, "state": "done"})


def zygote() -> None:
    """Fork crash writers on request: reads ``fork PATH SEED LOG`` / ``reap PID`` / ``quit``.

    This process imports tempomem but never calls deltalake, so its forked children run
    deltalake in-process (a SIGKILL then really interrupts the commit); a child forked from a
    process that already used deltalake would hand its commits to a spawned worker instead.
    """
    import tempomem  # noqa: F401  (warm imports before forking, so children start fast)

    for line in sys.stdin:
        cmd, *args = line.split()
        if cmd == "fork":
            pid = os.fork()
            if pid == 0:
                try:
                    crash_writer(args[0], int(args[1]), args[2])
                finally:
                    os._exit(0)
            print(pid, flush=True)
        elif cmd == "reap":
            _, status = os.waitpid(int(args[0]), 0)
            print(status, flush=True)
        elif cmd == "quit":
            return


if __name__ == "__main__":
    zygote()
