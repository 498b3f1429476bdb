"""A plain-Python reference model of SPEC §5–6: lists, dicts and loops, no DuckDB, no tempomem code.

It is written from the SPEC text, independently of ``tempomem.writepath``, so that the
stateful test can compare the two after every operation. Facts keep a list of revisions;
a commit works on copies of the latest states and appends one revision per touched fact,
stamped with the commit's belief time.

Only the write-path subset the stateful test drives is modelled: assert (one or many rows,
no artifacts, no reference_time), invalidate, correct, the store clock, and the queries
current / as_of / as_believed / history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tempomem.errors import ConflictError, FactNotFoundError, TempomemError

US = timedelta(microseconds=1)


def contains(lo: datetime | None, hi: datetime | None, t: datetime) -> bool:
    """[lo, hi) contains t; None bounds are the infinities."""
    return (lo is None or lo <= t) and (hi is None or t < hi)


def overlaps(a_lo, a_hi, b_lo, b_hi) -> bool:
    """Two half-open intervals share an instant; an empty one overlaps nothing."""
    if (a_lo is not None and a_hi is not None and a_lo >= a_hi) or \
       (b_lo is not None and b_hi is not None and b_lo >= b_hi):
        return False
    return (a_lo is None or b_hi is None or a_lo < b_hi) and (b_lo is None or a_hi is None or b_lo < a_hi)


def starts_before(a: datetime | None, b: datetime | None) -> bool:
    """Start a is earlier than start b (an unknown start is the earliest)."""
    if a is None:
        return b is not None
    return b is not None and a < b


@dataclass
class Fact:
    id: str
    key: tuple[str, str, str]
    created: int                                  # creation order, breaks ties of belief time
    revisions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def latest(self) -> dict[str, Any]:
        return self.revisions[-1]

    @property
    def first_recorded(self) -> datetime:
        return self.revisions[0]["recorded_at"]


class Model:
    def __init__(self, arity: dict[str, str], policy: dict[str, str]) -> None:
        self.arity = arity                        # predicate -> single | multi
        self.policy = policy                      # predicate -> last_write_wins | reject
        self.facts: dict[str, Fact] = {}
        self.last_commit: datetime | None = None

    # -- commits -----------------------------------------------------------------------------
    def _commit_time(self, now: datetime) -> datetime:
        """Strictly after the previous commit (SPEC §1.4), else the clock."""
        if self.last_commit is not None and now <= self.last_commit:
            return self.last_commit + US
        return now

    def _run(self, now: datetime, ops) -> Any:
        """Apply ``ops(work, t)`` to copies of the latest states; commit the touched ones."""
        t = self._commit_time(now)
        work = {i: dict(f.latest) for i, f in self.facts.items()}
        touched: list[str] = []
        new_facts: list[Fact] = []
        result = ops(work, t, touched, new_facts)  # raises before anything is stored
        for fact in new_facts:
            self.facts[fact.id] = fact
        for i in dict.fromkeys(touched):
            rev = dict(work[i], recorded_at=t)
            rev["revision"] = len(self.facts[i].revisions) + 1
            self.facts[i].revisions.append(rev)
        if touched:
            self.last_commit = t
        return result

    def _believed(self, work, key) -> list[str]:
        ids = [i for i in work if work[i]["key"] == key and work[i]["status"] not in ("retracted", "erased")]
        return sorted(ids, key=lambda i: (work[i]["first"], work[i]["created"]))

    def assert_many(self, rows: list[dict[str, Any]], now: datetime) -> list[str]:
        for row in rows:
            if row["valid_from"] is not None and row["valid_to"] is not None and row["valid_from"] > row["valid_to"]:
                raise TempomemError("valid_to before valid_from")

        def ops(work, t, touched, new_facts):
            return [self._assert(work, t, touched, new_facts, row) for row in rows]

        return self._run(now, ops)

    def _assert(self, work, t, touched, new_facts, row) -> str:
        key = ("default", row["subject"], row["predicate"])
        single = self.arity.get(row["predicate"], "single") == "single"
        believed = self._believed(work, key)
        vf, vt, inferred = row["valid_from"], row["valid_to"], row["valid_from"] is None
        # unknown start of a single-valued key with a believed value: bounded by the commit time
        if vf is None and single and believed and not (vt is not None and vt <= t):
            vf = t
        same = [i for i in believed if work[i]["object"] == row["object"]
                and overlaps(work[i]["valid_from"], work[i]["valid_to"], vf, vt)]
        if same:                                  # duplicate: merge into the earliest recorded
            x = same[0]
            s = work[x]
            if s["valid_from"] is None and vf is not None and not inferred:
                s["valid_from"], s["valid_from_inferred"] = vf, False
                touched.append(x)
            if s["valid_to"] is None and vt is not None:
                s["valid_to"], s["status"] = vt, "ended"
                touched.append(x)
        else:
            x = f"m{len(self.facts) + len(new_facts)}"
            work[x] = {"key": key, "object": row["object"], "valid_from": vf, "valid_to": vt,
                       "valid_from_inferred": inferred, "status": "live" if vt is None else "ended",
                       "retracted_at": None, "superseded_by": None, "reason": None,
                       "first": t, "created": len(self.facts) + len(new_facts)}
            new_facts.append(Fact(x, key, work[x]["created"]))
            touched.append(x)
        if not single:
            return x
        n = work[x]
        others = [i for i in believed if i != x and work[i]["object"] != n["object"]
                  and overlaps(work[i]["valid_from"], work[i]["valid_to"], n["valid_from"], n["valid_to"])]
        if not others:
            return x
        if self.policy.get(row["predicate"], "last_write_wins") == "reject":
            raise ConflictError("overlapping value")
        later = [i for i in others if starts_before(n["valid_from"], work[i]["valid_from"])]
        if later:                                 # N is about an earlier time
            first = min(later, key=lambda i: work[i]["valid_from"])  # a later start is never unknown
            n["valid_to"], n["status"], n["superseded_by"] = work[first]["valid_from"], "superseded", first
            touched.append(x)
        for i in others:
            s = work[i]
            if not overlaps(s["valid_from"], s["valid_to"], n["valid_from"], n["valid_to"]):
                continue
            if starts_before(s["valid_from"], n["valid_from"]):
                s["valid_to"], s["status"], s["superseded_by"] = n["valid_from"], "superseded", x
            else:                                 # same start: it was never true
                s["retracted_at"], s["status"] = t, "retracted"
            touched.append(i)
        return x

    def _existing(self, work, fact_id) -> dict[str, Any]:
        if fact_id not in work:
            raise FactNotFoundError(fact_id)
        if work[fact_id]["status"] in ("retracted", "erased"):
            raise TempomemError("can no longer be changed")
        return work[fact_id]

    def invalidate(self, fact_id: str, at: datetime, reason: str, now: datetime) -> str:
        def ops(work, t, touched, new_facts):
            s = self._existing(work, fact_id)
            if s["valid_from"] is not None and at < s["valid_from"]:
                raise TempomemError("at before valid_from")
            single = self.arity.get(s["key"][2], "single") == "single"
            if single and (s["valid_to"] is None or at > s["valid_to"]):
                for i in self._believed(work, s["key"]):
                    o = work[i]
                    if i != fact_id and o["object"] != s["object"] and \
                            overlaps(o["valid_from"], o["valid_to"], s["valid_from"], at):
                        raise ConflictError("overlapping value")
            s["valid_to"], s["status"], s["reason"] = at, "ended", reason
            touched.append(fact_id)
            return fact_id

        return self._run(now, ops)

    def correct(self, fact_id: str, reason: str, now: datetime) -> str:
        def ops(work, t, touched, new_facts):
            s = self._existing(work, fact_id)
            s["retracted_at"], s["status"], s["reason"] = t, "retracted", reason
            touched.append(fact_id)
            return fact_id

        return self._run(now, ops)

    # -- queries (SPEC §6) --------------------------------------------------------------------
    def _served(self, state) -> bool:
        return state["status"] not in ("retracted", "erased")

    def as_of(self, t: datetime) -> list[tuple[Fact, dict[str, Any]]]:
        return [(f, f.latest) for f in self.facts.values()
                if self._served(f.latest) and contains(f.latest["valid_from"], f.latest["valid_to"], t)]

    def as_believed(self, valid_at: datetime, believed_at: datetime) -> list[tuple[Fact, dict[str, Any]]]:
        out = []
        for f in self.facts.values():
            if f.latest["status"] == "erased":
                continue
            for k, rev in enumerate(f.revisions):
                until = f.revisions[k + 1]["recorded_at"] if k + 1 < len(f.revisions) else None
                if contains(rev["recorded_at"], until, believed_at) and rev["retracted_at"] is None \
                        and contains(rev["valid_from"], rev["valid_to"], valid_at):
                    out.append((f, rev))
        return out

    def history(self, subject: str, predicate: str | None = None) -> list[Fact]:
        found = [f for f in self.facts.values()
                 if f.key[1] == subject and (predicate is None or f.key[2] == predicate)]
        return sorted(found, key=lambda f: (f.first_recorded, f.created))

    def boundaries(self) -> set[datetime]:
        """Every instant at which some interval of the model starts or ends."""
        out: set[datetime] = set()
        for f in self.facts.values():
            for rev in f.revisions:
                for name in ("valid_from", "valid_to", "recorded_at", "retracted_at"):
                    if rev[name] is not None:
                        out.add(rev[name])
        return out
