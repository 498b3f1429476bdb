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
