"""Stateful comparison of the store with the reference model of SPEC §5–6 (tests/reference_model.py).

Hypothesis drives random sequences of assert_fact, assert_many, invalidate, correct and clock
advances against a store (test clock, belief times in early 2026) and the model. After every
step the two must agree on: every stored revision; as_of at every interval boundary (and
1 µs before it) plus random instants; as_believed at pairs of those instants; and, through
the public API, current, history per key and per subject, as_of and as_believed.

``TEMPOMEM_HEAVY=1`` runs many more and longer sequences.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections import Counter
from datetime import UTC, datetime, timedelta

import hypothesis.strategies as st
from conftest import HEAVY
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from reference_model import US, Model

import tempomem as tm

SUBJECTS = ["alice", "bob"]
PREDICATES = {"role": ("single", "last_write_wins"), "skill": ("multi", None), "desk": ("single", "reject")}
OBJECTS = ["a", "b", "c"]
DAY0 = datetime(2026, 3, 1, tzinfo=UTC)
# Valid times on a grid around DAY0, and three days either side of 1970-01-01: times before the
# epoch are negative microseconds, which SQL that orders or keys on them must survive.
GRID = ([DAY0 + timedelta(days=k) for k in range(0, 14, 2)]
        + [datetime(1969, 12, 29, tzinfo=UTC) + timedelta(days=k) for k in range(0, 6, 2)])
CLOCK_START = DAY0 + timedelta(days=3)

times = st.one_of(st.none(), st.sampled_from(GRID))
rows = st.fixed_dictionaries({
    "subject": st.sampled_from(SUBJECTS), "predicate": st.sampled_from(sorted(PREDICATES)),
    "object": st.sampled_from(OBJECTS), "valid_from": times, "valid_to": times,
})

FACT_COLUMNS = "fact_id, object, valid_from, valid_to, valid_from_inferred, status, retracted_at, superseded_by"


class StoreAgainstModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="tm-model-")
        self.now = CLOCK_START
        self.mem = tm.open(os.path.join(self.dir, "store"), create=True, clock=lambda: self.now,
                           predicates={p: arity for p, (arity, _) in PREDICATES.items()})
        for p, (arity, policy) in PREDICATES.items():
            self.mem.declare(p, arity, policy)
        self.model = Model({p: a for p, (a, _) in PREDICATES.items()},
                           {p: pol for p, (_, pol) in PREDICATES.items() if pol})
        self.to_store: dict[str, str] = {}
        self.to_model: dict[str, str] = {}
        self.rng = random.Random(0)

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- operations: both sides must succeed alike or fail with the same error type ----------
    def _both(self, on_store, on_model):
        try:
            expected = on_model()
        except tm.TempomemError as exc:
            expected_error = type(exc)
        else:
            expected_error = None
        try:
            got = on_store()
        except tm.TempomemError as exc:
            assert type(exc) is expected_error, f"store raised {exc!r}, model gave {expected_error or expected}"
            return None, None
        assert expected_error is None, f"model raised {expected_error.__name__}, store returned {got}"
        return got, expected

    def _link(self, store_ids: list[str], model_ids: list[str]) -> None:
        for s, m in zip(store_ids, model_ids, strict=True):
            if m in self.to_store:
                assert self.to_store[m] == s, "the store merged into another fact than the model"
            else:
                assert s not in self.to_model, "the store merged where the model created a fact"
                self.to_store[m], self.to_model[s] = s, m

    @rule(row=rows)
    def assert_fact(self, row):
        got, expected = self._both(lambda: [self.mem.assert_fact(**row)],
                                   lambda: self.model.assert_many([row], self.now))
        if got is not None:
            self._link([f.fact_id for f in got], expected)

    @rule(batch=st.lists(rows, min_size=1, max_size=4))
    def assert_many(self, batch):
        got, expected = self._both(lambda: self.mem.assert_many(batch),
                                   lambda: self.model.assert_many(batch, self.now))
        if got is not None:
            self._link([f.fact_id for f in got], expected)

    @precondition(lambda self: self.to_store)
    @rule(data=st.data(), at=st.sampled_from(GRID))
    def invalidate(self, data, at):
        m = data.draw(st.sampled_from(sorted(self.to_store)))
        self._both(lambda: self.mem.invalidate(self.to_store[m], at=at, reason="ended"),
                   lambda: self.model.invalidate(m, at, "ended", self.now))

    @precondition(lambda self: self.to_store)
    @rule(data=st.data())
    def correct(self, data):
        m = data.draw(st.sampled_from(sorted(self.to_store)))
        self._both(lambda: self.mem.correct(self.to_store[m], reason="wrong"),
                   lambda: self.model.correct(m, "wrong", self.now))

    @rule(step=st.sampled_from([timedelta(0), US, timedelta(hours=1), timedelta(days=1), timedelta(days=2)]))
    def advance_clock(self, step):
        self.now += step

    # -- comparisons --------------------------------------------------------------------------
    @staticmethod
    def _rows(rows) -> Counter:
        """A multiset of rows, times as UTC ISO strings (the two sides use different tzinfo types)."""
        return Counter(tuple(x.astimezone(UTC).isoformat() if isinstance(x, datetime) else x for x in r)
                       for r in rows)

    def _m(self, store_id):
        return None if store_id is None else self.to_model[store_id]

    def _instants(self) -> list[datetime]:
        edges = self.model.boundaries() | set(GRID) | {self.now}
        around = edges | {t - US for t in edges}
        return sorted(around | {DAY0 + timedelta(minutes=self.rng.randrange(0, 20 * 24 * 60)) for _ in range(3)})

    @invariant()
    def revisions_agree(self):
        stored = self.mem.reader.connection().sql(
            f"SELECT {FACT_COLUMNS}, revision, recorded_at FROM revisions").fetchall()
        got = self._rows((self._m(r[0]), *r[1:7], self._m(r[7]), r[8], r[9]) for r in stored)
        want = self._rows((f.id, v["object"], v["valid_from"], v["valid_to"], v["valid_from_inferred"], v["status"],
                       v["retracted_at"], v["superseded_by"], v["revision"], v["recorded_at"])
                      for f in self.model.facts.values() for v in f.revisions)
        assert got == want

    @invariant()
    def as_of_agrees_at_every_boundary(self):
        instants = self._instants()
        stored = self.mem.reader.connection().sql(
            "SELECT t.v, a.fact_id, a.object, a.valid_to FROM unnest($vs) AS t(v), "
            "LATERAL (SELECT * FROM as_of(t.v)) AS a", params={"vs": instants}).fetchall()
        got = self._rows((v, self._m(i), o, vt) for v, i, o, vt in stored)
        want = self._rows((t, f.id, s["object"], s["valid_to"]) for t in instants for f, s in self.model.as_of(t))
        assert got == want

    @invariant()
    def as_believed_agrees(self):
        instants = self._instants()
        pairs = [(v, b) for v in instants for b in instants]
        pairs = self.rng.sample(pairs, min(len(pairs), 400))
        stored = self.mem.reader.connection().sql(
            "SELECT t.v, t.b, a.fact_id, a.revision, a.object, a.valid_to "
            "FROM (SELECT unnest($vs) AS v, unnest($bs) AS b) AS t, "
            "LATERAL (SELECT * FROM as_believed(t.v, t.b)) AS a",
            params={"vs": [p[0] for p in pairs], "bs": [p[1] for p in pairs]}).fetchall()
        got = self._rows((v, b, self._m(i), r, o, vt) for v, b, i, r, o, vt in stored)
        want = self._rows((v, b, f.id, rev["revision"], rev["object"], rev["valid_to"])
                      for v, b in pairs for f, rev in self.model.as_believed(v, b))
        assert got == want

    @invariant()
    def public_api_agrees(self):
        current = self.mem.current()
        assert sorted(self._m(i) for i in current["fact_id"]) == sorted(f.id for f, _ in self.model.as_of(self.now))
        for subject in SUBJECTS:
            hist = self.mem.history(subject)
            assert [self._m(i) for i in hist["fact_id"]] == [f.id for f in self.model.history(subject)]
            assert [(s, r) for s, r in zip(hist["status"], hist["recorded_at"], strict=True)] == \
                [(f.latest["status"], f.first_recorded) for f in self.model.history(subject)]
            hist_role = self.mem.history(subject, "role")
            assert [self._m(i) for i in hist_role["fact_id"]] == [f.id for f in self.model.history(subject, "role")]
        v, b = self.rng.choice(self._instants()), self.rng.choice(self._instants())
        assert sorted(self._m(i) for i in self.mem.as_of(v)["fact_id"]) == sorted(f.id for f, _ in self.model.as_of(v))
        believed = self.mem.as_believed(v, b)
        assert sorted(zip(map(self._m, believed["fact_id"]), believed["revision"], strict=True)) == \
            sorted((f.id, rev["revision"]) for f, rev in self.model.as_believed(v, b))

    @invariant()
    def check_is_clean(self):
        report = self.mem.check()
        assert report.ok, report


StoreAgainstModel.TestCase.settings = settings(
    max_examples=120 if HEAVY else 12, stateful_step_count=30 if HEAVY else 12, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestStoreAgainstModel = StoreAgainstModel.TestCase
