"""A child forked after its parent ran a query: Polars cannot run there, and tempomem says so.

Polars' thread pool does not survive a fork; before tempomem.forks, such a child's first query
waited forever in ``pl.from_arrow``. The fork happens in a subprocess of its own (never in the
test runner), bounded by a timeout, so a hang fails the test instead of the run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

_SCRIPT = textwrap.dedent("""
    import os, sys
    import tempomem as tm

    def main():
        mem = tm.open(sys.argv[1], create=True)
        mem.assert_fact("svc", "instance_type", "m5.large")
        print("parent reads", mem.current("svc")["object"].to_list(), flush=True)
        pid = os.fork()
        if pid == 0:
            try:
                mem.current("svc")
                print("child read", flush=True)
            except tm.TempomemError as exc:
                print("child refused:", exc, flush=True)
            print("child wrote", mem.assert_fact("svc", "instance_type", "m5.xlarge").object, flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        print("parent reads", mem.current("svc")["object"].to_list(), flush=True)

    if __name__ == "__main__":
        main()
""")


def test_a_child_forked_after_a_query_gets_an_error_naming_spawn_and_its_writes_land(tmp_path) -> None:
    script = tmp_path / "fork_after_query.py"
    script.write_text(_SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "store")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "parent reads ['m5.large']"
    assert lines[1].startswith("child refused: this process was forked from one that had started Polars' threads")
    assert "'spawn'" in lines[1]
    assert lines[2:] == ["child wrote m5.xlarge", "parent reads ['m5.xlarge']"]


_WRITER = textwrap.dedent("""
    import os, sys
    import polars as pl
    import tempomem as tm

    def main():
        mem = tm.open(sys.argv[1], create=True)
        mem.assert_fact("svc", "instance_type", "m5.large")
        mem.current("svc")  # the parent's Polars threads start
        rows = [{"subject": f"host-{i}", "predicate": "zone", "object": "a"} for i in range(3000)]
        pid = os.fork()
        if pid == 0:
            print("child assert_many", len(mem.assert_many(rows)), flush=True)
            for name, call in [("polars input", lambda: mem.assert_many(pl.DataFrame(rows[:5]))),
                               ("backfill", lambda: mem.backfill(rows[:5])),
                               ("forget", lambda: mem.forget("svc", reason="gdpr"))]:
                try:
                    call()
                    print("child", name, "ran", flush=True)
                except tm.TempomemError as exc:
                    print("child", name, "refused:", "'spawn'" in str(exc), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        mem.assert_fact("svc", "instance_type", "m5.xlarge")  # the writer lock is free
        print("parent counts", mem.sql("SELECT count(*) FROM facts").fetchall()[0][0], flush=True)

    if __name__ == "__main__":
        main()
""")


def test_a_forked_writer_lands_a_large_batch_and_is_refused_what_needs_polars(tmp_path) -> None:
    """A batch of 3,000 dicts goes the set-based way, whose answers were made with Polars: the
    child hung after its commit, holding the store's writer lock, so that the parent's next
    write waited forever too. Now its Facts come from Arrow alone; what still needs Polars
    (a Polars input, a backfill's report, forget's rewrite) is refused before the lock is taken,
    and writes nothing."""
    script = tmp_path / "forked_writer.py"
    script.write_text(_WRITER)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "store")], capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "child assert_many 3000",
        "child polars input refused: True",
        "child backfill refused: True",
        "child forget refused: True",
        "parent counts 3002",  # m5.large closed by m5.xlarge: two facts of svc, and the batch
    ]
