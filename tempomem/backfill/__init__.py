"""Bulk backfill (SPEC §9): load history exported from elsewhere, keeping its belief times.

Everything is set-based: the input is bound to a DuckDB connection as a view, every rule
(time parsing, rejection, fixes, duplicates, flags) is SQL over all rows, and the revision rows
stream into two Parquet files (a fold's two parts: the revisions that ended, each fact's latest)
committed as one Delta transaction: no row passes through Python.
Python only builds the statements (from fixed templates; column names are quoted identifiers,
every value is a bound parameter) and drives the stages.

The load is materialised once, on a private connection with a memory limit (DuckDB spills to
a temporary folder beyond it), in the modules of this package, one per stage:

- :mod:`.source`: the input bound as ``_bf_in``, the caller's mapping applied;
- :mod:`.checks`: ``_bf_checked``, every input row parsed with its first bad field (or none)
  and a hash, then ``_bf_merged`` (exact repeats loaded once) and the view ``_bf_rows``
  (loadable rows with fixed spans, fact-level rejections removed);
- :mod:`.flags`: the report's counts and red flags; :mod:`.report`: the report;
- :mod:`.write`: the revision rows (a row with a later ``retracted_at`` gives two), with the
  fact ids of :mod:`.ids`; or, with ``resolve=True``, :mod:`.resolve` replays ``_bf_rows``
  through the set-based write path;
- :mod:`.pipeline`: the stages in order, under the writer lock.
"""

from .pipeline import backfill
from .report import BackfillReport, Progress
from .source import input_files

__all__ = ["BackfillReport", "Progress", "backfill", "input_files"]
