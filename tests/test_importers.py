"""Importers (SPEC §11): each fixture loads and answers an as_of and an as_believed question."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from conftest import ts

import tempomem as tm
from tempomem import sources

FIXTURES = Path(__file__).parent / "fixtures"


def answer(frame: pl.DataFrame) -> list[tuple[str, str]]:
    return sorted(frame.select("predicate", "object").rows())


def test_graphiti_edges(mem: tm.Memory) -> None:
    report = tm.importers.graphiti(mem, FIXTURES / "graphiti_edges.json")
    assert (report.rows_read, report.loaded, report.rejected.height, report.revisions) == (7, 7, 0, 7)
    assert report.flags.filter(pl.col("flag") == "valid_at_is_reference_time").rows() == [
        ("valid_at_is_reference_time", 1, 3)]
    assert report.flag_count("inferred_start") == 1  # e-likes has no valid_at
    # What was true mid-2023, as we know today: Paris (ended 2024-03-01), Acme; the internship too.
    assert answer(mem.as_of("2023-03-01", "Alice")) == [("LIVES_IN", "Paris"), ("WORKS_AT", "Acme")]
    assert answer(mem.as_of("2023-03-01", "Bob")) == [("INTERNED_AT", "Globex")]
    # Before expired_at (2024-03-02T09:00Z) the Paris edge was believed open-ended.
    assert answer(mem.as_believed("2024-03-15", "2024-02-01", "Alice")) == [
        ("LIVES_IN", "Paris"), ("WORKS_AT", "Acme")]
    assert answer(mem.as_believed("2024-03-15", "2024-03-02T09:00:00Z", "Alice")) == [
        ("LIVES_IN", "Berlin"), ("WORKS_AT", "Acme")]
    paris = mem.history("Alice", "LIVES_IN", revisions=True).filter(pl.col("object") == "Paris")
    assert paris.select("revision", "recorded_at", "valid_to").rows() == [
        (1, ts("2024-01-05T10:00:00Z"), None), (2, ts("2024-03-02T09:00:00Z"), ts("2024-03-01"))]
    likes = mem.history("n-bob").row(0, named=True)  # no names exported: uuids stand in
    assert (likes["object"], likes["artifacts"], likes["origin"]) == ("n-jazz", ["ep-4", "ep-5"], "import:graphiti")
    # the fields backfill does not read, reference_time among them, as given
    assert json.loads(mem.get("e-works").attributes) == {
        "confidence": "high", "source_node_uuid": "n-alice", "target_node_uuid": "n-acme",
        "reference_time": "2024-01-05T09:59:00Z"}
    assert mem.check().ok


def test_mem0_history(mem: tm.Memory) -> None:
    report = mem.backfill(FIXTURES / "mem0_history.db", format="mem0")
    assert (report.rows_read, report.loaded, report.revisions) == (6, 4, 5)
    # h5 is an UPDATE without updated_at (its created_at is the memory's creation); h6 has no time.
    assert report.rejected.select("row", "field").rows() == [(4, "recorded_at"), (5, "recorded_at")]
    # ADD h1 at 2024-05-01T09:00-07:00 = 16:00Z; UPDATE h2 at 2024-05-03 18:30 (naive: UTC);
    # DELETE h3 at 2024-06-01T12:00-07:00 = 19:00Z.
    assert mem.as_believed("2024-05-02", "2024-05-02", "m1")["object"].to_list() == ["Likes pizza"]
    assert mem.as_believed("2024-05-01T15:00:00Z", "2024-05-01T15:59:59Z", "m1").is_empty()
    assert mem.as_believed("2024-05-04", "2024-05-04", "m1")["object"].to_list() == ["Likes pizza and pasta"]
    assert mem.as_believed("2024-05-04", "2024-06-01T19:00:00Z", "m1").is_empty()
    # Today: the pizza memory held until the update (a change), the updated one was deleted.
    assert mem.as_of("2024-05-02", "m1")["object"].to_list() == ["Likes pizza"]
    assert mem.as_of("2024-05-04", "m1").is_empty()
    assert mem.as_of("2025-01-01", "m2")["object"].to_list() == ["Is vegetarian"]
    pizza = mem.get("h1")
    assert (pizza.status, pizza.superseded_by, pizza.valid_to) == ("superseded", "h2", ts("2024-05-03T18:30:00Z"))
    assert mem.get("h2").status == "retracted" and mem.get("h2").reason == "deleted in mem0"
    assert mem.check().ok


def _mem0_db(path: Path, events: list[tuple[str | None, ...]]) -> Path:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE history (id TEXT, memory_id TEXT, new_memory TEXT, event TEXT, "
                   "created_at TEXT, updated_at TEXT)")
        db.executemany("INSERT INTO history VALUES (?,?,?,?,?,?)", events)
    return path


def test_mem0_events_that_match_no_belief_are_flagged(mem: tm.Memory, tmp_path: Path) -> None:
    # Row 1 deletes a memory never added; row 3 deletes one already deleted; row 4 is an event
    # mem0 does not have; row 5 deletes with no readable time. Rows 0 and 2 are fine; so is row 6,
    # a DELETE at the instant of the ADD of row 7, which the mapping applies first (ADD < DELETE).
    path = _mem0_db(tmp_path / "history.db", [
        ("h0", "m1", "Likes tea", "ADD", "2024-05-01T09:00:00Z", None),
        ("h1", "m9", None, "DELETE", "2024-05-01T09:00:00Z", "2024-05-02T09:00:00Z"),
        ("h2", "m1", None, "delete", "2024-05-01T09:00:00Z", "2024-05-03T09:00:00Z"),
        ("h3", "m1", None, "DELETE", "2024-05-01T09:00:00Z", "2024-05-04T09:00:00Z"),
        ("h4", "m1", "Likes coffee", "MERGE", "2024-05-01T09:00:00Z", "2024-05-05T09:00:00Z"),
        ("h5", "m2", None, "DELETE", "2024-05-01T09:00:00Z", "not a time"),
        ("h6", "m3", None, "DELETE", "2024-05-01T09:00:00Z", "2024-05-06T09:00:00Z"),
        ("h7", "m3", "Likes jazz", "ADD", "2024-05-06T09:00:00Z", None),
    ])
    report = mem.backfill(path, format="mem0")
    assert report.flags.filter(pl.col("flag") == "unmatched_mem0_event").rows() == [("unmatched_mem0_event", 4, 1)]
    tea = mem.get("h0")
    assert (tea.status, tea.reason) == ("retracted", "deleted in mem0")
    jazz = mem.get("h7")
    assert (jazz.status, jazz.retracted_at) == ("retracted", ts("2024-05-06T09:00:00Z"))


def test_mem0_columns_typed_by_their_values_read_as_given(mem: tm.Memory, tmp_path: Path) -> None:
    """SQLite types values, not columns. ``memory_id`` (declared without a type) holds integers
    and then text; ``updated_at`` is NULL for 1,100 rows before its first value. Both read
    as the text of what is stored (a reader typing a column from its first rows would fail)."""
    path = tmp_path / "history.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE history (id, memory_id, new_memory, event, created_at, updated_at)")
        db.executemany("INSERT INTO history VALUES (?,?,?,?,?,?)", [
            *((f"h{i}", i, f"likes {i}", "ADD", f"2024-05-01T{i // 60 % 24:02d}:{i % 60:02d}:00Z", None)
              for i in range(1100)),
            ("u7", 7, "likes seven more", "UPDATE", "2024-05-01T00:07:00Z", "2024-06-01T00:00:00Z"),
            ("t0", "m-text", "a text key", "ADD", "2024-05-02T00:00:00Z", None)])
    report = mem.backfill(path, format="mem0")
    assert (report.loaded, report.revisions) == (1103, 1103)
    assert mem.as_of("2024-05-15", "7")["object"].to_list() == ["likes 7"]
    assert mem.as_of("2024-07-01", "7")["object"].to_list() == ["likes seven more"]
    assert mem.get("h7").superseded_by == "u7"
    assert mem.as_of("2024-07-01", "m-text")["object"].to_list() == ["a text key"]
    assert mem.as_of("2024-07-01", "1099")["object"].to_list() == ["likes 1099"]


def test_sqlite_that_is_not_a_database_is_one_typed_line(mem: tm.Memory, tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    path.write_text("mem0 history? no, a note\n" * 100)
    with pytest.raises(tm.TempomemError, match=r"^data: cannot read .*history\.db as SQLite: .*not a database$"):
        mem.backfill(path, format="mem0")
    assert mem.sql("SELECT count(*) FROM revisions").fetchall() == [(0,)]


def test_mem0_an_unreadable_time_rejects_its_row_and_changes_no_other(tmp_path: Path) -> None:
    """With every time readable the mapping hands backfill the times it read; one unreadable
    ADD sends them as text instead, so that backfill names that text. Both give the same facts."""
    events = [("h0", "m1", "Likes tea", "ADD", "2024-05-01T09:00:00-07:00", None),
              ("h1", "m1", "Likes green tea", "UPDATE", "2024-05-01T09:00:00Z", "2024-05-02 10:00:00"),
              ("h2", "m1", "Likes coffee", "UPDATE", "2024-05-01T09:00:00Z", "2024-05-02T10:00:00Z"),
              ("h3", "m2", "Is vegetarian", "ADD", "2024-05-03T08:00:00+02:00", None),
              ("h4", "m2", None, "DELETE", "2024-05-03T08:00:00Z", "2024-06-01T00:00:00Z")]
    stored = []
    for name, extra in (("read", []), ("text", [("h5", "m3", "Plays chess", "ADD", "yesterday", None)])):
        mem = tm.open(tmp_path / name, create=True)
        report = mem.backfill(_mem0_db(tmp_path / f"{name}.db", events + extra), format="mem0")
        assert report.rejected.rows() == ([] if not extra else [(
            5, "recorded_at", "yesterday", "cannot read yesterday as a time: not an ISO 8601 date or time "
            "(such as 2024-06-01, 2024-06-01T12:00:00Z or 20240601T120000+0200)")])
        stored.append(mem.sql("SELECT fact_id, object, valid_from, valid_to, recorded_at, retracted_at, status, "
                              "superseded_by, revision FROM revisions ORDER BY fact_id, revision").fetchall())
    assert stored[0] == stored[1]
    # h1 and h2 share an instant: h1 supersedes tea (h0) and is replaced at once (retracted) by h2.
    assert [(r[0], r[4].isoformat(), r[6], r[7]) for r in stored[0]] == [
        ("h0", "2024-05-01T16:00:00+00:00", "live", None),
        ("h0", "2024-05-02T10:00:00+00:00", "superseded", "h1"),
        ("h1", "2024-05-02T10:00:00+00:00", "retracted", None),
        ("h2", "2024-05-02T10:00:00+00:00", "live", None),
        ("h3", "2024-05-03T06:00:00+00:00", "live", None),
        ("h3", "2024-06-01T00:00:00+00:00", "retracted", None)]


def test_four_timestamp_sqlite(mem: tm.Memory) -> None:
    report = tm.importers.sqlite4ts(mem, FIXTURES / "four_timestamp.db")
    assert (report.loaded, report.rejected.height, report.revisions) == (4, 0, 5)
    old = mem.get("1")
    assert (old.status, old.superseded_by, old.superseded_at, old.recorded_at) == (
        "superseded", "2", ts("2024-06-02"), ts("2024-01-02"))
    assert mem.as_of("2024-03-01", "checkout-api", scope="ops")["object"].to_list() == ["m5.large"]
    assert mem.as_of("2024-07-01", "checkout-api")["object"].to_list() == ["m5.xlarge"]
    # mysql was believed from 2024-02-01 until its retraction on 2024-02-03, then postgres.
    assert mem.as_believed("2024-02-02", "2024-02-02", "orders-db")["object"].to_list() == ["mysql"]
    assert mem.as_believed("2024-02-02", "2024-02-03", "orders-db")["object"].to_list() == ["postgres"]
    assert mem.get("3").valid_from_inferred and mem.get("3").text == "orders-db runs MySQL"


def test_generic_csv_with_mapping(mem: tm.Memory, tmp_path: Path) -> None:
    log = tmp_path / "agent_log.csv"
    log.write_text("entity,attribute,value,logged,effective\n"
                   "checkout-api,region,eu-west-1,2025-01-02T00:00:00Z,2024-12\n"
                   "checkout-api,region,eu-central-1,2025-02-02T00:00:00Z,2025-02\n")
    report = tm.importers.generic(mem, log, {"entity": "subject", "attribute": "predicate", "value": "object",
                                             "logged": "recorded_at", "effective": "valid_from"})
    assert report.loaded == 2 and report.flag_count("overlapping_values") == 2
    assert mem.as_believed("2025-03-01", "2025-01-15", "checkout-api")["object"].to_list() == ["eu-west-1"]


def test_graphiti_edges_wrapped_late_fields_and_values_that_are_not_text(mem: tm.Memory, tmp_path: Path,
                                                                          monkeypatch) -> None:
    # An export wrapped as {"edges": [...]}; the second edge has a field the first lacks (past the
    # fields DuckDB samples: here one edge); a number and a nested object are read as their JSON
    # text, never as another value; a list that is not edges is refused, changing nothing.
    monkeypatch.setattr(sources, "_GRAPHITI_SAMPLE", 1)
    edges = [{"uuid": "e1", "source_name": "api", "target_name": "m5", "name": "RUNS_ON",
              "created_at": "2025-01-01T00:00:00Z", "valid_at": "2024-06-01", "episodes": ["ep-1"]},
             {"uuid": "e2", "source_name": "api", "target_name": 7, "name": "REPLICAS",
              "created_at": "2025-01-02T00:00:00Z", "valid_at": "2024-07-01", "invalid_at": "2024-08-01",
              "fact": {"count": 7}}]
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps({"edges": edges}))
    report = mem.backfill(path, format="graphiti")
    assert (report.rows_read, report.loaded, report.rejected.height) == (2, 2, 0)
    replicas = mem.get("e2")
    assert (replicas.object, replicas.text, replicas.valid_to) == ("7", '{"count":7}', ts("2024-08-01"))
    assert list(mem.get("e1").artifacts) == ["ep-1"]
    # the same edges as a plain list (read with the fields declared) give the same text, and a
    # field the mapping does not read changes nothing
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps([{**e, "uuid": e["uuid"] + "p", "extra": {"x": [1]}, "attributes": a}
                                 for e, a in zip(edges, ["quoted", {"k": 1.5}], strict=True)]))
    other = tm.open(tmp_path / "plain", create=True)
    assert other.backfill(plain, format="graphiti").loaded == 2
    replicas = other.get("e2p")
    assert (replicas.object, replicas.text, replicas.valid_to) == ("7", '{"count":7}', ts("2024-08-01"))
    assert (list(other.get("e1p").artifacts), other.get("e1p").attributes, replicas.attributes) == (
        ["ep-1"], '"quoted"', '{"k":1.5}')
    bad = tmp_path / "numbers.json"
    bad.write_text("[1, 2]")
    with pytest.raises(tm.TempomemError, match="as Graphiti edges"):
        mem.backfill(bad, format="graphiti")
    assert mem.sql("SELECT count(*) FROM facts").fetchall() == [(2,)]


def test_graphiti_jsonl_with_only_one_episode_column(mem: tm.Memory, tmp_path: Path) -> None:
    # An export has either `episodes` or `episode_uuids`, rarely both; either alone must load, and a
    # JSON Lines file of one edge is that edge (json.loads reads the line as one object).
    for i, key in enumerate(("episodes", "episode_uuids")):
        path = tmp_path / f"{key}.jsonl"
        path.write_text(f'{{"uuid": "e{i}", "source_name": "s{i}", "target_name": "o", "name": "R", '
                        f'"created_at": "2025-01-01T00:00:00Z", "valid_at": "2024-06-01", "{key}": ["ep-{i}"]}}\n')
        report = mem.backfill(path, format="graphiti")
        assert (report.rows_read, report.loaded, report.rejected.height) == (1, 1, 0)
        assert list(mem.get(f"e{i}").artifacts) == [f"ep-{i}"]


@pytest.mark.parametrize("lenient", [False, True])
def test_graphiti_an_unreadable_time_rejects_its_row_and_changes_no_other(tmp_path: Path, lenient: bool) -> None:
    """With every time readable the mapping hands backfill the times it read; one unreadable
    valid_at sends them all as text instead, so that backfill names that text (lenient: loads the
    edge with no start and flags it). The other edges' revisions are the same either way."""
    edges = [{"uuid": "e1", "source_name": "api", "target_name": "m5", "name": "RUNS_ON",
              "created_at": "2025-01-01T00:00:00+01:00", "valid_at": "2024-06-01", "invalid_at": "2024-09-01T12:00Z",
              "expired_at": "2025-02-01T00:00:00Z", "reference_time": "2024-12-31T23:00:00Z"},
             {"uuid": "e2", "source_name": "db", "target_name": "r6", "name": "RUNS_ON",
              "created_at": "2025-01-02 08:00", "valid_at": "2024-07-01T00:00:00Z",
              "expired_at": "2025-03-01T00:00:00Z"}]
    extra = {"uuid": "e3", "source_name": "cache", "target_name": "t3", "name": "RUNS_ON",
             "created_at": "2025-01-03T00:00:00Z", "valid_at": "last summer"}
    stored = []
    for name, given in (("read", edges), ("text", [*edges, extra])):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(given))
        mem = tm.open(tmp_path / name, create=True)
        report = mem.backfill(path, format="graphiti", lenient=lenient)
        if name == "text" and not lenient:
            assert report.rejected.select("row", "field", "value").rows() == [(2, "valid_from", "last summer")]
        else:
            assert report.rejected.height == 0
        assert report.flag_count("unreadable_time") == (1 if name == "text" and lenient else 0)
        stored.append(mem.sql("SELECT fact_id, valid_from, valid_to, recorded_at, retracted_at, status, revision "
                              "FROM revisions WHERE fact_id <> 'e3' ORDER BY fact_id, revision").fetchall())
    assert stored[0] == stored[1]
    # e1: believed open-ended from 2024-12-31T23:00Z, closed at invalid_at from expired_at on;
    # e2: expired with no invalid_at, a retraction.
    assert [(r[0], r[2], r[3], r[4], r[5]) for r in stored[0]] == [
        ("e1", None, ts("2024-12-31T23:00:00Z"), None, "live"),
        ("e1", ts("2024-09-01T12:00:00Z"), ts("2025-02-01"), None, "ended"),
        ("e2", None, ts("2025-01-02T08:00:00Z"), None, "live"),
        ("e2", None, ts("2025-03-01"), ts("2025-03-01"), "retracted")]


def test_graphiti_episodes_that_are_not_a_list_are_one_artifact_in_either_form(tmp_path: Path) -> None:
    """``episodes`` given as one value (a text, a number) is a list of that one text, as backfill
    reads one bare artifact, never dropped; a list's numbers are their text. Wrapped or plain alike."""
    edges = [{"uuid": "e1", "source_name": "api", "target_name": "m5", "name": "RUNS_ON",
              "created_at": "2025-01-01T00:00:00Z", "episodes": "ep-9"},
             {"uuid": "e2", "source_name": "db", "target_name": "r6", "name": "RUNS_ON",
              "created_at": "2025-01-01T00:00:00Z", "episode_uuids": [7, "ep-8"]},
             {"uuid": "e3", "source_name": "web", "target_name": "t3", "name": "RUNS_ON",
              "created_at": "2025-01-01T00:00:00Z", "episodes": 12, "episode_uuids": None}]
    for shape, given in (("plain", edges), ("wrapped", {"edges": edges})):
        path = tmp_path / f"{shape}.json"
        path.write_text(json.dumps(given))
        mem = tm.open(tmp_path / shape, create=True)
        assert mem.backfill(path, format="graphiti").loaded == 3
        assert [list(mem.get(f"e{i}").artifacts) for i in (1, 2, 3)] == [["ep-9"], ["7", "ep-8"], ["12"]]


def test_times_read_apart_are_put_back_in_the_edges_order() -> None:
    """The Graphiti mapping reads each edge's times in a query of its own and puts them beside the
    edges by position: a query's rows that came back in another order are put back by ``__row``
    (hand-checked: row 2's time is 30), and rows already in order are the table itself."""
    shuffled = pa.table({"__row": pa.array([2, 0, 3, 1], pa.int64()), "valid_t": [30, 10, 40, 20]})
    assert sources._by_row(shuffled).to_pydict() == {"__row": [0, 1, 2, 3], "valid_t": [10, 20, 30, 40]}
    ordered = pa.table({"__row": pa.chunked_array([[0, 1], [2]], pa.int64()), "valid_t": [5, 6, 7]})
    assert sources._by_row(ordered) is ordered


def test_graphiti_an_export_with_a_byte_order_mark_loads(mem: tm.Memory, tmp_path: Path) -> None:
    """Windows tools write UTF-8 with a byte-order mark; DuckDB's format detection then took the
    array for something else and the import failed. An empty list with one loads nothing."""
    edge = {"uuid": "e1", "source_name": "api", "target_name": "m5", "name": "RUNS_ON",
            "created_at": "2025-01-01T00:00:00Z", "valid_at": "2024-06-01", "episodes": ["ep-1"]}
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf\n  " + json.dumps([edge], indent=2).encode())
    assert mem.backfill(path, format="graphiti").loaded == 1
    assert (mem.get("e1").object, list(mem.get("e1").artifacts)) == ("m5", ["ep-1"])
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"\xef\xbb\xbf[]")
    assert mem.backfill(empty, format="graphiti").loaded == 0


def _revisions(mem: tm.Memory) -> pl.DataFrame:
    """Every revision as the store answers it, but what says when and how it was loaded."""
    return mem.sql("SELECT * EXCLUDE (origin, ingested_at) FROM revisions ORDER BY fact_id, revision").pl()


def test_a_mem0_history_grown_since_its_import_adds_what_is_new(tmp_path: Path) -> None:
    """The same history imported again a few days on (a daily sync): the events already
    imported are duplicates, the rest extend the stored facts (an UPDATE closes a stored ADD, a
    DELETE retracts it), and the store is the one a single import of the whole history makes."""
    events = [("h0", "m1", "Likes tea", "ADD", "2024-05-01T09:00:00Z", None),
              ("h2", "m2", "Lives in Oslo", "ADD", "2024-05-02T09:00:00Z", None),
              ("h1", "m1", "Likes coffee", "UPDATE", "2024-05-01T09:00:00Z", "2024-05-03T09:00:00Z"),
              ("h3", "m2", None, "DELETE", "2024-05-02T09:00:00Z", "2024-05-04T09:00:00Z"),
              ("h4", "m3", "Plays chess", "ADD", "2024-05-05T09:00:00Z", None)]
    synced = tm.open(tmp_path / "synced", create=True)
    assert tm.importers.mem0(synced, _mem0_db(tmp_path / "may2.db", events[:2])).loaded == 2
    grown = tm.importers.mem0(synced, _mem0_db(tmp_path / "may5.db", events))
    # rows: h0 (a duplicate), h0 closed by h1, h1, h2 retracted by h3 (only the retraction is new), h4
    assert (grown.rows_read, grown.loaded, grown.duplicates, grown.rejected.height, grown.revisions) == (5, 4, 1, 0, 4)
    assert synced.current("m1")["object"].to_list() == ["Likes coffee"]
    assert synced.current("m2").is_empty()
    assert synced.as_believed("2024-05-02T12:00:00Z", "2024-05-02T12:00:00Z", "m2")["object"].to_list() == [
        "Lives in Oslo"]
    once = tm.open(tmp_path / "once", create=True)
    tm.importers.mem0(once, tmp_path / "may5.db")
    assert _revisions(synced).equals(_revisions(once))
    again = tm.importers.mem0(synced, tmp_path / "may5.db")
    assert (again.loaded, again.duplicates, again.rejected.height) == (0, 5, 0)
    assert synced.check().ok


def test_a_graphiti_export_grown_since_its_import_adds_what_is_new(tmp_path: Path) -> None:
    """Graphiti edits edges in place: exported again, an edge expired since is new revisions of
    the stored edge (closed at invalid_at, or retracted without one), a new edge a new fact; the
    store is the one a single import of the later export makes."""
    def edge(uuid: str, name: str, target: str, **more: str) -> dict:
        return {"uuid": uuid, "group_id": "acme", "source_name": "Alice", "target_name": target, "name": name,
                "fact": f"Alice {name} {target}", "created_at": "2024-01-05T10:00:00Z",
                "valid_at": "2023-01-10T00:00:00Z", **more}
    works, paris = edge("e1", "WORKS_AT", "Acme"), edge("e2", "LIVES_IN", "Paris")
    (tmp_path / "jan.json").write_text(json.dumps([works, paris]))
    (tmp_path / "apr.json").write_text(json.dumps([
        {**works, "expired_at": "2024-04-01T00:00:00Z"},
        {**paris, "invalid_at": "2024-03-01T00:00:00Z", "expired_at": "2024-03-02T09:00:00Z"},
        edge("e3", "LIVES_IN", "Berlin", created_at="2024-03-02T09:00:00Z", valid_at="2024-03-01T00:00:00Z")]))
    synced = tm.open(tmp_path / "synced", create=True)
    tm.importers.graphiti(synced, tmp_path / "jan.json")
    grown = tm.importers.graphiti(synced, tmp_path / "apr.json")
    # rows: e1 retracted at its expiry (only the retraction is new); e2 as created (a duplicate)
    # and closed at its expiry; e3
    assert (grown.rows_read, grown.loaded, grown.duplicates, grown.rejected.height, grown.revisions) == (4, 3, 1, 0, 3)
    assert answer(synced.current("Alice", scope="acme")) == [("LIVES_IN", "Berlin")]
    assert answer(synced.as_believed("2024-02-01", "2024-03-01", "Alice", scope="acme")) == [
        ("LIVES_IN", "Paris"), ("WORKS_AT", "Acme")]
    once = tm.open(tmp_path / "once", create=True)
    tm.importers.graphiti(once, tmp_path / "apr.json")
    assert _revisions(synced).equals(_revisions(once))
    assert tm.importers.graphiti(synced, tmp_path / "apr.json").loaded == 0
    assert synced.check().ok


def test_an_import_replayed_applies_each_revision_of_a_source_row_once(mem: tm.Memory, tmp_path: Path) -> None:
    """resolve=True: a source row that the mapping makes two rows (a mem0 value and its closing
    by the next UPDATE, at two belief times) is two assertions, each applied once. Named by its
    row alone, each was applied twice: tea's first revision was written twice, already closed,
    and check() found the repeat."""
    path = _mem0_db(tmp_path / "history.db", [
        ("h0", "m1", "Likes tea", "ADD", "2024-05-01T09:00:00Z", None),
        ("h1", "m1", "Likes coffee", "UPDATE", "2024-05-01T09:00:00Z", "2024-05-03T09:00:00Z"),
        ("h2", "m1", "Likes water", "UPDATE", "2024-05-01T09:00:00Z", "2024-05-05T09:00:00Z"),
        ("h3", "m1", None, "DELETE", "2024-05-01T09:00:00Z", "2024-05-07T09:00:00Z")])
    report = tm.importers.mem0(mem, path, resolve=True)
    # rows: tea, tea closed, coffee, coffee closed, water (retracted by h3)
    assert (report.loaded, report.rejected.height, report.revisions) == (5, 0, 6)
    day = {d: ts(f"2024-05-0{d}T09:00:00Z") for d in (1, 3, 5, 7)}
    revisions = mem.history("m1", revisions=True)
    assert revisions.select("object", "revision", "recorded_at", "valid_to", "status").rows() == [
        ("Likes tea", 1, day[1], None, "live"), ("Likes tea", 2, day[3], day[3], "ended"),
        ("Likes coffee", 1, day[3], None, "live"), ("Likes coffee", 2, day[5], day[5], "ended"),
        ("Likes water", 1, day[5], None, "live"), ("Likes water", 2, day[7], None, "retracted")]
    assert mem.as_believed("2024-05-04", "2024-05-04", "m1")["object"].to_list() == ["Likes coffee"]
    assert mem.check().ok


def test_graphiti_edges_replayed_expire_once(mem: tm.Memory) -> None:
    """resolve=True: an edge expired after it was created (two rows of one edge) is asserted open
    from created_at and closed at invalid_at from expired_at, each once."""
    report = tm.importers.graphiti(mem, FIXTURES / "graphiti_edges.json", resolve=True)
    assert (report.rows_read, report.rejected.height) == (7, 0)
    paris = mem.history("Alice", "LIVES_IN", scope="acme", revisions=True).filter(pl.col("object") == "Paris")
    assert paris.select("revision", "recorded_at", "valid_to").rows() == [
        (1, ts("2024-01-05T10:00:00Z"), None), (2, ts("2024-03-02T09:00:00Z"), ts("2024-03-01"))]
    assert mem.check().ok
