"""The three query forms and the audit views (SPEC §4, §6) on small hand-checked histories."""

from __future__ import annotations

import importlib.resources
import re
from pathlib import Path

import deltalake
import duckdb
import pytest
from conftest import ts

import tempomem as tm
from tempomem.connection import sql_file


def _objects(df) -> list[str]:
    return df["object"].to_list()


@pytest.fixture
def moved(mem, clock):
    """Helsinki since 2019; Berlin from 2024-06, learned only in 2026-09."""
    clock.set("2019-01-10")
    helsinki = mem.assert_fact("ada", "city", "Helsinki", valid_from="2019")
    clock.set("2026-09-01")
    berlin = mem.assert_fact("ada", "city", "Berlin", valid_from="2024-06")
    return helsinki, berlin


def test_as_of_and_as_believed_diverge(mem, moved):
    assert _objects(mem.as_of("2025-01", "ada", "city")) == ["Berlin"]
    assert _objects(mem.as_believed("2025-01", "2025-06", "ada", "city")) == ["Helsinki"]
    assert _objects(mem.as_believed("2025-01", "2026-09-02", "ada", "city")) == ["Berlin"]


def test_half_open_boundary_gives_exactly_one_answer(mem, moved):
    assert _objects(mem.as_of("2024-06-01T00:00:00Z", "ada")) == ["Berlin"]
    assert _objects(mem.as_of("2024-05-31T23:59:59.999999Z", "ada")) == ["Helsinki"]
    # the belief boundary is half-open too: at the instant Berlin was recorded, Berlin is believed
    assert _objects(mem.as_believed("2025-01", "2026-09-01", "ada")) == ["Berlin"]
    assert _objects(mem.as_believed("2025-01", "2026-08-31T23:59:59.999999Z", "ada")) == ["Helsinki"]


def test_change_closes_the_old_interval_and_does_not_retract(mem, moved):
    helsinki, berlin = moved
    old = mem.get(helsinki.fact_id)
    assert old.valid_to == ts("2024-06-01")
    assert old.retracted_at is None
    assert old.status == "superseded"
    assert old.superseded_by == berlin.fact_id
    assert old.superseded_at == ts("2026-09-01")
    assert old.recorded_at == ts("2019-01-10")  # facts: when first recorded


def test_get_is_each_facts_latest_revision_before_and_after_a_fold(mem, moved, clock):
    """get reads a fact's rows by id alone: its answer is the revision `revisions` leaves
    believed, whether the fact was revised before the last fold, after it, or not since."""
    helsinki, berlin = moved
    clock.set("2026-09-02")
    wrong = mem.assert_fact("bo", "city", "Oslo", valid_from="2020")
    mem.correct(wrong.fact_id, reason="typo")
    clock.set("2026-09-03")
    gone = mem.assert_fact("cy", "city", "Rome", valid_from="2021")
    mem._storage.fold()
    clock.set("2026-09-04")
    mem.invalidate(berlin.fact_id, at="2026-08", reason="moved on")  # a fresh revision of a folded fact
    mem.forget("cy", reason="asked to")
    got = {f.fact_id: f for f in map(mem.get, (helsinki.fact_id, berlin.fact_id, wrong.fact_id, gone.fact_id))}
    assert [(f.status, f.valid_to, f.recorded_at) for f in got.values()] == [
        ("superseded", ts("2024-06-01"), ts("2019-01-10")),
        ("ended", ts("2026-08-01"), ts("2026-09-01")),
        ("retracted", None, ts("2026-09-02")),
        ("erased", None, ts("2026-09-03")),
    ]
    believed = mem.sql("SELECT fact_id, revision, status, reason FROM revisions WHERE believed_until IS NULL"
                       ).fetchall()
    assert sorted((f.fact_id, f.status, f.reason) for f in got.values()) == sorted(
        (i, status, reason) for i, _, status, reason in believed)
    with pytest.raises(KeyError):
        mem.get("no-such-fact")


def test_current_excludes_future_dated_facts(mem, clock):
    clock.set("2026-02-01")
    mem.assert_fact("ada", "role", "engineer", valid_from="2025")
    mem.assert_fact("ada", "role", "manager", valid_from="2026-06")
    assert _objects(mem.current("ada")) == ["engineer"]
    clock.set("2026-07-01")
    assert _objects(mem.current("ada")) == ["manager"]


def test_correction_retracts_without_closing_validity(mem, clock):
    clock.set("2026-01-10")
    f = mem.assert_fact("bob", "iban", "FR76-1", valid_from="2025-01")
    clock.set("2026-02-10")
    fixed = mem.correct(f.fact_id, reason="typo in the IBAN")
    assert fixed.status == "retracted"
    assert fixed.valid_to is None
    assert fixed.retracted_at == ts("2026-02-10")
    assert fixed.reason == "typo in the IBAN"
    assert mem.as_of("2025-06", "bob").is_empty()
    assert mem.current("bob").is_empty()
    # before the retraction we did believe it; after, we do not
    assert _objects(mem.as_believed("2025-06", "2026-01-20", "bob")) == ["FR76-1"]
    assert mem.as_believed("2025-06", "2026-02-10", "bob").is_empty()


def test_retracted_fact_shown_by_history_and_timeline(mem, clock):
    clock.set("2026-01-10")
    f = mem.assert_fact("bob", "iban", "FR76-1", valid_from="2025-01")
    clock.set("2026-02-10")
    mem.correct(f.fact_id, reason="wrong")
    hist = mem.history("bob", "iban")
    assert hist.select("object", "status", "recorded_at").rows() == [("FR76-1", "retracted", ts("2026-01-10"))]
    line = mem.timeline("bob")
    assert line.select("revision", "status", "recorded_at", "believed_until").rows() == [
        (1, "live", ts("2026-01-10"), ts("2026-02-10")),
        (2, "retracted", ts("2026-02-10"), None),
    ]


def test_late_correction_of_an_end(mem, clock):
    """Believed in March that it ended in June; in July learned it ended in May."""
    clock.set("2026-01-02")
    f = mem.assert_fact("proj", "lead", "carol", valid_from="2026-01")
    clock.set("2026-03-01")
    mem.invalidate(f.fact_id, at="2026-06-01", reason="carol leaves in June")
    clock.set("2026-07-01")
    mem.invalidate(f.fact_id, at="2026-05-01", reason="she left in May after all")
    # in April we believed carol led on May 15th; in August we know she did not
    assert _objects(mem.as_believed("2026-05-15", "2026-04-01", "proj")) == ["carol"]
    assert mem.as_believed("2026-05-15", "2026-08-01", "proj").is_empty()
    assert mem.as_of("2026-05-15", "proj").is_empty()
    revs = mem.history("proj", "lead", revisions=True)
    assert revs.select("revision", "valid_to", "recorded_at", "believed_until").rows() == [
        (1, None, ts("2026-01-02"), ts("2026-03-01")),
        (2, ts("2026-06-01"), ts("2026-03-01"), ts("2026-07-01")),
        (3, ts("2026-05-01"), ts("2026-07-01"), None),
    ]
    assert revs["reason"].to_list() == [None, "carol leaves in June", "she left in May after all"]


def test_nothing_is_ever_deleted(mem, clock):
    clock.set("2026-01-02")
    a = mem.assert_fact("k", "p", "a", valid_from="2025-01")
    clock.advance(days=1)
    mem.assert_fact("k", "p", "b", valid_from="2025-03")
    clock.advance(days=1)
    c = mem.assert_fact("k", "p", "c", valid_from="2025-03")  # same start: b is retracted
    clock.advance(days=1)
    mem.invalidate(c.fact_id, at="2025-09", reason="ended")
    clock.advance(days=1)
    mem.correct(a.fact_id, reason="never true")
    assert mem.history("k", "p")["object"].to_list() == ["a", "b", "c"]
    assert mem.history("k", "p")["status"].to_list() == ["retracted", "retracted", "ended"]
    assert mem.history("k", "p", revisions=True).height == 7


def test_history_filters_predicate_and_scope(mem, clock):
    clock.set("2026-01-02")
    mem.assert_fact("s", "p", "x", valid_from="2025")
    mem.assert_fact("s", "q", "y", valid_from="2025")
    mem.assert_fact("s", "p", "z", valid_from="2025", scope="team-b")
    assert _objects(mem.history("s", "p")) == ["x", "z"]
    assert _objects(mem.history("s", "p", scope="team-b")) == ["z"]
    assert sorted(_objects(mem.history("s"))) == ["x", "y", "z"]
    assert _objects(mem.as_of("2025-06", "s", scope="default")) == ["x", "y"]


def test_frames_have_the_facts_columns(mem, moved):
    assert mem.as_of("2025-01").columns == tm.schema.FACT_COLUMNS
    assert mem.history("ada").columns == tm.schema.FACT_COLUMNS
    assert mem.as_believed("2025-01", "2025-06").columns == [*tm.schema.FACT_COLUMNS, "revision", "believed_until"]
    assert str(mem.as_of("2025-01").schema["valid_from"]) == "Datetime(time_unit='us', time_zone='UTC')"


def test_columns_names_the_frames_columns_and_changes_no_answer(mem, moved, clock):
    clock.set("2026-09-02")
    mem.assert_fact("bob", "city", "Oslo", valid_from="2020")
    mem.assert_fact("ada", "pet", "cat", valid_from="2020")
    for subject in (None, "ada"):  # a snapshot (DuckDB over the files) and a point read
        picked = mem.as_of("2025-01", subject, columns=["object", "subject", "valid_from"])
        assert picked.columns == ["object", "subject", "valid_from"]
        assert picked.equals(mem.as_of("2025-01", subject).select("object", "subject", "valid_from"))
        believed = mem.as_believed("2025-01", "2025-06", subject, columns=["revision", "object"])
        assert believed.equals(mem.as_believed("2025-01", "2025-06", subject).select("revision", "object"))
    # in the key order, as without columns
    assert mem.as_of("2025-01", columns=["object"])["object"].to_list() == ["Berlin", "cat", "Oslo"]
    assert mem.as_believed("2025-01", "2025-06", columns=["object"])["object"].to_list() == ["Helsinki"]
    assert mem.current("ada", "city", columns=["fact_id"])["fact_id"].to_list() == [moved[1].fact_id]


@pytest.mark.parametrize(("columns", "message"), [
    (["object", "colour"], "columns: no column 'colour'"),
    (["believed_until"], "columns: no column 'believed_until'"),    # a revision's, not a fact's
    ("object", "columns: expected a non-empty list of column names, got 'object'"),
    ([], "columns: expected a non-empty list"),
    (["object", "object"], "columns: 'object' is named twice"),
])
def test_bad_columns_raise_naming_the_column(mem, moved, columns, message):
    with pytest.raises(tm.TempomemError, match=message):
        mem.as_of("2025-01", columns=columns)


def test_sql_views_and_macros(mem, moved):
    rows = mem.sql("SELECT object FROM as_of($t) WHERE subject = $s", {"t": "2025-01-01", "s": "ada"}).fetchall()
    assert rows == [("Berlin",)]
    con = mem.connect()
    assert con.sql("SELECT count(*) FROM revisions").fetchall() == [(3,)]
    assert con.sql("SELECT object FROM history('ada', predicate := 'city') ORDER BY recorded_at").fetchall() == [
        ("Helsinki",), ("Berlin",)]


def test_macro_file_loads_into_a_plain_duckdb_session(mem, moved):
    """The .sql file needs a `revisions` table and `facts` made from it as its header says."""
    revisions = mem.connect().sql("SELECT * FROM revisions").to_arrow_table()
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("revisions_arrow", revisions)
    con.execute("CREATE TABLE revisions AS SELECT * FROM revisions_arrow")
    con.execute("""CREATE VIEW facts AS
                   SELECT * EXCLUDE (revision, believed_until)
                          REPLACE (min(recorded_at) OVER (PARTITION BY fact_id) AS recorded_at)
                   FROM revisions QUALIFY believed_until IS NULL""")
    con.execute(sql_file("macros.sql"))
    assert con.sql("SELECT object FROM as_of(TIMESTAMPTZ '2025-01-01')").fetchall() == [("Berlin",)]
    assert con.sql("SELECT object FROM as_believed('2025-01-01', '2025-06-01')").fetchall() == [("Helsinki",)]


def test_a_plain_duckdb_session_over_the_stores_files_answers_as_the_store(mem, moved, clock):
    """The README's recipe: the files the Delta log lists as `_tm_events`, then revisions.sql and
    macros.sql as the package ships them. Folded rows and rows written since a fold both."""
    mem._storage.fold()
    clock.set("2026-10-01")
    helsinki = moved[0]
    mem.correct(helsinki.fact_id, reason="never lived there")
    mem.assert_fact("bo", "city", "Oslo", valid_from="2025")
    con = duckdb.connect()
    files = deltalake.DeltaTable(str(mem.path)).file_uris()
    con.execute("CREATE TABLE _tm_events AS SELECT * FROM read_parquet($files, union_by_name = true)", {"files": files})
    con.execute("CREATE VIEW _tm_fresh_events AS SELECT * FROM _tm_events")
    for name in ("revisions.sql", "macros.sql"):
        con.execute(importlib.resources.files("tempomem").joinpath(name).read_text())
    store = mem.connect()
    for query in ("SELECT subject, object FROM as_of(TIMESTAMPTZ '2025-06-01')",
                  "SELECT subject, object FROM as_believed(TIMESTAMPTZ '2025-06-01', TIMESTAMPTZ '2026-09-15')",
                  "SELECT fact_id, revision, believed_until, status FROM timeline('ada')",
                  "SELECT bucket, subject, object FROM memory_diff('2026-09-15', '2026-11-01')"):
        ordered = f"SELECT * FROM ({query}) ORDER BY ALL"
        assert con.sql(ordered).fetchall() == store.sql(ordered).fetchall(), query
    assert con.sql("SELECT object FROM as_believed(TIMESTAMPTZ '2025-06-01', TIMESTAMPTZ '2026-09-15') "
                   "WHERE subject = 'ada'").fetchall() == [("Berlin",)]
    assert con.sql("SELECT count(*) FROM revisions").fetchall() == [(5,)]  # Helsinki 2 + its correction, Berlin, Oslo


@pytest.mark.parametrize(("call", "message"), [
    (lambda mem: mem.as_of("2025-01", ["ada"]), "subject: expected a string (or None for any), got list ['ada']"),
    (lambda mem: mem.history("ada", predicate=["city"]), "predicate: expected a string (or None for any), got list"),
    (lambda mem: mem.current("ada", scope=1), "scope: expected a string (or None for any), got int 1"),
    (lambda mem: mem.as_believed("2025-01", "2026-01", "ada", ("city",)), "predicate: expected a string"),
    (lambda mem: mem.timeline(b"ada"), "subject: expected a string (or None for any), got bytes"),
    (lambda mem: mem.coalesced(subject=["ada"]), "subject: expected a string"),
    (lambda mem: mem.sequenced("2025-01", "2025-02", "1d", predicate=5), "predicate: expected a string"),
])
def test_a_key_argument_that_is_not_a_string_is_refused(mem, moved, call, message):
    """A list or a number given as a key was a pyarrow or numpy error from the key index."""
    for point_reads in (True, False):
        mem.reader.point_reads = point_reads
        with pytest.raises(tm.TempomemError, match=re.escape(message)):
            call(mem)


def test_subject_with_quotes_and_sql_is_plain_text(mem, clock):
    clock.set("2026-01-02")
    nasty = "x'); DROP TABLE facts; --"
    f = mem.assert_fact(nasty, "said \"hi\"", "O'Brien", valid_from="2025")
    assert _objects(mem.as_of("2025-06", nasty)) == ["O'Brien"]
    assert mem.get(f.fact_id).subject == nasty
    assert mem.history(nasty)["predicate"].to_list() == ['said "hi"']


def test_check_is_clean_and_reports_a_stray_file(mem, moved, store_path):
    assert mem.check().ok
    stray = store_path / "part-00000-dropped-by-hand.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"fact_id": ["evil"]}), stray)
    report = mem.check()
    assert not report.ok
    assert report.problems.select("kind").to_series().to_list() == ["unreferenced_file"]
    assert "dropped-by-hand" in report.problems["detail"][0]
    # never read: answers are unchanged
    assert _objects(mem.as_of("2025-01", "ada")) == ["Berlin"]


def test_a_data_file_missing_from_disk_is_named_by_reads_and_check(mem, moved, store_path):
    files = mem.reader.read_files(lambda con, files: files)
    assert len(files) == 2  # the two commits of `moved`
    gone = files[0]
    Path(gone).unlink()
    named = (r"store: 1 data file\(s\) of the newest version are missing from disk "
             rf"\(first: {re.escape(repr(gone))}\); check\(\) \(tempomem check\) lists them")
    version = mem.reader.storage.latest_version()
    fresh = tm.open(store_path)  # a writer that has not read the key's states yet reads them first
    many = [{"subject": f"s{i}", "predicate": "p", "object": "o"} for i in range(3000)]  # read a column at a time
    for call in (lambda: mem.as_of("2025-01", "ada"), lambda: mem.as_of("2025-01"), lambda: mem.history("ada"),
                 lambda: fresh.assert_fact("ada", "city", "Oslo"),
                 lambda: fresh.assert_many(many),
                 lambda: fresh.forget("ada", reason="asked")):
        with pytest.raises(tm.TempomemError, match=named):
            call()
    assert mem.reader.storage.latest_version() == version  # nothing committed
    report = tm.open(store_path).check()  # a new process would see the same
    assert report.problems.rows() == [("missing_file", None, f"{gone} is in the Delta log but not on disk: no read "
                                                             "of the store works until it is restored from a copy")]
    assert not report.ok


def test_a_commit_stands_when_the_merge_of_small_files_after_it_fails(mem, moved, monkeypatch):
    # Housekeeping after a commit that landed must not tell the caller it failed: the fact is
    # stored, and the caller gets it (with a warning), not an error for a write that happened.
    def broken() -> bool:
        raise OSError("No space left on device")

    monkeypatch.setattr(mem.reader.storage, "compact_if_needed", broken)
    with pytest.warns(RuntimeWarning, match=r"the commit landed, but merging small files failed \(No space left"):
        fact = mem.assert_fact("ada", "pet", "cat")
    assert mem.get(fact.fact_id).object == "cat"
    assert mem.current("ada", "pet")["object"].to_list() == ["cat"]


def test_a_damaged_log_entry_is_named_in_one_line(mem, moved, store_path):
    mem.as_of("2025-01")  # this reader holds the version before the next commit
    tm.open(store_path).assert_fact("ada", "pet", "cat")  # another writer's commit, then its entry damaged
    entry = sorted((store_path / "_delta_log").glob("*.json"))[-1]
    entry.write_text("{not json")
    with pytest.raises(tm.TempomemError, match=rf"store: the Delta log entry {re.escape(str(entry))} is damaged"):
        mem.as_of("2025-01")  # follows the log entry by entry
    with pytest.raises(tm.TempomemError, match=r"store: cannot read the Delta log of .*: .*[Jj]son"):
        tm.open(store_path).as_of("2025-01")  # reads it through deltalake


def test_check_reports_a_revision_whose_stored_previous_columns_are_wrong(mem, moved):
    """A foreign writer's row that does not repeat the revision it follows (prev_*)."""
    helsinki, _ = moved
    con = mem.reader.connection()
    # Helsinki's revision 2 (closed by Berlin) again as revision 3, but naming revision 1 as before
    row = con.sql("""SELECT * REPLACE (revision + 1 AS revision, recorded_at + INTERVAL 1 DAY AS recorded_at,
                                       ingested_at + INTERVAL 1 DAY AS ingested_at)
                     FROM _tm_events WHERE fact_id = $id AND revision = 2""", params={"id": helsinki.fact_id})
    mem._storage.append(row.to_arrow_table())
    problems = mem.check().problems
    assert problems.rows() == [("previous_mismatch", helsinki.fact_id,
                                "revision 3: its stored prev_* columns are not those of the revision before it")]


def test_compaction_merges_small_files_and_changes_no_answer(mem, clock):
    from tempomem.storage import folder

    clock.set("2026-01-02")
    for i in range(folder._SMALL_FILES_BEFORE_COMPACTION + 3):
        clock.advance(hours=1)
        mem.assert_fact("svc", "replicas", str(i), valid_from=f"2025-01-01T00:{i:02d}:00Z")
    files = mem._storage.snapshot().files
    assert len(files) < folder._SMALL_FILES_BEFORE_COMPACTION
    before = mem.history("svc", revisions=True)
    assert before.height == 2 * (folder._SMALL_FILES_BEFORE_COMPACTION + 3) - 1
    mem._storage.compact()  # compact again, explicitly
    assert len(mem._storage.snapshot().files) == 1
    assert mem.history("svc", revisions=True).equals(before)
    assert mem.as_of("2025-01-01T00:10:30Z", "svc")["object"].to_list() == ["10"]
    assert mem.check().ok


def test_a_store_of_an_older_schema_is_refused_with_what_to_do(mem, store_path):
    settings = mem._storage.read_settings()
    mem._storage.write_settings({**settings, "schema_version": 2})
    with pytest.raises(tm.TempomemError, match="schema version 2 is not 3; export it with the tempomem that wrote"):
        tm.open(store_path)
