"""Backfill (SPEC §2, §9): times, rejections, fixes, duplicates, flags, inputs, the clock."""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from analytics_helpers import assert_previous_columns
from conftest import HEAVY, ts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tempomem as tm
from tempomem import engine, ids, overlaps, timegrammar
from tempomem.backfill import checks
from tempomem.backfill import write as backfill_write
from tempomem.export import export
from tempomem.schema import EVENT_SCHEMA, PREVIOUS_COLUMNS, STATS_COLUMNS
from tempomem.storage import writer as storage_writer


def revs(mem: tm.Memory, subject: str | None = None) -> pl.DataFrame:
    where = "WHERE subject = $s" if subject else ""
    return mem.sql(f"SELECT * FROM revisions {where} ORDER BY subject, fact_id, revision",
                   params={"s": subject} if subject else None).pl()


def row(subject: str, obj: str = "x", recorded_at: object = "2025-01-01T00:00:00Z", **more: object) -> dict:
    return {"subject": subject, "predicate": "p", "object": obj, "recorded_at": recorded_at, **more}


def stored_parts(mem: tm.Memory) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A load's two files (a fold's two parts) as written: the revisions that ended (folded with
    their belief end) and the latest ones; an empty frame for a part with no row."""
    frames = [pl.read_parquet(f) for f in mem._storage.snapshot().files]
    ended = [f for f in frames if f["folded_until"].null_count() == 0]
    latest = [f for f in frames if f["folded_until"].null_count() == f.height]
    assert len(ended) <= 1 and len(latest) == 1 and len(ended) + len(latest) == len(frames)
    return (ended[0] if ended else latest[0].clear()), latest[0]


# -- times ---------------------------------------------------------------------------------------

def test_time_forms_normalise_to_utc_microseconds(mem: tm.Memory) -> None:
    report = mem.backfill([
        row("offset_pst", valid_from="2024-11-03T01:30:00-08:00"),
        row("offset_pdt", valid_from="2024-06-01T10:00:00-07:00"),
        row("naive", valid_from="2024-06-01 10:00:00.123456"),
        row("zulu", valid_from="2024-06-01T10:00:00Z"),
        row("year", valid_from="2024"),
        row("month", valid_from="2024-06"),
        row("day", valid_from=" 2024-06-05 "),
        row("basic", valid_from="20240601"),  # ISO 8601 basic format, never an epoch
    ])
    assert report.loaded == 8 and report.rejected.height == 0
    got = dict(revs(mem).select("subject", "valid_from").iter_rows())
    assert got == {
        "offset_pst": ts("2024-11-03T09:30:00Z"),
        "offset_pdt": ts("2024-06-01T17:00:00Z"),
        "naive": ts("2024-06-01T10:00:00.123456Z"),
        "zulu": ts("2024-06-01T10:00:00Z"),
        "year": ts("2024-01-01T00:00:00Z"),
        "month": ts("2024-06-01T00:00:00Z"),
        "day": ts("2024-06-05T00:00:00Z"),
        "basic": ts("2024-06-01T00:00:00Z"),
    }


def test_typed_columns_datetimes_dates_and_epochs(mem: tm.Memory) -> None:
    frame = pl.DataFrame({
        "subject": ["a", "b"], "predicate": ["p", "p"], "object": ["x", "y"],
        "recorded_at": [datetime(2025, 1, 2, 3, 4, 5), datetime(2025, 1, 2, 3, 4, 6)],  # naive = UTC
        "valid_from": [date(2024, 2, 29), date(2024, 3, 1)],
        "valid_to": [1_717_236_000_000, 1_717_236_000_500],  # epoch milliseconds
    })
    mem.backfill(frame, epoch_unit="ms")
    got = revs(mem).select("subject", "recorded_at", "valid_from", "valid_to").rows()
    assert got == [
        ("a", ts("2025-01-02T03:04:05Z"), ts("2024-02-29"), ts("2024-06-01T10:00:00Z")),
        ("b", ts("2025-01-02T03:04:06Z"), ts("2024-03-01"), ts("2024-06-01T10:00:00.500Z")),
    ]
    aware = pl.DataFrame({"subject": ["c"], "predicate": ["p"], "object": ["z"],
                          "recorded_at": [datetime(2025, 1, 1, 12, tzinfo=timezone(timedelta(hours=-8)))]})
    mem.backfill(aware)
    assert revs(mem, "c")["recorded_at"].to_list() == [ts("2025-01-01T20:00:00Z")]


def test_epochs_need_their_unit_and_bad_epoch_unit(mem: tm.Memory) -> None:
    report = mem.backfill([row("a", recorded_at=1_735_689_600), row("b", valid_from="1717236000")])
    assert report.loaded == 0
    assert report.rejected.rows() == [
        (0, "recorded_at", "1735689600", "cannot read 1735689600 as a time: " + timegrammar.BARE_NUMBER),
        (1, "valid_from", "1717236000", "cannot read 1717236000 as a time: " + timegrammar.BARE_NUMBER
         + " (lenient=True reads it as missing)"),
    ]
    report = mem.backfill([row("a", recorded_at=1_735_689_600), row("b", valid_from="1717236000")], epoch_unit="s")
    assert report.loaded == 2
    assert revs(mem).select("recorded_at", "valid_from").rows() == [
        (ts("2025-01-01"), None), (ts("2025-01-01"), ts("2024-06-01T10:00:00Z"))]
    with pytest.raises(tm.TempomemError, match="epoch_unit"):
        mem.backfill([row("b")], epoch_unit="days")


# -- rejections, lenient, strict -----------------------------------------------------------------

def test_mixed_bad_and_good_rows_are_reported_one_by_one(mem: tm.Memory, tmp_path: Path) -> None:
    csv = tmp_path / "mixed.csv"
    csv.write_text(
        "subject,predicate,object,recorded_at,valid_from,confidence\n"
        "api,instance_type,m5.large,2025-03-01T00:00:00Z,2025-02-01,0.8\n"   # 0 good
        "api,instance_type,m5.xlarge,,2025-03-01,0.8\n"                      # 1 no belief time
        ",instance_type,m5.xlarge,2025-03-02,,\n"                            # 2 no subject
        "db,engine,postgres,yesterday,,\n"                                   # 3 unreadable belief time
        "db,version,16,2025-03-03,sometime,\n"                               # 4 unreadable valid_from
        "db,owner,ops,2025-03-04,,1.5\n"                                     # 5 confidence out of range
        "cache,engine,redis,2025-03-05,2024-12,\n"                           # 6 good
    )
    report = mem.backfill(csv)
    assert (report.rows_read, report.loaded, report.duplicates) == (7, 2, 0)
    assert report.rejected.rows() == [
        (1, "recorded_at", None, "required: a belief time is never invented"),
        (2, "subject", None, "required, got nothing"),
        (3, "recorded_at", "yesterday", f"cannot read yesterday as a time: {timegrammar.NOT_ISO}"),
        (4, "valid_from", "sometime",
         f"cannot read sometime as a time: {timegrammar.NOT_ISO} (lenient=True reads it as missing)"),
        (5, "confidence", "1.5", "must be a number between 0 and 1"),
    ]
    assert sorted(mem.as_of("2025-03-01").select("subject", "object").rows()) == [
        ("api", "m5.large"), ("cache", "redis")]


def test_lenient_reads_unparseable_valid_time_as_missing(mem: tm.Memory) -> None:
    report = mem.backfill([row("a", valid_from="sometime", valid_to="never")], lenient=True)
    assert report.loaded == 1 and report.rejected.height == 0
    stored = revs(mem).row(0, named=True)
    assert stored["valid_from"] is None and stored["valid_to"] is None and stored["valid_from_inferred"]
    assert report.flag_count("unreadable_time") == 1 and report.flag_count("inferred_start") == 1
    # A belief time is never invented, lenient or not.
    report = mem.backfill([row("b", recorded_at="whenever")], lenient=True)
    assert report.loaded == 0 and report.rejected["field"].to_list() == ["recorded_at"]


def test_strict_loads_nothing_and_carries_the_report(mem: tm.Memory) -> None:
    version = mem._storage.latest_version()
    with pytest.raises(tm.BackfillError, match="1 of 2 rows rejected") as caught:
        mem.backfill([row("a"), row("b", recorded_at=None)], strict=True)
    assert isinstance(caught.value, tm.TempomemError)
    assert caught.value.report.rejected["row"].to_list() == [1]
    assert mem._storage.latest_version() == version
    assert revs(mem).is_empty()
    assert mem.backfill([row("a")], strict=True).loaded == 1


@pytest.mark.parametrize("resolve", [False, True])
def test_an_input_with_no_row_loads_nothing_whatever_its_columns(mem: tm.Memory, tmp_path: Path, resolve) -> None:
    """An empty day of an export is not an error: an empty JSON Lines file (which DuckDB reads as
    one column, `json`), an empty list, with or without a mapping of columns it cannot show."""
    (tmp_path / "day.jsonl").write_text("")
    (tmp_path / "day.csv").write_text("subject,predicate,object,recorded_at\n")
    version = mem._storage.latest_version()
    for data, mapping in ((tmp_path / "day.jsonl", None), (tmp_path / "day.csv", None), ([], None),
                          ([], {"who": "subject"})):
        report = mem.backfill(data, mapping=mapping, resolve=resolve)
        assert (report.rows_read, report.loaded, report.rejected.height, report.revisions) == (0, 0, 0, 0)
    assert mem._storage.latest_version() == version


def test_missing_required_column_and_bad_mapping(mem: tm.Memory) -> None:
    with pytest.raises(tm.TempomemError, match="recorded_at: the input has no recorded_at column"):
        mem.backfill([{"subject": "a", "predicate": "p", "object": "x"}])
    with pytest.raises(tm.TempomemError, match="mapping: the input has no column 'when'"):
        mem.backfill([row("a")], mapping={"when": "recorded_at"})
    # the command line's form, given to the Python API, was an AttributeError
    with pytest.raises(tm.TempomemError, match=r"mapping: expected a dict \{source_column: spec_column\}, got str"):
        mem.backfill([row("a")], mapping="when=recorded_at")


# -- fixes and flags -----------------------------------------------------------------------------

def test_end_before_start_keeps_the_end_and_flags_fixed_span(mem: tm.Memory) -> None:
    report = mem.backfill([row("a"), row("b", valid_from="2024-05-02", valid_to="2024-05-01")])
    assert report.fixed == 1
    assert report.flags.filter(pl.col("flag") == "fixed_span").rows() == [("fixed_span", 1, 1)]
    fixed = revs(mem, "b").row(0, named=True)
    assert (fixed["valid_from"], fixed["valid_to"], fixed["valid_from_inferred"]) == (
        ts("2024-05-01"), ts("2024-05-01"), True)
    assert mem.as_of("2024-05-01", "b").is_empty()  # an empty span holds at no instant


def test_belief_from_future_rejected_unless_lenient(mem: tm.Memory) -> None:
    future = (datetime.now(UTC) + timedelta(days=30)).isoformat()
    report = mem.backfill([row("a"), row("b", recorded_at=future), row("c", retracted_at=future)])
    assert report.loaded == 1
    assert report.rejected.select("row", "field").rows() == [(1, "recorded_at"), (2, "retracted_at")]
    assert report.rejected["reason"][0].startswith("belief_from_future")
    assert report.flags.filter(pl.col("flag") == "belief_from_future").rows() == [("belief_from_future", 2, 1)]
    report = mem.backfill([row("b", recorded_at=future)], lenient=True)
    assert report.loaded == 1 and report.flag_count("belief_from_future") == 1
    assert "recorded_after_ingested" in mem.check().problems["kind"].to_list()


def test_retracted_before_recorded_is_rejected_and_flagged(mem: tm.Memory) -> None:
    report = mem.backfill([row("a", recorded_at="2025-02-01", retracted_at="2025-01-01")])
    assert report.loaded == 0
    assert report.rejected.rows() == [
        (0, "retracted_at", "2025-01-01", "retracted_before_recorded: retracted_at is before recorded_at")]
    assert report.flag_count("retracted_before_recorded") == 1


def test_retracted_at_gives_a_second_retracted_revision(mem: tm.Memory) -> None:
    mem.backfill([row("card", "FR76", recorded_at="2025-01-10", valid_from="2025-01-01",
                      retracted_at="2025-02-01", retraction_reason="typo in the IBAN")])
    first, second = revs(mem).iter_rows(named=True)
    assert (first["revision"], first["recorded_at"], first["believed_until"], first["status"],
            first["retracted_at"]) == (1, ts("2025-01-10"), ts("2025-02-01"), "live", None)
    assert (second["revision"], second["recorded_at"], second["status"], second["retracted_at"],
            second["reason"]) == (2, ts("2025-02-01"), "retracted", ts("2025-02-01"), "typo in the IBAN")
    assert mem.as_believed("2025-01-15", "2025-01-20", "card")["object"].to_list() == ["FR76"]
    assert mem.as_believed("2025-01-15", "2025-02-01", "card").is_empty()
    assert mem.as_of("2025-01-15", "card").is_empty()
    assert_previous_columns(mem)  # the retraction names the row as recorded as its previous revision


def test_a_superseded_row_retracted_later_keeps_its_supersession_time(mem: tm.Memory) -> None:
    """Without superseded_at, a row is superseded when it was recorded: its later retraction
    keeps that time, so the diff sees one retraction, not a new supersession."""
    mem.backfill([row("card", "FR76", recorded_at="2025-01-10", valid_from="2025-01-01", valid_to="2025-01-05",
                      superseded_by="f-next", retracted_at="2025-02-01")])
    assert revs(mem).select("revision", "recorded_at", "superseded_at", "status").rows() == [
        (1, ts("2025-01-10"), ts("2025-01-10"), "superseded"), (2, ts("2025-02-01"), ts("2025-01-10"), "retracted")]
    assert_previous_columns(mem)
    d = mem.diff("2025-02-01", "2025-02-02")
    assert (d.retracted["object"].to_list(), d.changed.height) == (["FR76"], 0)


def test_exact_duplicates_load_once_with_artifacts_merged(mem: tm.Memory) -> None:
    report = mem.backfill([
        row("a", artifacts=["ep1"]), row("b"), row("a", artifacts=["ep2", "ep1"]), row("a", artifacts=["ep3"]),
        row("a", "other", artifacts=["ep9"]),
    ])
    assert (report.rows_read, report.loaded, report.duplicates) == (5, 3, 2)
    a = revs(mem, "a").filter(pl.col("object") == "x")
    assert a.height == 1 and a["artifacts"].to_list() == [["ep1", "ep2", "ep3"]]


def test_rows_that_repeat_a_stored_fact_are_not_loaded_again(mem: tm.Memory, clock) -> None:
    """A file loaded twice (a notebook cell run again) loads its facts once: the second load
    counts the rows that repeat a stored fact (key, value, valid interval and recorded_at) as
    duplicates and names them with the flag already_stored; a row differing in any of those loads."""
    rows = [row("a", valid_from="2024-01-01"), row("b", retracted_at="2025-02-01T00:00:00Z"), row("c")]
    first = mem.backfill(rows)
    assert (first.loaded, first.duplicates) == (3, 0) and "already_stored" not in first.flags["flag"].to_list()
    again = mem.backfill([row("new"), *rows, row("a", valid_from="2024-01-02"), row("c", recorded_at="2025-01-02")])
    assert (again.rows_read, again.loaded, again.duplicates) == (6, 3, 3)
    assert again.flags.filter(pl.col("flag") == "already_stored").rows() == [("already_stored", 3, 1)]
    assert revs(mem).group_by("subject").len().sort("subject").rows() == [
        ("a", 2), ("b", 2), ("c", 2), ("new", 1)]  # b: the row and its retraction, once
    assert sorted(mem.as_of("2024-06-01", "a")["valid_from"].to_list()) == [ts("2024-01-01"), ts("2024-01-02")]
    # a replay finds the stored facts itself: no flag
    assert "already_stored" not in mem.backfill(rows, resolve=True).flags["flag"].to_list()


def test_rows_with_fact_ids_that_repeat_stored_revisions_are_not_loaded_again(mem: tm.Memory, tmp_path: Path) -> None:
    """An import or an export loaded again: each row with a fact id that repeats the stored
    revision of that fact at its recorded_at is a duplicate, not a refused id; a row that adds
    a later revision to a stored fact loads as its next revision, and a new fact loads."""
    rows = [row("api", "m5", fact_id="f1", recorded_at="2025-01-01"),
            row("api", "m5", fact_id="f1", recorded_at="2025-03-01", valid_to="2025-02-01"),
            row("db", "r6", fact_id="f2", recorded_at="2025-01-02")]
    assert mem.backfill(rows).loaded == 3
    again = mem.backfill(rows)
    assert (again.loaded, again.duplicates, again.rejected.height) == (0, 3, 0)
    tm.export.export(mem, tmp_path / "all.parquet")
    back = mem.backfill(tmp_path / "all.parquet")
    assert (back.rows_read, back.loaded, back.duplicates, back.rejected.height) == (3, 0, 3, 0)
    grown = mem.backfill([*rows, row("db", "r6", fact_id="f2", recorded_at="2025-04-01", valid_to="2025-04-01"),
                          row("web", "n1", fact_id="f3", recorded_at="2025-04-01")])
    assert (grown.loaded, grown.duplicates, grown.rejected.height) == (2, 3, 0)
    assert sorted(revs(mem).select("fact_id", "revision").rows()) == [
        ("f1", 1), ("f1", 2), ("f2", 1), ("f2", 2), ("f3", 1)]
    assert mem.as_of("2025-04-02", "db").is_empty()  # f2 ended at 2025-04-01, as the grown row says


def test_a_repeat_of_a_stored_fact_that_retracts_it_is_refused(mem: tm.Memory, clock) -> None:
    """A repeated row without a retraction is the stored fact whatever became of it since (a
    correction does not bring it back); one that adds a retraction would rewrite it: refused."""
    clock.set("2026-01-01T00:00:00Z")
    mem.backfill([row("a"), row("c")])
    (c_id,) = mem.sql("SELECT fact_id FROM facts WHERE subject = 'c'").fetchall()[0]
    mem.correct(c_id, reason="never true")
    report = mem.backfill([row("a", retracted_at="2025-03-01T00:00:00Z"), row("c")])
    assert (report.loaded, report.duplicates) == (0, 1)
    assert report.rejected.select("row", "field", "value").rows() == [(0, "retracted_at", "2025-03-01 00:00:00+00")]
    assert report.rejected["reason"][0].startswith("repeats stored fact ")
    assert mem.sql("SELECT subject, status FROM facts ORDER BY subject").fetchall() == [
        ("a", "live"), ("c", "retracted")]


def test_other_columns_are_kept_as_json_attributes(mem: tm.Memory) -> None:
    # a row whose other columns are all null has no attributes (not "{}")
    mem.backfill(pl.DataFrame({"subject": ["a", "b", "c"], "predicate": ["p", "p", "p"], "object": ["x", "y", "z"],
                               "recorded_at": ["2025-01-01", "2025-01-02", "2025-01-03"],
                               "ticket": ["INC-7", None, None], "attempts": [3, 4, None]}))
    got = dict(revs(mem).select("subject", "attributes").iter_rows())
    assert got == {"a": '{"ticket":"INC-7","attempts":3}', "b": '{"attempts":4}', "c": None}


def test_shared_instants_need_twenty_percent_and_a_hundred_rows(mem: tm.Memory) -> None:
    stamped = [row(f"s{i}", recorded_at="2025-05-05T05:05:05Z", valid_from="2024-01-01") for i in range(100)]
    spread = [row(f"t{i}", recorded_at=f"2025-01-01T00:00:{i:02d}Z", valid_from=f"2023-01-{i + 1:02d}")
              for i in range(20)]
    report = mem.backfill(stamped + spread)
    assert report.flags.filter(pl.col("flag").str.starts_with("shared")).rows() == [
        ("shared_recorded_at", 100, 0), ("shared_valid_from", 100, 0)]
    small = tm.open(mem.path.parent / "small", create=True)
    report = small.backfill(stamped[:99])  # 100% of the load, but fewer than 100 rows
    assert report.flag_count("shared_recorded_at") == 0


def _times(prefix: str, n: int) -> list[str]:
    """n distinct instants from ``prefix`` (a date), a second apart."""
    return [f"{prefix}T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z" for i in range(n)]


def test_a_shared_instant_is_found_wherever_it_sits_and_counted_exactly(mem: tm.Memory) -> None:
    # 500 rows. recorded_at: 150 rows (the last ones of the input, in the middle of the sorted
    # times) share 2025-03-03 and 110 share 2025-02-02: both over a fifth, the larger is the
    # flag. valid_from: 100 rows share 2024-01-01 (exactly a fifth: no flag); 107 of the last
    # rows give 2024-06-06, but 6 of those end before they start, so they are fixed spans and
    # their start moves: 101 rows share it.
    jan, may = _times("2025-01-01", 120), _times("2025-05-01", 120)
    a = [row(f"a{i}", recorded_at=jan[i], valid_from="2024-01-01" if i < 100 else _times("2023-01-01", 120)[i])
         for i in range(120)]
    b = [row(f"b{i}", recorded_at=may[i], valid_from=_times("2022-01-01", 120)[i]) for i in range(120)]
    c = [row(f"c{i}", recorded_at="2025-02-02", valid_from=_times("2021-01-01", 110)[i]) for i in range(110)]
    d = [row(f"d{i}", recorded_at="2025-03-03", valid_from="2024-06-06" if i < 107 else _times("2019-01-01", 150)[i],
             valid_to="2020-01-01" if i < 6 else None) for i in range(150)]
    report = mem.backfill(a + b + c + d)
    assert (report.loaded, report.fixed) == (500, 6)
    assert report.flags.filter(pl.col("flag").str.starts_with("shared")).sort("flag").rows() == [
        ("shared_recorded_at", 150, 350), ("shared_valid_from", 101, 356)]
    # One of those rows starting at another time leaves 100 of 500 at 2024-06-06, like
    # 2024-01-01: exactly a fifth, not more, so no flag.
    moved = [*d[:106], {**d[106], "valid_from": "2018-01-01"}, *d[107:]]
    fewer = tm.open(mem.path.parent / "fewer", create=True).backfill(a + b + c + moved)
    assert fewer.flag_count("shared_valid_from") == 0 and fewer.flag_count("shared_recorded_at") == 150


def test_backfilled_rows_are_stored_in_sort_key_order_with_generated_ids(mem: tm.Memory, tmp_path: Path) -> None:
    mem.backfill([row("zed", "z1", recorded_at="2025-01-05"), row("amy", "a2", recorded_at="2025-02-01"),
                  row("bob", "b1", recorded_at="2025-01-03", retracted_at="2025-03-01"),
                  row("amy", "a1", recorded_at="2025-01-01"), row("amy", "a0", recorded_at="2025-02-01", scope="work")])
    ended, latest = stored_parts(mem)
    assert ended.select("scope", "subject", "object", "revision").rows() == [("default", "bob", "b1", 1)]
    assert latest.select("scope", "subject", "object", "revision").rows() == [
        ("default", "amy", "a1", 1), ("default", "amy", "a2", 1),
        ("default", "bob", "b1", 2), ("default", "zed", "z1", 1), ("work", "amy", "a0", 1)]
    stored = pl.concat([ended, latest])
    # A generated id: 29 lowercase hex digits, the first 14 its recorded_at in µs.
    for fact_id, first in stored.select("fact_id", "first_recorded_at").rows():
        assert len(fact_id) == 29 and fact_id == fact_id.lower() and int(fact_id, 16) >= 0
        assert fact_id[:14] == f"{int(first.timestamp() * 1_000_000):014x}"
    assert stored["fact_id"].n_unique() == 5
    # Given ids sort as text, generated ones ("0…" for these times) among them.
    given = tm.open(tmp_path / "given", create=True)
    given.backfill([row("amy", "x", fact_id="f-b"), row("amy", "y"),
                    row("amy", "z", fact_id="f-a", recorded_at="2025-03-01"),
                    row("amy", "z", fact_id="f-a", recorded_at="2025-02-01"), row("abe", "w", fact_id="f-c")])
    ended, latest = stored_parts(given)
    assert ended.select("subject", "object", "fact_id", "revision").rows() == [("amy", "z", "f-a", 1)]
    assert latest.select("subject", "object", "fact_id", "revision").rows()[1:] == [
        ("amy", "y", latest["fact_id"][1], 1), ("amy", "z", "f-a", 2), ("amy", "x", "f-b", 1)]
    assert latest["subject"][0] == "abe"


def test_a_load_sorted_in_key_ranges_writes_the_same_sorted_file(tmp_path: Path, monkeypatch) -> None:
    # 40 rows over 7 subjects and two scopes; rows sharing a given fact_id are revisions and
    # some rows are retracted later (two revisions): ranges must keep each fact whole.
    rows = [row(f"s{i % 7}", f"o{i}", recorded_at=f"2025-01-{i % 28 + 1:02d}T00:00:{i:02d}Z",
                scope="work" if i % 5 == 0 else None, fact_id=f"f{i % 7}" if i % 3 == 0 else None,
                retracted_at="2025-06-01" if i % 4 == 1 else None) for i in range(40)]
    whole = tm.open(tmp_path / "whole", create=True)
    assert whole.backfill(rows).rejected.height > 0  # some ids repeat across keys or after a retraction
    ranges: list[list[dict]] = []
    real = backfill_write._key_ranges

    def spy(con: object, loaded: int) -> list[dict]:
        ranges.append(real(con, loaded))  # type: ignore[arg-type]
        return ranges[-1]

    monkeypatch.setattr(backfill_write, "_SORT_ROWS", 6)
    monkeypatch.setattr(backfill_write, "_key_ranges", spy)
    split = tm.open(tmp_path / "split", create=True)
    report = split.backfill(rows)
    assert len(ranges[0]) > 3 and ranges[0][0]["from_scope"] is None and ranges[0][-1]["to_scope"] is None
    keys = ["scope", "subject", "predicate", "fact_id", "revision"]
    for part in stored_parts(split):
        assert part.height and part.select(keys).rows() == part.select(keys).sort(keys).rows()
    stored = pl.concat(stored_parts(split))
    assert stored.height == report.revisions == revs(whole).height
    same = ["scope", "subject", "object", "recorded_at", "revision", "status", "believed_until"]
    assert revs(split).select(same).sort(same).equals(revs(whole).select(same).sort(same))
    given = pl.col("fact_id").str.starts_with("f")
    assert revs(split).filter(given).select("fact_id", *same).sort("fact_id", "revision").equals(
        revs(whole).filter(given).select("fact_id", *same).sort("fact_id", "revision"))


def test_facts_of_many_rows_are_numbered_in_belief_order_over_many_vectors(tmp_path: Path, monkeypatch) -> None:
    # 30,000 rows of 8,000 facts of one to six rows each, given shuffled, a fact's last row
    # retracted later now and then: each revision is numbered against its neighbours in the
    # sorted stream (rows_share_facts), which DuckDB computes in the stream's order over many
    # vectors and threads. Expected values come from the input, by Polars: a fact's rows by
    # recorded_at are revisions 1..m, then its retraction; each carries the fact's first
    # recorded_at, and its belief end is the next revision's recorded_at.
    facts, n = 8_000, 30_000
    order = [(i * 7919) % n for i in range(n)]  # a permutation: the rows come shuffled
    fact = [i % facts for i in order]
    nth = [i // facts for i in order]  # the row's place in its fact, by recorded_at
    start = datetime(2025, 1, 1, tzinfo=UTC)
    last = {f: max(k for k in range(6) if f + k * facts < n) for f in range(facts)}
    frame = pl.DataFrame({
        "fact_id": [f"f{f:05d}" for f in fact],
        "subject": [f"s{f % 997}" for f in fact],
        "predicate": ["p"] * n,
        "object": [f"o{i}" for i in order],
        "recorded_at": [start + timedelta(days=k, seconds=f) for f, k in zip(fact, nth, strict=True)],
        "retracted_at": [start + timedelta(days=30) if k == last[f] and f % 5 == 0 else None
                         for f, k in zip(fact, nth, strict=True)],
    })
    expected = (frame.select("fact_id", "recorded_at", status=pl.lit("live"))
                .vstack(frame.filter(pl.col("retracted_at").is_not_null())
                        .select("fact_id", recorded_at="retracted_at", status=pl.lit("retracted")))
                .sort("fact_id", "recorded_at")
                .with_columns(revision=pl.int_range(1, pl.len() + 1).over("fact_id").cast(pl.Int32),
                              first_recorded_at=pl.col("recorded_at").min().over("fact_id"),
                              folded_until=pl.col("recorded_at").shift(-1).over("fact_id")))
    stored = {}
    for name, sort_rows in (("whole", None), ("split", 5_000)):
        if sort_rows:
            monkeypatch.setattr(backfill_write, "_SORT_ROWS", sort_rows)
        store = tm.open(tmp_path / name, create=True)
        report = store.backfill(frame)
        assert (report.loaded, report.rejected.height, report.revisions) == (n, 0, expected.height)
        keys = ["scope", "subject", "predicate", "fact_id", "revision"]
        for part in stored_parts(store):
            assert part.select(keys).rows() == part.select(keys).sort(keys).rows()
        stored[name] = pl.concat(stored_parts(store)).select(expected.columns).sort("fact_id", "revision")
        assert_previous_columns(store)
    assert stored["whole"].equals(expected) and stored["split"].equals(expected)


def test_rows_of_one_fact_each_are_sorted_before_they_become_revisions(tmp_path: Path, monkeypatch) -> None:
    # 30,000 rows without fact ids, so every fact is one row: the input rows are sorted, then
    # each becomes its revisions. Over many vectors on every DuckDB thread and six key ranges,
    # the file must still be in key order with each retraction right after its row, and hold
    # what one unsplit load holds.
    n = 30_000
    frame = pl.DataFrame({
        "subject": [f"s{(i * 7919) % 997}" for i in range(n)],
        "predicate": [f"p{i % 3}" for i in range(n)],
        "object": [f"o{i}" for i in range(n)],
        "recorded_at": [datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=(i * 104729) % n) for i in range(n)],
        "retracted_at": [datetime(2025, 6, 1, tzinfo=UTC) if i % 10 == 3 else None for i in range(n)],
        "scope": ["work" if i % 11 == 0 else None for i in range(n)],
    })
    whole = tm.open(tmp_path / "whole", create=True)
    whole.backfill(frame)
    monkeypatch.setattr(backfill_write, "_SORT_ROWS", 5_000)
    split = tm.open(tmp_path / "split", create=True)
    report = split.backfill(frame)
    assert report.loaded == n and report.revisions == n + n // 10
    for store in (whole, split):
        keys = ["scope", "subject", "predicate", "fact_id", "revision"]
        for part in stored_parts(store):
            assert part.select(keys).rows() == part.select(keys).sort(keys).rows()
        stored = pl.concat(stored_parts(store))
        retraction = stored.filter(pl.col("revision") == 2)
        assert retraction.height == n // 10 and retraction["status"].unique().to_list() == ["retracted"]
        assert_previous_columns(store)
    same = ["scope", "subject", "predicate", "object", "recorded_at", "revision", "status", "believed_until"]
    assert revs(split).select(same).sort(same).equals(revs(whole).select(same).sort(same))


def test_overlapping_values_follow_predicate_arity(mem: tm.Memory) -> None:
    rows = [row("api", "m5.large", recorded_at="2025-01-01", valid_from="2024-01-01"),
            row("api", "m5.xlarge", recorded_at="2025-01-02", valid_from="2024-06-01"),
            row("db", "a", recorded_at="2025-01-01", valid_from="2024-01-01", valid_to="2024-06-01"),
            row("db", "b", recorded_at="2025-01-02", valid_from="2024-06-01")]
    report = mem.backfill(rows)
    assert report.flags.filter(pl.col("flag") == "overlapping_values").rows() == [("overlapping_values", 2, 0)]
    assert "overlapping_values" in mem.check().problems["kind"].to_list()
    multi = tm.open(mem.path.parent / "multi", create=True, predicates={"p": "multi"})
    assert multi.backfill(rows).flag_count("overlapping_values") == 0


def test_generated_ids_are_the_fact_id_macro_made_per_batch() -> None:
    # The write makes generated ids from two integers (numpy, per batch); they must equal the
    # SQL macro's ids, digit for digit, including the clamped ends of the µs range.
    con = duckdb.connect()
    con.execute(ids.FACT_ID_MACRO)
    cases = [("1970-01-01 00:00:00+00", 0, 0), ("1960-05-01 00:00:00+00", 3, 7),  # before 1970: µs 0
             ("2025-01-01 12:34:56.789012+00", 41, (1 << 59) - 1), ("9999-12-31 23:59:59.999999+00", 10**9, 12345)]
    expected, us, serial = [], [], []
    for at, row_, nonce in cases:
        made, clamped = con.sql("SELECT tm__fact_id(NULL, $t::TIMESTAMPTZ, $r, $n), tm__id_us($t::TIMESTAMPTZ)",
                                params={"t": at, "r": row_, "n": nonce}).fetchall()[0]
        expected.append(made)
        us.append(clamped)
        serial.append(nonce + row_)
    assert us[:2] == [0, 0] and us[3] == (1 << 56) - 1  # 9999 is past 2^56 µs: the top value
    got = ids.generated_ids(pa.array(us, pa.int64()), pa.array(serial, pa.int64())).to_pylist()
    assert got == expected
    assert got[0] == "0" * 29 and got[3].startswith("f" * 14)


def test_value_changes_are_seen_inside_and_across_batches() -> None:
    # Sorted rows in four batches: (s, a, p) changes value across a batch boundary, (t, c, p)
    # inside a batch; a change of predicate or scope between neighbours is no change of value.
    def batch(*rows: tuple[str, str, str, str]) -> pa.RecordBatch:
        return pa.RecordBatch.from_pylist([dict(zip(("scope", "subject", "predicate", "object"), r, strict=True))
                                           for r in rows])

    changes = backfill_write.ValueChanges()
    changes.see(batch(("s", "a", "p", "x"), ("s", "a", "p", "x")))
    changes.see(batch(("s", "a", "p", "y")))
    changes.see(batch(("s", "b", "p", "x"), ("s", "b", "q", "y")))
    changes.see(batch(("t", "b", "q", "z"), ("t", "c", "p", "1"), ("t", "c", "p", "2"), ("t", "c", "p", "1")))
    assert sorted(changes.keys().to_pylist(), key=lambda k: tuple(k.values())) == [
        {"scope": "s", "subject": "a", "predicate": "p"}, {"scope": "t", "subject": "c", "predicate": "p"}]
    assert backfill_write.ValueChanges().keys().num_rows == 0


@pytest.mark.parametrize(("batch_rows", "overlap_rows"), [(1, 1), (2, 3), (3, None), (None, None)])
def test_overlapping_values_are_counted_whatever_the_write_batches(tmp_path: Path, monkeypatch, batch_rows,
                                                                   overlap_rows) -> None:
    # api (rows 0, 1) and zeta (rows 8, 9) hold two values at once; cache repeats one value;
    # db's values follow each other in valid time, queue's in belief time (row 6 is retracted
    # before row 7 is recorded). Expected: 4 rows, first row 0, however the stream is batched
    # and in however many parts of the keys the test takes the rows (overlaps.PART_ROWS).
    rows = [row("api", "m5.large", recorded_at="2025-01-01", valid_from="2024-01-01"),
            row("api", "m5.xlarge", recorded_at="2025-01-02", valid_from="2024-06-01"),
            row("db", "a", recorded_at="2025-01-01", valid_from="2024-01-01", valid_to="2024-06-01"),
            row("db", "b", recorded_at="2025-01-02", valid_from="2024-06-01"),
            row("cache", "x", recorded_at="2025-01-01"), row("cache", "x", recorded_at="2025-01-03"),
            row("queue", "q1", recorded_at="2025-01-01", retracted_at="2025-01-05"),
            row("queue", "q2", recorded_at="2025-01-06"),
            row("zeta", "z1", recorded_at="2025-01-01"), row("zeta", "z2", recorded_at="2025-01-01")]
    if batch_rows is not None:
        monkeypatch.setattr(storage_writer, "ROW_GROUP_ROWS", batch_rows)
    if overlap_rows is not None:
        monkeypatch.setattr(overlaps, "PART_ROWS", overlap_rows)
    mem = tm.open(tmp_path / "store", create=True)
    report = mem.backfill(rows)
    assert report.flags.filter(pl.col("flag") == "overlapping_values").rows() == [("overlapping_values", 4, 0)]
    assert report.revisions == 11
    # Nothing written (strict, one row rejected): the same flag, from every key of the load.
    with pytest.raises(tm.BackfillError) as caught:
        tm.open(tmp_path / "strict", create=True).backfill([*rows, row("bad", recorded_at="never")], strict=True)
    assert caught.value.report.flags.filter(pl.col("flag") == "overlapping_values").rows() == [
        ("overlapping_values", 4, 0)]


def test_an_encoding_error_in_the_writer_thread_fails_the_load_and_changes_nothing(
        mem: tm.Memory, monkeypatch) -> None:
    """Parquet encoding runs in a thread of its own: its error reaches the caller, the partial
    file is removed and nothing is committed."""
    mem.backfill([row("kept", "k")])
    before = (mem._storage.snapshot().version, sorted(mem._storage.data_files_on_disk()))
    encoded = []

    def failing_write_table(self, table, row_group_size=None):
        encoded.append(table.num_rows)
        if len(encoded) == 2:
            raise OSError("No space left on device")
        return original(self, table, row_group_size=row_group_size)

    original = pq.ParquetWriter.write_table
    monkeypatch.setattr(pq.ParquetWriter, "write_table", failing_write_table)
    monkeypatch.setattr(storage_writer, "ROW_GROUP_ROWS", 2)
    with pytest.raises(OSError, match="No space left on device"):
        mem.backfill([row(f"s{i}", f"v{i}") for i in range(10)])
    assert len(encoded) == 2  # the thread stops encoding after the error
    assert (mem._storage.snapshot().version, sorted(mem._storage.data_files_on_disk())) == before
    assert revs(mem)["subject"].to_list() == ["kept"]


def test_inferred_start_flag_and_given_inferred(mem: tm.Memory) -> None:
    report = mem.backfill([row("a"), row("b", valid_from="2024-01-01", valid_from_inferred="true"),
                           row("c", valid_from="2024-01-01")])
    assert report.flags.filter(pl.col("flag") == "inferred_start").rows() == [("inferred_start", 1, 0)]
    assert dict(revs(mem).select("subject", "valid_from_inferred").iter_rows()) == {"a": True, "b": True, "c": False}


# -- rows sharing a fact_id ------------------------------------------------------------------------

def test_rows_of_one_fact_id_are_its_revisions(mem: tm.Memory) -> None:
    report = mem.backfill([
        row("api", "m5", fact_id="f1", recorded_at="2025-01-01", valid_from="2024-01-01"),
        row("api", "m5", fact_id="f1", recorded_at="2025-03-01", valid_from="2024-01-01", valid_to="2024-06-01",
            reason="resized"),
        row("api", "m5", fact_id="f1", recorded_at="2025-03-01", valid_from="2024-01-01", valid_to="2024-07-01"),
        row("web", "m5", fact_id="f1", recorded_at="2025-04-01"),
    ])
    assert report.loaded == 2
    assert report.rejected.select("row", "reason").rows() == [
        (2, "another row of this fact has the same recorded_at"),
        (3, "an earlier row of this fact has another scope, subject or predicate")]
    assert revs(mem).select("revision", "valid_to", "status", "reason").rows() == [
        (1, None, "live", None), (2, ts("2024-06-01"), "ended", "resized")]
    assert mem.as_believed("2024-08-01", "2025-02-01", "api")["object"].to_list() == ["m5"]
    assert mem.as_believed("2024-08-01", "2025-03-01", "api").is_empty()
    assert_previous_columns(mem)
    # the stored fact's history is not rewritten; a later revision extends it
    again = mem.backfill([row("api", "m5", fact_id="f1", recorded_at="2025-02-01"),
                          row("api", "m5", fact_id="f1", recorded_at="2025-05-01", valid_from="2024-01-01")])
    assert again.rejected.select("row", "reason").rows() == [
        (0, "already in the store, its latest revision recorded at 2025-03-01 00:00:00+00: backfill adds later "
            "revisions to a stored fact, it never rewrites its history")]
    assert revs(mem).select("revision", "valid_to", "status").rows() == [
        (1, None, "live"), (2, ts("2024-06-01"), "ended"), (3, None, "live")]
    assert_previous_columns(mem)



def test_rows_after_a_retraction_and_rows_rewriting_a_stored_fact_are_refused(mem: tm.Memory) -> None:
    """A row after its fact's retraction is refused naming it; a row of a stored fact is refused
    when it would rewrite that fact's history (recorded no later than its latest revision, of
    another key, after its retraction), whether the load gives the fact one row or several, and
    otherwise loads as the fact's next revisions; a fact of one row breaks no other rule."""
    mem.backfill([row("db", "r6", fact_id="s1", recorded_at="2025-01-01"),
                  row("dx", "r5", fact_id="s2", recorded_at="2025-01-01", retracted_at="2025-01-02")])
    report = mem.backfill([
        row("api", "m5", fact_id="f1", recorded_at="2025-01-01", retracted_at="2025-02-01"),
        row("api", "m6", fact_id="f1", recorded_at="2025-03-01"),
        row("db", "r7", fact_id="s1", recorded_at="2024-12-01"),
        row("db", "r7", fact_id="s1", recorded_at="2025-04-01", valid_to="2025-04-01"),
        row("db", "r8", fact_id="s1", recorded_at="2025-05-01"),
        row("dc", "r8", fact_id="s1", recorded_at="2025-06-01"),
        row("dx", "r5", fact_id="s2", recorded_at="2025-03-01"),
        row("web", "m5", fact_id="s1x", recorded_at="2025-04-01"),
    ])
    assert report.rejected.select("row", "reason").rows() == [
        (1, "this fact was already retracted at 2025-02-01 00:00:00+00"),
        (2, "already in the store, its latest revision recorded at 2025-01-01 00:00:00+00: backfill adds later "
            "revisions to a stored fact, it never rewrites its history"),
        (5, "the stored fact of this id has another key: (default, db, p)"),
        (6, "the stored fact was retracted at 2025-01-02 00:00:00+00: backfill adds nothing after a retraction")]
    assert report.loaded == 4
    assert sorted(revs(mem).select("fact_id", "revision", "object", "status").rows()) == [
        ("f1", 1, "m5", "live"), ("f1", 2, "m5", "retracted"), ("s1", 1, "r6", "live"), ("s1", 2, "r7", "ended"),
        ("s1", 3, "r8", "live"), ("s1x", 1, "m5", "live"), ("s2", 1, "r5", "live"), ("s2", 2, "r5", "retracted")]
    assert_previous_columns(mem)
    assert mem.check().ok


@pytest.mark.parametrize("resolve", [False, True])
def test_a_load_giving_every_input_column_loads(tmp_path: Path, resolve: bool) -> None:
    """An input with every column backfill reads (none left to NULL) loads its values as given."""
    mem = tm.open(tmp_path / "s", create=True)
    given = {"fact_id": "f1", "scope": "ops", "subject": "api", "predicate": "p", "object": "m5", "text": "api on m5",
             "reason": "sized", "source": "cmdb", "superseded_by": None, "link_type": "entity", "status": "live",
             "valid_from": "2024-01-01", "valid_to": None, "recorded_at": "2025-01-01", "retracted_at": None,
             "superseded_at": None, "confidence": 0.5, "weight": 2.0, "valid_from_inferred": False,
             "embedding": [0.5], "attributes": '{"k": 1}', "artifacts": ["doc-1"], "retraction_reason": None}
    report = mem.backfill([given], resolve=resolve)
    assert (report.loaded, report.rejected.height) == (1, 0)
    fact = mem.history("api").row(0, named=True)  # a replay makes its own ids
    assert [fact[c] for c in ("text", "source", "confidence", "weight", "embedding", "attributes", "artifacts")] == [
        "api on m5", "cmdb", 0.5, 2.0, [0.5], '{"k": 1}', ["doc-1"]]


def test_facts_of_several_rows_are_numbered_in_belief_order_and_facts_of_one_row_as_alone(tmp_path: Path) -> None:
    """Where rows share fact ids, each revision is numbered against its neighbours in the sorted
    stream (rows_share_facts); a fact of one row among them is written exactly as a load where
    no rows share facts writes it (one_row_per_fact). Hand-checked: f1's two rows (given out of
    order) and its retraction, g1's row retracted; f1 and g1 sort next to each other by id."""
    shared = [row("api", "m6", fact_id="f1", recorded_at="2025-02-01", valid_from="2024-01-01",
                  retracted_at="2025-03-01"),
              row("api", "m5", fact_id="f1", recorded_at="2025-01-01", valid_from="2024-01-01")]
    single = [row("api", "r6", fact_id="f2", recorded_at="2025-01-05", retracted_at="2025-01-09"),
              *(row(f"svc-{i}", "x", fact_id=f"h{i}", recorded_at=f"2025-01-{1 + i:02d}") for i in range(5))]
    stored = {}
    for name, rows in (("all", shared + single), ("single", single)):
        mem = tm.open(tmp_path / name, create=True)
        assert mem.backfill(rows).loaded == len(rows)
        # the rows as written, prev_* and belief ends included
        stored[name] = pl.concat([pl.read_parquet(f) for f in mem._storage.snapshot().files]).drop(
            "ingested_at").sort("fact_id", "revision")
        assert_previous_columns(mem)
    written = stored["all"]
    assert written.filter(pl.col("fact_id") != "f1").equals(stored["single"])
    f1 = written.filter(pl.col("fact_id") == "f1")
    assert f1.select("revision", "object", "status", "prev_object", "prev_recorded_at", "first_recorded_at",
                     "folded_until").rows() == [
        (1, "m5", "live", None, None, ts("2025-01-01"), ts("2025-02-01")),
        (2, "m6", "live", "m5", ts("2025-01-01"), ts("2025-01-01"), ts("2025-03-01")),
        (3, "m6", "retracted", "m6", ts("2025-02-01"), ts("2025-01-01"), None)]
    assert written.filter(pl.col("fact_id") == "f2").select("revision", "status", "prev_status",
                                                            "folded_until").rows() == [
        (1, "live", None, ts("2025-01-09")), (2, "retracted", "live", None)]

# -- the store clock ---------------------------------------------------------------------------

def test_backfilled_times_do_not_move_the_store_clock(mem: tm.Memory, clock) -> None:
    clock.set("2025-01-01T00:00:00Z")
    first = mem.assert_fact("a", "p", "x", valid_from="2024-01-01")
    mem.backfill([row("b", recorded_at="2026-06-01T00:00:00Z")])
    saved = mem._storage.read_clock()
    last_us = int(ts("2025-01-01").timestamp() * 1e6)
    assert saved == {"version": mem._storage.latest_version(), "last_recorded_us": last_us, "epoch": 0}
    clock.set("2025-01-02T00:00:00Z")
    second = mem.assert_fact("c", "p", "y")
    assert first.recorded_at == ts("2025-01-01") and second.recorded_at == ts("2025-01-02")
    assert {r["origin"] for r in revs(mem).iter_rows(named=True)} == {"api", "backfill"}


# -- inputs ------------------------------------------------------------------------------------------

INPUT = pl.DataFrame({
    "subj": ["api", "db", "cache"], "predicate": ["runs", "runs", "runs"], "object": ["v1", "v2", "v3"],
    "seen": ["2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z", "2025-01-03T00:00:00Z"],
    "valid_from": ["2024-01", "2024-02", None],
})
MAPPING = {"subj": "subject", "seen": "recorded_at"}
EXPECTED = [("api", "v1", ts("2025-01-01"), ts("2024-01-01")), ("cache", "v3", ts("2025-01-03"), None),
            ("db", "v2", ts("2025-01-02"), ts("2024-02-01"))]


def _loaded(mem: tm.Memory) -> list[tuple]:
    return revs(mem).select("subject", "object", "recorded_at", "valid_from").sort("subject").rows()


@pytest.mark.parametrize("kind", ["parquet", "csv", "jsonl", "folder", "glob", "arrow", "duckdb", "dicts"])
def test_every_input_kind_loads_the_same_facts(kind: str, tmp_path: Path, clock) -> None:
    mem = tm.open(tmp_path / kind, create=True, clock=clock)
    files = tmp_path / "in"
    files.mkdir()
    if kind in ("parquet", "folder", "glob"):
        INPUT.head(2).write_parquet(files / "a.parquet")
        INPUT.tail(1).write_parquet(files / "b.parquet")
        data: object = {"parquet": files / "a.parquet", "folder": files, "glob": str(files / "*.parquet")}[kind]
    elif kind == "csv":
        INPUT.write_csv(files / "x.csv")
        data = str(files / "x.csv")
    elif kind == "jsonl":
        INPUT.write_ndjson(files / "x.jsonl")
        data = files / "x.jsonl"
    elif kind == "arrow":
        data = INPUT.to_arrow()
    elif kind == "duckdb":
        con = duckdb.connect()
        data = con.from_arrow(INPUT.to_arrow())
    else:
        data = INPUT.to_dicts()
    report = mem.backfill(data, mapping=MAPPING)
    expected = EXPECTED[:1] + EXPECTED[2:] if kind == "parquet" else EXPECTED
    assert report.loaded == len(expected)
    assert _loaded(mem) == expected


def test_row_numbers_run_across_files(mem: tm.Memory, tmp_path: Path) -> None:
    INPUT.head(2).write_parquet(tmp_path / "a.parquet")
    INPUT.tail(1).with_columns(seen=pl.lit("bad")).write_parquet(tmp_path / "b.parquet")
    report = mem.backfill(str(tmp_path / "*.parquet"), mapping=MAPPING)
    assert report.rejected.select("row", "field").rows() == [(2, "recorded_at")]
    # One file (read without the offsets join): its row number is the position.
    one = tm.open(tmp_path / "one", create=True)
    pl.concat([INPUT.head(2), INPUT.tail(1).with_columns(seen=pl.lit("bad"))]).write_parquet(tmp_path / "one.parquet")
    assert one.backfill(tmp_path / "one.parquet", mapping=MAPPING).rejected.select("row", "field").rows() == [
        (2, "recorded_at")]


# -- round trip --------------------------------------------------------------------------------------

def _comparable(mem: tm.Memory) -> pl.DataFrame:
    return revs(mem).drop("ingested_at").sort("fact_id", "revision")


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export_then_backfill_rebuilds_the_same_revisions(mem: tm.Memory, clock, tmp_path: Path, fmt: str) -> None:
    clock.set("2025-01-01T00:00:00Z")
    a = mem.assert_fact("api", "instance_type", "m5.large", valid_from="2024-01-01", artifact="ep1")
    clock.set("2025-02-01T00:00:00.000001Z")
    mem.assert_fact("api", "instance_type", "m5.xlarge", valid_from="2024-06-01")
    clock.set("2025-03-01T00:00:00Z")
    mem.correct(a.fact_id, reason="never was")
    mem.backfill([row("db", "pg", artifacts=["x", "y"], embedding=[0.1, 0.25], ticket="T-1", confidence=0.7)])
    # text a CSV must quote, and a blank one (stored as the default, so not read back as another)
    mem.assert_fact(" cache ", "note", "NULL", text='said "no", then\r\nyes ', source="a,b", artifact="x\ny")
    mem.assert_fact("cache", "note", "\\N", text=" \t")
    out = tmp_path / f"export.{fmt}"
    assert tm.export.export(mem, out, fmt) == 7  # api: 3 revisions of m5.large, 1 of m5.xlarge; db: 1; 2 notes
    copy = tm.open(tmp_path / "copy", create=True)
    report = copy.backfill(out)
    assert report.rejected.height == 0 and report.loaded == 7
    assert copy.sql("SELECT text FROM facts WHERE predicate = 'note' ORDER BY subject").fetchall() == [
        ('said "no", then\r\nyes ',), ("cache note \\N",)]
    assert _comparable(copy).drop("origin").equals(_comparable(mem).drop("origin"))
    assert set(_comparable(copy)["origin"]) == {"backfill"}


def test_an_export_after_a_forget_loads_all_but_the_tombstones_which_are_named(mem: tm.Memory, clock,
                                                                                   tmp_path: Path) -> None:
    clock.set("2025-01-01T00:00:00Z")
    mem.assert_fact("cust-7", "iban", "DE-1")
    kept = mem.assert_fact("acct-1", "status", "open")
    clock.set("2025-02-01T00:00:00Z")
    mem.forget("cust-7", reason="GDPR")  # two rows: the fact as it was, its tombstone
    out = tmp_path / "after.csv"
    assert tm.export.export(mem, out) == 3
    copy = tm.open(tmp_path / "copy", create=True)
    report = copy.backfill(out)
    assert report.loaded == 1 and report.rejected.select("field", "value").rows() == [("status", "erased")] * 2
    assert report.rejected["reason"][0].startswith("the tombstone of an erased fact")
    assert copy.sql("SELECT fact_id, object FROM facts").fetchall() == [(kept.fact_id, "open")]


@pytest.mark.parametrize(("name", "fmt", "written_as"), [
    ("memory.csv", None, "csv"), ("memory.PQ", None, "parquet"), ("memory", None, "parquet"),
    ("memory", "csv", "csv"), ("memory.parquet", "parquet", "parquet"),
])
def test_export_writes_the_format_backfill_reads_the_file_as(mem: tm.Memory, tmp_path: Path, name: str,
                                                             fmt: str | None, written_as: str) -> None:
    mem.assert_fact("api", "instance_type", "m5.large")
    out = tmp_path / name
    assert tm.export.export(mem, out, fmt) == 1
    assert out.read_bytes().startswith(b"PAR1") == (written_as == "parquet")
    copy = tm.open(tmp_path / "copy", create=True)
    assert copy.backfill(out, format=written_as).loaded == 1


@pytest.mark.parametrize(("name", "fmt", "message"), [
    ("memory.csv", "parquet", "out: backfill would read .*memory.csv back as csv .*not parquet; name it .parquet "
                              "or export it as csv"),
    ("memory.parquet", "csv", "back as parquet .*not csv; name it .csv or export it as parquet"),
    ("memory.jsonl", None, "back as jsonl .*not parquet; name it .parquet$"),
    ("memory.csv", "json", "format: must be one of parquet, csv, got 'json'"),
    ("no-such-folder/memory.parquet", None, "out: cannot write .*memory.parquet: .*No such file or directory"),
])
def test_export_refuses_a_file_backfill_would_read_as_another_format(mem: tm.Memory, tmp_path: Path, name: str,
                                                                   fmt: str | None, message: str) -> None:
    mem.assert_fact("api", "instance_type", "m5.large")
    with pytest.raises(tm.TempomemError, match=message):
        tm.export.export(mem, tmp_path / name, fmt)
    assert not (tmp_path / name).exists()


def test_a_nested_value_in_a_text_field_is_stored_as_its_json(mem: tm.Memory, tmp_path: Path) -> None:
    # A JSON Lines object, or a list column of a frame, where text is expected: its JSON text,
    # not DuckDB's text form of a struct ({'a': 1}).
    (tmp_path / "nested.jsonl").write_text(
        '{"subject": "svc", "predicate": "limits", "object": {"cpu": 2, "unit": "core"}, '
        '"recorded_at": "2026-01-01", "source": ["a", "b"]}\n')
    assert mem.backfill(tmp_path / "nested.jsonl").loaded == 1
    frame = pl.DataFrame({"subject": ["db"], "predicate": ["ports"], "object": [[5432, 5433]],
                          "recorded_at": ["2026-01-01"]})
    assert mem.backfill(frame).loaded == 1
    assert mem.sql("SELECT subject, object, source FROM facts ORDER BY subject").fetchall() == [
        ("db", "[5432,5433]", None), ("svc", '{"cpu":2,"unit":"core"}', '["a","b"]')]


@pytest.mark.parametrize(("last_line", "reason"), [
    ("svc,tier,silver", "Expected Number of Columns: 4 Found: 3"),
    ("svc,tier,silver,2026-02-01,extra", "Expected Number of Columns: 4 Found: 5"),
])
def test_a_csv_line_without_the_headers_fields_is_refused_by_its_number(mem: tm.Memory, tmp_path: Path,
                                                                        last_line: str, reason: str) -> None:
    # One ragged line made DuckDB's sniffer read the whole file as one column (or take a data
    # line for the header), and the load failed on "no subject column" or loaded nothing.
    path = tmp_path / "ragged.csv"
    path.write_text(f'subject,predicate,object,recorded_at\nsvc,note,"two\nlines",2026-01-01\n{last_line}\n')
    with pytest.raises(tm.TempomemError, match=rf"data: {re.escape(str(path))}, CSV record 3 \(the header is record "
                                               rf"1\): {reason}; every record needs the header's fields$"):
        mem.backfill(path)
    assert mem.sql("SELECT count(*) FROM revisions").fetchall() == [(0,)]
    path.write_text(path.read_text().replace(last_line, "svc,tier,silver,2026-02-01"))
    assert mem.backfill(path).loaded == 2  # the quoted line break is a value, not a line


@pytest.mark.parametrize("field", ["subject", "object", "text", "source", "scope", "reason", "fact_id"])
def test_a_nul_character_in_any_text_is_refused_as_the_write_path_refuses_it(mem: tm.Memory, field: str) -> None:
    row = {"subject": "s", "predicate": "p", "object": "o", "recorded_at": "2026-01-01", field: "a\x00b"}
    report = mem.backfill(pl.DataFrame({k: [v] for k, v in row.items()}))
    assert report.rejected.rows() == [(0, field, "a\\0b", "contains a NUL character")]
    assert report.loaded == 0
    with pytest.raises(tm.TempomemError, match="contains a NUL character"):
        mem.assert_fact("s", "p", "a\x00b")


@pytest.mark.parametrize("blank", ["\t", "\n", " \t ", "\u3000", "\xa0", "\x1f"])
def test_white_space_alone_is_no_value_as_the_write_path_reads_it(mem: tm.Memory, blank: str) -> None:
    frame = pl.DataFrame({"subject": [blank, " x"], "predicate": ["p", "p"], "object": ["o", "o"],
                          "recorded_at": ["2026-01-01", "2026-01-01"]})
    report = mem.backfill(frame)
    assert report.rejected.select("row", "field", "reason").rows() == [(0, "subject", "required, got nothing")]
    assert mem.sql("SELECT subject FROM facts").fetchall() == [(" x",)]  # text around a value stays
    with pytest.raises(tm.TempomemError, match="subject: must not be empty"):
        mem.assert_fact(blank, "p", "o")


def test_arrow_stream_and_empty_input(mem: tm.Memory) -> None:
    table = pa.table({"subject": ["a"], "predicate": ["p"], "object": ["x"], "recorded_at": ["2025-01-01"]})
    assert mem.backfill(table.to_reader()).loaded == 1
    version = mem._storage.latest_version()
    report = mem.backfill(table.slice(0, 0))
    assert (report.rows_read, report.loaded, report.written) == (0, 0, False)
    assert mem._storage.latest_version() == version


# -- property: random valid histories round-trip exactly -----------------------------------------


_BASE = datetime(2025, 1, 1, tzinfo=UTC)
_micros = st.integers(min_value=0, max_value=300 * 86_400 * 10**6)


@st.composite
def _history(draw: st.DrawFn) -> list[dict]:
    rows = []
    for i in range(draw(st.integers(1, 8))):
        start = draw(st.none() | _micros)
        end = draw(st.none() | _micros)
        if start is not None and end is not None and end < start:
            start, end = end, start
        recorded = draw(_micros)
        retracted = draw(st.none() | st.integers(0, 10**9))
        rows.append({
            "fact_id": f"f{i}", "subject": draw(st.sampled_from(["a", "b"])), "predicate": "p",
            "object": draw(st.sampled_from(["x", "y", "z"])),
            "valid_from": None if start is None else _BASE - timedelta(days=400) + timedelta(microseconds=start),
            "valid_to": None if end is None else _BASE - timedelta(days=400) + timedelta(microseconds=end),
            "recorded_at": _BASE + timedelta(microseconds=recorded),
            "retracted_at": None if retracted is None else _BASE + timedelta(microseconds=recorded + retracted),
            "artifacts": draw(st.lists(st.sampled_from(["e1", "e2", "e3"]), max_size=2, unique=True)),
            "confidence": draw(st.none() | st.floats(0, 1)),
        })
    return rows


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=_history())
def test_random_valid_histories_round_trip_exactly(history: list[dict], tmp_path_factory) -> None:
    folder = tmp_path_factory.mktemp("prop")
    mem = tm.open(folder / "one", create=True)
    report = mem.backfill(history)
    assert report.rejected.height == 0 and report.loaded == len(history)
    stored = {r["fact_id"]: r for r in revs(mem).filter(pl.col("revision") == 1).iter_rows(named=True)}
    for given_row in history:
        got = stored[given_row["fact_id"]]
        for name in ("subject", "object", "valid_from", "valid_to", "recorded_at", "confidence"):
            assert got[name] == given_row[name], name
        assert got["artifacts"] == given_row["artifacts"]
    retractions = revs(mem).filter(pl.col("status") == "retracted")
    retracted = dict(retractions.select("fact_id", "recorded_at").iter_rows())
    assert retracted == {r["fact_id"]: r["retracted_at"] for r in history if r["retracted_at"] is not None}
    export(mem, folder / "out.parquet")
    copy = tm.open(folder / "two", create=True)
    copy.backfill(folder / "out.parquet")
    assert _comparable(copy).equals(_comparable(mem))
    assert_previous_columns(mem)
    assert_previous_columns(copy)


@st.composite
def _growing_history(draw: st.DrawFn) -> list[dict]:
    """Facts of one to three revision rows each (one fact id, one key, distinct belief times,
    valid ends that change), the last one retracted or not."""
    rows = []
    for i in range(draw(st.integers(1, 5))):
        key = {"fact_id": f"f{i}", "subject": draw(st.sampled_from(["a", "b"])), "predicate": "p",
               "object": draw(st.sampled_from(["x", "y"]))}
        start = draw(st.none() | _micros)
        for recorded in sorted(set(draw(st.lists(_micros, min_size=1, max_size=3)))):
            end = draw(st.none() | _micros)
            rows.append({**key, "valid_from": None if start is None else _BASE - timedelta(microseconds=start),
                         "valid_to": None if end is None else _BASE + timedelta(microseconds=end),
                         "recorded_at": _BASE + timedelta(microseconds=recorded), "retracted_at": None})
        if draw(st.booleans()):
            rows[-1]["retracted_at"] = rows[-1]["recorded_at"] + timedelta(microseconds=draw(st.integers(0, 10**9)))
    return rows


@settings(max_examples=40 if HEAVY else 5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=_growing_history(), cuts=st.lists(_micros, max_size=3))
def test_a_history_loaded_as_it_grew_is_the_history_loaded_at_once(history: list[dict], cuts: list[int],
                                                                    tmp_path_factory) -> None:
    """A source loaded again and again as it grows (what it held at each of a few instants: the
    rows recorded by then, a retraction only once it happened), then whole, gives the store one
    load of the whole source gives: revision numbers, prev_* and belief ends included."""
    folder = tmp_path_factory.mktemp("grown")
    once, grown = tm.open(folder / "once", create=True), tm.open(folder / "grown", create=True)
    assert once.backfill(history).rejected.height == 0
    for cut in [*sorted(cuts), None]:
        at = None if cut is None else _BASE + timedelta(microseconds=cut)
        held = [{**r, "retracted_at": r["retracted_at"] if at is None or (r["retracted_at"] or at) <= at else None}
                for r in history if at is None or r["recorded_at"] <= at]
        report = grown.backfill(pl.DataFrame(held, schema=pl.DataFrame(history).schema))
        assert report.rejected.height == 0, report.rejected
    assert _comparable(grown).equals(_comparable(once))
    assert_previous_columns(grown)


def test_resolve_replays_through_the_write_path(mem: tm.Memory, clock) -> None:
    report = mem.backfill([
        row("api", "eu-west-1", recorded_at="2025-01-02", valid_from="2024-12"),
        row("api", "eu-central-1", recorded_at="2025-02-02", valid_from="2025-02"),
        row("db", "mysql", recorded_at="2025-01-01", retracted_at="2025-01-05", retraction_reason="wrong"),
    ], resolve=True)
    assert (report.loaded, report.revisions) == (3, 5)
    west = revs(mem, "api").filter(pl.col("object") == "eu-west-1")
    assert west.select("revision", "recorded_at", "valid_to", "status").rows() == [
        (1, ts("2025-01-02"), None, "live"), (2, ts("2025-02-02"), ts("2025-02-01"), "superseded")]
    assert mem.as_believed("2025-03-01", "2025-02-01", "api")["object"].to_list() == ["eu-west-1"]
    assert mem.as_of("2025-03-01", "api")["object"].to_list() == ["eu-central-1"]
    last = revs(mem, "db").select("recorded_at", "status", "reason").rows()[-1]
    assert last == (ts("2025-01-05"), "retracted", "wrong")
    clock.set("2025-01-03")  # backfilled beliefs did not move the clock
    assert mem.assert_fact("web", "p", "x").recorded_at == ts("2025-01-03")
    assert mem.check().ok
    assert_previous_columns(mem)


def test_a_replay_refuses_rows_recorded_before_what_the_store_believes_of_their_key(mem: tm.Memory) -> None:
    """A replay applies rows in belief order after the stored beliefs: a row of a key recorded no
    later than that key's latest stored revision (the same log replayed again, a late row
    replayed a day on) is refused naming that time, and changes nothing; later rows and other
    keys replay. Applied, each old row was asserted again against today's beliefs."""
    log = [row("api", "m5", recorded_at="2025-01-01", valid_from="2024-01-01"),
           row("api", "m6", recorded_at="2025-02-01", valid_from="2024-06-01")]
    assert mem.backfill(log, resolve=True).loaded == 2
    before = revs(mem).drop("believed_until")
    again = mem.backfill([*log, row("api", "m4", recorded_at="2025-01-15", valid_from="2024-03-01"),
                          row("api", "m7", recorded_at="2025-03-01", valid_from="2024-09-01"),
                          row("db", "pg", recorded_at="2025-01-01")], resolve=True)
    reason = ("the store already holds beliefs of this key up to 2025-02-01 00:00:00+00: a replay applies rows "
              "after them (a source that grew since it was loaded loads as given, resolve=False)")
    assert again.rejected.select("row", "field", "reason").rows() == [
        (0, "recorded_at", reason), (1, "recorded_at", reason), (2, "recorded_at", reason)]
    assert (again.loaded, again.revisions) == (2, 3)  # m7 closes m6: two revisions; pg: one
    assert revs(mem, "api").filter(pl.col("recorded_at") <= ts("2025-02-01")).drop("believed_until").equals(before)
    assert mem.as_of("2024-10-01", "api")["object"].to_list() == ["m7"]
    assert mem.check().ok


def test_a_replay_stores_the_facts_it_makes_folded_and_new_revisions_of_stored_facts_fresh(mem: tm.Memory) -> None:
    """Like a resolve=False load, a replay writes its new facts' whole histories folded (each
    revision with its belief end), so no later small commit must fold it; a revision of a fact
    already stored is written fresh, its end derived with the stored rows'. Answers are the same."""
    mem.backfill([row("api", "eu-west-1", recorded_at="2025-01-02", valid_from="2024-12"),
                  row("api", "eu-central-1", recorded_at="2025-02-02", valid_from="2025-02")], resolve=True)
    stored = pl.read_delta(str(mem._storage.path)).sort("object", "revision")
    assert stored.select("object", "revision", "folded", "folded_until").rows() == [
        ("eu-central-1", 1, True, None),
        ("eu-west-1", 1, True, ts("2025-02-02")), ("eu-west-1", 2, True, None)]
    # a later replay onto the stored facts: eu-central-1 ends (a new revision of a stored fact)
    mem.backfill([row("api", "us-east-1", recorded_at="2025-03-03", valid_from="2025-03")], resolve=True)
    fresh = pl.read_delta(str(mem._storage.path)).filter(~pl.col("folded")).sort("object", "revision")
    assert fresh.select("object", "revision", "folded_until").rows() == [("eu-central-1", 2, None)]
    history = revs(mem, "api").select("object", "revision", "believed_until", "status").sort("object", "revision")
    assert history.rows() == [
        ("eu-central-1", 1, ts("2025-03-03"), "live"), ("eu-central-1", 2, None, "superseded"),
        ("eu-west-1", 1, ts("2025-02-02"), "live"), ("eu-west-1", 2, None, "superseded"),
        ("us-east-1", 1, None, "live")]
    assert mem.as_believed("2025-02-15", "2025-02-10", "api")["object"].to_list() == ["eu-central-1"]
    assert mem.check().ok


def test_a_replay_writes_its_ended_revisions_apart_from_the_latest_ones(mem: tm.Memory, monkeypatch) -> None:
    """A replay writes a fold's two parts: one file of the revisions that ended (folded with
    their belief end), one of each fact's latest revision, each in key order. Their footers say
    which is which, so a reader of the latest revisions (a batch's stored states among them)
    skips the first file's row groups unread."""
    mem.backfill([row("db", "mysql", recorded_at="2025-01-01", valid_from="2024-06"),
                  row("api", "eu-west-1", recorded_at="2025-01-02", valid_from="2024-12"),
                  row("api", "eu-central-1", recorded_at="2025-02-02", valid_from="2025-02"),
                  row("db", "postgres", recorded_at="2025-03-01", valid_from="2025-03")], resolve=True)
    footers = {f: pq.read_metadata(f).row_group(0) for f in mem._storage.snapshot().files}
    until = {f: g.column(g.num_columns - 1) for f, g in footers.items()}
    assert {c.path_in_schema for c in until.values()} == {"folded_until"}
    (ended,) = [f for f, c in until.items() if c.statistics.null_count == 0]
    (latest,) = [f for f, c in until.items() if c.statistics.null_count == c.num_values]
    keys = ["subject", "object", "revision", "status", "folded", "folded_until"]
    assert pl.read_parquet(ended).select(keys).rows() == [
        ("api", "eu-west-1", 1, "live", True, ts("2025-02-02")), ("db", "mysql", 1, "live", True, ts("2025-03-01"))]
    assert pl.read_parquet(latest).select(keys).rows() == [
        ("api", "eu-west-1", 2, "superseded", True, None), ("api", "eu-central-1", 1, "live", True, None),
        ("db", "mysql", 2, "superseded", True, None), ("db", "postgres", 1, "live", True, None)]
    assert mem.as_of("2025-02-01", "db")["object"].to_list() == ["mysql"]
    # a batch on the set-based path reads the stored states with the ended rows left out
    monkeypatch.setattr(engine, "SET_BASED_FROM", 1)
    facts = mem.assert_many([
        {"subject": "db", "predicate": "p", "object": "sqlite", "valid_from": "2025-04-01"},
        {"subject": "api", "predicate": "p", "object": "eu-central-1", "valid_from": "2025-03-01"}])
    assert [f.object for f in facts] == ["sqlite", "eu-central-1"]
    assert facts[1].valid_from == ts("2025-02-01")  # the duplicate merged into the stored fact
    assert mem.as_of("2025-05-01", "db")["object"].to_list() == ["sqlite"]
    assert mem.history("db").select("object", "status").rows() == [
        ("mysql", "superseded"), ("postgres", "superseded"), ("sqlite", "live")]
    assert mem.check().ok



def test_resolve_rejects_a_row_the_write_path_refuses_and_loads_the_rest(mem: tm.Memory) -> None:
    mem.declare("iban", policy="reject")
    rows = [
        {"subject": "c42", "predicate": "iban", "object": "FR1", "recorded_at": "2025-01-01", "valid_from": "2024-01"},
        # overlaps FR1 under a reject policy: refused, and its later retraction with it
        {"subject": "c42", "predicate": "iban", "object": "DE2", "recorded_at": "2025-02-01", "valid_from": "2024-06",
         "retracted_at": "2025-02-10"},
        # same belief instant, same key, after the refused row: FR1 again with a new artifact
        {"subject": "c42", "predicate": "iban", "object": "FR1", "recorded_at": "2025-02-01", "valid_from": "2024-01",
         "artifacts": ["ep2"]},
        {"subject": "c42", "predicate": "city", "object": "Paris", "recorded_at": "2025-02-01"},
    ]
    with pytest.raises(tm.BackfillError, match="1 of 4 rows rejected"):
        mem.backfill(rows, resolve=True, strict=True)
    assert revs(mem).height == 0
    report = mem.backfill(rows, resolve=True)
    assert (report.rows_read, report.loaded, report.duplicates, report.revisions) == (4, 3, 0, 3)
    assert report.rejected.select("row", "field", "value").rows() == [(1, "object", "DE2")]
    assert report.rejected["reason"][0].startswith("refused by the write path: overlapping value")
    got = revs(mem).select("predicate", "object", "revision", "recorded_at", "artifacts", "status").rows()
    assert got == [
        ("iban", "FR1", 1, ts("2025-01-01"), [], "live"),
        ("iban", "FR1", 2, ts("2025-02-01"), ["ep2"], "live"),
        ("city", "Paris", 1, ts("2025-02-01"), [], "live"),
    ]
    assert mem.check().ok

# -- the files a backfill writes -----------------------------------------------------------------

def test_backfilled_files_are_plain_delta_with_no_values_in_the_log(mem: tm.Memory) -> None:
    mem.backfill([
        row("alice-secret", "obj-secret", recorded_at="2025-01-01T00:00:00.123456Z", valid_from="2024",
            ticket="T-secret", retracted_at="2025-02-01T00:00:00.5Z", text="alice knows the secret"),
        row("bob", "y", recorded_at="2025-01-03T00:00:00Z", embedding="[1.5, 2]", artifacts="ep1"),
    ])
    log = "".join(p.read_text() for p in sorted((mem._storage.path / "_delta_log").glob("*.json")))
    assert "secret" not in log and "bob" not in log and '"y"' not in log
    adds = [json.loads(line)["add"] for line in log.splitlines() if '"add"' in line]
    assert len(adds) == 2  # alice's first revision ended: a fold's two parts, one commit
    files = sorted((json.loads(a["stats"]) for a in adds), key=lambda stats: stats["numRecords"])
    # alice's recorded revision; alice's retraction and bob's revision
    assert [stats["numRecords"] for stats in files] == [1, 2]
    for stats in files:
        assert set(stats["minValues"]) | set(stats["maxValues"]) | set(stats["nullCount"]) <= set(STATS_COLUMNS)
    # Delta statistics are milliseconds: the minimum is truncated, the maximum rounded up.
    assert files[0]["minValues"]["recorded_at"] == "2025-01-01T00:00:00.123Z"
    assert files[1]["maxValues"]["recorded_at"] == "2025-02-01T00:00:00.500Z"
    assert [stats["nullCount"] for stats in files] == [
        {"revision": 0, "valid_from": 0, "valid_to": 1, "recorded_at": 0, "retracted_at": 1, "ingested_at": 0},
        {"revision": 0, "valid_from": 1, "valid_to": 2, "recorded_at": 0, "retracted_at": 1, "ingested_at": 0}]
    # Other readers see the same rows with the store's types; skipping on the stats keeps them.
    read = pl.scan_delta(str(mem._storage.path))
    assert read.collect_schema() == pl.Schema(pl.from_arrow(EVENT_SCHEMA.empty_table()).schema)
    later = read.filter(pl.col("recorded_at") > ts("2025-01-01T00:00:00.1234Z")).sort("subject", "revision")
    assert later.select("subject", "revision", "status").collect().rows() == [
        ("alice-secret", 1, "live"), ("alice-secret", 2, "retracted"), ("bob", 1, "live")]
    by_delta = pl.read_delta(str(mem._storage.path)).sort("subject", "revision")
    stored = ["first_recorded_at", "folded", "folded_until"]
    assert by_delta.drop(*PREVIOUS_COLUMNS, *stored).equals(
        revs(mem).drop("believed_until").sort("subject", "revision"))
    # the retraction repeats the revision it follows
    assert by_delta.select("prev_status", "prev_recorded_at").rows() == [
        (None, None), ("live", ts("2025-01-01T00:00:00.123456Z")), (None, None)]
    # A backfill writes whole histories of new facts, so its rows are stored folded: each with
    # its belief end and its fact's first recorded time, and no window is needed to read them.
    assert by_delta.select(stored).rows() == [
        (ts("2025-01-01T00:00:00.123456Z"), True, ts("2025-02-01T00:00:00.5Z")),
        (ts("2025-01-01T00:00:00.123456Z"), True, None),
        (ts("2025-01-03T00:00:00Z"), True, None)]


def test_a_maximum_no_millisecond_bounds_leaves_its_column_out_of_the_statistics(mem: tm.Memory) -> None:
    """Rounded up to a millisecond, 9999-12-31T23:59:59.999999 has no successor: the commit used
    to fail with an OverflowError. The column is left out of min/max; nothing skips the file."""
    end = ts("9999-12-31T23:59:59.999999Z")
    fact = mem.assert_fact("svc", "tier", "gold", valid_from="2026-01-01", valid_to=end)
    assert mem.get(fact.fact_id).valid_to == end and mem.check().ok
    log = "".join(p.read_text() for p in sorted((mem._storage.path / "_delta_log").glob("*.json")))
    [stats] = [json.loads(json.loads(line)["add"]["stats"]) for line in log.splitlines() if '"add"' in line]
    assert "valid_to" not in stats["minValues"] and "valid_to" not in stats["maxValues"]
    assert stats["maxValues"]["valid_from"] == "2026-01-01T00:00:00.000Z"
    later = pl.scan_delta(str(mem._storage.path)).filter(pl.col("valid_to") > ts("9999-12-31T23:59:59.9995Z"))
    assert later.select("subject").collect().rows() == [("svc",)]


def test_many_small_backfills_compact_without_changing_answers(mem: tm.Memory) -> None:
    for i in range(34):
        mem.backfill([row(f"s{i:02d}", f"v{i}", recorded_at=f"2025-01-01T00:00:{i:02d}Z")])
    assert len(mem._storage.snapshot().files) < 34  # compacted
    got = revs(mem).select("subject", "object", "recorded_at", "revision").rows()
    assert got == [(f"s{i:02d}", f"v{i}", ts(f"2025-01-01T00:00:{i:02d}Z"), 1) for i in range(34)]


def test_an_integer_past_64_bits_in_a_list_of_dicts_loads_as_text(mem: tm.Memory) -> None:
    # found by the hostile-input property test: pyarrow raised a bare OverflowError
    report = mem.backfill([{"subject": "a", "predicate": "p", "object": 2**63, "recorded_at": "2025-01-01"}])
    assert report.loaded == 1
    assert mem.history("a")["object"].to_list() == ["9223372036854775808"]


def test_a_time_outside_years_1_to_9999_is_unreadable(mem: tm.Memory) -> None:
    # found by the hostile-input property test: DuckDB reads year 0, Python and Polars cannot
    report = mem.backfill([row("x", "v", recorded_at=-62_135_596_801),  # 0000-12-31T23:59:59Z
                           row("y", "v", recorded_at="2025-01-01", valid_from="10000-01-01"),
                           row("z", "v", recorded_at="2025-01-01")], epoch_unit="s")
    assert report.loaded == 1
    assert report.rejected.select("row", "field", "reason").rows() == [
        (0, "recorded_at", f"cannot read -62135596801 as a time: {timegrammar.OUT_OF_RANGE}"),
        (1, "valid_from",
         f"cannot read 10000-01-01 as a time: {timegrammar.NOT_ISO} (lenient=True reads it as missing)")]


def test_an_integer_beyond_64_bits_in_dicts_is_a_rejected_row(mem: tm.Memory) -> None:
    report = mem.backfill([row("a", retracted_at=2**63), row("b")])
    assert report.loaded == 1
    assert report.rejected.rows() == [
        (0, "retracted_at", "9223372036854775808",
         f"cannot read 9223372036854775808 as a time: {timegrammar.BARE_NUMBER}")]


def test_repeated_hashes_are_found_by_sorting_across_chunks() -> None:
    # The row hashes arrive in several chunks; a value repeated across chunks counts, each
    # repeated value is listed once, and values seen once are not.
    hashes = pa.chunked_array([[7, 3, 2**64 - 1], [3, 9], [2**64 - 1, 3, 0]], pa.uint64())
    assert checks._repeated(hashes).tolist() == [3, 2**64 - 1]
    assert checks._repeated(pa.chunked_array([[1, 2, 3]], pa.uint64())).tolist() == []
    assert checks._repeated(pa.chunked_array([], pa.uint64())).tolist() == []


def test_repeat_columns_are_those_of_the_sql() -> None:
    """The columns stage 1 hashes to find exact repeats are those stage 2 groups and keeps
    (backfill_checks.sql spells them out)."""
    from tempomem.connection import sql_parts

    parts = sql_parts("backfill_checks.sql")
    for part in ("merged", "candidates"):
        selected = re.findall(r"\b\w+\b", parts[part].split("FROM _bf_checked")[0])
        for name in checks.ROW_VALUES:
            assert name in selected, f"{part}: {name}"


def test_a_folds_two_parts_are_written_in_whole_row_groups_whatever_the_batches(tmp_path: Path, monkeypatch) -> None:
    """FoldParts puts each row in its part (ended: folded with its belief end) in the order
    given, cuts each part into whole row groups across the batches it came in, and leaves no
    file for a part with no row."""
    monkeypatch.setattr(storage_writer, "ROW_GROUP_ROWS", 4)
    until = [ts("2025-01-02") if i % 3 == 0 else None for i in range(11)]
    rows = pa.table({name: pa.nulls(11, field.type) for name, field in zip(EVENT_SCHEMA.names, EVENT_SCHEMA,
                                                                             strict=True)}, schema=EVENT_SCHEMA)
    rows = (rows.set_column(rows.schema.get_field_index("revision"), "revision", pa.array(range(11), pa.int32()))
            .set_column(rows.schema.get_field_index("folded"), "folded", pa.array([True] * 11))
            .set_column(rows.schema.get_field_index("folded_until"), "folded_until",
                        pa.array(until, EVENT_SCHEMA.field("folded_until").type)))
    ended, rest = tmp_path / "ended.parquet", tmp_path / "rest.parquet"
    with storage_writer.FoldParts(ended, rest) as parts:
        for start, length in ((0, 1), (1, 5), (6, 2), (8, 3)):  # batches that cut across groups
            parts.write(rows.slice(start, length).to_batches()[0])
    assert parts.files == [ended, rest]
    assert pl.read_parquet(ended)["revision"].to_list() == [0, 3, 6, 9]
    assert pl.read_parquet(rest)["revision"].to_list() == [1, 2, 4, 5, 7, 8, 10]
    groups = {p.name: [pq.read_metadata(p).row_group(g).num_rows for g in range(pq.read_metadata(p).num_row_groups)]
              for p in (ended, rest)}
    assert groups == {"ended.parquet": [4], "rest.parquet": [4, 3]}
    # a part with no row leaves no file
    with storage_writer.FoldParts(tmp_path / "none.parquet", tmp_path / "all.parquet") as parts:
        parts.write(rows.filter(pc.is_null(rows["folded_until"])).to_batches()[0])
    assert parts.files == [tmp_path / "all.parquet"] and not (tmp_path / "none.parquet").exists()


# The overlap test's definition (check()'s rule): every two revisions of a key, paired.
_PAIRED_OVERLAPS = """
SELECT DISTINCT a.i FROM _ov_part AS a JOIN _ov_part AS b
  ON a.k = b.k AND a.fact_id <> b.fact_id AND a.object IS DISTINCT FROM b.object
 AND tm_overlaps(a.recorded_at, a.believed_until, b.recorded_at, b.believed_until)
 AND tm_overlaps(a.valid_from, a.valid_to, b.valid_from, b.valid_to)"""


def _candidate_revisions(draw) -> list[dict]:
    """Facts of three keys (numbered `k`), each a chain of revisions in belief time as
    a load writes them: each revision believed until the next one's recorded_at, the last open
    (or bounded, as a row retracted later leaves it: its retraction is no candidate)."""
    day = st.one_of(st.none(), st.integers(0, 8))
    out: list[dict] = []
    for fact in range(draw(st.integers(0, 8))):
        key, value = draw(st.integers(0, 2)), draw(st.sampled_from(["a", "b", "c", None]))
        times = sorted(draw(st.sets(st.integers(0, 9), min_size=1, max_size=3)))
        ends = [*times[1:], draw(st.one_of(st.none(), st.integers(times[-1], 10)))]  # empty at recorded_at too
        for recorded, until in zip(times, ends, strict=True):
            out.append({"i": len(out), "k": key, "fact_id": f"f{fact}", "object": value, "valid_from": draw(day),
                        "valid_to": draw(day), "recorded_at": recorded, "believed_until": until})
    return out


@settings(max_examples=500 if HEAVY else 100, deadline=None)
@given(st.data())
def test_counted_overlaps_find_the_revisions_pairing_finds(data) -> None:
    """The overlap flag counts the open revisions' overlaps instead of pairing them (a busy key's
    pairs grow with its revisions squared): it finds exactly the revisions that pairing every two
    revisions of a key finds, on random revisions: empty and unbounded intervals, ties, open and
    bounded belief, NULL objects, a fact's revisions, several keys."""
    revisions = data.draw(st.composite(_candidate_revisions)())
    day = datetime(2025, 1, 1, tzinfo=UTC)
    as_time = {n: pa.array([None if r[n] is None else day + timedelta(days=r[n]) for r in revisions],
                           pa.timestamp("us", tz="UTC"))
               for n in ("valid_from", "valid_to", "recorded_at", "believed_until")}
    table = pa.table({"i": pa.array([r["i"] for r in revisions], pa.int64()),
                      "k": pa.array([r["k"] for r in revisions], pa.int64()),
                      **{n: pa.array([r[n] for r in revisions], pa.string()) for n in ("fact_id", "object")},
                      **as_time})
    con = duckdb.connect()
    con.execute(tm.connection.sql_parts("macros.sql")["intervals"])
    con.register("_ov_candidates", table)
    # every key busy (all counted), none (all paired), or some of each
    overlaps.find(con, busy_from=data.draw(st.sampled_from([0, 3, 100])))
    found = sorted(i for (i,) in con.sql("SELECT DISTINCT i FROM _ov_found").fetchall())
    assert found == sorted(i for (i,) in con.sql(_PAIRED_OVERLAPS).fetchall())


def test_a_key_of_many_open_overlapping_revisions_is_flagged_whole(tmp_path: Path) -> None:
    """A single-valued key of 30,000 rows, each open-ended from its own start, five values in
    turn: every row overlaps the next one's value. Pairing them was 450M pairs; counted, the
    load flags all of them (and a second key, whose values follow each other, none)."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    n = 30_000
    busy = pl.DataFrame({"subject": "svc", "predicate": "p", "object": [f"v{i % 5}" for i in range(n)],
                         "valid_from": [start + timedelta(minutes=i) for i in range(n)],
                         "recorded_at": [start + timedelta(minutes=i, seconds=5) for i in range(n)]})
    calm = busy.head(1000).with_columns(subject=pl.lit("db"), valid_to=pl.col("valid_from") + timedelta(minutes=1))
    report = tm.open(tmp_path / "s", create=True).backfill(pl.concat([busy, calm], how="diagonal"))
    assert report.loaded == n + 1000
    assert report.flags.filter(pl.col("flag") == "overlapping_values").rows() == [("overlapping_values", n, 0)]


@pytest.mark.parametrize("busy_from", [64, 10**9])
def test_a_busy_key_of_revision_chains_flags_exactly_its_overlaps(tmp_path: Path, monkeypatch, busy_from) -> None:
    """200 facts of one key, each two rows of one fact id: open-ended from day j, then closed at
    day j+1 when the next fact starts (the chain never overlaps). Then x, recorded late, holds
    another value inside fact 50's period; and y's two revisions meet fact 100's while its first
    revision is still believed; a small key's two values overlap. Hand-checked: fact 50's second
    row and x; fact 100's two rows and y's two; d1, d2: 8 rows, the first row 101. Counted (a busy
    key) or paired, the same."""
    monkeypatch.setattr(overlaps, "BUSY_FROM", busy_from)
    day = datetime(2024, 1, 1, tzinfo=UTC)

    def at(days: float) -> datetime:
        return day + timedelta(days=days)

    rows = []
    for j in range(200):
        rows.append(row("svc", f"v{j % 2}", recorded_at=at(j), valid_from=at(j), fact_id=f"f{j}"))
        rows.append(row("svc", f"v{j % 2}", recorded_at=at(j + 1), valid_from=at(j), valid_to=at(j + 1),
                        fact_id=f"f{j}"))
    rows.append(row("svc", "other", recorded_at=at(300), valid_from=at(50.5), valid_to=at(50.7), fact_id="x"))
    rows.append(row("svc", "other2", recorded_at=at(100.5), valid_from=at(100.2), fact_id="y"))
    rows.append(row("svc", "other2", recorded_at=at(100.7), valid_from=at(100.2), valid_to=at(100.3), fact_id="y"))
    # and a key of two rows (never busy) whose two values overlap
    rows += [row("db", "a", recorded_at=at(1), valid_from=at(0), fact_id="d1"),
             row("db", "b", recorded_at=at(2), valid_from=at(1), fact_id="d2")]
    mem = tm.open(tmp_path / "s", create=True)
    report = mem.backfill(rows)
    assert report.loaded == 405
    assert report.flags.filter(pl.col("flag") == "overlapping_values").rows() == [("overlapping_values", 8, 101)]
    # check() pairs only the facts the count finds on the busy key (suspects) and every revision
    # of the others: the same problems as the macro pairing every believed revision, a row a pair
    problems = mem.check().problems
    assert problems.filter(pl.col("kind") == "overlapping_values")["fact_id"].to_list() == ["d1", "f100", "f50"]
    # a pair overlapping in several revisions is reported at the first instant both are believed:
    # y's first revision (day 100.5) against fact 100's first
    assert problems.filter(pl.col("fact_id") == "f100")["detail"].item().endswith("believed at 2024-04-10 12:00:00+00")
    plain = mem.connect().sql("SELECT * FROM tm_problems([]) ORDER BY kind, fact_id").pl()
    assert problems.equals(plain.cast(pl.String))


def test_a_store_exported_again_brings_its_copy_up_to_date(tmp_path: Path, clock) -> None:
    """A copy kept by exporting a store and backfilling the export, again after every change
    (an assertion that closes a value, an invalidation, a correction, a new key): each export
    adds what is new and nothing twice, and the copy answers as the store does, revision for
    revision."""
    source, copy = tm.open(tmp_path / "source", create=True), tm.open(tmp_path / "copy", create=True)
    clock.set("2026-01-01T00:00:00Z")
    source.assert_fact("svc", "owner", "ana", valid_from="2026-01-01")
    tier = source.assert_fact("svc", "tier", "gold")
    size = source.assert_fact("db", "size", "m5.large")
    changes = [lambda: source.assert_fact("svc", "owner", "bob", valid_from="2026-02-01"),
               lambda: source.invalidate(tier.fact_id, at="2026-05-01", reason="downgraded"),
               lambda: source.correct(size.fact_id, reason="never that size"),
               lambda: source.assert_fact("web", "owner", "cy")]
    loaded = []
    for n, change in enumerate([None, *changes]):
        if change:
            clock.set(f"2026-02-{1 + n:02d}T00:00:00Z")
            change()
        tm.export.export(source, tmp_path / f"export{n}.parquet")
        report = copy.backfill(tmp_path / f"export{n}.parquet")
        assert report.rejected.height == 0
        loaded.append((report.loaded, report.duplicates))
        assert copy.sql("SELECT * EXCLUDE (origin, ingested_at) FROM revisions ORDER BY fact_id, revision").pl().equals(
            source.sql("SELECT * EXCLUDE (origin, ingested_at) FROM revisions ORDER BY fact_id, revision").pl())
    # each change adds its revisions: bob and ana's closing, tier's end, the retraction, web
    assert loaded == [(3, 0), (2, 3), (1, 5), (1, 6), (1, 7)]
    assert sorted(copy.as_of("2026-04-01", "svc").select("predicate", "object").rows()) == [
        ("owner", "bob"), ("tier", "gold")]
    assert copy.as_of("2026-06-01", "svc").select("predicate", "object").rows() == [("owner", "bob")]
    assert copy.current("db").is_empty() and copy.check().ok
