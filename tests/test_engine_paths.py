"""The set-based write path (rounds.sql) gives exactly the facts and revisions of the one-row
path (writepath.Batch), for random batches, and a replay equals the same rows asserted one
belief time after another."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, timedelta

import polars as pl
import pytest
from conftest import HEAVY, TestClock, ts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tempomem as tm
from tempomem import engine, rounds, states
from tempomem.backfill import resolve
from tempomem.temporal import decisions

_DAY = timedelta(days=1)
_BASE = ts("2025-01-01")
# The random batches' valid times start at one of these, the same for a whole example: starts
# before 1970 are negative microseconds, which SQL that orders or keys on them must survive.
_ERA = st.shared(st.sampled_from([_BASE, ts("1969-12-28"), ts("1601-01-01")]), key="era")
_PREDICATES = {"p": "single", "m": "multi", "r": "single"}

# CI runs a smaller sample (each example builds two stores); TEMPOMEM_HEAVY=1 runs five times as many.
_EXAMPLES = 60 if HEAVY else 12


def _open(path, clock):
    mem = tm.open(path, create=True, clock=clock, predicates={"m": "multi"})
    mem.declare("r", "single", policy="reject")
    return mem


@st.composite
def _row(draw):
    base = draw(_ERA)
    start = draw(st.one_of(st.none(), st.integers(0, 6)))
    length = draw(st.one_of(st.none(), st.integers(0, 4)))
    row = {"subject": draw(st.sampled_from(["a", "b"])), "predicate": draw(st.sampled_from(list(_PREDICATES))),
           "object": draw(st.sampled_from(["x", "y", "z"])),
           "valid_from": None if start is None else base + start * _DAY,
           "valid_to": None if length is None else base + ((start or 0) + length) * _DAY}
    if draw(st.booleans()):
        row["artifact"] = draw(st.sampled_from(["m1", "m2"]))
    if draw(st.integers(0, 4)) == 0:
        row["reference_time"] = base + draw(st.integers(0, 8)) * _DAY
    return row


_step = st.one_of(
    st.tuples(st.just("assert"), st.lists(_row(), min_size=1, max_size=6)),
    st.tuples(st.just("invalidate"), st.integers(0, 20), st.builds(lambda base, d: base + d * _DAY, _ERA,
                                                                    st.integers(0, 9))),
    st.tuples(st.just("correct"), st.integers(0, 20)),
)


def _canonical(mem: tm.Memory) -> pl.DataFrame:
    """Every revision, ids replaced by their rank (ids sort by creation in both paths)."""
    rows = mem.sql("SELECT * FROM revisions").pl()
    ids = sorted(rows["fact_id"].unique().to_list())
    names = {fact_id: f"F{i}" for i, fact_id in enumerate(ids)}
    reason = pl.col("reason")
    for fact_id, name in names.items():
        reason = reason.str.replace_all(fact_id, name, literal=True)
    return (rows.with_columns(fact_id=pl.col("fact_id").replace_strict(names),
                              superseded_by=pl.col("superseded_by").replace_strict(names, default=None),
                              reason=reason)
            .drop("ingested_at").sort("fact_id", "revision"))


def _run(mem: tm.Memory, clock: TestClock, steps) -> list[str]:
    """Apply the steps, one commit each a day apart; return what each step raised."""
    outcomes = []
    for i, step in enumerate(steps):
        clock.set(ts("2026-01-01") + i * _DAY)
        try:
            if step[0] == "assert":
                mem.assert_many([dict(r) for r in step[1]])
            else:
                ids = sorted(mem.sql("SELECT fact_id FROM facts").pl()["fact_id"].to_list())
                if not ids:
                    outcomes.append("none")
                    continue
                target = ids[step[1] % len(ids)]
                if step[0] == "invalidate":
                    mem.invalidate(target, at=step[2], reason="ended")
                else:
                    mem.correct(target, reason="wrong")
            outcomes.append("ok")
        except tm.TempomemError as exc:
            outcomes.append(type(exc).__name__)
    return outcomes


def _parts_read(monkeypatch) -> list[str]:
    """The names of the SQL parts the set-based path reads from now on, in order (a list that grows)."""
    parts: list[str] = []
    real = rounds._statements()

    class Seen(dict):
        def __getitem__(self, part):
            parts.append(part)
            return super().__getitem__(part)

    monkeypatch.setattr(rounds, "_statements", lambda: Seen(real))
    return parts


def _both_paths(folder, monkeypatch, steps, busy=False) -> tuple[tm.Memory, tm.Memory]:
    """Run the steps on the one-row path and on the set-based path (``busy``: every
    last_write_wins key decided as a busy one, closedform_busy.sql); assert the same outcomes
    and the same revisions; return the two stores."""
    one_clock, set_clock = TestClock(), TestClock()
    one, set_based = _open(folder / "one", one_clock), _open(folder / "set", set_clock)
    with monkeypatch.context() as patch:
        patch.setattr(engine, "SET_BASED_FROM", 10**9)
        expected = _run(one, one_clock, steps)
        patch.setattr(engine, "SET_BASED_FROM", 0)
        patch.setattr(rounds, "WINDOW_FROM", 1)  # passes after the first read a few operations a key
        if busy:
            patch.setattr(rounds, "BUSY_FROM", 0)
        got = _run(set_based, set_clock, steps)
    assert got == expected
    assert _canonical(set_based).equals(_canonical(one))
    return one, set_based


@settings(max_examples=_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_step, min_size=1, max_size=5), busy=st.booleans())
def test_set_based_path_equals_one_row_path(tmp_path_factory, monkeypatch, steps, busy):
    one, set_based = _both_paths(tmp_path_factory.mktemp("paths"), monkeypatch, steps, busy)
    assert set_based.check().ok == one.check().ok


@settings(max_examples=_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_step, min_size=1, max_size=6), every=st.sampled_from([1, 2]))
def test_a_writer_holding_its_keys_as_rows_writes_what_one_holding_states_writes(tmp_path_factory, monkeypatch,
                                                                                 steps, every):
    """The one-row path keeps its keys' states between commits. Against it, the same path
    reading its keys again from the store before every commit (``every`` 1) or every other
    one (2), each key held as rows whatever its size (states.KeyFacts, ``_ROWS_FROM`` 0), a
    state made of a fact only when a commit can touch it: the same outcomes and revisions."""
    folder = tmp_path_factory.mktemp("rows")
    kept_clock, rows_clock = TestClock(), TestClock()
    kept, as_rows = _open(folder / "kept", kept_clock), _open(folder / "rows", rows_clock)
    real_sync, commits = states.StateCache.sync, [0]

    def forgetful_sync(cache, storage):
        commits[0] += 1
        if commits[0] % every == 0:
            cache.forget_all(-1, None)
        real_sync(cache, storage)

    with monkeypatch.context() as patch:
        patch.setattr(engine, "SET_BASED_FROM", 10**9)
        expected = _run(kept, kept_clock, steps)
        patch.setattr(states, "_ROWS_FROM", 0)
        patch.setattr(states.StateCache, "sync", forgetful_sync)
        got = _run(as_rows, rows_clock, steps)
    assert got == expected
    assert _canonical(as_rows).equals(_canonical(kept))


@st.composite
def _log_batch(draw):
    """A batch in the shape of a real log, which the set-based path takes in closed form: open
    facts with known starts, mostly in order of start, the odd late or bounded one among them."""
    base, rows, day = draw(_ERA), [], draw(st.integers(0, 3))
    for _ in range(draw(st.integers(1, 12))):
        day += draw(st.sampled_from([0, 1, 1, 2, -3]))
        row = {"subject": draw(st.sampled_from(["a", "b"])), "predicate": draw(st.sampled_from(["p", "m"])),
               "object": draw(st.sampled_from(["x", "y"])), "valid_from": base + day * _DAY}
        if draw(st.integers(0, 7)) == 0:
            row["valid_to"] = base + (day + 2) * _DAY
        if draw(st.booleans()):
            row["artifacts"] = draw(st.lists(st.sampled_from(["m1", "m2", "m3"]), max_size=2, unique=True))
        rows.append(row)
    return ("assert", rows)


@settings(max_examples=_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.one_of(_log_batch(), st.tuples(st.just("correct"), st.integers(0, 20))),
                      min_size=1, max_size=4), busy=st.booleans())
def test_log_shaped_batches_equal_the_one_row_path(tmp_path_factory, monkeypatch, steps, busy):
    """The closed forms (closedform.sql, closedform_busy.sql) and the rounds after them against
    the one-row path."""
    _both_paths(tmp_path_factory.mktemp("logs"), monkeypatch, steps, busy)


def test_a_key_with_many_assertions_in_one_batch(tmp_path, monkeypatch):
    """Hand-checked: 300 assertions of one single-valued key, a day apart, objects a a b b a a …:
    150 facts, each closed by the next at its start; the runs' second rows are duplicates."""
    clock = TestClock("2026-02-01")
    mem = _open(tmp_path / "s", clock)
    monkeypatch.setattr(engine, "SET_BASED_FROM", 0)
    rows = [{"subject": "k", "predicate": "p", "object": "ab"[(i // 2) % 2], "valid_from": _BASE + i * _DAY,
             "artifact": f"e{i}"} for i in range(300)]
    facts = mem.assert_many(rows)
    assert [f.fact_id == facts[i - 1].fact_id for i, f in enumerate(facts) if i] == [i % 2 == 1 for i in range(1, 300)]
    history = mem.history("k", revisions=True)
    assert history.height == 150  # one commit: one revision per fact, its final state
    assert history["status"].value_counts().sort("status").rows() == [("live", 1), ("superseded", 149)]
    last = mem.current("k")
    assert (last["object"][0], last["valid_from"][0], list(last["artifacts"][0])) == ("b", _BASE + 298 * _DAY,
                                                                                   ["e298", "e299"])
    third = mem.as_of(_BASE + 5 * _DAY, "k")
    assert (third["object"][0], third["valid_to"][0]) == ("a", _BASE + 6 * _DAY)


@pytest.mark.parametrize("busy_from", [rounds.BUSY_FROM, 0])
def test_late_assertions_merge_or_cut_into_the_timeline(tmp_path, monkeypatch, busy_from):
    """Hand-checked, SPEC §5 one row at a time: a replayed log of one single-valued key whose
    late rows (a start before the latest) merge into a fact of their object that ends after
    their start, the earliest-recorded, or else cut the fact holding their start; then a batch
    doing the same against stored facts that have ended. Whether the key is decided as a busy
    one (closedform_busy.sql) or in passes that stop at each cut (closedform.sql)."""
    monkeypatch.setattr(rounds, "BUSY_FROM", busy_from)
    def day(d):
        return _BASE + (d - 1) * _DAY

    mem = _open(tmp_path / "s", TestClock("2026-03-01"))
    rows = [("a", 1), ("b", 5), ("a", 10), ("b", 3, ["late"]), ("a", 2), ("c", 7), ("a", 6), ("b", 12)]
    mem.backfill([{"subject": "k", "predicate": "p", "object": o, "valid_from": day(d),
                   "recorded_at": ts("2026-01-01") + i * _DAY, "artifacts": more[0] if more else []}
                  for i, (o, d, *more) in enumerate(rows)], resolve=True)

    def named_revisions():
        """The revisions in belief order, each fact named F0, F1, ... as it first appears."""
        frame = mem.sql("SELECT * FROM revisions ORDER BY recorded_at, valid_from").pl()
        names = {f: f"F{i}" for i, f in enumerate(frame["fact_id"].unique(maintain_order=True))}
        return [dict(r, name=names[r["fact_id"]], successor=names.get(r["superseded_by"]))
                for r in frame.iter_rows(named=True)]

    def revisions():
        return [(r["name"], r["object"], r["valid_from"], r["valid_to"], r["status"], r["successor"],
                 list(r["artifacts"])) for r in named_revisions()]

    def superseded_at(name):
        return [r["superseded_at"] for r in named_revisions() if r["name"] == name]

    assert revisions() == [
        ("F0", "a", day(1), None, "live", None, []),
        ("F0", "a", day(1), day(5), "superseded", "F1", []),         # b@5 closes it
        ("F1", "b", day(5), None, "live", None, []),
        ("F1", "b", day(5), day(10), "superseded", "F2", []),        # a@10: F0 ended before, a new fact
        ("F2", "a", day(10), None, "live", None, []),
        ("F1", "b", day(5), day(10), "superseded", "F2", ["late"]),  # b@3 merges into F1 (ends after 3)
        # a@2 merges into F0 (ends at 5, recorded before F2): no artifact, no revision
        ("F1", "b", day(5), day(7), "superseded", "F3", ["late"]),   # c@7: no c after 7, it cuts F1
        ("F3", "c", day(7), day(10), "superseded", "F2", []),        # ... and ends where F2 starts
        # a@6 merges into F2 (ends after 6)
        ("F2", "a", day(10), day(12), "superseded", "F4", []),       # b@12 is in order
        ("F4", "b", day(12), None, "live", None, []),
    ]
    # F1 closed by F2's commit (third), kept that time when b@3 grew it, then cut by c@7 (sixth)
    assert superseded_at("F1") == [None, ts("2026-01-03"), ts("2026-01-03"), ts("2026-01-06")]
    monkeypatch.setattr(engine, "SET_BASED_FROM", 0)
    mem.assert_many([{"subject": "k", "predicate": "p", "object": "b", "valid_from": day(6), "artifact": "x"},
                     {"subject": "k", "predicate": "p", "object": "c", "valid_from": day(8)},
                     {"subject": "k", "predicate": "p", "object": "d", "valid_from": day(11)}])
    assert revisions()[10:] == [
        ("F1", "b", day(5), day(7), "superseded", "F3", ["late", "x"]),  # b@6 merges into the ended F1
        # c@8 merges into the ended F3; d@11 cuts F2 and ends where F4 starts
        ("F2", "a", day(10), day(11), "superseded", "F5", []),
        ("F5", "d", day(11), day(12), "superseded", "F4", []),
    ]


@pytest.mark.parametrize("busy_from", [rounds.BUSY_FROM, 0])
def test_rows_with_an_end_leave_gaps_close_or_end_the_latest_fact(tmp_path, monkeypatch, busy_from):
    """Hand-checked, SPEC §5 one row at a time, on a key decided as a busy one or not: a row with
    an end closes the fact holding its start and leaves a gap after its end; one starting in
    that gap ends at the next start; a duplicate with an end gives it to the open latest fact
    (and none to one that has an end); a later row closes the ended fact at its start."""
    monkeypatch.setattr(rounds, "BUSY_FROM", busy_from)
    parts = _parts_read(monkeypatch)

    def day(d):
        return _BASE + (d - 1) * _DAY

    mem = _open(tmp_path / "s", TestClock("2026-03-01"))
    rows = [("a", 1, None), ("b", 5, 8), ("c", 10, None), ("a", 9, 12), ("c", 11, 20), ("b", 6, 7), ("d", 15, None)]
    mem.backfill([{"subject": "k", "predicate": "p", "object": o, "valid_from": day(f),
                   "valid_to": None if t is None else day(t), "recorded_at": ts("2026-01-01") + i * _DAY}
                  for i, (o, f, t) in enumerate(rows)], resolve=True)
    frame = mem.sql("SELECT * FROM revisions ORDER BY recorded_at, valid_from").pl()
    names = {f: f"F{i}" for i, f in enumerate(frame["fact_id"].unique(maintain_order=True))}
    assert [(names[r["fact_id"]], r["object"], r["valid_from"], r["valid_to"], r["status"],
             names.get(r["superseded_by"])) for r in frame.iter_rows(named=True)] == [
        ("F0", "a", day(1), None, "live", None),
        ("F0", "a", day(1), day(5), "superseded", "F1"),       # b@5-8 closes it
        ("F1", "b", day(5), day(8), "ended", None),            # ... and leaves [8, ...) empty
        ("F2", "c", day(10), None, "live", None),              # c@10: nothing holds 10
        ("F3", "a", day(9), day(10), "superseded", "F2"),      # a@9-12 in the gap ends where F2 starts
        ("F2", "c", day(10), day(20), "ended", None),          # c@11-20 merges into F2, giving its end
        # b@6-7 merges into F1, which has an end: no revision
        ("F2", "c", day(10), day(15), "superseded", "F4"),     # d@15 closes F2
        ("F4", "d", day(15), None, "live", None),
    ]
    if busy_from == 0:  # one pass took every row, the end given to F2 too
        assert (parts.count("busy_emit"), parts.count("round")) == (1, 0)


def test_a_cut_after_a_close_keeps_the_close(tmp_path, monkeypatch):
    """Found by CI's hypothesis run: y@1, x@6, y@6 (retracts x@6), then a late x@1 retracts the
    first fact, which x@6 had already closed at 6: the retraction keeps that end and successor."""
    rows = [("y", 1), ("x", 6), ("y", 6), ("x", 1)]
    steps = [("assert", [{"subject": "b", "predicate": "p", "object": o, "valid_from": _BASE + (d - 1) * _DAY}
                         for o, d in rows])]
    one, _ = _both_paths(tmp_path, monkeypatch, steps)
    first = one.history("b", revisions=True).sort("valid_from", "recorded_at").row(0, named=True)
    assert (first["object"], first["status"], first["valid_to"]) == ("y", "retracted", _BASE + 5 * _DAY)


@pytest.mark.parametrize("busy", [False, True])
def test_starts_before_1970_and_centuries_ahead_order_a_key_as_any_others(tmp_path, monkeypatch, busy):
    """The closed form compares operations by (valid_from, op) as one number built from
    valid_from's microseconds, which are negative before 1970. x@1950, a late y@1900, x again
    in 1969 (a repeat of x), z@2500, a late y@1960 that cuts into x: as the one-row path
    decides, in one batch and in a batch each (hand-checked below)."""
    rows = [{"subject": "a", "predicate": "p", "object": o, "valid_from": ts(t)}
            for o, t in [("x", "1950-01-01"), ("y", "1900-06-01"), ("x", "1969-12-31T23:59:59"),
                         ("z", "2500-01-01"), ("y", "1960-01-01")]]
    for name, steps in (("together", [("assert", rows)]), ("apart", [("assert", [row]) for row in rows])):
        (tmp_path / name).mkdir()
        _, set_based = _both_paths(tmp_path / name, monkeypatch, steps, busy)
        held = {t: set_based.as_of(ts(t), "a", "p")["object"].to_list()
                for t in ("1899-01-01", "1920-01-01", "1955-01-01", "1965-01-01", "2499-12-31", "2600-01-01")}
        assert held == {"1899-01-01": [], "1920-01-01": ["y"], "1955-01-01": ["x"], "1965-01-01": ["y"],
                        "2499-12-31": ["y"], "2600-01-01": ["z"]}


@pytest.mark.parametrize("busy", [False, True])
def test_an_empty_fact_is_never_the_next_start_of_a_late_assertion(tmp_path, monkeypatch, busy):
    """Found by hypothesis: x@6 (open), then x over the empty span [4, 4), then a late z@1.
    The empty fact overlaps nothing (SPEC §5, "incl. empty spans"), so z is closed at 6 by
    x@6, not at 4; the closed form took the empty fact's start for the next one's. On the set
    path a batch of its own each (the empty fact stored before the late row), and all three in
    one batch (with ``busy``, decided as a busy key first, the rounds after)."""
    day = lambda n: _BASE + (n - 1) * _DAY  # noqa: E731
    rows = [{"subject": "a", "predicate": "p", "object": "x", "valid_from": day(6)},
            {"subject": "a", "predicate": "p", "object": "x", "valid_from": day(4), "valid_to": day(4)},
            {"subject": "a", "predicate": "p", "object": "z", "valid_from": day(1)}]
    apart, together = tmp_path / "apart", tmp_path / "together"
    apart.mkdir(), together.mkdir()
    for folder, steps in ((apart, [("assert", [row]) for row in rows]), (together, [("assert", rows)])):
        _, set_based = _both_paths(folder, monkeypatch, steps, busy)
        got = set_based.history("a", "p")
        x6 = got.filter(pl.col("valid_from") == day(6)).row(0, named=True)
        z = got.filter(pl.col("object") == "z").row(0, named=True)
        assert (x6["status"], x6["valid_to"]) == ("live", None)
        assert (z["valid_to"], z["status"], z["superseded_by"]) == (day(6), "superseded", x6["fact_id"])


def test_passes_that_read_a_few_operations_a_key_change_nothing(tmp_path, monkeypatch):
    """A replay whose busiest key cuts into its timeline every few rows (rows a minute apart,
    starts up to an hour late, as a metric re-asserted with a reporting lag) takes a dozen
    passes. Reading two operations a key per pass (more when a key takes all it read), and
    renumbering what is left in place, gives exactly the revisions of reading all of them."""
    rng = random.Random(5)
    at = ts("2026-01-01")
    log = []
    for i in range(300):
        recorded = at + timedelta(minutes=i)
        key = rng.choice(["busy"] * 8 + ["calm", "multi"])
        log.append({"subject": key, "predicate": "m" if key == "multi" else "p", "object": rng.choice("xyz"),
                    "valid_from": recorded - timedelta(minutes=rng.choice([0, 0, 1, 5, 20, 60])),
                    "recorded_at": recorded})
    parts = _parts_read(monkeypatch)
    monkeypatch.setattr(rounds, "BUSY_FROM", 10**9)  # the busy key's closed form would take "busy"
    stores, passes = {}, {}
    for window in (2, 10**6):
        monkeypatch.setattr(rounds, "WINDOW_FROM", window)
        parts.clear()
        stores[window] = _open(tmp_path / str(window), TestClock())
        stores[window].backfill(log, resolve=True)
        passes[window] = (parts.count("runs"), parts.count("next_in_place"))
    assert passes[10**6][0] > 5 and passes[2][0] > passes[10**6][0] and passes[2][1] > 0
    assert _canonical(stores[2]).drop("origin").equals(_canonical(stores[10**6]).drop("origin"))


def test_a_busy_key_decided_at_once_equals_its_passes(tmp_path, monkeypatch):
    """A status of two or three values re-asserted every few minutes, hours late (the shape
    whose late rows cut into the timeline every few dozen), on top of a stored history whose
    last fact has ended, with artifacts: deciding the key's rows at once (closedform_busy.sql),
    in passes of two guesses each so that several are needed, gives exactly the revisions of
    the passes that stop at each cut (closedform.sql), which the tests above hold to the
    one-row path."""
    rng = random.Random(11)
    at = ts("2026-01-01")

    def log(rows, first, values):
        return [{"subject": "busy", "predicate": "p", "object": rng.choice(values),
                 "valid_from": at + timedelta(minutes=first + 7 * i - rng.choice([0, 1, 30, 90, 400, 2000])),
                 "recorded_at": at + timedelta(days=40, minutes=first + 7 * i),
                 "artifacts": rng.choice([[], [], ["m1"], ["m2", "m1"]])} for i in range(rows)]

    first, second = log(100, 0, "xy"), log(160, 3000, "xyz")
    stores, passes = {}, {}
    calls = []
    real = rounds._busy_pass
    monkeypatch.setattr(rounds, "_busy_pass", lambda con: calls.append(real(con)) or calls[-1])
    monkeypatch.setattr(rounds, "BUSY_GUESSES", 2)
    for busy_from in (10**9, 0):
        monkeypatch.setattr(rounds, "BUSY_FROM", busy_from)
        calls.clear()
        mem = stores[busy_from] = _open(tmp_path / str(busy_from), TestClock("2026-02-11T12:00:00"))
        mem.backfill(first, resolve=True)
        last = mem.current("busy")["fact_id"][0]
        mem.invalidate(last, at=at + timedelta(minutes=1500), reason="ended")
        mem.backfill(second, resolve=True)
        passes[busy_from] = sum(calls)  # the busy passes that took operations
    assert passes[10**9] == 0 and passes[0] > 3
    assert stores[0].history("busy", revisions=True).height > 100
    assert _canonical(stores[0]).drop("origin").equals(_canonical(stores[10**9]).drop("origin"))


def test_a_busy_status_key_is_settled_in_one_pass_of_a_few_guesses(tmp_path, monkeypatch):
    """A status of two values re-asserted every few minutes, each row hours late: the frontier's
    new facts are found exactly before the first guess (the chain of busy_frontier), so one pass
    of at most four guesses settles all 600 rows, where guessing every row a new fact settled a
    few dozen a guess."""
    rng = random.Random(3)
    at = ts("2026-01-01")
    log = [{"subject": "status", "predicate": "p", "object": rng.choice("xy"),
            "valid_from": at + timedelta(seconds=300 * i - rng.randrange(1, 40_000)),
            "recorded_at": at + timedelta(days=1, seconds=300 * i)} for i in range(600)]
    parts = _parts_read(monkeypatch)
    mem = _open(tmp_path / "s", TestClock("2026-02-01"))
    mem.backfill(log, resolve=True)
    assert parts.count("busy_setup") == 1 and 1 <= parts.count("busy_decide") <= 4
    assert parts.count("round") == 0


def test_a_busy_reject_key_merges_its_repeats_and_refuses_a_conflict(tmp_path, monkeypatch):
    """Hand-checked, a key under ``reject`` decided as a busy one (closedform_busy.sql): 300
    re-assertions of one value, late or not, land on the one fact with their new artifacts in
    first-seen order, in one pass and no round; then a batch whose one late row has another
    value fails whole with the fact it overlaps named, and writes nothing."""
    monkeypatch.setattr(rounds, "BUSY_FROM", 0)
    parts = _parts_read(monkeypatch)
    mem = _open(tmp_path / "s", TestClock("2026-03-01"))
    log = [{"subject": "k", "predicate": "r", "object": "x", "valid_from": _BASE + (i % 7) * _DAY,
            "recorded_at": ts("2026-01-01") + timedelta(minutes=i), "artifacts": [f"a{i % 3}"]} for i in range(300)]
    mem.backfill(log, resolve=True)
    assert parts.count("busy_setup") == 1 and parts.count("round") == 0
    history = mem.history("k", revisions=True).sort("revision")
    # the first row makes the fact; the next two add a1 then a2, the rest add nothing
    assert [(r["revision"], r["valid_from"], list(r["artifacts"])) for r in history.iter_rows(named=True)] == [
        (1, _BASE, ["a0"]), (2, _BASE, ["a0", "a1"]), (3, _BASE, ["a0", "a1", "a2"])]
    fact = history["fact_id"][0]
    rows = [{"subject": "k", "predicate": "r", "object": "x", "valid_from": _BASE + d * _DAY} for d in range(9)]
    rows.insert(4, {"subject": "k", "predicate": "r", "object": "y", "valid_from": _BASE + 3.5 * _DAY})
    monkeypatch.setattr(engine, "SET_BASED_FROM", 0)
    parts.clear()
    with pytest.raises(tm.ConflictError, match=f"'y' overlaps 'x' \\(fact {fact}\\)"):
        mem.assert_many(rows)
    assert parts.count("busy_setup") == 1 and parts.count("round") == 0
    assert mem.history("k", revisions=True).height == 3


def test_a_busy_key_of_unknown_starts_is_decided_at_once(tmp_path, monkeypatch):
    """Hand-checked, SPEC §5 "Unknown starts" on a key decided as a busy one: a replayed log with
    no valid_from (recorded a day apart: a a b b a) keeps the first fact's start unknown (a round
    applies that row) and starts every later one at its belief time, then one busy pass takes
    the rest. A later row that gives a start to the unknown one's object fills it (the rounds)."""
    monkeypatch.setattr(rounds, "BUSY_FROM", 0)
    parts = _parts_read(monkeypatch)
    mem = _open(tmp_path / "s", TestClock("2026-03-01"))

    def day(d):
        return ts("2026-01-01") + d * _DAY

    mem.backfill([{"subject": "k", "predicate": "p", "object": o, "recorded_at": day(i)}
                  for i, o in enumerate("aabba")], resolve=True)
    assert parts.count("round") == 1 and parts.count("busy_emit") == 1

    def facts():
        return [(r["object"], r["valid_from"], r["valid_to"], r["valid_from_inferred"], r["status"])
                for r in mem.sql("SELECT * FROM facts ORDER BY valid_from NULLS FIRST").pl().iter_rows(named=True)]

    assert facts() == [("a", None, day(2), True, "superseded"), ("b", day(2), day(4), True, "superseded"),
                       ("a", day(4), None, True, "live")]
    mem.backfill([{"subject": "k", "predicate": "p", "object": "a", "valid_from": ts("2025-12-20"),
                   "recorded_at": day(5)}], resolve=True)
    assert facts()[0] == ("a", ts("2025-12-20"), day(2), False, "superseded")


def test_a_large_batch_lands_like_one_by_one(tmp_path, monkeypatch):
    """Hand-checked: one key asserted three times in one batch; only final states are beliefs."""
    clock = TestClock("2026-02-01")
    mem = _open(tmp_path / "s", clock)
    monkeypatch.setattr(engine, "SET_BASED_FROM", 0)
    facts = mem.assert_many([
        {"subject": "k", "predicate": "p", "object": "a", "valid_from": "2025-01-01"},
        {"subject": "k", "predicate": "p", "object": "b", "valid_from": "2025-03-01"},
        {"subject": "k", "predicate": "p", "object": "a", "valid_from": "2025-02-01", "artifact": "msg"},
        {"subject": "e", "predicate": "p", "object": "x", "valid_from": "1960-05-01", "valid_to": "1960-06-01",
         "embedding": [0.5, 0.25]},
    ])
    assert [f.object for f in facts] == ["a", "b", "a", "x"]
    assert facts[2].fact_id == facts[0].fact_id  # a duplicate of the first
    assert facts[2].artifacts == ("msg",)
    assert (facts[2].valid_to, facts[2].status) == (ts("2025-03-01"), "superseded")
    assert (facts[0].embedding, facts[3].artifacts, facts[3].embedding) == (None, (), (0.5, 0.25))
    assert (facts[3].valid_from, facts[3].valid_to) == (ts("1960-05-01"), ts("1960-06-01"))  # before 1970
    assert {f.recorded_at for f in facts} == {ts("2026-02-01")}
    assert all(getattr(f, n).tzinfo is UTC for f in facts for n in ("recorded_at", "ingested_at", "valid_from"))
    history = mem.history("k", revisions=True)
    assert history.height == 2  # one revision each: within one commit only the final state is a belief
    assert history["status"].to_list() == ["superseded", "live"]
    # the batch's facts are built without Fact(): still ordinary frozen Facts, equal to those read back
    assert [mem.get(f.fact_id) for f in facts] == facts and len(set(facts)) == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts[0].object = "c"


def test_a_large_batch_under_reject_is_all_or_nothing(tmp_path, monkeypatch):
    clock = TestClock("2026-02-01")
    mem = _open(tmp_path / "s", clock)
    first = mem.assert_fact("k", "r", "a", valid_from="2025-01-01")
    monkeypatch.setattr(engine, "SET_BASED_FROM", 0)
    clock.advance(days=1)
    with pytest.raises(tm.ConflictError, match=f"overlapping value.*{first.fact_id}"):
        mem.assert_many([{"subject": "j", "predicate": "p", "object": "x"},
                         {"subject": "k", "predicate": "r", "object": "b", "valid_from": "2025-02-01"}])
    assert mem.history("j").height == 0


@settings(max_examples=_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(_row(), st.integers(0, 3), st.one_of(st.none(), st.integers(0, 3))),
                     min_size=1, max_size=10),
       chunk=st.sampled_from([1, 3, 1_000_000]), busy=st.booleans())
def test_replay_equals_asserting_each_belief_time_in_turn(tmp_path_factory, monkeypatch, rows, chunk, busy):
    """backfill(resolve=True) (set-based) against assert_many + correct per distinct belief
    time with the clock at that time (one-row path): the SPEC's "as if asserted one by one",
    whether the log is applied in one chunk of keys or in many (``resolve.CHUNK_OPS``), and
    with every last_write_wins key decided as a busy one or not."""
    monkeypatch.setattr(resolve, "CHUNK_OPS", chunk)
    if busy:
        monkeypatch.setattr(rounds, "BUSY_FROM", 0)
    folder = tmp_path_factory.mktemp("replay")
    given, log, seen = [], [], {}
    for i, (row, day, retract_after) in enumerate(rows):
        recorded = ts("2026-01-01") + day * _DAY
        # a reject conflict refuses one row of a replay but a whole batch of the write path
        entry = {k: v for k, v in row.items() if k not in ("artifact", "reference_time")}
        entry["predicate"] = "p" if entry["predicate"] == "r" else entry["predicate"]
        entry["artifacts"] = [row["artifact"]] if "artifact" in row else []
        entry["recorded_at"] = recorded
        # each retraction at an instant of its own: a replay applies operations sharing an
        # instant in one commit, which the public API cannot do for a correction
        entry["retracted_at"] = (None if retract_after is None
                                 else recorded + retract_after * _DAY + timedelta(hours=12, minutes=i))
        given.append(entry)
        # SPEC §9: an exact repeat of an earlier row (artifacts aside) is loaded once, its
        # artifacts merged; the write path has no such rule, so the model takes it out first
        same = tuple((k, v) for k, v in entry.items() if k != "artifacts")
        if same in seen:
            earlier = seen[same]
            earlier["artifacts"] = list(dict.fromkeys([*earlier["artifacts"], *entry["artifacts"]]))
            continue
        seen[same] = dict(entry)  # a copy: merging artifacts must not change the replay's input
        log.append((len(log), seen[same]))
    replayed = _open(folder / "replay", TestClock())
    try:
        replayed.backfill(given, resolve=True)
        replay_error = None
    except tm.TempomemError as exc:
        replay_error = exc

    clock = TestClock()
    stepped = _open(folder / "stepped", clock)
    events = sorted([(e["recorded_at"], 0, i) for i, e in log]
                    + [(e["retracted_at"], 1, i) for i, e in log if e["retracted_at"] is not None])
    landed: dict[int, str] = {}
    stepped_error = None
    try:
        for t in sorted({t for t, _, _ in events}):
            clock.set(t)
            asserts = [i for when, kind, i in events if when == t and kind == 0]
            news = [{k: v for k, v in log[i][1].items() if k not in ("recorded_at", "retracted_at")}
                    for i in asserts]
            facts = stepped.assert_many(news) if news else []
            landed.update({i: f.fact_id for i, f in zip(asserts, facts, strict=True)})
            for when, kind, i in events:
                if when == t and kind == 1:
                    stepped.correct(landed[i], reason="retracted (backfill)")
    except tm.TempomemError as exc:
        stepped_error = exc
    assert (replay_error is None) == (stepped_error is None), (replay_error, stepped_error)
    if replay_error is None:
        assert _canonical(replayed).drop("origin").equals(_canonical(stepped).drop("origin"))


def test_a_replay_in_chunks_of_one_key_finds_each_key_by_its_scope_first(tmp_path, monkeypatch):
    """A chunk is the keys from its first subject to the next chunk's, in (scope, subject)
    order: a key of a later scope whose subject sorts first still falls in its own chunk, and
    the log loads as it does in one chunk."""
    at = ts("2026-01-01")
    log = [{"scope": scope, "subject": subject, "predicate": "p", "object": obj, "valid_from": "2025-01-01",
            "recorded_at": at + i * _DAY}
           for i, (scope, subject, obj) in enumerate([("b", "a", "x"), ("a", "z", "y"), ("b", "a", "y"),
                                                       ("a", "z", "z"), ("a", "m", "w"), ("b", "b", "v")])]
    loaded = {}
    for chunk in (1, 1_000_000):
        monkeypatch.setattr(resolve, "CHUNK_OPS", chunk)
        mem = _open(tmp_path / str(chunk), TestClock())
        assert mem.backfill(log, resolve=True).revisions == 8
        loaded[chunk] = _canonical(mem).drop("origin")
        assert (mem.sql("SELECT scope, subject, object FROM facts WHERE status = 'live' ORDER BY ALL").fetchall()
                == [("a", "m", "w"), ("a", "z", "z"), ("b", "a", "y"), ("b", "b", "v")])
    assert loaded[1].equals(loaded[1_000_000])


def test_every_cell_of_the_decision_table_is_reached_by_the_classifier():
    """The table has a row per SPEC §5 case and each case is what the classifier returns for it."""
    a, b, c, d = (_BASE + i * _DAY for i in range(4))
    examples = {
        "same_object_overlap": ("x", a, c, "x", b, d),
        "different_object_apart": ("x", a, b, "y", b, c),
        "different_object_s_earlier": ("x", b, d, "y", a, c),
        "different_object_n_earlier": ("x", a, c, "y", b, d),
        "different_object_same_start": ("x", a, c, "y", a, d),
        "same_object_apart": ("x", a, b, "x", c, d),
    }
    assert set(examples) == set(decisions.DECISIONS)
    for case, pair in examples.items():
        assert decisions.case_of(*pair) == case
    assert decisions.case_of("x", None, None, "y", a, None) == "different_object_n_earlier"
    assert decisions.case_of("x", a, a, "y", None, None) == "different_object_apart"  # an empty span
    expected = {  # SPEC §5's table, cell by cell
        ("different_object_s_earlier", "single/last_write_wins"): "close_existing",
        ("different_object_n_earlier", "single/last_write_wins"): "close_new",
        ("different_object_same_start", "single/last_write_wins"): "retract_existing",
    }
    for case in decisions.DECISIONS:
        for rule in decisions.RULES:
            cell = decisions.action(case, rule)
            if case == "same_object_overlap":
                assert cell == "merge"
            elif case.startswith("different_object") and case != "different_object_apart":
                want = "store" if rule == "multi" else "refuse" if rule == "single/reject" else expected[case, rule]
                assert cell == want
            else:
                assert cell == "store"
