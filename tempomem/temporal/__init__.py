"""Temporal resolution, apart from storage: the interval rules and SPEC §5's decision table.

Nothing in this package imports DuckDB, Polars or pyarrow: it is the part of the write path a
reader lays beside the SPEC. The set-based path (``tempomem/rounds.sql``) reads the same
table, registered into DuckDB by :mod:`tempomem.rounds`.
"""
