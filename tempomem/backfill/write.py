"""Writing a backfill as given: the revision rows derived in SQL, sorted, streamed into the
table folder as a fold's two parts (:class:`~tempomem.storage.writer.FoldParts`: the revisions
that ended, then each fact's latest, a file each) and committed as one Delta transaction (the
clock stays)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..connection import sql_parts
from ..ids import generated_ids
from ..schema import EVENT_SCHEMA
from ..storage import FoldParts, writer
from .report import Progress

if TYPE_CHECKING:
    from ..engine import Engine

#: The write's SQL (backfill_write.sql): the parts each load runs, chosen by whether the input
#: has fact ids and whether rows share them, then ``revisions`` once per key range.
_SQL = sql_parts("backfill_write.sql")
#: The macro ``tm__bf_in_range``: whether a row is in a key range of :func:`key_ranges`.
KEY_RANGE_MACRO = _SQL["key_range"]
_IDS = {True: "ids_given", False: "ids_generated"}
#: How a load's revisions are numbered (backfill_write.sql), by whether any of its rows share fact ids.
_FACTS = {False: "one_row_per_fact", True: "rows_share_facts"}
#: Columns the input may lack that _bf_rows still gives values (see candidates and merged in
#: backfill_checks.sql): they are not NULL throughout, so they stay in the sort.
_RECOMPUTED = ("valid_from_inferred", "artifacts")


#: Rows one sort handles: a load with more is written as several sorted key ranges, so that
#: each sort fits in DuckDB's memory instead of spilling (a range's rows are held once).
_SORT_ROWS = 2_000_000
#: Rows sampled to place the range bounds (only the balance of the ranges depends on it).
_BOUND_SAMPLE = 100_000

# Bounds of about equal key ranges: the (scope, subject) starting each range but the first,
# from a sample. All rows of a subject share a range, so do all revisions of a fact. The sample
# takes whole vectors of the stage-1 table (SYSTEM): a quarter of the CPU of a row sample of
# the _bf_rows view, which reads every row. {percent} is a number computed from the row count
# (TABLESAMPLE takes no parameter), never input.
_BOUNDS_SQL = """
SELECT DISTINCT ON (tile) s, j FROM (
    SELECT s, j, ntile($ranges) OVER (ORDER BY s, j) AS tile
    FROM (SELECT coalesce(c.scope, 'default') AS s, c.subject AS j
          FROM _bf_checked c TABLESAMPLE SYSTEM ({percent} PERCENT) REPEATABLE (7) WHERE c._h IS NOT NULL)
) WHERE tile > 1 ORDER BY tile, s, j
"""


def _key_ranges(con: duckdb.DuckDBPyConnection, loaded: int) -> list[dict[str, str | None]]:
    """Parameters of the write's key ranges: [from, to) in (scope, subject) order, tiling all keys.

    One unbounded range when the load fits one sort. The sample only places the bounds:
    every row falls in exactly one range whatever they are (a subject too large for one
    range just makes a large range).
    """
    ranges = -(-loaded // _SORT_ROWS)
    percent = min(100.0, 100.0 * _BOUND_SAMPLE / loaded)
    sampled = con.sql(_BOUNDS_SQL.format(percent=float(percent)),
                      params={"ranges": ranges}).fetchall() if ranges > 1 else []
    return key_ranges(sampled)


def key_ranges(bounds: Iterable[tuple[str, str]]) -> list[dict[str, str | None]]:
    """The parameters of ``tm__bf_in_range`` (:data:`KEY_RANGE_MACRO`) for the ranges that
    ``bounds``, (scope, subject) pairs in any order and repeated or not, cut all keys into:
    [from, to), the first from and the last to unbounded (NULL)."""
    edges: list[tuple[str, str] | tuple[None, None]] = [(None, None), *sorted({tuple(b) for b in bounds}),
                                                        (None, None)]
    return [{"from_scope": lo[0], "from_subject": lo[1], "to_scope": hi[0], "to_subject": hi[1]}
            for lo, hi in itertools.pairwise(edges)]


class Written(NamedTuple):
    """What :func:`write_revisions` wrote: how many revisions, the files that hold them, the keys
    whose value changes between adjacent rows (:class:`ValueChanges`), and each written
    revision's input row (``file``: its file's place in ``files``; ``pos``: its place in the
    file; ``row``: ``__row``)."""

    revisions: int
    files: list[Path]
    changed_keys: pa.Table
    input_rows: pa.Table


_INPUT_ROWS = pa.schema([("file", pa.int64()), ("pos", pa.int64()), ("row", pa.int64())])


def _input_rows(tags: list[pa.ChunkedArray]) -> pa.Table:
    """The table :attr:`Written.input_rows` from each file's rows' ``__row`` in file order."""
    return pa.concat_tables([pa.table([np.full(len(rows), n, np.int64), np.arange(len(rows), dtype=np.int64),
                                       rows.cast(pa.int64())], schema=_INPUT_ROWS)
                             for n, rows in enumerate(tags)]) if tags else _INPUT_ROWS.empty_table()


def write_as_given(engine: Engine, con: duckdb.DuckDBPyConnection, *, loaded: int, has_fact_id: bool,
                    absent: dict[str, str], origin: str, ingested_at: datetime, notify: Progress,
                    finish: Callable[[Written], None]) -> int:
    """Write the revision rows (:func:`write_revisions`) into files of the table folder and
    commit them as one Delta transaction; keep the store clock where it was. Once the files are
    written and before they are committed, ``finish`` gets what was written (:class:`Written`):
    the report's overlap test."""
    if loaded == 0:
        return 0
    last_api_us = engine.last_api_us()
    targets = (engine.storage.new_file_path(), engine.storage.new_file_path(), engine.storage.new_file_path())
    try:
        written = write_revisions(con, targets, loaded=loaded, has_fact_id=has_fact_id, absent=absent,
                                  origin=origin, ingested_at=ingested_at, notify=notify)
        finish(written)
    except BaseException:
        for target in targets:
            target.unlink(missing_ok=True)
        raise
    engine.add_files(written.files, last_api_us)
    return written.revisions


def write_revisions(con: duckdb.DuckDBPyConnection, targets: tuple[Path, Path, Path], *, loaded: int,
                    has_fact_id: bool, absent: dict[str, str], origin: str, ingested_at: datetime,
                    notify: Progress) -> Written:
    """Write the load's revision rows into the Parquet files ``targets`` (the new facts' ended
    revisions, their others: :class:`~tempomem.storage.writer.FoldParts`; the revisions added to
    stored facts, fresh as a commit's); return what it wrote (:class:`Written`).

    DuckDB computes them sorted by the store's SORT_KEYS (a large load range by range of
    keys, in order); they stream out as Arrow batches, each part in row groups of the store's
    size (so that point queries prune row groups). No row becomes a Python object: Arrow's
    Parquet writer encodes each batch (a third of the CPU DuckDB's COPY takes for them).
    ``absent`` names the columns the input lacks (name: SQL type), kept out of the sort.
    """
    # Rows sharing a given fact_id (the checks' _bf_shared_facts) are revisions numbered in
    # belief time order; otherwise a fact has one revision (two when retracted later).
    shared = has_fact_id and con.sql("SELECT count(*) > 0 FROM _bf_shared_facts").fetchall()[0][0]
    onto = has_fact_id and con.sql("SELECT count(*) > 0 FROM _bf_stored_facts").fetchall()[0][0]
    nulls = [name for name in absent if name not in _RECOMPUTED]
    con.execute(_SQL["absent"], {"absent": nulls})
    con.execute(KEY_RANGE_MACRO)
    for part in ("common", _IDS[has_fact_id], _FACTS[shared], "revision_rows", *(("split_onto",) if onto else ())):
        con.execute(_SQL[part])
    params = {"origin": origin, "ingested_at": ingested_at, "absent": nulls}
    changes = ValueChanges()
    with FoldParts(*targets[:2]) as out:
        for key_range in _key_ranges(con, loaded):
            rows = con.sql(_SQL["revisions"], params={**params, **key_range,
                                                      "rows": "_bf_new_rows" if onto else "_bf_rows"})
            _stream(rows, out, changes, has_fact_id=has_fact_id)
            notify("write", changes.rows)
    tags = out.tags()
    files = out.files
    if onto:
        with FoldParts(targets[2], targets[2]) as added:  # fresh rows: never the ended part
            _stream(con.sql(_SQL["onto_stored"], params=params), added, changes, has_fact_id=True)
        tags += added.tags()
        files += added.files
        notify("write", changes.rows)
    return Written(changes.rows, files, changes.keys(), _input_rows(tags))


def _stream(rows: duckdb.DuckDBPyRelation, out: FoldParts, changes: ValueChanges, *, has_fact_id: bool) -> None:
    """Write the revision rows of ``rows`` (backfill_write.sql's columns) into ``out``, each
    tagged with its input row, and let ``changes`` see them."""
    for batch in rows.to_arrow_reader(writer.ROW_GROUP_ROWS):
        ids = batch.column(0) if has_fact_id else generated_ids(batch.column("_id_us"), batch.column("_id_serial"))
        # a copy: a column of DuckDB's batch holds the whole batch's memory until released
        input_rows = pa.array(batch.column("_row").to_numpy(zero_copy_only=False).copy())
        batch = pa.RecordBatch.from_arrays([ids, *batch.columns[1:len(EVENT_SCHEMA)]], names=EVENT_SCHEMA.names)
        out.write(batch, tags=input_rows)
        changes.see(batch)


class ValueChanges:
    """The keys (scope, subject, predicate) whose object differs between two adjacent rows of
    the written stream. The stream is sorted by key, so a key's rows are adjacent and a key
    holds more than one value exactly when it appears here: the candidates of the overlap
    test, found with a few vectorised comparisons per batch instead of a group per key.
    """

    _KEY = ("scope", "subject", "predicate")

    def __init__(self) -> None:
        self._found: list[pa.Table] = []
        self._last: pa.RecordBatch | None = None  # the previous batch's last row
        #: The rows seen.
        self.rows = 0

    def see(self, batch: pa.RecordBatch) -> None:
        """Note the changes inside ``batch`` and between the previous batch and it."""
        self.rows += batch.num_rows
        if batch.num_rows == 0:
            return
        cols = batch.select([*self._KEY, "object"])
        # The boundary: the previous batch's last row before this one (a two-row batch).
        pairs = [cols] if self._last is None else [pa.concat_batches([self._last, cols.slice(0, 1)]), cols]
        for part in pairs:
            before, after = part.slice(0, part.num_rows - 1), part.slice(1)
            same_key = pc.and_(pc.and_(pc.equal(before["scope"], after["scope"]),
                                       pc.equal(before["subject"], after["subject"])),
                               pc.equal(before["predicate"], after["predicate"]))
            changed = pc.and_(same_key, pc.not_equal(before["object"], after["object"]))
            if pc.any(changed).as_py():
                self._found.append(pa.Table.from_batches([after.select(list(self._KEY)).filter(changed)]))
        self._last = cols.slice(cols.num_rows - 1)

    def keys(self) -> pa.Table:
        """The keys seen changing value, each once."""
        if not self._found:
            return pa.table({k: pa.array([], pa.string()) for k in self._KEY})
        return pa.concat_tables(self._found).group_by(list(self._KEY)).aggregate([])
