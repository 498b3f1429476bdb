"""Storage: the only package that imports ``deltalake`` or writes Parquet into a store.

:class:`Storage` is a store folder (:mod:`.folder`); every deltalake call runs through
:mod:`.delta`; the log entries tempomem writes and follows itself (one-file appends, the file
list of a newer version) are :mod:`.log`; every Parquet writer setting lives in :mod:`.writer`.
"""

from .delta import Snapshot, parquet_stats, snapshot_files
from .folder import Storage
from .writer import COMPRESSION, ROW_GROUP_ROWS, BackgroundWriter, FoldParts, parquet_writer

__all__ = ["COMPRESSION", "ROW_GROUP_ROWS", "BackgroundWriter", "FoldParts", "Snapshot", "Storage", "parquet_stats",
           "parquet_writer", "snapshot_files"]
