"""What a data file's Parquet footer says of its rows' folding, read without decoding a row.

A fold marks the rows it rewrites ``folded`` and stores the belief end of those that ended
(``folded_until``), and writes those apart from the rest (revisions.sql, folded.sql). Three
readers act on what a row group's statistics prove: the connection binds its join over the
fresh rows to the files that have any, the compaction counts the fresh rows, and the key index
skips the groups that hold no row of ``facts``. This module is the one reading of the footer
they share; a group the statistics leave open is ``MIXED``, which each reader treats as
"could be anything" (read it, count it, keep it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache

import pyarrow.parquet as pq

#: No row folded (``folded`` all NULL or all false), or no ``folded`` column at all.
FRESH = "fresh"
#: Every row folded, and some may still be believed (a ``folded_until`` NULL, or unknown).
FOLDED = "folded"
#: Every row folded with its belief end stored: not one is a row of ``facts``.
ENDED = "ended"
#: The statistics do not tell (folded and fresh rows together, or no statistics).
MIXED = "mixed"


@lru_cache(maxsize=512)
def _read(path: str) -> pq.FileMetaData:
    return pq.read_metadata(path)


def metadata(path: str | os.PathLike[str]) -> pq.FileMetaData:
    """A data file's footer, read once in a process: a data file never changes once written, and
    its name (a new UUID) is never used again. The commit that adds a file, the connection that
    binds it and the key index that finds rows in it all ask for the same footer; a large fold
    file's (900 row groups) takes ~40 ms to parse."""
    return _read(os.fspath(path))


def group_folding(group: pq.RowGroupMetaData, columns: Mapping[str, int]) -> str:
    """The folding of one row group: ``FRESH``, ``FOLDED``, ``ENDED`` or ``MIXED``. ``columns``
    maps the file's column paths to their place (:func:`column_places`)."""
    if "folded" not in columns:
        return FRESH
    folded = group.column(columns["folded"]).statistics
    if folded is None or not folded.has_null_count:
        return MIXED
    if folded.null_count == group.num_rows:
        return FRESH
    if folded.null_count or not folded.has_min_max or folded.min != folded.max:
        return MIXED
    if not folded.min:
        return FRESH
    until = group.column(columns["folded_until"]).statistics if "folded_until" in columns else None
    return ENDED if until is not None and until.has_null_count and until.null_count == 0 else FOLDED


def column_places(metadata: pq.FileMetaData) -> dict[str, int]:
    """Each column path of the file and its place in a row group's columns."""
    return {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}


def groups_folding(metadata: pq.FileMetaData) -> list[str]:
    """:func:`group_folding` of every row group of a file, in order."""
    columns = column_places(metadata)
    return [group_folding(metadata.row_group(g), columns) for g in range(metadata.num_row_groups)]
