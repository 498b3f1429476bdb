"""A store's raw revision rows as a Spark DataFrame: one version of its Delta table.

With the Delta Lake reader on the cluster (Databricks, or delta-spark's jars) Spark reads the
table itself. Without it, the snapshot's file list comes from the ``deltalake`` package and
Spark reads those Parquet files. A plain file list gives the table's rows only when no file has
rows deleted by a deletion vector and no column is renamed by column mapping, so such a table
is refused on that path (tempomem never writes either, but another writer might).
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa

from ..errors import TempomemError
from ..schema import EVENT_SCHEMA
from ..storage import snapshot_files


def spark_schema() -> str:
    """The stored rows' schema (schema.EVENT_SCHEMA) as a Spark DDL string."""
    return ", ".join(f"`{f.name}` {_spark_type(f.type)}" for f in EVENT_SCHEMA)


def _spark_type(t: pa.DataType) -> str:
    if pa.types.is_timestamp(t):
        return "TIMESTAMP"
    if pa.types.is_list(t):
        return f"ARRAY<{_spark_type(t.value_type)}>"
    simple = {pa.string(): "STRING", pa.bool_(): "BOOLEAN", pa.float64(): "DOUBLE", pa.float32(): "FLOAT",
              pa.int32(): "INT", pa.int64(): "BIGINT"}
    return simple[t]


def read_events(spark: Any, path: str, version: int | None = None) -> Any:
    """The raw revision rows of the store at ``path`` (one version of its Delta table)."""
    if not os.path.isdir(path) and "://" not in path:
        raise TempomemError(f"path: no tempomem store (Delta table) at {path!r}")
    native = _native_delta(spark, path, version)
    if native is not None:
        return native
    files = snapshot_files(path, version)
    if not files:
        return spark.createDataFrame([], spark_schema())
    return spark.read.schema(spark_schema()).parquet(*files)


def _native_delta(spark: Any, path: str, version: int | None) -> Any:
    """The table read by Spark's own Delta reader, or None when the cluster has none."""
    jvm = getattr(spark, "_jvm", None)  # absent on Spark Connect: then ask the reader itself
    if jvm is not None:
        try:
            loadable = jvm.org.apache.spark.util.Utils.classIsLoadable(
                "org.apache.spark.sql.delta.sources.DeltaDataSource")
        except Exception:
            loadable = True  # cannot tell: let the reader answer
        if not loadable:
            # no Delta classes: format("delta") would only fail, after a costly lookup of
            # Python data sources
            return None
    try:
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        frame = reader.load(path)
        frame.schema  # noqa: B018 (resolves the source: a missing reader fails here)
        return frame
    except Exception as exc:
        if "DATA_SOURCE_NOT_FOUND" in str(exc) or "Failed to find data source: delta" in str(exc):
            return None
        raise
