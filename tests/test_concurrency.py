"""Two processes writing one key at once lose nothing (SPEC §3), with spawn and with fork."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

import tempomem as tm

N = 6


def _writer(path: str, name: str, out) -> None:
    mem = tm.open(path)
    ids = []
    for i in range(N):
        f = mem.assert_fact("svc", "owner", f"{name}-{i}", valid_from=f"2025-01-01T00:{len(ids):02d}:00Z",
                            artifact=f"{name}-{i}")
        ids.append(f.fact_id)
    out.put((name, ids))


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_two_processes_on_one_key_lose_nothing(tmp_path: Path, method: str) -> None:
    path = str(tmp_path / "store")
    parent = tm.open(path, create=True)
    parent.assert_fact("warmup", "p", "v")  # the parent has used deltalake before forking
    ctx = mp.get_context(method)
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, name, out)) for name in ("a", "b")]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=240) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    history = parent.history("svc", "owner")
    written = {f for ids in results.values() for f in ids}
    assert set(history["fact_id"]) == written
    assert history.height == 2 * N
    assert parent.current("svc", "owner").height == 1
    assert parent.history("svc", revisions=True)["recorded_at"].n_unique() == 2 * N
    assert parent.check().ok
