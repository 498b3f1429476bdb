"""``backfill(resolve=True)``: replay checked rows through the write path (SPEC §5, §9).

Every input row is an assertion at its ``recorded_at``, and a row's ``retracted_at`` a
correction, at that time, of the fact the assertion landed on. The operations are ordered by
time (assertions before corrections at one instant, then by input row) and applied set-based
by :mod:`tempomem.rounds`, each at its own time, so supersession, duplicates and unknown starts
are derived exactly as the write path derives them. Operations on different keys never meet,
so the log is applied in chunks of whole subjects (about :data:`CHUNK_OPS` operations each, in
the store's key order: key ranges, as a large as-given load is written in): memory is bounded
by a chunk, and each chunk's revision rows, already sorted, stream into two Parquet files,
committed in one Delta transaction by the caller. The store clock does not move.

The two files are a fold's two parts (:class:`~tempomem.storage.writer.FoldParts`): the
revisions that ended (folded with their belief end) and the rest, each in key order. A reader
of the latest revisions (a commit's states, ``facts``, a point ``as_of``) then skips the first
file's row groups by their statistics; in one file, a key's ended and latest revisions shared
every row group.

An assertion the write path refuses (a conflict under a ``reject`` policy, a belief time not
after the fact's latest revision) is left out and its row reported as rejected; the other rows
load. A refused correction (its fact is no longer believed) fails the whole load. A row
recorded no later than its key's latest stored revision never gets here: the checks reject it
(backfill_checks.sql, replayed_before_stored), since it would be applied against beliefs it
precedes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl
import pyarrow as pa

from .. import rounds
from ..connection import sql_parts
from ..errors import TempomemError
from ..storage import ROW_GROUP_ROWS, FoldParts
from .write import KEY_RANGE_MACRO, key_ranges

if TYPE_CHECKING:
    from .report import Progress

#: Operations in one chunk of subjects (a subject with more is a chunk of its own).
CHUNK_OPS = 1_000_000
_SQL = sql_parts("backfill_replay.sql")


@dataclass
class Replay:
    """The outcome of a replay: its revision rows in Parquet files of the table folder, not
    yet committed, and the refused rows."""

    #: The written files (none when the replay made no revision).
    files: list[Path]
    revisions: int
    #: One row per refused input row: ``row``, ``field``, ``value``, ``reason`` (as ``BackfillReport.rejected``).
    rejected: pl.DataFrame


def replay(con: duckdb.DuckDBPyConnection, settings: dict[str, Any], targets: tuple[Path, Path], *, origin: str,
           ingested_at: datetime, notify: Progress) -> Replay:
    """Apply ``_bf_rows`` through the write path, writing the revisions to ``targets`` (new
    files in the table folder: the ended revisions, the others; a file is removed again on an
    error or when nothing is written to it).

    A refused assertion rejects its row (field ``object`` for a conflict, ``recorded_at`` for a
    belief time not after the fact's latest revision). A refused retraction (the fact it
    would retract is no longer believed) raises :class:`TempomemError` naming the input row.
    """
    rules = {p: (d["arity"], d["policy"]) for p, d in settings["predicates"].items()}
    refused: list[tuple[Any, ...]] = []
    written, nonce = 0, rounds.new_nonce()  # one id space for the whole log: `op` is global
    try:
        con.execute(_SQL["chunks"], {"chunk": CHUNK_OPS})
        con.execute(KEY_RANGE_MACRO)
        offset = 0
        with FoldParts(*targets) as out:
            for key_range in key_ranges(lo for (lo,) in con.sql(_SQL["bounds"]).fetchall()):
                con.execute(_SQL["chunk_ops"], {"offset": offset, **key_range})
                offset += con.sql("SELECT count(*) FROM _tm_ops_in").fetchall()[0][0]
                rounds.load_stored(con)
                applied = rounds.apply(con, rules, settings["policy"], ingested_at=ingested_at, origin=origin,
                                       nonce=nonce, fold_new=True)
                for batch in applied.rows.to_batches(ROW_GROUP_ROWS):  # queued a row group at a time
                    out.write(batch)
                written += applied.rows.num_rows
                notify("write", written)
                refused += _refused_rows(con, applied.refused)
                rounds.drop_stored(con)
    except BaseException:
        for target in targets:
            target.unlink(missing_ok=True)
        raise
    finally:
        for name in ("_tm_ops_in", "_tm_replay_keys"):
            con.execute(f"DROP TABLE IF EXISTS {name}")
        rounds.drop_stored(con)
    return Replay(out.files, written, _rejected(sorted(refused, key=lambda r: r[0])))


def _refused_rows(con: duckdb.DuckDBPyConnection, refused: pa.Table) -> list[tuple[Any, ...]]:
    """The input rows of a chunk's refused operations, with what the report says of them."""
    if not refused.num_rows:
        return []
    con.register("_tm_refused_ops", refused)
    try:
        return con.sql(_SQL["refused_rows"]).fetchall()
    finally:
        con.unregister("_tm_refused_ops")


def _rejected(refused: list[tuple[Any, ...]]) -> pl.DataFrame:
    """The report's rows for the refused assertions; a refused correction is an error."""
    out = []
    for row, op_kind, kind, fact_id, obj, recorded_at, conflict_ids, conflict_objects in refused:
        if op_kind == "correct":
            why = ("its latest revision was recorded at or after this retraction" if kind == "clock"
                   else "it is no longer believed; it can no longer be changed")
            raise TempomemError(f"backfill (resolve=True), row {row}: fact_id: fact {fact_id}: {why}")
        if kind == "conflict":
            out.append({"row": row, "field": "object", "value": obj,
                        "reason": f"refused by the write path: overlapping value: {obj!r} overlaps "
                                  f"{conflict_objects} (fact {conflict_ids}) and the predicate's policy is reject"})
        else:
            out.append({"row": row, "field": "recorded_at", "value": recorded_at,
                        "reason": f"refused by the write path: fact {fact_id}: its latest revision was recorded "
                                  f"at or after {recorded_at}; the store clock is behind it"})
    return pl.DataFrame(out, schema={"row": pl.Int64, "field": pl.String, "value": pl.String, "reason": pl.String})
