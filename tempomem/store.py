"""``tm.open`` and :class:`Memory`: one store, its clock, its write commits and its queries."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from . import assertion_columns, diff, erasure, ids, queries, sequenced
from .connection import bind_files, new_connection
from .diff import MemoryDiff
from .engine import Engine
from .errors import FactNotFoundError, TempomemError
from .reader import Reader
from .schema import SCHEMA_VERSION, Fact
from .staterows import as_fact, latest_revision
from .storage import Storage
from .times import TimeLike, clock_or_system, to_utc
from .trust import trust_filters
from .writepath import check_declaration, check_policy, clean_reason

Clock = Callable[[], datetime]


def open(path: str | os.PathLike[str], create: bool = False, predicates: dict[str, str] | None = None,
         policy: str | None = None, clock: Clock | None = None, embedder: Any = None) -> Memory:
    """Open the store at ``path`` (a folder); ``create=True`` makes it when it does not exist.

    ``predicates`` declares arities (``{"works_on": "multi"}``); ``policy`` changes the store's
    default policy for single-valued predicates (``None`` keeps what is stored). ``clock`` is a
    zero-argument callable returning an aware datetime, for tests.

    >>> mem = tm.open(folder / "memory.tm", create=True, predicates={"works_on": "multi"})
    >>> mem.assert_fact("checkout-api", "instance_type", "m5.xlarge").status
    'live'
    """
    check_policy(policy)
    clock = clock_or_system(clock)  # every argument is checked before a store is made
    for predicate, arity in (predicates or {}).items():
        check_declaration(predicate, arity, None)
    if not Storage.exists(path):
        if not queries.flag(create, "create"):
            raise TempomemError(f"path: no tempomem store at {path}; pass create=True to make one")
        Storage.create(path, {"schema_version": SCHEMA_VERSION, "policy": policy or "last_write_wins",
                              "predicates": {}, "salt": secrets.token_hex(16)})
    storage = Storage(path)
    stored = storage.read_settings()
    if (version := stored.get("schema_version")) != SCHEMA_VERSION:
        raise TempomemError(f"path: store schema version {version} is not {SCHEMA_VERSION}; export it with the "
                            "tempomem that wrote it (tempomem export) and backfill the file into a new store")
    mem = Memory(storage, clock=clock, embedder=embedder)
    if policy is not None and policy != stored["policy"]:
        mem.reader.engine.update_settings(lambda settings: settings.update(policy=policy))
    for predicate, arity in (predicates or {}).items():
        mem.declare(predicate, arity)
    return mem


class Memory:
    """A bitemporal fact store. Make one with :func:`tempomem.open`."""

    def __init__(self, storage: Storage, *, clock: Clock | None = None, embedder: Any = None) -> None:
        self._storage = storage
        self._engine = Engine(storage, clock)
        #: The read side the features use (tempomem.reader): connection, lock, caches.
        self.reader = Reader(storage, self._engine, embedder)

    def __repr__(self) -> str:
        return f"<tempomem.Memory at {self.path}>"

    @property
    def path(self) -> Path:
        """The store folder."""
        return self._storage.path

    def declare(self, predicate: str, arity: str = "single", policy: str | None = None) -> None:
        """Declare a predicate's arity (``single``/``multi``) and, for single, its policy.

        >>> mem.declare("works_on", "multi")
        >>> _ = mem.assert_many([{"subject": "ana", "predicate": "works_on", "object": o} for o in ("api", "db")])
        >>> sorted(mem.current("ana")["object"])
        ['api', 'db']
        """
        check_declaration(predicate, arity, policy)
        self._engine.update_settings(
            lambda settings: settings["predicates"].update({predicate: {"arity": arity, "policy": policy}}))

    @property
    def embedder(self) -> Any:
        """The store's embedder (``tm.open(..., embedder=)``; the local default once recall used it)."""
        return self.reader.embedder

    @embedder.setter
    def embedder(self, embedder: Any) -> None:
        self.reader.embedder = embedder

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A new DuckDB connection with the views ``facts`` and ``revisions`` and the macros.

        The connection sees the store as it is now; call ``connect()`` again to see later
        commits.

        >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.xlarge", valid_from="2026-03-10")
        >>> mem.connect().sql("SELECT object FROM as_of('2026-03-15')").fetchall()
        [('m5.xlarge',)]
        """
        con = new_connection()
        bind_files(con, self._storage.snapshot().files, first=True)
        return con

    def sql(self, query: str, params: Any = None) -> duckdb.DuckDBPyRelation:
        """Run SQL against the store (views and macros of :meth:`connect`); values go in ``params``.

        >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.xlarge")
        >>> mem.sql("SELECT count(*) FROM facts WHERE subject = $s", params={"s": "checkout-api"}).fetchall()
        [(1,)]
        """
        con = self.connect()
        try:
            return con.sql(query, params=params)
        except duckdb.Error as exc:
            raise TempomemError(f"sql: {exc}") from None

    def now(self) -> datetime:
        """The store clock's current time."""
        return self._engine.now()

    def current(self, subject: str | None = None, predicate: str | None = None, *,
                scope: str | None = None, trusted: Any = None, columns: Sequence[str] | None = None) -> pl.DataFrame:
        """Facts valid now and believed now (future-dated facts are not current).

        ``trusted`` (here and in :meth:`as_of`, :meth:`as_believed`) serves only facts meeting a
        source/confidence policy: ``{"sources": ["tool_verified"], "min_confidence": 0.9}``,
        or a list of sources (see :mod:`tempomem.trust`). ``columns`` (the same three) gives those
        columns only, in order: a snapshot decodes no other (but those its filters and order read).

        >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.xlarge", valid_from="2026-03-10")
        >>> _ = mem.assert_fact("checkout-api", "region", "eu-west-1", valid_from="2099-01-01")
        >>> mem.current("checkout-api").select("predicate", "object").rows()
        [('instance_type', 'm5.xlarge')]
        """
        return self.reader.read_subject(subject, scope, predicate, True, queries.as_of, self.now(), subject=subject,
                                        predicate=predicate, scope=scope, columns=columns, **trust_filters(trusted))

    def as_of(self, valid_at: TimeLike, subject: str | None = None, predicate: str | None = None, *,
              scope: str | None = None, trusted: Any = None, columns: Sequence[str] | None = None) -> pl.DataFrame:
        """What was true at ``valid_at``, as best we know today.

        >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.large", valid_from="2026-03-01")
        >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.xlarge", valid_from="2026-03-10")
        >>> mem.as_of("2026-03-05", "checkout-api")["object"].to_list()
        ['m5.large']
        >>> mem.as_of("2026-03-05", columns=["subject", "object"]).rows()
        [('checkout-api', 'm5.large')]
        """
        valid_at = to_utc(valid_at, field="valid_at")
        return self.reader.read_subject(subject, scope, predicate, True, queries.as_of, valid_at, subject=subject,
                                        predicate=predicate, scope=scope, columns=columns, **trust_filters(trusted))

    def as_believed(self, valid_at: TimeLike, believed_at: TimeLike, subject: str | None = None,
                    predicate: str | None = None, *, scope: str | None = None,
                    trusted: Any = None, columns: Sequence[str] | None = None) -> pl.DataFrame:
        """What the memory believed at ``believed_at`` about ``valid_at`` (one row per revision).

        >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.xlarge", valid_from="2026-03-10")
        >>> mem.as_believed("2026-03-15", "2026-03-19", "checkout-api").height  # recorded on 03-20
        0
        >>> mem.as_believed("2026-03-15", mem.now(), "checkout-api")["object"].to_list()
        ['m5.xlarge']
        """
        return self.reader.read_subject(subject, scope, predicate, False, queries.as_believed,
                                        to_utc(valid_at, field="valid_at"), to_utc(believed_at, field="believed_at"),
                                        subject=subject, predicate=predicate, scope=scope, columns=columns,
                                        **trust_filters(trusted))

    def history(self, subject: str, predicate: str | None = None, *, scope: str | None = None,
                revisions: bool = False) -> pl.DataFrame:
        """Every fact recorded on a key in belief order, retracted ones included.

        ``revisions=True`` gives every revision instead of one row per fact.

        >>> f = mem.assert_fact("checkout-api", "instance_type", "m5.large", valid_from="2026-03-01")
        >>> _ = mem.correct(f.fact_id, reason="typo: it was never m5.large")
        >>> mem.history("checkout-api").select("object", "status").rows()
        [('m5.large', 'retracted')]
        """
        return self.reader.read_subject(subject, scope, predicate, not queries.flag(revisions, "revisions"),
                                        queries.history, subject, predicate, scope, revisions)

    def timeline(self, subject: str, *, scope: str | None = None) -> pl.DataFrame:
        """The audit view of a subject: every revision of its facts, in belief order.

        >>> f = mem.assert_fact("checkout-api", "instance_type", "m5.large", valid_from="2026-03-01")
        >>> _ = mem.invalidate(f.fact_id, at="2026-03-10", reason="resized")
        >>> mem.timeline("checkout-api")["status"].to_list()
        ['live', 'ended']
        """
        return self.reader.read_subject(subject, scope, None, False, queries.timeline, subject, scope)

    def get(self, fact_id: str) -> Fact:
        """The fact with this id as currently believed; ``KeyError`` if there is none.

        >>> f = mem.assert_fact("checkout-api", "instance_type", "m5.xlarge")
        >>> mem.get(f.fact_id).object
        'm5.xlarge'
        """
        state = self.reader.read_files(latest_revision, ids.checked(fact_id))
        if state is None:
            raise FactNotFoundError(f"fact_id: no fact {fact_id!r} in this store")
        return as_fact(state)

    def diff(self, from_at: TimeLike, to_at: TimeLike, *, subjects: str | list[str] | None = None,
             predicates: str | list[str] | None = None) -> MemoryDiff:
        """What the store learned in the belief window ``[from_at, to_at)`` (SPEC §8).

        >>> start = mem.now()
        >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.xlarge", valid_from="2026-03-10")
        >>> d = mem.diff(start, "2100-01-01")
        >>> d.created.select("subject", "object").rows(), d.changed.height
        ([('checkout-api', 'm5.xlarge')], 0)
        """
        return diff.diff(self.reader, from_at, to_at, subjects=subjects, predicates=predicates)

    def sequenced(self, from_at: TimeLike, to_at: TimeLike, every: str | timedelta, *,
                  believed_at: TimeLike | None = None, subject: str | None = None, predicate: str | None = None,
                  scope: str | None = None) -> pl.DataFrame:
        """One row per bin of ``[from_at, to_at)`` and per fact believed then overlapping it, with
        ``coverage`` (SPEC §12); see :func:`tempomem.sequenced.sequenced`.

        >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.xlarge", valid_from="2026-03-01T12:00Z")
        >>> mem.sequenced("2026-03-01", "2026-03-03", "1d")["coverage"].to_list()
        [0.5, 1.0]
        """
        return sequenced.sequenced(self.reader, from_at, to_at, every, believed_at=believed_at, subject=subject,
                                   predicate=predicate, scope=scope)

    def coalesced(self, *, believed_at: TimeLike | None = None, subject: str | None = None,
                  predicate: str | None = None, scope: str | None = None) -> pl.DataFrame:
        """The believed facts of each value merged into maximal periods (SPEC §12); see
        :func:`tempomem.sequenced.coalesced`.

        >>> gold = {"subject": "svc", "predicate": "tier", "object": "gold"}
        >>> _ = mem.assert_many([{**gold, "valid_from": "2026-01-01", "valid_to": "2026-02-01"},
        ...                      {**gold, "valid_from": "2026-02-01"}])
        >>> mem.coalesced(subject="svc").select("object", "facts").rows()
        [('gold', 2)]
        """
        return sequenced.coalesced(self.reader, believed_at=believed_at, subject=subject, predicate=predicate,
                                   scope=scope)

    def check(self) -> queries.CheckReport:
        """Verify the store's invariants; ``.problems`` lists each violation (SPEC §8).

        >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.xlarge")
        >>> mem.check().ok
        True
        """
        multi = [p for p, (arity, _) in self._engine.rules()[0].items() if arity == "multi"]
        stray = sorted(set(self._storage.data_files_on_disk()) - self._storage.referenced_files())
        if missing := self._storage.missing_files():  # no other check can read the version then
            return queries.file_problems(missing, stray)
        return self.reader.read(queries.problems, multi, stray)

    def assert_fact(self, subject: str, predicate: str, object: str, *, valid_from: TimeLike | None = None,
                    valid_to: TimeLike | None = None, scope: str = "default", source: str = "user",
                    confidence: float = 0.9, text: str | None = None, artifact: str | None = None,
                    reference_time: TimeLike | None = None, link_type: str = "entity", weight: float = 1.0) -> Fact:
        """Assert one fact (SPEC §5); returns it as stored (a duplicate returns the existing fact).

        >>> f = mem.assert_fact("checkout-api", "instance_type", "m5.xlarge", valid_from="2026-03-10")
        >>> f.object, f.valid_from.isoformat(), f.valid_to
        ('m5.xlarge', '2026-03-10T00:00:00+00:00', None)
        """
        return self.assert_many([{k: v for k, v in locals().items() if k != "self"}])[0]

    def assert_many(self, rows: Any) -> list[Fact]:
        """Assert many facts in row order, in one commit with one ``recorded_at`` (all or nothing).

        ``rows``: a Polars, pandas or Arrow frame, a DuckDB relation, or a list of dicts with the arguments of
        :meth:`assert_fact` as columns.

        >>> facts = mem.assert_many([{"subject": "svc", "predicate": "replicas", "object": "3"},
        ...                          {"subject": "db", "predicate": "replicas", "object": "2"}])
        >>> [f.subject for f in facts], facts[0].recorded_at == facts[1].recorded_at
        (['svc', 'db'], True)
        """
        checked, news = assertion_columns.read(rows, self._engine.set_based)
        return self._engine.assertions(news) if checked is None else self._engine.checked_assertions(checked)

    def invalidate(self, fact_id: str, *, at: TimeLike, reason: str) -> Fact:
        """The fact ended in the world at ``at`` (sets or corrects its end; a new revision).

        >>> f = mem.assert_fact("checkout-api", "instance_type", "m5.large", valid_from="2026-03-01")
        >>> ended = mem.invalidate(f.fact_id, at="2026-03-10", reason="resized")
        >>> ended.status, ended.valid_to.date().isoformat()
        ('ended', '2026-03-10')
        """
        end = to_utc(at, field="at")
        if end is None:
            raise TempomemError("at: an end time is required")
        why = clean_reason(reason)
        return self._engine.change(fact_id, lambda batch: batch.invalidate(fact_id, end, why))

    def forget(self, subject: str, *, reason: str, scope: str | None = None) -> int:
        """Erase a subject from every file of the store, leaving tombstones; returns the facts erased.

        >>> _ = mem.assert_fact("customer-42", "iban", "FR76 3000 6000")
        >>> mem.forget("customer-42", reason="GDPR request")
        1
        """
        return erasure.forget(self._engine, subject, reason=reason, scope=scope)

    def correct(self, fact_id: str, *, reason: str) -> Fact:
        """Retract a fact as never true: it leaves every belief from now on, its validity unchanged.

        >>> f = mem.assert_fact("checkout-api", "instance_type", "m5.large")
        >>> mem.correct(f.fact_id, reason="misread the console").status
        'retracted'
        """
        why = clean_reason(reason)
        return self._engine.change(fact_id, lambda batch: batch.correct(fact_id, why))

    def backfill(self, data: Any, *, mapping: dict[str, str] | None = None, format: str | None = None,
                 lenient: bool = False, strict: bool = False, resolve: bool = False,
                 epoch_unit: str | None = None, progress: Any = None) -> Any:
        """Load existing history keeping its belief times; returns a :class:`tm.BackfillReport` (SPEC §9).

        ``data``: a Parquet/CSV/JSON Lines path (by extension or ``format=``), a folder or glob
        of them, a Polars/pandas/Arrow frame, a DuckDB relation or a list of dicts; ``format``
        may also name an importer (``"graphiti"``, ``"mem0"``, ``"sqlite4ts"``). ``mapping``
        renames source columns to the SPEC's. Bad rows are rejected one by one and reported
        (``strict=True``: all or nothing, raising :class:`tm.BackfillError`). ``lenient``
        reads unparseable valid times as missing and loads beliefs from the future.
        ``resolve=True`` replays the rows through the write path in ``recorded_at`` order, after what the
        store believes (a row no later than its key's latest stored revision is rejected). As given, a row
        repeating a stored revision (key, value, valid interval, ``recorded_at``, fact id) is a duplicate
        (flag ``already_stored``), one naming a stored fact after its latest revision is its next: a source
        that grew since it was loaded adds only what is new. ``epoch_unit``
        (``"s"``, ``"ms"``, ``"us"``) reads bare numbers as epochs; without it a number is a
        rejected row (nothing says seconds rather than milliseconds). Text times follow the
        grammar of :mod:`tempomem.timegrammar`, as everywhere. ``progress``: by
        default a bar (tqdm; a widget in Jupyter) for a load of a million rows or more where
        someone watches; ``False`` for none, or a ``progress(stage, rows_done)`` callback
        (:mod:`tempomem.progress`).

        >>> report = mem.backfill([
        ...     {"subject": "svc", "predicate": "owner", "object": "ana", "ts": "2025-06-01"},
        ...     {"subject": "svc", "predicate": "owner", "object": "bo", "ts": "not a time"}],
        ...     mapping={"ts": "recorded_at"})
        >>> report.loaded, report.rejected["field"].to_list()
        (1, ['recorded_at'])
        """
        from .backfill import backfill
        from .progress import reporter

        with reporter(progress) as notify:
            return backfill(self._engine, data, mapping=mapping, format=format, lenient=lenient, strict=strict,
                            resolve=resolve, epoch_unit=epoch_unit, progress=notify)

    def embed(self, embedder: Any = None) -> int:
        """Fill missing embeddings in bulk with ``embedder`` (default: the store's); returns rows filled.

        Embeddings are derived data: the rows are rewritten in place in one atomic commit (same
        revisions, same ``recorded_at``/``ingested_at``), so no belief changes. Erased facts
        are never embedded.

        >>> _ = mem.assert_fact("customer-42", "iban", "DE89 3704")
        >>> mem.embed()
        1
        """
        from . import recall

        return recall.embed(self._engine, embedder or recall.store_embedder(self.reader))

    def recall(self, query: Any, k: int = 5, *, valid_at: TimeLike | None = None, believed_at: TimeLike | None = None,
               subject: str | None = None, predicate: str | None = None, trusted: Any = None) -> pl.DataFrame:
        """The ``k`` facts in force at (``valid_at``, ``believed_at``) most similar to ``query``.

        ``query`` is text (embedded by the store's embedder) or a vector. Times default to the
        store clock's now. The time slice comes first (as_believed semantics: a closed,
        retracted or not-yet-believed fact is never returned), cosine ranking second; the
        frame has the revision's columns plus ``score``, best first. ``trusted`` keeps only
        facts meeting the trusted policy of :meth:`as_of` (see :mod:`tempomem.trust`).
        Facts still lacking an embedding are embedded first (see :meth:`embed`).

        >>> _ = mem.assert_fact("customer-42", "iban", "DE89 3704")
        >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.xlarge")
        >>> mem.recall("customer 42 iban", k=1)["object"].to_list()
        ['DE89 3704']
        """
        from . import recall

        return recall.recall(self.reader, query, k, valid_at=valid_at, believed_at=believed_at,
                             subject=subject, predicate=predicate, trusted=trusted)
