"""Where a key's rows are: the row groups of a store's files that can hold them.

A small commit reads the states of a few keys (``states.StateCache``), and a query naming a
subject reads that subject's rows (``pointread``). Through DuckDB either costs 20-40 ms on a
large store, most of it opening each file of the version and testing the statistics of every
row group; here it is a lookup in memory and a read of the one or two row groups that can hold them.

Data files never change once written, so what is known about each is kept until it leaves the
table: for a file of few rows (the write path's commits and their compactions), the hashes of
the keys and of the subjects it holds; for a larger one (sorted by key: a backfill, a fold), each
row group's min/max of ``scope``, ``subject`` and ``predicate`` from its Parquet footer. A hash
that collides, or a row group without those statistics, is read for nothing: the index can only
make a read smaller, never miss a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .schema import EVENT_SCHEMA

Key = tuple[str, str, str]
_KEY_COLUMNS = ["scope", "subject", "predicate"]
#: A file of at most this many rows is indexed by the hashes of its keys (8 bytes a row), not
#: by statistics: a commit's file, or a merge of many, has statistics spanning unrelated subjects.
_HASHED_FILE_ROWS = 65_536
_SEPARATOR = "\x1f"
_STRINGS = {f.name for f in EVENT_SCHEMA if f.type == pa.string()}


@dataclass(frozen=True)
class _Bounds:
    """One key column's min and max in each row group of a file; ``known`` is false where the
    footer has no usable statistics (then the group may hold any value)."""

    lo: np.ndarray
    hi: np.ndarray
    known: np.ndarray

    def may_hold(self, value: str) -> np.ndarray:
        return ~self.known | ((self.lo <= value) & (value <= self.hi))


@dataclass(frozen=True)
class _File:
    metadata: pq.FileMetaData
    hashes: np.ndarray | None  # a small file's key hashes, sorted; None: use the statistics
    subjects: np.ndarray | None  # a small file's subject hashes, sorted
    bounds: dict[str, _Bounds]  # per key column (a large file)
    ended: np.ndarray  # per row group: every row folded with its belief end stored
    dictionary: list[str]  # the string columns the file dictionary-encodes, read as dictionaries

    def source(self, path: str) -> pq.ParquetFile:
        # Dictionary columns stay dictionaries until the few rows found are cast: decoding a
        # 16k-row group takes half the time. A column stored plain is not made one (that costs).
        return pq.ParquetFile(path, metadata=self.metadata, pre_buffer=False, read_dictionary=self.dictionary)

    def groups(self) -> np.ndarray:
        return np.arange(self.metadata.num_row_groups)


def _statistics(metadata: pq.FileMetaData) -> tuple[dict[str, _Bounds], np.ndarray]:
    names = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
    bounds = {}
    for name in _KEY_COLUMNS:
        stats = [group.column(names[name]).statistics for group in groups]
        known = np.array([s is not None and s.has_min_max and s.null_count == 0 for s in stats], dtype=bool)
        lo = np.array([s.min if k else "" for s, k in zip(stats, known, strict=True)], dtype=np.str_)
        hi = np.array([s.max if k else "" for s, k in zip(stats, known, strict=True)], dtype=np.str_)
        bounds[name] = _Bounds(lo, hi, known)
    ended = np.array([_all_ended(group, names) for group in groups], dtype=bool)
    return bounds, ended


def _all_ended(group: pq.RowGroupMetaData, names: dict[str, int]) -> bool:
    """Whether the footer shows every row of the group folded (``folded`` all true) with its belief
    end stored (``folded_until`` never NULL): no such row is a row of ``facts`` (revisions.sql)."""
    if "folded" not in names or "folded_until" not in names:
        return False
    folded = group.column(names["folded"]).statistics
    until = group.column(names["folded_until"]).statistics
    return (folded is not None and folded.has_min_max and folded.null_count == 0 and folded.min is True
            and until is not None and until.null_count == 0)


def _dictionary_columns(metadata: pq.FileMetaData) -> list[str]:
    if not metadata.num_row_groups:
        return []
    group = metadata.row_group(0)
    chunks = (group.column(i) for i in range(metadata.num_columns))
    return [c.path_in_schema for c in chunks if c.path_in_schema in _STRINGS
            and any("DICTIONARY" in e for e in c.encodings)]


def _joined(table: pa.Table) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(*(table[c].cast(pa.string()) for c in _KEY_COLUMNS), _SEPARATOR)


def _hashes(joined: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return pl.Series(joined).hash().to_numpy()


def _holds(hashes: np.ndarray, wanted: np.ndarray) -> bool:
    if not len(hashes):
        return False
    at = np.searchsorted(hashes, wanted).clip(max=len(hashes) - 1)
    return bool((hashes[at] == wanted).any())


class KeyIndex:
    """The rows of given keys in given files, reading only the row groups that can hold them."""

    def __init__(self) -> None:
        self._files: dict[str, _File] = {}

    def rows(self, files: Sequence[str], keys: Iterable[Key]) -> pa.Table:
        """Every row (``EVENT_SCHEMA``) of ``keys`` in ``files``, in no particular order."""
        keys = list(keys)
        wanted = pa.array([_SEPARATOR.join(k) for k in keys], pa.string())
        wanted_hashes = _hashes(wanted)
        parts = [EVENT_SCHEMA.empty_table()]
        for path, entry in self._entries(files):
            if entry.hashes is not None:
                groups = entry.groups() if _holds(entry.hashes, wanted_hashes) else []
            else:
                may = np.zeros(entry.metadata.num_row_groups, dtype=bool)
                for key in keys:
                    may |= np.logical_and.reduce([entry.bounds[c].may_hold(v) for c, v in zip(_KEY_COLUMNS, key,
                                                                                            strict=True)])
                groups = np.flatnonzero(may)
            if len(groups):
                source = entry.source(path)
                keys_read = source.read_row_groups(list(groups), columns=_KEY_COLUMNS, use_threads=False)
                parts.append(_found(source, list(groups), pc.is_in(_joined(keys_read), wanted), EVENT_SCHEMA.names))
        return pa.concat_tables(parts)

    def subject_rows(self, files: Sequence[str], subject: str, *, scope: str | None = None,
                     predicate: str | None = None, facts_only: bool = False,
                     unread: Sequence[str] = ()) -> pa.Table:
        """Every row (``EVENT_SCHEMA``) of ``subject`` in ``files`` (of ``scope`` and ``predicate``
        when given), in no particular order.

        ``facts_only`` skips the row groups whose footer shows no row of ``facts`` (every row
        folded with its belief end stored, revisions.sql), for a reader of ``facts`` alone.
        The ``unread`` columns are not decoded: they come back NULL.
        """
        given = {"scope": scope, "subject": subject, "predicate": predicate}
        given = {c: v for c, v in given.items() if v is not None}
        wanted = None
        columns = [c for c in EVENT_SCHEMA.names if c not in unread]
        parts = [EVENT_SCHEMA.empty_table()]
        for path, entry in self._entries(files):
            if entry.subjects is not None:
                wanted = _hashes(pa.array([subject], pa.string())) if wanted is None else wanted
                groups = entry.groups() if _holds(entry.subjects, wanted) else []
            else:
                may = np.logical_and.reduce([entry.bounds[c].may_hold(v) for c, v in given.items()])
                groups = np.flatnonzero(may & ~entry.ended if facts_only else may)
            if len(groups):
                source = entry.source(path)
                keys_read = source.read_row_groups(list(groups), columns=list(given), use_threads=False)
                found = np.logical_and.reduce([pc.fill_null(pc.equal(keys_read[c].cast(pa.string()), v), False)
                                               .to_numpy(zero_copy_only=False) for c, v in given.items()])
                parts.append(_found(source, list(groups), found, columns))
        return pa.concat_tables(parts)

    def _entries(self, files: Sequence[str]) -> Iterable[tuple[str, _File]]:
        listed = set(files)
        for gone in [f for f in self._files if f not in listed]:
            del self._files[gone]
        for path in files:
            yield path, self._files.get(path) or self._index(path)

    def _index(self, path: str) -> _File:
        metadata = pq.read_metadata(path)
        hashes = subjects = None
        bounds: dict[str, _Bounds] = {}
        if metadata.num_rows <= _HASHED_FILE_ROWS:
            table = pq.ParquetFile(path, metadata=metadata).read(columns=_KEY_COLUMNS, use_threads=False)
            hashes = np.unique(_hashes(_joined(table)))
            subjects = np.unique(_hashes(table["subject"].cast(pa.string())))
            ended = np.zeros(metadata.num_row_groups, dtype=bool)
        else:
            bounds, ended = _statistics(metadata)
        entry = self._files[path] = _File(metadata, hashes, subjects, bounds, ended, _dictionary_columns(metadata))
        return entry


def _found(source: pq.ParquetFile, groups: list[int], found: pa.Array | pa.ChunkedArray,
           columns: list[str]) -> pa.Table:
    """The rows of ``groups`` where ``found`` is true, as ``EVENT_SCHEMA`` (columns not in
    ``columns`` NULL). Only the groups holding one of them are decoded (a group whose statistics
    span the rows sought, such as the one where a fold's two parts meet, often holds none)."""
    found = np.asarray(found.to_numpy(zero_copy_only=False) if isinstance(found, (pa.Array, pa.ChunkedArray))
                       else found, dtype=bool)
    ends = np.cumsum([source.metadata.row_group(g).num_rows for g in groups])
    starts = ends - [source.metadata.row_group(g).num_rows for g in groups]
    holding = [i for i, (lo, hi) in enumerate(zip(starts, ends, strict=True)) if found[lo:hi].any()]
    if not holding:
        return EVENT_SCHEMA.empty_table()
    mask = np.concatenate([found[starts[i]:ends[i]] for i in holding])
    # one reader thread: for a row group or two a pool's start-up costs more than it saves
    read = source.read_row_groups([groups[i] for i in holding], columns=columns, use_threads=False)
    # a file deltalake wrote reads as string views, which pyarrow cannot filter: plain types first
    rows = pa.table({f.name: read[f.name] if pa.types.is_dictionary(read.schema.field(f.name).type)
                     else read[f.name].cast(f.type) for f in EVENT_SCHEMA if f.name in columns}).filter(mask)
    return pa.table([rows[f.name].cast(f.type) if f.name in columns else pa.nulls(rows.num_rows, f.type)
                     for f in EVENT_SCHEMA], schema=EVENT_SCHEMA)
