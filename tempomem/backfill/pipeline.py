"""``mem.backfill``: the stages of one load in order, under the writer lock (SPEC §9)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from ..connection import bind_events, new_connection, without_checkpoints, without_progress_bar
from ..errors import BackfillError, TempomemError
from ..forks import check_polars
from ..queries import flag
from ..sources import FORMATS
from ..timegrammar import EPOCH_FACTORS
from ..times import system_clock
from . import flags
from .checks import Loader
from .report import REJECTED_SCHEMA, BackfillReport, Progress
from .resolve import replay
from .source import FILE_FORMATS, bind_input, rename
from .write import Written, write_as_given, write_revisions

if TYPE_CHECKING:
    from ..engine import Engine

#: DuckDB's memory limit during a load (it spills to disk beyond it): with Python, Arrow and
#: the Delta commit around it, a load of any size stays well under 4 GB of RSS.
DUCKDB_MEMORY = "2GB"


def backfill(engine: Engine, data: Any, *, mapping: dict[str, str] | None = None, format: str | None = None,
             lenient: bool = False, strict: bool = False, resolve: bool = False, epoch_unit: str | None = None,
             progress: Progress | None = None) -> BackfillReport:
    """Load ``data`` through ``engine`` keeping its belief times; see :meth:`Memory.backfill`.

    ``progress`` is called as ``progress(stage, rows_done)``. An importer's ``format`` reads
    the source first (:data:`tempomem.sources.FORMATS`), which gives the rows, the stored
    ``origin`` (``import:<format>``) and flags of its own.
    """
    check_polars()  # the report's frames are Polars work under the writer lock: refused before taking it
    lenient, strict, resolve = (flag(v, n) for v, n in ((lenient, "lenient"), (strict, "strict"), (resolve, "resolve")))
    if epoch_unit is not None and epoch_unit not in EPOCH_FACTORS:
        raise TempomemError(f"epoch_unit: must be one of {', '.join(EPOCH_FACTORS)} or None, got {epoch_unit!r}")
    origin, extra_flags = "backfill", None
    if format is not None and format not in FILE_FORMATS:
        if format not in FORMATS:
            known = ", ".join((*FILE_FORMATS, *FORMATS))
            raise TempomemError(f"format: must be one of {known}, got {format!r}")
        source = FORMATS[format](data)
        data, origin, extra_flags, epoch_unit = source.rows, source.origin, source.flags, source.epoch_unit
        format = None
    notify = progress or (lambda stage, done: None)
    storage = engine.storage
    with engine.exclusive(), tempfile.TemporaryDirectory(prefix="tempomem-backfill-") as spill:
        con = new_connection()
        bind_events(con, storage.snapshot().files, first=True)
        # A load of any size fits: past the limit DuckDB spills to a private temp folder.
        con.execute("SET memory_limit = $limit", {"limit": DUCKDB_MEMORY})
        con.execute("SET temp_directory = $dir", {"dir": spill})
        without_progress_bar(con)
        without_checkpoints(con)
        try:
            bind_input(con, data, format)
            notify("read", 0)
            columns = rename(con, mapping or {})
            settings = storage.read_settings()
            now = system_clock()
            loader = Loader(con, columns, lenient=lenient, epoch_unit=epoch_unit, now=now)
            loader.check_rows()
            notify("checked", loader.rows_read)
            loader.collapse_and_check_facts(resolve=resolve)
            report_parts = flags.report_parts(loader, settings, extra_flags=extra_flags)
            plan = None
            if resolve:
                # Rows the write path refuses become rejected rows of the report.
                plan = replay(con, settings, (storage.new_file_path(), storage.new_file_path()), origin=origin,
                              ingested_at=now, notify=notify)
                if plan.rejected.height:
                    rejected = pl.concat([report_parts["rejected"], plan.rejected.cast(REJECTED_SCHEMA)])  # type: ignore[arg-type]
                    report_parts = {**report_parts, "rejected": rejected.sort("row"),
                                    "loaded": report_parts["loaded"] - plan.rejected.height}
            report = BackfillReport(**report_parts, origin=origin)
            written_as = {"loaded": report.loaded, "has_fact_id": loader.has_fact_id, "absent": loader.absent,
                          "origin": origin, "ingested_at": now}
            if strict and report.rejected.height:
                for file in plan.files if plan is not None else []:
                    file.unlink(missing_ok=True)
                if not resolve and report.loaded:
                    # Nothing is committed, but the report flags what the load would have
                    # written: the revisions go to a scratch file, tested as a load's are.
                    scratch = (Path(spill) / "strict-ended.parquet", Path(spill) / "strict.parquet",
                               Path(spill) / "strict-onto.parquet")
                    written = write_revisions(con, scratch, **written_as, notify=lambda stage, done: None)
                    report_parts["flags"] = flags.with_overlaps(con, report_parts["flags"], settings, written)
                    report = BackfillReport(**report_parts, origin=origin)
                raise BackfillError(
                    f"backfill: {report.rejected.height} of {report.rows_read} rows rejected and strict=True; "
                    f"nothing was loaded (first: row {report.rejected['row'][0]}, {report.rejected['field'][0]}: "
                    f"{report.rejected['reason'][0]})",
                    report,
                )
            if plan is not None:
                revisions = plan.revisions
                if plan.files:
                    engine.add_files(plan.files, engine.last_api_us())
            else:
                def flag_overlaps(written: Written) -> None:
                    report_parts["flags"] = flags.with_overlaps(con, report_parts["flags"], settings, written)

                revisions = write_as_given(engine, con, **written_as, notify=notify, finish=flag_overlaps)
            return BackfillReport(**{**report_parts, "revisions": revisions}, origin=origin, written=revisions > 0)
        finally:
            con.close()
