"""sequenced and coalesced (SPEC §12): hand-checked rows for every edge the SPEC names.

Facts are loaded by backfill with their own ids and belief times, so every expected row is
written out literally. The SQL macros and the Python twins are checked against each other.
"""

from __future__ import annotations

from datetime import timedelta

import duckdb
import polars as pl
import pytest
from conftest import ts

import tempomem as tm
from tempomem.connection import sql_file
from tempomem.sequenced import parse_every

SEQ = ["bin_from", "bin_to", "fact_id", "object", "coverage"]
CO = ["subject", "object", "valid_from", "valid_to", "facts", "fact_ids"]


def load(mem: tm.Memory, rows: list[dict]) -> None:
    """Backfill ``rows`` as given (each with a fact_id and a recorded_at), all or nothing."""
    mem.backfill([{"subject": "svc", "predicate": "type", **r} for r in rows], strict=True)


def f(fact_id: str, obj: str, start: str | None = None, end: str | None = None, **more: str) -> dict:
    """One backfill row: a fact recorded on 2024-01-01 unless ``recorded_at`` says otherwise."""
    return {"fact_id": fact_id, "object": obj, "valid_from": start, "valid_to": end, "recorded_at": "2024-01-01",
            **more}


def rows(df: pl.DataFrame, columns: list[str]) -> list[tuple]:
    return df.select(columns).rows()


def t(text: str | None):
    return None if text is None else ts(text)


@pytest.fixture
def mem(store_path, clock):
    # "multi": overlapping values of one key are loaded as given and nothing is flagged
    return tm.open(store_path, create=True, clock=clock, predicates={"type": "multi"})


# -- bins ---------------------------------------------------------------------------------------


def test_bins_are_half_open_and_coverage_is_the_share_of_the_bin(mem):
    load(mem, [
        f("a", "A", "2024-01-02", "2024-01-04"),
        f("b", "B", "2024-01-02T12:00Z", "2024-01-03T06:00Z"),
    ])
    got = mem.sequenced("2024-01-01", "2024-01-06", "1d")
    # a starts where the first bin ends and ends where the fourth begins: it is in neither
    assert rows(got, SEQ) == [
        (t("2024-01-02"), t("2024-01-03"), "a", "A", 1.0),
        (t("2024-01-02"), t("2024-01-03"), "b", "B", 0.5),
        (t("2024-01-03"), t("2024-01-04"), "a", "A", 1.0),
        (t("2024-01-03"), t("2024-01-04"), "b", "B", 0.25),
    ]
    assert got.columns == ["bin_from", "bin_to", "fact_id", "scope", "subject", "predicate", "object", "coverage"]
    assert got.schema["bin_from"] == pl.Datetime("us", "UTC") and got.schema["coverage"] == pl.Float64


def test_last_bin_is_clipped_at_to_at(mem):
    load(mem, [{"fact_id": "a", "object": "A", "valid_from": "2024-01-03T06:00Z", "recorded_at": "2024-01-01"}])
    got = mem.sequenced("2024-01-02", "2024-01-03T12:00Z", "1d")
    assert rows(got, SEQ) == [(t("2024-01-03"), t("2024-01-03T12:00Z"), "a", "A", 0.5)]  # 6 h of a 12 h bin


def test_month_bins_add_each_bound_to_from_at(mem):
    load(mem, [{"fact_id": "a", "object": "A", "recorded_at": "2024-01-01"}])  # unknown start, still true
    got = mem.sequenced("2024-01-31", "2024-05-01", "1mo")
    assert rows(got, ["bin_from", "bin_to", "coverage"]) == [
        (t("2024-01-31"), t("2024-02-29"), 1.0),
        (t("2024-02-29"), t("2024-03-31"), 1.0),   # 03-31, not 03-29: one addition to from_at
        (t("2024-03-31"), t("2024-04-30"), 1.0),
        (t("2024-04-30"), t("2024-05-01"), 1.0),
    ]
    sql = mem.sql("SELECT bin, bin_from, bin_to FROM tm_bins(TIMESTAMPTZ '2024-01-31', TIMESTAMPTZ '2024-05-01', "
                  "INTERVAL 1 MONTH) ORDER BY bin").fetchall()
    assert sql == [(0, t("2024-01-31"), t("2024-02-29")), (1, t("2024-02-29"), t("2024-03-31")),
                   (2, t("2024-03-31"), t("2024-04-30")), (3, t("2024-04-30"), t("2024-05-01"))]


def test_fixed_bins_cover_a_fact_partly_at_its_ends_and_wholly_between(mem):
    """Fixed-length bins: only a fact's first and last bins can be partly covered; the bins between
    are whole. 4-hour bins of [00:00, 10:00): [0, 4), [4, 8), [8, 10) (clipped at to_at)."""
    load(mem, [
        f("a", "A", "2024-01-01T01:00Z", "2024-01-01T09:00Z"),     # three bins: 3/4, whole, 1/2
        f("b", "B", "2024-01-01T02:00Z"),                            # still true: 1/2, whole, the clipped bin wholly
        f("c", "C", "2024-01-01T04:00Z", "2024-01-01T08:00Z"),     # exactly the second bin, ending on its end
        f("d", "D", "2024-01-01T05:00Z", "2024-01-01T05:00:00.000001Z"),  # one microsecond
        {"fact_id": "e", "object": "E", "valid_to": "2024-01-01T04:00Z", "recorded_at": "2024-01-01"},
        f("g", "G", "2024-01-01T05:00Z", "2024-01-01T13:00Z"),     # runs past to_at
    ])
    got = mem.sequenced("2024-01-01", "2024-01-01T10:00Z", "4h")
    b0, b1, b2, end = t("2024-01-01"), t("2024-01-01T04:00Z"), t("2024-01-01T08:00Z"), t("2024-01-01T10:00Z")
    assert rows(got, SEQ) == [
        (b0, b1, "a", "A", 0.75), (b0, b1, "b", "B", 0.5), (b0, b1, "e", "E", 1.0),
        (b1, b2, "a", "A", 1.0), (b1, b2, "b", "B", 1.0), (b1, b2, "c", "C", 1.0),
        (b1, b2, "d", "D", 1 / 14_400_000_000), (b1, b2, "g", "G", 0.75),
        (b2, end, "a", "A", 0.5), (b2, end, "b", "B", 1.0), (b2, end, "g", "G", 1.0),
    ]


def test_days_across_a_daylight_saving_change_take_the_general_path(mem):
    """In a session that is not UTC a day can be 23 hours: the bins are then not of one length, and
    tm_sequenced joins each fact to its bins (Paris, 2024-03-31: clocks go from 02:00 to 03:00)."""
    load(mem, [f("a", "A", "2024-03-31T10:00Z"), f("b", "B", "2024-03-30T11:00Z", "2024-04-01T10:00Z")])
    con = duckdb.connect()
    con.execute("SET TimeZone = 'Europe/Paris'")
    con.register("revisions_arrow", mem.connect().sql("SELECT * FROM revisions").to_arrow_table())
    con.execute("CREATE TABLE revisions AS SELECT * FROM revisions_arrow")
    con.execute("CREATE VIEW facts AS SELECT * EXCLUDE (revision, believed_until) FROM revisions")
    con.execute(sql_file("macros.sql"))
    got = con.sql("""SELECT epoch_us(bin_from), epoch_us(bin_to), fact_id, coverage
                     FROM sequenced(TIMESTAMPTZ '2024-03-30 00:00:00+01', TIMESTAMPTZ '2024-04-02 00:00:00+02',
                                    INTERVAL 1 DAY)""").fetchall()
    us = {k: int(t(v).timestamp()) * 1_000_000 for k, v in
          [("30", "2024-03-29T23:00Z"), ("31", "2024-03-30T23:00Z"), ("01", "2024-03-31T22:00Z"),
           ("02", "2024-04-01T22:00Z")]}
    assert got == [
        (us["30"], us["31"], "b", 0.5),
        (us["31"], us["01"], "a", 12 / 23),      # 12:00 to midnight of a 23-hour day
        (us["31"], us["01"], "b", 1.0),
        (us["01"], us["02"], "a", 1.0),
        (us["01"], us["02"], "b", 0.5),
    ]


def test_open_and_unknown_bounds_are_the_infinities(mem):
    load(mem, [
        {"fact_id": "early", "object": "E", "valid_to": "2024-01-02T12:00Z", "recorded_at": "2024-01-01"},
        {"fact_id": "late", "object": "L", "valid_from": "2024-01-03T18:00Z", "recorded_at": "2024-01-01"},
        {"fact_id": "before", "object": "X", "valid_to": "2024-01-01", "recorded_at": "2024-01-01"},
        {"fact_id": "after", "object": "Y", "valid_from": "2024-01-04", "recorded_at": "2024-01-01"},
    ])
    got = mem.sequenced("2024-01-01", "2024-01-04", "1d")
    assert rows(got, SEQ) == [
        (t("2024-01-01"), t("2024-01-02"), "early", "E", 1.0),
        (t("2024-01-02"), t("2024-01-03"), "early", "E", 0.5),
        (t("2024-01-03"), t("2024-01-04"), "late", "L", 0.25),
    ]


def test_empty_intervals_take_part_in_nothing(mem):
    # an end before its start: backfill keeps the end and moves the start to it, [01-02, 01-02)
    mem.backfill([{"fact_id": "e", "subject": "svc", "predicate": "type", "object": "E", "valid_from": "2024-01-03",
                   "valid_to": "2024-01-02", "recorded_at": "2024-01-01"}])
    assert mem.history("svc")["valid_from"].to_list() == [t("2024-01-02")]
    assert mem.sequenced("2024-01-01", "2024-01-05", "1d").is_empty()
    assert mem.coalesced().is_empty()


def test_rows_are_ordered_by_bin_then_key_then_object_then_fact(mem):
    mem.backfill([
        {"fact_id": "z2", "subject": "b", "predicate": "type", "object": "O", "recorded_at": "2024-01-01"},
        {"fact_id": "z1", "subject": "b", "predicate": "type", "object": "O", "recorded_at": "2024-01-01"},
        {"fact_id": "y", "subject": "b", "predicate": "type", "object": "N", "recorded_at": "2024-01-01"},
        {"fact_id": "x", "subject": "a", "predicate": "type", "object": "Z", "recorded_at": "2024-01-01"},
        {"fact_id": "w", "scope": "ops", "subject": "a", "predicate": "type", "object": "A",
         "recorded_at": "2024-01-01"},
    ], strict=True)
    got = mem.sequenced("2024-01-01", "2024-01-03", "1d")
    key = ["bin_from", "scope", "subject", "object", "fact_id"]
    assert rows(got, key) == [
        (t("2024-01-01"), "default", "a", "Z", "x"), (t("2024-01-01"), "default", "b", "N", "y"),
        (t("2024-01-01"), "default", "b", "O", "z1"), (t("2024-01-01"), "default", "b", "O", "z2"),
        (t("2024-01-01"), "ops", "a", "A", "w"),
        (t("2024-01-02"), "default", "a", "Z", "x"), (t("2024-01-02"), "default", "b", "N", "y"),
        (t("2024-01-02"), "default", "b", "O", "z1"), (t("2024-01-02"), "default", "b", "O", "z2"),
        (t("2024-01-02"), "ops", "a", "A", "w"),
    ]
    assert rows(mem.sequenced("2024-01-01", "2024-01-02", "1d", subject="b", predicate="type"), key) == [
        (t("2024-01-01"), "default", "b", "N", "y"), (t("2024-01-01"), "default", "b", "O", "z1"),
        (t("2024-01-01"), "default", "b", "O", "z2")]
    assert mem.sequenced("2024-01-01", "2024-01-02", "1d", scope="ops")["fact_id"].to_list() == ["w"]


# -- belief time: retracted, erased, believed in the past -------------------------------------------


def test_believed_at_in_the_past_reads_the_revision_believed_then(mem, clock):
    clock.set("2026-01-01")
    f = mem.assert_fact("svc", "type", "A", valid_from="2024-01-01")
    clock.set("2026-02-01")
    mem.invalidate(f.fact_id, at="2024-01-02T12:00Z", reason="resized")
    clock.set("2026-03-01")
    g = mem.assert_fact("svc", "type", "B", valid_from="2024-01-02T12:00Z")
    window = ("2024-01-01", "2024-01-04", "1d")
    assert rows(mem.sequenced(*window), SEQ) == [
        (t("2024-01-01"), t("2024-01-02"), f.fact_id, "A", 1.0),
        (t("2024-01-02"), t("2024-01-03"), f.fact_id, "A", 0.5),
        (t("2024-01-02"), t("2024-01-03"), g.fact_id, "B", 0.5),
        (t("2024-01-03"), t("2024-01-04"), g.fact_id, "B", 1.0),
    ]
    # in January A was believed still true, and B was not known yet
    assert rows(mem.sequenced(*window, believed_at="2026-01-15"), SEQ) == [
        (t("2024-01-01"), t("2024-01-02"), f.fact_id, "A", 1.0),
        (t("2024-01-02"), t("2024-01-03"), f.fact_id, "A", 1.0),
        (t("2024-01-03"), t("2024-01-04"), f.fact_id, "A", 1.0),
    ]
    assert mem.sequenced(*window, believed_at="2025-12-31").is_empty()   # before anything was recorded
    assert rows(mem.coalesced(believed_at="2026-02-15"), CO) == [
        ("svc", "A", t("2024-01-01"), t("2024-01-02T12:00Z"), 1, [f.fact_id])]


def test_retracted_facts_leave_beliefs_after_the_retraction_only(mem):
    load(mem, [{"fact_id": "r", "object": "R", "valid_from": "2024-01-01", "recorded_at": "2024-01-01",
                "retracted_at": "2024-02-01", "retraction_reason": "never true"},
               {"fact_id": "k", "object": "K", "valid_from": "2024-01-02", "recorded_at": "2024-01-01"}])
    window = ("2024-01-01", "2024-01-03", "1d")
    assert rows(mem.sequenced(*window), SEQ) == [(t("2024-01-02"), t("2024-01-03"), "k", "K", 1.0)]
    assert rows(mem.sequenced(*window, believed_at="2024-01-15"), SEQ) == [
        (t("2024-01-01"), t("2024-01-02"), "r", "R", 1.0),
        (t("2024-01-02"), t("2024-01-03"), "k", "K", 1.0),
        (t("2024-01-02"), t("2024-01-03"), "r", "R", 1.0),
    ]
    assert rows(mem.coalesced(), CO) == [("svc", "K", t("2024-01-02"), None, 1, ["k"])]
    assert rows(mem.coalesced(believed_at="2024-01-15"), CO) == [
        ("svc", "R", t("2024-01-01"), None, 1, ["r"]), ("svc", "K", t("2024-01-02"), None, 1, ["k"])]


def test_erased_facts_are_gone_from_every_belief(mem, clock):
    load(mem, [{"fact_id": "gone", "subject": "cust-42", "object": "X", "valid_from": "2024-01-01",
                "recorded_at": "2024-01-01"},
               {"fact_id": "kept", "object": "K", "valid_from": "2024-01-01", "recorded_at": "2024-01-01"}])
    clock.set("2026-01-02")
    mem.forget("cust-42", reason="GDPR request")
    for believed_at in (None, "2024-06-01"):
        assert mem.sequenced("2024-01-01", "2024-01-02", "1d", believed_at=believed_at)["fact_id"].to_list() == ["kept"]
        assert mem.coalesced(believed_at=believed_at)["fact_ids"].to_list() == [["kept"]]


# -- coalesced ------------------------------------------------------------------------------------


def test_coalesced_merges_meets_and_overlaps_but_never_across_a_gap(mem):
    load(mem, [
        # meets: [01, 03) + [03, 05) -> [01, 05)
        f("m2", "meet", "2024-01-03", "2024-01-05"),
        f("m1", "meet", "2024-01-01", "2024-01-03"),
        # overlaps, and one inside a longer one that ends sooner than the first: still one period
        f("o1", "over", "2024-01-01", "2024-01-10"),
        f("o2", "over", "2024-01-02", "2024-01-03"),
        f("o3", "over", "2024-01-05", "2024-01-12"),
        # a gap of one microsecond keeps two periods
        f("g1", "gap", "2024-01-01", "2024-01-03"),
        f("g2", "gap", "2024-01-03T00:00:00.000001Z", "2024-01-04"),
        # another value of the key touching "meet" never merges with it
        f("n1", "next", "2024-01-05", "2024-01-06"),
    ])
    assert rows(mem.coalesced(), CO) == [
        ("svc", "gap", t("2024-01-01"), t("2024-01-03"), 1, ["g1"]),
        ("svc", "meet", t("2024-01-01"), t("2024-01-05"), 2, ["m1", "m2"]),
        ("svc", "over", t("2024-01-01"), t("2024-01-12"), 3, ["o1", "o2", "o3"]),
        ("svc", "gap", t("2024-01-03T00:00:00.000001Z"), t("2024-01-04"), 1, ["g2"]),
        ("svc", "next", t("2024-01-05"), t("2024-01-06"), 1, ["n1"]),
    ]
    assert mem.coalesced().columns == ["scope", "subject", "predicate", "object", "valid_from", "valid_to", "facts",
                                       "fact_ids"]


def test_coalesced_fact_ids_by_start_unknown_first_then_id_and_open_ends(mem):
    load(mem, [
        {"fact_id": "c", "object": "A", "valid_from": "2024-01-05", "recorded_at": "2024-01-01"},
        f("b2", "A", "2024-01-02", "2024-01-05"),
        f("b1", "A", "2024-01-02", "2024-01-03"),
        {"fact_id": "z", "object": "A", "valid_to": "2024-01-02", "recorded_at": "2024-01-01"},
        {"fact_id": "y", "object": "A", "valid_to": "2023-06-01", "recorded_at": "2024-01-01"},
        # two values in other scopes / keys never mix with svc's
        {"fact_id": "s", "scope": "ops", "object": "A", "valid_from": "2024-01-01", "recorded_at": "2024-01-01"},
        {"fact_id": "u", "subject": "other", "object": "A", "valid_from": "2024-01-01", "recorded_at": "2024-01-01"},
    ])
    got = mem.coalesced()
    assert got.select("scope", *CO).rows() == [
        ("default", "other", "A", t("2024-01-01"), None, 1, ["u"]),
        ("default", "svc", "A", None, None, 5, ["y", "z", "b1", "b2", "c"]),
        ("ops", "svc", "A", t("2024-01-01"), None, 1, ["s"]),
    ]
    assert rows(mem.coalesced(subject="svc", predicate="type", scope="default"), ["facts"]) == [(5,)]


@pytest.mark.parametrize("hashes", [
    "42 AS key_hash, 42 AS value_hash",                                             # everything collides
    "42 AS key_hash, hash(f.scope, f.subject, f.predicate, f.object) AS value_hash",  # every key in one
    "hash(f.scope, f.subject, f.predicate) AS key_hash, 42 AS value_hash",          # every value in one
])
def test_values_whose_hashes_collide_are_still_coalesced_apart(mem, hashes):
    """coalesced takes a fact as a period by itself when its key proves its values all differ
    (one mask bit per value hash) or its value hash is no other fact's; facts of a shared hash go
    through gaps and islands by their value. With keys or values made to hash alike, the answer
    is the same."""
    load(mem, [f("a1", "A", "2024-01-01", "2024-01-03"), f("a2", "A", "2024-01-03", "2024-01-04"),
               f("b", "B", "2024-01-02", "2024-01-05"), f("c1", "C", "2024-01-01", "2024-01-02"),
               f("c2", "C", "2024-01-03"), f("d", "D", None, "2024-01-02"),
               {"fact_id": "e", "subject": "other", "object": "A", "valid_from": "2024-01-02",
                "recorded_at": "2024-01-01"}])
    expected = [("other", "A", t("2024-01-02"), None, 1, ["e"]),
                ("svc", "D", None, t("2024-01-02"), 1, ["d"]),
                ("svc", "A", t("2024-01-01"), t("2024-01-04"), 2, ["a1", "a2"]),
                ("svc", "C", t("2024-01-01"), t("2024-01-02"), 1, ["c1"]),
                ("svc", "B", t("2024-01-02"), t("2024-01-05"), 1, ["b"]),
                ("svc", "C", t("2024-01-03"), None, 1, ["c2"])]
    assert rows(mem.coalesced(), CO) == expected
    con = mem.connect()
    con.execute(f"""CREATE OR REPLACE MACRO tm_coalesce_input(believed_at) AS TABLE
                    SELECT f.*, {hashes} FROM tm_believed(believed_at) AS f
                    WHERE NOT tm_is_empty(f.valid_from, f.valid_to)""")
    assert rows(con.sql("SELECT * FROM coalesced()").pl(), CO) == expected


# -- bad input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "field", "reason"), [
    (("2024-01-05", "2024-01-01", "1d"), "to_at", "must be after from_at"),
    (("2024-01-01", "2024-01-01", "1d"), "to_at", "must be after from_at"),
    (("2024-01-01", "2024-01-05", "0d"), "every", "positive"),
    (("2024-01-01", "2024-01-05", timedelta(0)), "every", "positive"),
    (("2024-01-01", "2024-01-05", timedelta(days=-1)), "every", "positive"),
    (("2024-01-01", "2024-01-05", "1.5mo"), "every", "whole"),
    (("2024-01-01", "2024-01-05", "daily"), "every", "expected a step"),
    (("2024-01-01", "2024-01-05", 7), "every", "expected a timedelta"),
    (("2000-01-01", "2024-01-01", "1m"), "every", "more than 1,000,000 bins"),
    ((None, "2024-01-05", "1d"), "from_at", "required"),
    (("2024-01-01", "soon", "1d"), "to_at", "cannot read"),
])
def test_bad_windows_are_typed_errors_naming_the_argument(mem, args, field, reason):
    with pytest.raises(tm.TempomemError, match=reason) as err:
        mem.sequenced(*args)
    assert str(err.value).startswith(f"{field}: ")


def test_exactly_a_million_bins_is_allowed_and_one_more_is_not(mem):
    assert mem.sequenced("2024-01-01", "2024-01-01T00:00:01Z", "1us").is_empty()   # 1,000,000 bins, no fact
    with pytest.raises(tm.TempomemError, match="more than 1,000,000"):
        mem.sequenced("2024-01-01", "2024-01-01T00:00:01.000001Z", "1us")


def test_parse_every():
    assert parse_every("1mo") == "1 months 0 microseconds"
    assert parse_every("1mo15d") == "1 months 1296000000000 microseconds"
    assert parse_every("6h") == parse_every(timedelta(hours=6)) == "0 months 21600000000 microseconds"
    assert parse_every("1.5h") == "0 months 5400000000 microseconds"
    assert parse_every("1w") == parse_every("7d")
    assert parse_every(" 15M ") == "0 months 900000000 microseconds"


def test_sql_macros_refuse_bad_windows_with_a_clear_error(mem):
    """SQL callers get DuckDB's error, with the reason; the fetch raises it."""
    con = mem.connect()
    for args, message in [("'2024-02-01', '2024-01-01', INTERVAL 1 DAY", "before to_at"),
                          ("'2024-01-01', '2024-02-01', INTERVAL 0 DAY", "positive"),
                          ("'2024-01-01', '2024-06-01', INTERVAL '1 month -29 days'", "positive"),  # steps back in Feb
                          ("'2000-01-01', '2024-01-01', INTERVAL 1 MINUTE", "1,000,000"),
                          ("NULL, '2024-01-01', INTERVAL 1 DAY", "must not be NULL")]:
        with pytest.raises(duckdb.Error, match=message):
            con.sql(f"SELECT count(*) FROM sequenced({args})").fetchall()


# -- the SQL macros ----------------------------------------------------------------------------------


def test_sql_macros_answer_what_the_python_twins_answer(mem):
    load(mem, [f("a", "A", "2024-01-01", "2024-01-03"),
               {"fact_id": "b", "object": "A", "valid_from": "2024-01-03", "recorded_at": "2024-03-01"}])
    params = {"f": t("2024-01-01"), "t": t("2024-01-05"), "b": t("2024-02-01")}
    sql = mem.sql("SELECT * FROM sequenced($f, $t, INTERVAL 1 DAY, believed_at := $b)", params).pl()
    assert sql.equals(mem.sequenced("2024-01-01", "2024-01-05", "1d", believed_at="2024-02-01"))
    assert sql["fact_id"].to_list() == ["a", "a"]
    assert mem.sql("SELECT * FROM coalesced()").pl().equals(mem.coalesced())
    assert mem.sql("SELECT facts, fact_ids FROM coalesced()").fetchall() == [(2, ["a", "b"])]
    assert mem.sql("SELECT count(*), sum(coverage) FROM tm_sequenced(TIMESTAMPTZ '2024-01-01', "
                   "TIMESTAMPTZ '2024-01-05', INTERVAL 12 HOUR)").fetchall() == [(8, 8.0)]


def test_macros_load_into_a_plain_duckdb_session(mem):
    """The file needs only a `revisions` table and `facts` made from it, as its header says."""
    load(mem, [f("a", "A", "2024-01-01T12:00Z", "2024-01-02"),
               {"fact_id": "b", "object": "A", "valid_from": "2024-01-02", "recorded_at": "2024-01-01"}])
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("revisions_arrow", mem.connect().sql("SELECT * FROM revisions").to_arrow_table())
    con.execute("CREATE TABLE revisions AS SELECT * FROM revisions_arrow")
    con.execute("""CREATE VIEW facts AS
                   SELECT * EXCLUDE (revision, believed_until)
                          REPLACE (min(recorded_at) OVER (PARTITION BY fact_id) AS recorded_at)
                   FROM revisions QUALIFY believed_until IS NULL""")
    con.execute(sql_file("macros.sql"))
    assert con.sql("SELECT bin_from, fact_id, coverage FROM sequenced(TIMESTAMPTZ '2024-01-01', "
                   "TIMESTAMPTZ '2024-01-03', INTERVAL 1 DAY)").fetchall() == [
        (t("2024-01-01"), "a", 0.5), (t("2024-01-02"), "b", 1.0)]
    assert con.sql("SELECT valid_from, valid_to, fact_ids FROM coalesced()").fetchall() == [
        (t("2024-01-01T12:00Z"), None, ["a", "b"])]


def test_the_run_of_bins_found_by_division_is_never_short(mem):
    """tm_sequenced finds each fact's bins by dividing by the mean bin length; against the plain
    interval join of the facts and tm_bins, for bins of months (uneven) and of odd fixed lengths
    (whose rows, made from bin numbers alone, have the same bounds and coverage to the bit)."""
    starts = ["2023-11-30T07:00Z", "2024-01-31", "2024-02-29T23:59:59Z", "2024-03-31T00:00:00.000001Z",
              "2024-12-31", "2025-02-28T12:00Z", None]
    ends = ["2024-01-01", "2024-02-29", "2024-03-31T00:00:01Z", "2024-07-15", "2025-03-01", None]
    load(mem, [{"fact_id": f"f{i}-{j}", "object": "A", "valid_from": s, "valid_to": e, "recorded_at": "2024-01-01"}
               for i, s in enumerate(starts) for j, e in enumerate(ends)])
    plain = """
        SELECT b.bin_from, b.bin_to, f.fact_id,
               CAST(epoch_us(least(coalesce(f.valid_to, b.bin_to), b.bin_to))
                    - epoch_us(greatest(coalesce(f.valid_from, b.bin_from), b.bin_from)) AS DOUBLE)
               / CAST(epoch_us(b.bin_to) - epoch_us(b.bin_from) AS DOUBLE)
        FROM tm_bins($f, $t, CAST($e AS INTERVAL)) AS b, tm_believed(NULL) AS f
        WHERE tm_overlaps(f.valid_from, f.valid_to, b.bin_from, b.bin_to) ORDER BY ALL"""
    fast = "SELECT bin_from, bin_to, fact_id, coverage FROM tm_sequenced($f, $t, CAST($e AS INTERVAL)) ORDER BY ALL"
    for lo, hi, every in [("2024-01-31", "2025-04-01", "1 month"), ("2023-12-15", "2026-01-01", "3 months 1 day"),
                          ("2024-01-01T03:00Z", "2024-09-01", "7 days 5 hours"), ("2024-02-10", "2024-04-01", "1 day"),
                          ("2024-02-29T23:59:59.5Z", "2024-03-31T00:00:00.7Z", "1 hour 1 second")]:
        params = {"f": t(lo), "t": t(hi), "e": every}
        expected = mem.sql(plain, params).fetchall()
        assert expected, every
        assert mem.sql(fast, params).fetchall() == expected, every
