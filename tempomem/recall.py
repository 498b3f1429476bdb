"""Validity-constrained recall: embeddings as derived data, and similarity over a time slice.

``embed`` fills missing embeddings in place (no new revision, no belief time moves);
``recall`` runs the ``recall`` SQL macro (time slice first, cosine ranking second). The SQL this
module runs itself is in ``recall.sql``.

Speed: in tempomem's own DuckDB connection the recall macro runs over stand-ins that give the
same rows faster: ``_tm_index`` and ``_tm_rows`` read an in-memory copy of ``revisions``
without vectors, rebuilt when the store version changes; ``tm_scores`` reads similarities that
NumPy computed from vectors held in memory per data file (a commit loads only the files it
added and drops the ones it removed; a compaction reloads everything once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from .connection import sql_parts
from .embed import Embedder, default_embedder
from .errors import TempomemError
from .forks import check_polars
from .progress import batches
from .queries import frame
from .storage import Storage
from .times import TimeLike, to_utc
from .trust import trust_filters

if TYPE_CHECKING:
    from .engine import Engine
    from .reader import Reader


#: The named parts of recall.sql: ``{name: text}``.
_SQL = sql_parts("recall.sql")
_SCORES_SCHEMA = pa.schema([("fact_id", pa.string()), ("revision", pa.int32()), ("score", pa.float64())])


@dataclass
class _Vectors:
    """The vectors of one data file that have one length: keys, matrix and row norms."""

    fact_id: pa.Array
    revision: pa.Array
    matrix: np.ndarray
    norms: np.ndarray


@dataclass
class _Cache:
    """What tempomem's connection holds in memory for recall and traversal."""

    con: duckdb.DuckDBPyConnection
    vectors: dict[str, list[_Vectors]] = field(default_factory=dict)  # data file -> its vectors
    missing: dict[str, int] = field(default_factory=dict)  # data file -> rows lacking an embedding
    index_version: int = -2


def store_embedder(reader: Reader) -> Embedder:
    """The store's embedder: the one given to ``tm.open``, else the local hashing embedder."""
    if reader.embedder is None:
        reader.embedder = default_embedder()
    return reader.embedder


def _matching_embedder(storage: Storage, embedder: Embedder, *, record: bool) -> None:
    """Refuse an embedder other than the one that made the store's vectors (recorded in settings).

    Vectors of two embedders of one length are not comparable, and nothing else would tell.
    ``record`` stores this embedder as the store's when none is recorded yet (hold the lock).
    """
    _check_embedder(embedder)
    this = f"{type(embedder).__module__}.{type(embedder).__qualname__}(dim={embedder.dim})"
    settings = storage.read_settings()
    made_by = settings.get("embedder")
    if made_by is None:
        if record:
            storage.write_settings({**settings, "embedder": this})
        return
    if made_by != this:
        raise TempomemError(f"embedder: this store's vectors were made by {made_by}, not {this}; "
                            f"open it with that embedder (tm.open(..., embedder=...))")


def _vectors_table(fact_ids: pa.Array, revisions: pa.Array, vectors: np.ndarray) -> pa.Table:
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel())
    lists = pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1]).cast(pa.list_(pa.float32()))
    return pa.table({"fact_id": fact_ids, "revision": revisions, "embedding": lists})


def _embed_texts(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """``embedder``'s vectors of ``texts`` (an embedder :func:`_matching_embedder` took), refused
    unless one row of ``dim`` finite numbers a text (a NaN stored would make every later recall's
    scores NaN, silently)."""
    try:
        vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise TempomemError(f"embedder: returned something that is not numbers ({exc})") from None
    if vectors.shape != (len(texts), embedder.dim):
        raise TempomemError(f"embedder: returned shape {vectors.shape} for {len(texts)} texts of dim {embedder.dim}")
    if not np.isfinite(vectors).all():
        bad = int(np.flatnonzero(~np.isfinite(vectors).all(axis=1))[0])
        raise TempomemError(f"embedder: returned a vector with NaN or infinity, for the text {texts[bad]!r}")
    return vectors


def _check_embedder(embedder: Any) -> None:
    if not isinstance(embedder, Embedder) or not isinstance(embedder.dim, int):
        raise TempomemError(f"embedder: expected an object with dim (an int) and embed(texts) returning one vector "
                            f"per text (tempomem.embed.Embedder), got {type(embedder).__name__}")


#: Texts per embedder call in :func:`embed`: big enough to keep a model's batches full.
_EMBED_BATCH = 65_536


def embed(engine: Engine, embedder: Embedder) -> int:
    """Fill every missing embedding (see :meth:`Memory.embed`); returns the rows filled."""
    check_polars()  # the texts are Polars work under the writer lock: refused before taking it
    _check_embedder(embedder)  # refused before the lock too
    with engine.exclusive():
        con = engine.connection()
        missing = con.sql(_SQL["missing"]).to_arrow_table()
        if missing.num_rows == 0:
            return 0
        _matching_embedder(engine.storage, embedder, record=True)
        # One model call per distinct text: revisions of a fact usually share their text.
        texts = pl.from_arrow(missing.select(["text"]))
        distinct = texts.unique(maintain_order=True)["text"].to_list()
        # In slices, so that a bar (tempomem.progress) can follow a million texts or more; each
        # text is embedded on its own, so the slices change no vector.
        vectors = np.concatenate([_embed_texts(embedder, distinct[start:stop])
                                  for start, stop in batches(len(distinct), _EMBED_BATCH)])
        distinct = pl.DataFrame({"text": pl.Series(distinct, dtype=pl.String)})
        position = texts.join(distinct.with_row_index("i"), on="text", how="left", maintain_order="left")["i"]
        table = _vectors_table(missing["fact_id"], missing["revision"], vectors[position.to_numpy()])
        engine.set_embeddings(table)
        return missing.num_rows


def _load_vectors(con: duckdb.DuckDBPyConnection, file: str) -> list[_Vectors]:
    """A data file's embeddings as one float32 matrix per vector length."""
    table = con.sql(_SQL["file_vectors"], params={"f": file}).to_arrow_table()
    if table.num_rows == 0:
        return []
    lengths = pc.list_value_length(table["embedding"]).to_numpy()
    out = []
    for dim in np.unique(lengths):
        part = table.filter(pa.array(lengths == dim)) if len(np.unique(lengths)) > 1 else table
        values = part["embedding"].combine_chunks().flatten().to_numpy(zero_copy_only=False)
        matrix = np.ascontiguousarray(values, dtype=np.float32).reshape(part.num_rows, int(dim))
        out.append(_Vectors(part["fact_id"].combine_chunks(), part["revision"].combine_chunks(), matrix,
                            np.linalg.norm(matrix, axis=1)))
    return out


def _refresh(reader: Reader, con: duckdb.DuckDBPyConnection, *, vectors: bool = True) -> _Cache:
    """Bring the in-memory index (and, with ``vectors``, the vectors) of ``con`` up to date."""
    cache: _Cache | None = reader.caches.get("recall")
    if cache is None or cache.con is not con:
        con.register("_tm_query_scores", _SCORES_SCHEMA.empty_table())  # the macro binds at creation
        con.execute(_SQL["scores"])
        cache = _Cache(con)
        reader.caches["recall"] = cache
    snap = reader.storage.snapshot()
    if cache.index_version != snap.version:
        con.execute(_SQL["index"])
        cache.index_version = snap.version
    if not vectors:
        return cache
    current = set(snap.files)
    for gone in [f for f in cache.vectors if f not in current]:
        del cache.vectors[gone], cache.missing[gone]
    new = [f for f in snap.files if f not in cache.vectors]
    for file in new:
        cache.vectors[file] = _load_vectors(con, file)
    if new:
        counts = dict.fromkeys(new, 0)
        counts.update(con.sql(_SQL["missing_per_file"], params={"files": new}).fetchall())
        cache.missing.update(counts)
    return cache


def _scores(cache: _Cache, query: list[float]) -> list[tuple[_Vectors, np.ndarray]]:
    """Cosine similarity of ``query`` to every cached vector of its length (zero vectors: 0)."""
    q = np.asarray(query, dtype=np.float32)
    q_norm = float(np.linalg.norm(q))
    out, lengths = [], set()
    for parts in cache.vectors.values():
        for part in parts:
            lengths.add(part.matrix.shape[1])
            if part.matrix.shape[1] != q.size:
                continue
            denominator = part.norms * q_norm
            dots = (part.matrix @ q).astype(np.float64)
            out.append((part, np.divide(dots, denominator, out=np.zeros_like(dots), where=denominator > 0)))
    if not out and lengths:  # an answer of nothing would read as "nothing is similar"
        raise TempomemError(f"query: a vector of {q.size} numbers, but this store's vectors have "
                            f"{', '.join(map(str, sorted(lengths)))}")
    return out


def prepared_connection(reader: Reader) -> duckdb.DuckDBPyConnection:
    """The store's connection with its in-memory time-slice index up to date (hold ``reader.lock``)."""
    con = reader.connection()
    _refresh(reader, con, vectors=False)
    return con


def indexed_version(reader: Reader) -> int:
    """The store version the in-memory index was built from (after :func:`prepared_connection`)."""
    return reader.caches["recall"].index_version


def _query_vector(reader: Reader, query: Any) -> list[float]:
    if isinstance(query, str):
        if not query.strip():
            raise TempomemError("query: must not be empty")
        embedder = store_embedder(reader)
        _matching_embedder(Storage(reader.storage.path), embedder, record=False)
        return _embed_texts(embedder, [query])[0].tolist()
    try:
        vector = np.asarray(query, dtype=np.float64)
    except (TypeError, ValueError):
        raise TempomemError(f"query: expected text or a vector of numbers, got {type(query).__name__}") from None
    if vector.ndim != 1 or vector.size == 0 or not np.all(np.isfinite(vector)):
        raise TempomemError(f"query: expected a non-empty 1-D vector of finite numbers, got shape {vector.shape}")
    return vector.tolist()


#: How many of the best scores recall offers the macro at first (they widen 8-fold as needed).
_OFFER_PER_K = 64
_MIN_OFFER = 1024


def _best(scores: list[tuple[_Vectors, np.ndarray]], wanted: int) -> tuple[pa.Table, bool]:
    """The scored rows at least as good as the ``wanted``-th best; True when that is all of them."""
    total = sum(values.size for _, values in scores)
    threshold = -np.inf
    if total > wanted:
        every = np.concatenate([values for _, values in scores])
        threshold = np.partition(every, total - wanted)[total - wanted]
    ids, revisions, kept = [], [], []
    for part, values in scores:
        keep = np.flatnonzero(values >= threshold)
        ids.append(part.fact_id.take(keep))
        revisions.append(part.revision.take(keep))
        kept.append(pa.array(values[keep], pa.float64()))
    offered = pa.Table.from_arrays([pa.chunked_array(ids, pa.string()), pa.chunked_array(revisions, pa.int32()),
                                    pa.chunked_array(kept, pa.float64())], schema=_SCORES_SCHEMA)
    return offered, offered.num_rows == total


def recall(reader: Reader, query: Any, k: int = 5, *, valid_at: TimeLike | None = None,
           believed_at: TimeLike | None = None, subject: str | None = None, predicate: str | None = None,
           trusted: Any = None) -> pl.DataFrame:
    """See :meth:`Memory.recall`."""
    check_polars()  # the store's embedder reads a text query with Polars
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise TempomemError(f"k: must be a positive integer, got {k!r}")
    vector = _query_vector(reader, query)
    now = reader.now()
    at: datetime = to_utc(valid_at, field="valid_at") or now  # type: ignore[assignment]
    believed: datetime = to_utc(believed_at, field="believed_at") or now  # type: ignore[assignment]
    policy = trust_filters(trusted)  # the same policy as as_of/current (tempomem.trust)
    with reader.lock:
        cache = _refresh(reader, reader.connection())
        if any(cache.missing.values()):
            embed(reader.engine, store_embedder(reader))
            cache = _refresh(reader, reader.connection())
        scores = _scores(cache, vector)
        params = {"q": vector, "k": k, "valid_at": at, "believed_at": believed, "subject": subject,
                  "predicate": predicate, "sources": policy["trusted_sources"],
                  "min_confidence": policy["trusted_min_confidence"]}
        # Exact top k of the slice without joining every score to it: offer the macro the best
        # `wanted` scores (all ties of the last one included); if fewer than k of them are in
        # the slice, every unseen vector scores no higher than those, so widen and ask again.
        wanted = max(_OFFER_PER_K * k, _MIN_OFFER)
        try:
            while True:
                offered, complete = _best(scores, wanted)
                cache.con.register("_tm_query_scores", offered)
                found = frame(cache.con, _SQL["recall"], params)
                if found.height >= k or complete:
                    return found
                wanted *= 8
        finally:  # let the scores go; the macro stays bound to the (empty) name
            cache.con.register("_tm_query_scores", _SCORES_SCHEMA.empty_table())
