"""Where a key's rows are: the row groups of a store's files that can hold them.

A small commit reads the states of a few keys (``states.StateCache``). Through DuckDB that
costs 20-40 ms on a 1M-revision store, most of it opening each file of the version; here it is
a lookup in memory and a read of the one or two row groups that can hold the key.

Data files never change once written, so what is known about each is kept until it leaves the
table: for a file of few rows (the write path's commits and their compactions), the hashes of
the keys it holds; for a larger one (sorted by key: a backfill, a fold), each row group's
min/max of ``scope``, ``subject`` and ``predicate`` from its Parquet footer. A hash that
collides, or a row group without those statistics, is read for nothing: the index can only
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
from .storage.writer import DICTIONARY_COLUMNS

Key = tuple[str, str, str]
_KEY_COLUMNS = ["scope", "subject", "predicate"]
#: A file of at most this many rows is indexed by the hashes of its keys (8 bytes a row), not
#: by statistics: a commit's file, or a merge of many, has statistics spanning unrelated subjects.
_HASHED_FILE_ROWS = 65_536
_SEPARATOR = "\x1f"


@dataclass(frozen=True)
class _File:
    metadata: pq.FileMetaData
    hashes: np.ndarray | None  # a small file's key hashes, sorted; None: use the statistics
    bounds: tuple[tuple[tuple[str, str] | None, ...], ...]  # per row group, per key column


def _bounds(metadata: pq.FileMetaData) -> tuple[tuple[tuple[str, str] | None, ...], ...]:
    names = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    out = []
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        per_column = []
        for name in _KEY_COLUMNS:
            stats = group.column(names[name]).statistics
            usable = stats is not None and stats.has_min_max and stats.null_count == 0
            per_column.append((stats.min, stats.max) if usable else None)
        out.append(tuple(per_column))
    return tuple(out)


def _may_hold(bounds: tuple[tuple[str, str] | None, ...], key: Key) -> bool:
    return all(b is None or b[0] <= value <= b[1] for b, value in zip(bounds, key, strict=True))


def _joined(table: pa.Table) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(*(table[c].cast(pa.string()) for c in _KEY_COLUMNS), _SEPARATOR)


def _hashes(joined: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return pl.Series(joined).hash().to_numpy()


class KeyIndex:
    """The rows of given keys in given files, reading only the row groups that can hold them."""

    def __init__(self) -> None:
        self._files: dict[str, _File] = {}

    def rows(self, files: Sequence[str], keys: Iterable[Key]) -> pa.Table:
        """Every row (``EVENT_SCHEMA``) of ``keys`` in ``files``, in no particular order."""
        keys = list(keys)
        listed = set(files)
        for gone in [f for f in self._files if f not in listed]:
            del self._files[gone]
        wanted = pa.array([_SEPARATOR.join(k) for k in keys], pa.string())
        wanted_hashes = _hashes(wanted)
        parts = [pa.Table.from_pylist([], schema=EVENT_SCHEMA)]
        for path in files:
            entry = self._files.get(path) or self._index(path)
            if entry.hashes is not None:
                at = np.searchsorted(entry.hashes, wanted_hashes).clip(max=len(entry.hashes) - 1)
                present = len(entry.hashes) and (entry.hashes[at] == wanted_hashes).any()
                groups = list(range(entry.metadata.num_row_groups)) if present else []
            else:
                groups = [g for g, b in enumerate(entry.bounds) if any(_may_hold(b, k) for k in keys)]
            if not groups:
                continue
            # One reader thread: for a row group or two a pool's start-up costs more than it
            # saves. Dictionary columns stay dictionaries until the few rows found are cast:
            # decoding a 16k-row group takes half the time (8 -> 4 ms).
            source = pq.ParquetFile(path, metadata=entry.metadata, pre_buffer=False, read_dictionary=DICTIONARY_COLUMNS)
            found = pc.is_in(_joined(source.read_row_groups(groups, columns=_KEY_COLUMNS, use_threads=False)), wanted)
            if pc.any(found).as_py():
                rows = source.read_row_groups(groups, use_threads=False).filter(found)
                parts.append(rows.select(EVENT_SCHEMA.names).cast(EVENT_SCHEMA))
        return pa.concat_tables(parts)

    def _index(self, path: str) -> _File:
        metadata = pq.read_metadata(path)
        hashes = None
        if metadata.num_rows <= _HASHED_FILE_ROWS:
            table = pq.ParquetFile(path, metadata=metadata).read(columns=_KEY_COLUMNS, use_threads=False)
            hashes = np.unique(_hashes(_joined(table)))
        entry = self._files[path] = _File(metadata, hashes, () if hashes is not None else _bounds(metadata))
        return entry
