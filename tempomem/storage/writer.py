"""Every setting with which tempomem writes Parquet into a store, and the writers that use them.

Delta appends (:mod:`tempomem.storage.delta`), a fold's DuckDB ``COPY`` and a backfill's Arrow
writer all take their row groups, compression, dictionaries and statistics from here.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..schema import EVENT_SCHEMA

#: Rows per Parquet row group. A point query decodes the whole group that holds its key, and
#: pays a fixed cost for every other group whose statistics it tests: 16k balances the two at
#: 100k-10M revisions (at 100k, 122,880-row groups made a point query 14 -> 31 ms; at 10M they
#: saved as much in statistics tests as they cost in decoding). A Python point read tests no
#: statistics (tempomem.pointread finds its groups in memory), and 4k-row groups would halve its
#: decoding, but at 10M revisions they made a point query through SQL 27 -> 80 ms and a count of
#: as_of 0.17 -> 0.45 s (bench_reads.py, issue 20): DuckDB's scans pay per group.
ROW_GROUP_ROWS = 16 * 1024
#: The Parquet compression of every data file. Reading a row group is mostly decompressing it:
#: pyarrow decodes a 16k-row group of a fold's files in 3.95 ms from ZSTD, 2.27 ms from LZ4, and
#: at 10M revisions a snapshot as_of took 0.99 -> 0.85 s, as_believed 1.38 -> 0.99 s, a count of
#: as_of 156 -> 83 ms (benchmarks/README.md, issue 20), for files ~1.6x larger (371 -> 595 MB).
#: Every reader of a Delta table (DuckDB, Polars, pyarrow, deltalake, Spark) reads LZ4_RAW.
COMPRESSION = "lz4_raw"
#: DuckDB's memory for a fold; a larger table spills its sort to a temporary folder.
FOLD_MEMORY = "2GB"
#: A fold writes files of at most this many row groups (1M rows).
FOLD_ROW_GROUPS_PER_FILE = 64
#: Columns the Parquet writer dictionary-encodes (few distinct values in practice) and the
#: columns it keeps min/max statistics for (those a reader filters on; not the free text).
DICTIONARY_COLUMNS = ["scope", "predicate", "object", "status", "reason", "source", "origin", "link_type"]
STATISTICS_COLUMNS = [c for c in EVENT_SCHEMA.names if c not in ("text", "attributes", "artifacts", "embedding")]


#: Columns with a Bloom filter in every row group. A commit that changes a fact by id
#: (``correct``, ``invalidate``) and ``get`` look a fact up by ``fact_id`` alone, and in files
#: sorted by key its min/max statistics skip nothing: at 10M revisions DuckDB decoded every row
#: group's ids (~210 ms); with the filters it tests them (~7-9 ms; tests/test_fold.py checks that
#: every writer writes them). A filter of a 16k-row group is 32 KB, ~3% of a file.
BLOOM_FILTER_COLUMNS = ("fact_id",)
#: The false-positive rate the filters are sized for (sizes are powers of two: at 16k rows the
#: real rate is below it).
BLOOM_FILTER_FPP = 0.01


def _bloom_filters(rows: int) -> dict[str, dict[str, float]]:
    """pyarrow's Bloom filter options for row groups of at most ``rows`` rows."""
    ndv = max(1, min(rows, ROW_GROUP_ROWS))
    return {name: {"ndv": ndv, "fpp": BLOOM_FILTER_FPP} for name in BLOOM_FILTER_COLUMNS}


def writer_properties() -> Any:
    """deltalake's writer settings for its own writes (erasure, embeddings)."""
    from deltalake import BloomFilterProperties, ColumnProperties, WriterProperties

    bloom = ColumnProperties(bloom_filter_properties=BloomFilterProperties(True, BLOOM_FILTER_FPP, ROW_GROUP_ROWS))
    return WriterProperties(max_row_group_size=ROW_GROUP_ROWS, compression=COMPRESSION.upper(),
                            column_properties=dict.fromkeys(BLOOM_FILTER_COLUMNS, bloom))


def parquet_writer(path: Path | str, rows: int | None = None) -> pq.ParquetWriter:
    """The Parquet writer of every data file tempomem writes itself: the store's columns, LZ4,
    dictionaries and statistics where readers use them, Bloom filters on
    :data:`BLOOM_FILTER_COLUMNS` sized for ``rows`` (a file of fewer rows than a row group) or
    for whole row groups (``benchmarks/bench_backfill.py`` times it alone)."""
    return pq.ParquetWriter(path, EVENT_SCHEMA, compression=COMPRESSION, use_dictionary=DICTIONARY_COLUMNS,
                            write_statistics=STATISTICS_COLUMNS,
                            bloom_filter_options=_bloom_filters(ROW_GROUP_ROWS if rows is None else rows))


def write_file(path: Path, table: pa.Table) -> None:
    """One data file of ``table``'s rows (a commit's, in the store's columns), in row groups of
    :data:`ROW_GROUP_ROWS`, its Bloom filters sized for its rows."""
    with parquet_writer(path, table.num_rows) as out:
        out.write_table(table.select(EVENT_SCHEMA.names).cast(EVENT_SCHEMA), row_group_size=ROW_GROUP_ROWS)


#: Batches waiting for the encoder: enough to keep it busy while DuckDB makes the next ones.
_QUEUED_BATCHES = 8


class BackgroundWriter:
    """One Parquet file encoded by a thread of its own, fed batches through a bounded queue.

    Arrow's encoder releases the GIL, so it runs on one core while DuckDB sorts and projects
    the next batches on the other: the write's two halves overlap instead of taking turns. An
    encoding error is raised by the next :meth:`write` or on leaving the ``with``.
    """

    def __init__(self, path: Path) -> None:
        self._queue: queue.Queue[pa.RecordBatch | pa.Table | None] = queue.Queue(maxsize=_QUEUED_BATCHES)
        self._error: BaseException | None = None
        self._writer = parquet_writer(path)
        self._thread = threading.Thread(target=self._encode, name="tempomem-backfill-writer", daemon=True)
        self._thread.start()

    def _encode(self) -> None:
        while (batch := self._queue.get()) is not None:
            if self._error is None:  # after an error, only drain the queue so that write() never blocks
                try:
                    self._writer.write(batch, row_group_size=ROW_GROUP_ROWS)
                except BaseException as exc:  # raised in the caller's thread
                    self._error = exc

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Queue ``batch`` (waits while the queue is full); a table is written in row groups of
        :data:`ROW_GROUP_ROWS` rows across its chunks."""
        if self._error is not None:
            raise self._error
        self._queue.put(batch)

    def __enter__(self) -> BackgroundWriter:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        self._queue.put(None)
        self._thread.join()
        self._writer.close()
        if kind is None and self._error is not None:
            raise self._error


class SortedFiles:
    """Rows given in order, written in that order as Parquet files of whole row groups of
    :data:`ROW_GROUP_ROWS` (rows are held until they fill one, whatever batches they come in;
    the last group takes the rest), each file encoded by a :class:`BackgroundWriter`. With
    ``groups_per_file``, a file takes that many groups and the next of ``paths`` the rest; else
    the first path takes them all. After the ``with``, :attr:`files` are the paths written, in
    order: a stream of no row writes none."""

    def __init__(self, paths: Iterator[Path], groups_per_file: int | None = None) -> None:
        self._paths, self._per_file = paths, groups_per_file
        self._held: list[pa.Table] = []
        self._writer: BackgroundWriter | None = None
        self._in_file = 0  # rows given to the open file
        #: The files written, in order.
        self.files: list[Path] = []

    def write(self, table: pa.Table) -> None:
        """Queue ``table`` (``EVENT_SCHEMA`` columns) after the rows given before."""
        self._held.append(table)
        self._flush(whole_groups=True)

    def _flush(self, *, whole_groups: bool) -> None:
        if not self._held:
            return
        held = pa.concat_tables(self._held)
        whole = held.num_rows - held.num_rows % ROW_GROUP_ROWS if whole_groups else held.num_rows
        done = 0
        while done < whole:
            if self._writer is None:
                self.files.append(next(self._paths))
                self._writer, self._in_file = BackgroundWriter(self.files[-1]), 0
            room = whole - done
            if self._per_file is not None:
                room = min(room, self._per_file * ROW_GROUP_ROWS - self._in_file)
            # one table of many chunks: the writer cuts it into row groups across them
            self._writer.write(held.slice(done, room))
            done, self._in_file = done + room, self._in_file + room
            if self._per_file is not None and self._in_file == self._per_file * ROW_GROUP_ROWS:
                self._close(None)
        self._held[:] = [held.slice(whole)]

    def _close(self, kind: object) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.__exit__(kind, None, None)

    def __enter__(self) -> SortedFiles:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        try:
            if kind is None:
                self._flush(whole_groups=False)
        finally:
            self._close(kind)


#: The column a row's tag travels in through :meth:`FoldParts.write`.
_TAG = "__tag"


class FoldParts:
    """A fold's two parts (``folder.py``) written as two Parquet files, each a
    :class:`SortedFiles` of one file: the revisions folded with their belief end, which are no
    longer any fact's latest, and the others. A reader of the latest revisions (``facts``, a
    commit's states) then skips the first file by its footer: ``folded_until`` holds no NULL there.

    Rows come in the store's sort order, and each file keeps it, in whole row groups. After the
    ``with``, :attr:`files` are those that hold rows; a part with no row writes no file."""

    def __init__(self, ended: Path, rest: Path) -> None:
        self._parts = (SortedFiles(iter([ended])), SortedFiles(iter([rest])))
        self._tags: tuple[list[pa.ChunkedArray], list[pa.ChunkedArray]] = ([], [])

    def write(self, rows: pa.RecordBatch, tags: pa.Array | None = None) -> None:
        """Queue ``rows`` (``EVENT_SCHEMA`` columns), each to its part; ``tags``, one value per row
        (what the caller needs to know of each row written), go where their rows go (:meth:`tags`)."""
        table = pa.Table.from_batches([rows]).cast(EVENT_SCHEMA)
        if tags is not None:  # split with the rows, taken off after
            table = table.append_column(_TAG, tags)
        # as the fold orders them (folder.py): a fresh row's belief end is never stored
        ended = pc.is_valid(table["folded_until"])
        count = pc.sum(ended).as_py() or 0
        if count in (0, table.num_rows):  # all one part (a load with no ended revision): no filter's copy
            parts = (table, table.slice(0, 0)) if count else (table.slice(0, 0), table)
        else:
            parts = (table.filter(ended), table.filter(pc.invert(ended)))
        for n, part in enumerate(parts):
            if part.num_rows:
                if tags is not None:
                    self._tags[n].append(part[_TAG])
                    part = part.drop_columns([_TAG])
                self._parts[n].write(part)

    @property
    def files(self) -> list[Path]:
        return [path for part in self._parts for path in part.files]

    def tags(self) -> list[pa.ChunkedArray]:
        """For each of :attr:`files`, the tags of its rows in the order it holds them (when every
        :meth:`write` gave tags)."""
        return [pa.chunked_array([chunk for tag in tags for chunk in tag.chunks])
                for tags, part in zip(self._tags, self._parts, strict=True) if part.files]

    def __enter__(self) -> FoldParts:
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        try:
            self._parts[0].__exit__(kind, *rest)
        finally:
            self._parts[1].__exit__(kind, *rest)
