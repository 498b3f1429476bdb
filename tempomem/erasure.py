"""``mem.forget``: erase a subject from every file of the store, leaving tombstones (SPEC §8).

Erasure is the one operation that rewrites stored rows. It reads every revision, rewrites
those of the erased facts (subject hashed, object/text/attributes/embedding/artifacts gone,
status ``erased``), adds one tombstone revision per erased fact carrying the reason, scrubs
the erased strings from the reasons of other facts that quote them ("superseded by fact …
(IBAN)"), and replaces the whole table in one commit with :meth:`Storage.overwrite`, which
deletes the old data files and the old log entries so the bytes are gone from disk.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import TYPE_CHECKING

import polars as pl

from .errors import TempomemError
from .forks import check_polars
from .queries import check_keys
from .schema import EVENT_SCHEMA, PREVIOUS, SORT_KEYS
from .staterows import micros
from .times import MICROSECOND, system_clock
from .writepath import clean_reason

if TYPE_CHECKING:
    from .engine import Engine

#: Prefix of a hashed (forgotten) subject; ``memory_diff`` finds erasures by it.
HASH_PREFIX = "erased:"
_SCRUBBED = "[erased]"


def hash_subject(salt: str, name: str) -> str:
    """The stable salted hash that replaces a forgotten subject's name.

    >>> hash_subject("00", "customer-42")[:7]
    'erased:'
    """
    return HASH_PREFIX + hashlib.sha256(f"{salt}\x00{name}".encode()).hexdigest()[:32]


def forget(engine: Engine, subject: str, *, reason: str, scope: str | None = None) -> int:
    """Erase ``subject`` (and every fact whose object is exactly it); return the facts erased.

    Afterwards no Parquet file or log entry of the store holds the name as a subject or an
    object, in any fact's text, reason, attributes or artifacts, nor the erased facts' objects
    or texts (another subject or object that merely contains the name, ``customer-42-card``,
    is another entity's and is kept); each erased fact keeps its times as an ``erased``
    tombstone whose last revision carries ``reason``. ``scope=None`` erases it in every scope.
    """
    if not isinstance(subject, str) or not subject.strip():
        raise TempomemError("subject: a non-empty subject name is required")
    check_keys(scope=scope)
    why = clean_reason(reason)
    check_polars()  # the rewrite is Polars work under the writer lock: refused before taking it
    with engine.exclusive():
        commit_time = engine.commit_time()
        rows = pl.from_arrow(engine.connection().sql("SELECT * FROM _tm_events").to_arrow_table())
        assert isinstance(rows, pl.DataFrame)
        in_scope = pl.lit(True) if scope is None else pl.col("scope") == scope
        hit = ((pl.col("subject") == subject) | (pl.col("object") == subject)) & in_scope
        targets = rows.filter(hit & (pl.col("status") != "erased"))["fact_id"].unique()
        if targets.is_empty():
            where = "" if scope is None else f" in scope {scope!r}"
            raise TempomemError(f"subject: {subject!r} is neither a subject nor an object of any fact{where}")
        salt = engine.storage.read_settings()["salt"]
        table, last_us = _erased_table(rows, targets, subject, hash_subject(salt, subject), why, commit_time,
                                       in_scope)
        engine.overwrite(table.to_arrow(), last_us)
    return targets.len()


def _scrubbed_mentions(name: str) -> dict[str, pl.Expr]:
    """The other facts' free text (``text``, ``attributes``, ``artifacts``) with the name
    replaced, as it stands and as JSON writes it inside a string; the embedding of a text that
    changed is dropped, since it was made from the name (``mem.embed()`` makes it again). Keys
    and objects that merely contain the name are other entities' and are kept."""
    forms = sorted({name, json.dumps(name)[1:-1]}, key=len, reverse=True)
    blanks = [_SCRUBBED] * len(forms)
    mentioned = pl.col("text").str.contains_any(forms).fill_null(False)
    return {
        "text": pl.col("text").str.replace_many(forms, blanks),
        "attributes": pl.col("attributes").str.replace_many(forms, blanks),
        "artifacts": pl.col("artifacts").list.eval(pl.element().str.replace_many(forms, blanks)),
        "embedding": pl.when(mentioned).then(None).otherwise(pl.col("embedding")),
    }


def _erased_table(rows: pl.DataFrame, targets: pl.Series, name: str, hashed: str, reason: str,
                  commit_time: datetime, in_scope: pl.Expr) -> tuple[pl.DataFrame, int]:
    """All rows after erasure, sorted for storage, and the newest belief time in microseconds;
    the name is scrubbed from the reasons and the free text of the other facts ``in_scope``
    (:func:`_scrubbed_mentions`): in another scope it may name another entity."""
    erased = pl.col("fact_id").is_in(targets.implode())
    gone = rows.filter(erased)
    # Strings to scrub from reasons: the name, and each erased object the way the write path
    # quotes it, "(object)", which cannot match inside a fact id.
    quoted = [f"({o})" for o in gone["object"].drop_nulls().unique().to_list()]
    patterns = sorted({name, *quoted}, key=len, reverse=True)
    scrub = pl.col("reason").str.replace_many(patterns, [_SCRUBBED] * len(patterns))

    tombstones = (
        gone.sort("revision").group_by("fact_id").last()
        .with_columns(
            revision=pl.col("revision") + 1,
            recorded_at=pl.max_horizontal(pl.lit(commit_time), pl.col("recorded_at") + MICROSECOND),
            reason=pl.lit(reason),
            ingested_at=pl.lit(system_clock()),
        )
    )
    wiped = pl.concat([gone.with_columns(reason=scrub), tombstones.select(gone.columns)]).with_columns(
        subject=pl.when(pl.col("subject") == name).then(pl.lit(hashed)).otherwise(pl.col("subject")),
        object=pl.lit(None, pl.String),
        text=pl.lit(None, pl.String),
        attributes=pl.lit(None, pl.String),
        embedding=pl.lit(None, pl.List(pl.Float32)),
        artifacts=pl.lit([], pl.List(pl.String)),
        status=pl.lit("erased"),
        # The tombstone ends the belief of the row before it: with every revision of an erased
        # fact unfolded, the revisions view derives that itself (revisions.sql).
        folded=pl.lit(False),
        folded_until=pl.lit(None, pl.Datetime("us", "UTC")),
    ).sort("fact_id", "revision").with_columns(
        # each row repeats the revision before it as it now stands: wiped, or the tombstone's
        pl.col(name).shift(1).over("fact_id").alias(f"prev_{name}") for name in PREVIOUS
    )
    # a fact whose key or object holds the name (another entity's: customer-42-card) keeps it there
    # and its text with it; scrubbing its text would only make that text disagree with its key
    mentions = in_scope & ~pl.any_horizontal(pl.col(c).str.contains(name, literal=True)
                                             for c in ("scope", "subject", "object"))
    kept = rows.filter(~erased).with_columns(
        reason=pl.when(in_scope).then(scrub).otherwise(pl.col("reason"))).with_columns(
        pl.when(mentions).then(expr).otherwise(pl.col(column)).alias(column)
        for column, expr in _scrubbed_mentions(name).items())
    everything = pl.concat([kept, wiped]).sort(
        [k for k, _ in SORT_KEYS], descending=[d == "descending" for _, d in SORT_KEYS]
    )
    last = tombstones["recorded_at"].max()
    return everything.select(EVENT_SCHEMA.names), micros(last)
