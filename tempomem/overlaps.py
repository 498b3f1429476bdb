"""Overlapping values among candidate revisions (``overlaps.sql``): what backfill's
``overlapping_values`` flag counts and what ``check()`` reports, found without pairing every two
revisions of a busy key, whose pairs grow with the square of its revisions.

The caller makes ``_ov_candidates`` (see ``overlaps.sql``) on a connection with the interval
predicates; :func:`find` leaves in ``_ov_found`` the ``i`` of every candidate whose value overlaps
another fact's value of its key in both valid and belief time; :func:`drop` removes the tables.
"""

from __future__ import annotations

import duckdb

from .connection import sql_parts

#: Candidate revisions one part of the test takes (by key hash): a part's pairs and counts stay
#: within memory however large the load or store.
PART_ROWS = 1_000_000
#: A key with more candidate revisions than this has its overlaps counted, not paired
#: (``overlaps.sql``, part ``busy_keys``). Counting costs a key n log n but a large constant:
#: on keys of ~10-20 revisions it took 7-13 s a million revisions where pairing took 0.3-0.7 s
#: (Graphiti's and mem0's candidates with 16 and 8 here), so only keys whose pairs would
#: outgrow it are counted.
BUSY_FROM = 64
_SQL = sql_parts("overlaps.sql")
_TABLES = ("_ov_candidates", "_ov_found", "_ov_busy_keys", "_ov_part", "_ov_busy", "_ov_dom", "_ov_dom_counts",
           "_ov_bounded", "_ov_believed_together")


def find(con: duckdb.DuckDBPyConnection, *, busy_from: int | None = None) -> None:
    """Fill ``_ov_found`` from ``_ov_candidates``, a part of the keys at a time; a key of more
    than ``busy_from`` candidates (default :data:`BUSY_FROM`) is counted, the others paired."""
    con.execute(_SQL["found"])
    con.execute(_SQL["busy_keys"], {"busy_from": BUSY_FROM if busy_from is None else busy_from})
    revisions = con.sql("SELECT count(*) FROM _ov_candidates").fetchall()[0][0]
    parts = max(1, -(-revisions // PART_ROWS))
    for part in range(parts):
        find_in_part(con, parts=parts, part=part)


def find_in_part(con: duckdb.DuckDBPyConnection, *, parts: int, part: int) -> None:
    """Add to ``_ov_found`` the overlapping revisions of one part of ``_ov_candidates``: the keys
    of few revisions paired, the busy ones (``_ov_busy_keys``, made by :func:`find`) counted."""
    con.execute(_SQL["part_revs"], {"parts": parts, "part": part})
    for statement in ("overlap", "overlap_open", "busy_revisions", "dominance"):
        con.execute(_SQL[statement])
    # the two-dimensional counts take a level per doubling of the largest group
    largest = con.sql("SELECT coalesce(max(pos), 0) FROM _ov_dom").fetchall()[0][0]
    for level in range(int(largest).bit_length()):
        con.execute(_SQL["dominance_level"], {"m": level})
    for statement in ("overlap_bounded_open", "overlap_bounded_pairs"):
        con.execute(_SQL[statement])


def drop(con: duckdb.DuckDBPyConnection) -> None:
    """Remove the candidates and every table the test made."""
    for table in _TABLES:
        con.execute(f"DROP TABLE IF EXISTS {table}")
