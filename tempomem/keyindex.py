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

A point reader also keeps the row groups it decoded (:class:`_Groups`): a subject asked about
again, or one beside it in key order, is then found without decoding anything. For the same
reason (files never change once written) a kept group can never be stale.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .schema import EVENT_SCHEMA
from .storage import footer

Key = tuple[str, str, str]
_KEY_COLUMNS = ["scope", "subject", "predicate"]
_KEY_TUPLE = tuple(_KEY_COLUMNS)
#: A file of at most this many rows is indexed by the hashes of its keys (8 bytes a row), not
#: by statistics: a commit's file, or a merge of many, has statistics spanning unrelated subjects.
_HASHED_FILE_ROWS = 65_536
_SEPARATOR = "\x1f"
#: How many groups read once :class:`_Groups` remembers, to keep them when read again.
_SEEN_GROUPS = 4096
#: Made once (the point reader registers it too): pyarrow takes ~0.25 ms to make an empty table
#: of the schema, a tenth of a point read.
NO_ROWS = EVENT_SCHEMA.empty_table()
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


class _File:
    """What is known about one data file: for a small one, the hashes of its keys and of its
    subjects; for a large one, its row groups' key statistics; for either, once a reader of
    ``facts`` asks, which row groups hold no row of it. The footer, and the file opened for
    reading, are kept from the first time they are needed."""

    def __init__(self, path: str, metadata: pq.FileMetaData | None, *, hashes: np.ndarray | None = None,
                 subjects: np.ndarray | None = None) -> None:
        self.path = path
        if metadata is not None:
            self.metadata = metadata
        self.hashes = hashes  # a small file's key hashes, sorted; None: use the statistics
        self.subjects = subjects  # a small file's subject hashes, sorted
        self.bounds: dict[str, _Bounds] = {}  # per key column (a large file)
        if hashes is None:
            self.bounds = _statistics(self.metadata)

    @cached_property
    def metadata(self) -> pq.FileMetaData:
        return footer.metadata(self.path)

    @cached_property
    def source(self) -> pq.ParquetFile:
        # Dictionary columns stay dictionaries until the few rows found are cast: decoding a
        # 16k-row group takes half the time. A column stored plain is not made one (that costs).
        return pq.ParquetFile(self.path, metadata=self.metadata, pre_buffer=False,
                              read_dictionary=_dictionary_columns(self.metadata))

    @cached_property
    def ended(self) -> np.ndarray:
        """Per row group: every row folded with its belief end stored, so none is a row of ``facts``."""
        return np.array([state == footer.ENDED for state in footer.groups_folding(self.metadata)], dtype=bool)

    def groups(self, facts_only: bool) -> np.ndarray:
        """Its row groups, less, for a reader of ``facts`` alone, those holding none of its rows."""
        return np.flatnonzero(~self.ended) if facts_only else np.arange(self.metadata.num_row_groups)


def _statistics(metadata: pq.FileMetaData) -> dict[str, _Bounds]:
    names = footer.column_places(metadata)
    groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
    bounds = {}
    for name in _KEY_COLUMNS:
        stats = [group.column(names[name]).statistics for group in groups]
        known = np.array([s is not None and s.has_min_max and s.null_count == 0 for s in stats], dtype=bool)
        lo = np.array([s.min if k else "" for s, k in zip(stats, known, strict=True)], dtype=np.str_)
        hi = np.array([s.max if k else "" for s, k in zip(stats, known, strict=True)], dtype=np.str_)
        bounds[name] = _Bounds(lo, hi, known)
    return bounds


@dataclass(frozen=True)
class _Layout:
    """A version's files as a lookup sees them: the row groups of its large files as one set of
    arrays (each group's file, place, key bounds and whether it holds no row of ``facts``), so
    that a lookup tests every group of the version in one numpy operation, not a loop over its
    files (a 100M-revision store has ~100); and its small files, known by hashes."""

    large: tuple[_File, ...]
    file_of: np.ndarray
    group_of: np.ndarray
    bounds: dict[str, _Bounds]
    ended: np.ndarray
    small: tuple[_File, ...]

    @classmethod
    def of(cls, entries: Sequence[_File]) -> _Layout:
        large = tuple(e for e in entries if e.hashes is None)
        counts = [e.metadata.num_row_groups for e in large]
        bounds = {c: _Bounds(*(_joined_arrays([getattr(e.bounds[c], part) for e in large], dtype)
                               for part, dtype in (("lo", np.str_), ("hi", np.str_), ("known", bool))))
                  for c in _KEY_COLUMNS}
        places = _joined_arrays([np.arange(n) for n in counts], int)
        return cls(large, np.repeat(np.arange(len(large)), counts), places, bounds,
                   _joined_arrays([e.ended for e in large], bool), tuple(e for e in entries if e.hashes is not None))

    def may_hold(self, given: dict[str, str]) -> np.ndarray:
        """Per group: whether its statistics leave room for a row with the ``given`` key values."""
        return np.logical_and.reduce([self.bounds[c].may_hold(v) for c, v in given.items()])

    def groups(self, may: np.ndarray, facts_only: bool, small_holds: Callable[[_File], bool]
               ) -> Iterable[tuple[_File, int]]:
        """The (file, group) pairs to read: every group of the small files that ``small_holds``
        and the large files' groups that ``may`` hold the rows sought; for a reader of ``facts``
        alone, none that holds no row of it."""
        for entry in self.small:
            if small_holds(entry):
                yield from ((entry, int(g)) for g in entry.groups(facts_only))
        for i in np.flatnonzero(may & ~self.ended if facts_only else may):
            yield self.large[self.file_of[i]], int(self.group_of[i])


def _joined_arrays(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate([np.zeros(0, dtype=dtype), *parts])


def _dictionary_columns(metadata: pq.FileMetaData) -> list[str]:
    """The string columns worth reading as dictionaries: those whose dictionary is a small part
    of their data (a column of few values). One of many values (``reason``, one per row or
    nearly) decodes faster as plain strings: read as a dictionary it took ~1.5 ms a 16k-row group
    against ~1.1 ms plain, while a few-valued one takes ~0.12 ms against ~0.7 ms."""
    if not metadata.num_row_groups:
        return []
    group = metadata.row_group(0)
    chunks = (group.column(i) for i in range(metadata.num_columns))
    return [c.path_in_schema for c in chunks if c.path_in_schema in _STRINGS and c.has_dictionary_page
            and 2 * (c.data_page_offset - c.dictionary_page_offset) < c.total_compressed_size]


def _joined(table: pa.Table) -> pa.ChunkedArray:
    """Each row's key as one string (:func:`_key_string`)."""
    scope, subject, predicate = (table[c].cast(pa.string()) for c in _KEY_COLUMNS)
    return pc.binary_join_element_wise(pc.utf8_length(scope).cast(pa.string()), scope,
                                       pc.utf8_length(subject).cast(pa.string()), subject, predicate, _SEPARATOR)


def _key_string(key: Key) -> str:
    """A key as one string that no other key has: the scope's and the subject's lengths go
    before them, since any of the three may hold the separator."""
    scope, subject, predicate = key
    return _SEPARATOR.join((str(len(scope)), scope, str(len(subject)), subject, predicate))


def _hashes(joined: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return pl.Series(joined).hash().to_numpy()


def _holds(hashes: np.ndarray, wanted: np.ndarray) -> bool:
    if not len(hashes):
        return False
    at = np.searchsorted(hashes, wanted).clip(max=len(hashes) - 1)
    return bool((hashes[at] == wanted).any())


class _Groups:
    """Decoded row groups by (file, group, columns), the least recently used dropped past
    ``budget`` bytes; with no budget, nothing is kept.

    A group is kept from its second read on. Memory new to the process costs: while the cache
    fills, keeping a group read once made that read ~1.5-4.5 ms slower at 10M (pyarrow's mimalloc
    zeroing fresh pages), and most groups a sweep of subjects reads are never read again, so
    they would also push out the groups that are."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._kept: OrderedDict[tuple[str, int, tuple[str, ...]], pa.Table] = OrderedDict()
        self._bytes = 0
        self._seen: OrderedDict[tuple[str, int, tuple[str, ...]], None] = OrderedDict()  # read once

    def read(self, entry: _File, group: int, columns: tuple[str, ...]) -> pa.Table:
        key = (entry.path, group, columns)
        table = self._kept.get(key)
        if table is not None:
            self._kept.move_to_end(key)
            return table
        # The key columns (three dictionaries) decode faster on one thread than a pool starts; the
        # others of a 16k-row group in LZ4 decode in 1.45 ms on two threads against 2.4 ms on one.
        threads = len(columns) > len(_KEY_TUPLE)
        table = _plain(entry.source.read_row_group(group, columns=list(columns), use_threads=threads))
        if not 0 < table.nbytes <= self.budget:
            return table
        if key in self._seen:  # read before: keep it
            del self._seen[key]
            self._kept[key] = table
            self._bytes += table.nbytes
            while self._bytes > self.budget:
                self._bytes -= self._kept.popitem(last=False)[1].nbytes
        else:
            self._seen[key] = None
            if len(self._seen) > _SEEN_GROUPS:
                self._seen.popitem(last=False)
        return table

    def forget(self, gone: set[str]) -> None:
        """Drop the groups of files that left the table (their paths are never reused, but the
        memory is better spent on the files that are read)."""
        for key in [k for k in self._kept if k[0] in gone]:
            self._bytes -= self._kept.pop(key).nbytes
        for key in [k for k in self._seen if k[0] in gone]:
            del self._seen[key]


class KeyIndex:
    """The rows of given keys in given files, reading only the row groups that can hold them;
    ``cache_bytes`` of the row groups decoded are kept (:class:`_Groups`)."""

    def __init__(self, cache_bytes: int = 0) -> None:
        self._files: dict[str, _File] = {}
        self._groups = _Groups(cache_bytes)
        self._layout: tuple[tuple[str, ...], _Layout] | None = None

    def rows(self, files: Sequence[str], keys: Iterable[Key], *, facts_only: bool = False,
             unread: Sequence[str] = ()) -> pa.Table:
        """Every row (``EVENT_SCHEMA``) of ``keys`` in ``files``, in no particular order.

        ``facts_only`` and ``unread`` as for :meth:`subject_rows` (a writer wants each fact's
        latest revision, which is a row of ``facts``)."""
        keys = list(keys)
        wanted = pa.array([_key_string(k) for k in keys], pa.string())
        subjects = pa.array(sorted({k[1] for k in keys}), pa.string())
        layout = self._layout_of(files)
        hashes = _hashes(wanted) if layout.small else None
        may = np.zeros(len(layout.file_of), dtype=bool)
        for key in keys:
            may |= layout.may_hold(dict(zip(_KEY_COLUMNS, key, strict=True)))
        return self._read(layout.groups(may, facts_only, lambda e: _holds(e.hashes, hashes)),
                          lambda keys_read: _key_positions(keys_read, subjects, wanted), unread)

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
        layout = self._layout_of(files)
        hashes = _hashes(pa.array([subject], pa.string())) if layout.small else None
        return self._read(layout.groups(layout.may_hold(given), facts_only, lambda e: _holds(e.subjects, hashes)),
                          lambda keys_read: np.flatnonzero(np.logical_and.reduce(
                              [_equal(keys_read[c], v) for c, v in given.items()])), unread)

    def _read(self, groups: Iterable[tuple[_File, int]], positions: Callable[[pa.Table], np.ndarray],
              unread: Sequence[str]) -> pa.Table:
        """The rows of ``groups`` at the sorted ``positions`` their key columns give, as
        ``EVENT_SCHEMA`` (``unread`` columns NULL). A group's other columns are decoded only when
        it holds one of them (a group whose statistics span the rows sought, such as the one
        where a fold's two parts meet, often holds none)."""
        columns = [c for c in EVENT_SCHEMA.names if c not in unread]
        kept, rest = set(columns), tuple(c for c in columns if c not in _KEY_TUPLE)
        parts = [NO_ROWS]
        for entry, group in groups:
            keys_read = self._groups.read(entry, group, _KEY_TUPLE)
            at = positions(keys_read)
            if not len(at):
                continue
            rows = _rows_at(self._groups.read(entry, group, rest), at)
            found = _rows_at(keys_read, at)
            # dictionaries become the schema's strings on the few rows found, not on the group
            parts.append(pa.table([_as_field(found[f.name] if f.name in _KEY_TUPLE else rows[f.name], f)
                                   if f.name in kept else pa.nulls(len(at), f.type) for f in EVENT_SCHEMA],
                                  schema=EVENT_SCHEMA))
        return pa.concat_tables(parts)

    def _layout_of(self, files: Sequence[str]) -> _Layout:
        """The layout of ``files``, made again only when the version's files change."""
        files = tuple(files)
        if self._layout is None or self._layout[0] != files:
            self._layout = (files, _Layout.of(list(self._entries(files))))
        return self._layout[1]

    def _entries(self, files: Sequence[str]) -> Iterable[_File]:
        listed = set(files)
        gone = {f for f in self._files if f not in listed}
        for path in gone:
            del self._files[path]
        if gone:
            self._groups.forget(gone)
        for path in files:
            yield self._files.get(path) or self._index(path)

    def _index(self, path: str) -> _File:
        metadata = footer.metadata(path)
        if metadata.num_rows > _HASHED_FILE_ROWS:
            entry = self._files[path] = _File(path, metadata)
        else:
            keys = pq.ParquetFile(path, metadata=metadata).read(columns=_KEY_COLUMNS, use_threads=False)
            entry = self._files[path] = _small_file(path, metadata, keys)
        return entry

    def learn(self, path: str, rows: pa.Table) -> None:
        """Know the file just written at ``path`` from its ``rows`` (``EVENT_SCHEMA``), without
        reading it back: a commit's own file is otherwise read again by its next commit."""
        if rows.num_rows <= _HASHED_FILE_ROWS:
            self._files[path] = _small_file(path, None, rows.select(_KEY_COLUMNS))


def _small_file(path: str, metadata: pq.FileMetaData | None, keys: pa.Table) -> _File:
    """A small file known by the hashes of its keys and of its subjects."""
    return _File(path, metadata, hashes=np.unique(_hashes(_joined(keys))),
                 subjects=np.unique(_hashes(keys["subject"].cast(pa.string()))))


def _key_positions(keys_read: pa.Table, subjects: pa.Array, wanted: pa.Array) -> np.ndarray:
    """Where a group's key columns hold one of the keys ``wanted`` (:func:`_key_string`):
    the rows of their ``subjects`` first, one column compared over the group, then the whole
    key on those few rows only (joining the three columns of every row cost more than the test)."""
    subject = keys_read["subject"]
    if pa.types.is_dictionary(subject.type):
        subject = subject.cast(pa.string())
    at = np.flatnonzero(_mask(pc.is_in(subject, subjects)))
    if not len(at):
        return at
    return at[_mask(pc.is_in(_joined(keys_read.take(pa.array(at))), wanted))]


def _mask(found: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(found, False).to_numpy(zero_copy_only=False), dtype=bool)


def _equal(column: pa.ChunkedArray, value: str) -> np.ndarray:
    """Where a key column as read equals ``value`` (NULL: false). A dictionary is compared by its
    codes, without decoding the group's strings."""
    parts = [np.zeros(0, dtype=bool)]
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            same = pc.fill_null(pc.equal(chunk.dictionary, value), False)
            codes = np.flatnonzero(same.to_numpy(zero_copy_only=False))
            indices = pc.fill_null(chunk.indices, -1).to_numpy()
            # a value is once in a dictionary, but nothing says a writer cannot repeat it
            parts.append(indices == codes[0] if len(codes) == 1 else np.isin(indices, codes))
        else:
            parts.append(pc.fill_null(pc.equal(chunk, value), False).to_numpy(zero_copy_only=False))
    return np.concatenate(parts)


def _as_field(column: pa.ChunkedArray, field: pa.Field) -> pa.ChunkedArray:
    return column.cast(field.type) if pa.types.is_dictionary(column.type) else column


def _plain(table: pa.Table) -> pa.Table:
    """``table`` with the schema's types, dictionaries left as they are: a file deltalake wrote
    reads as string views, of which pyarrow cannot take rows."""
    target = pa.schema([f if pa.types.is_dictionary(f.type) else EVENT_SCHEMA.field(f.name) for f in table.schema])
    return table if target == table.schema else table.cast(target)


def _rows_at(table: pa.Table, at: np.ndarray) -> pa.Table:
    """The rows of ``table`` at the sorted positions ``at``: a slice when they are contiguous, as
    a key's rows are in a file sorted by key, so that nothing is copied."""
    if len(at) and at[-1] - at[0] + 1 == len(at):
        return table.slice(int(at[0]), len(at))
    return table.take(pa.array(at))
