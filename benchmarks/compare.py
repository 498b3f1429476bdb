"""tempomem side by side with the designs a user would otherwise pick, on the same data (issue 6).

    .venv/bin/python benchmarks/compare.py --sizes 1e5,1e6          # then --sizes 1e7 --append

For each size, ``workload.py`` generates one history and every system loads it: tempomem (the
store), (1) the four-timestamp design on SQLite, (2) PostgreSQL with tstzrange columns, a GiST
index and an exclusion constraint, (3) a Polars in-memory filter over the flat export, (4) the
floor: DuckDB scanning the store's Parquet files with the same key/time predicate and no
bitemporal logic. Each query class runs once to warm up, then ``--runs`` times (fewer for the
heavy classes, see ``HEAVY_RUNS``); the median, min and max are kept, and every system's answer
size is compared with tempomem's (a mismatch is reported, never hidden). A system that cannot
run is skipped with a printed reason. Results go to ``results.json`` (``--results``; merged across
runs) and ``RESULTS.md`` + ``results.png`` beside it are rewritten from it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).parent))
import workload

import tempomem as tm

HERE = Path(__file__).parent
T_VALID = datetime(2026, 3, 17, tzinfo=UTC)        # snapshot / point valid time
T_BELIEF = datetime(2026, 3, 20, tzinfo=UTC)       # as_believed belief time
DIFF_FROM, DIFF_TO = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 8, tzinfo=UTC)
NEW_START = datetime(2026, 9, 1, tzinfo=UTC)       # writes start after every generated value
CLASSES = ["point_as_of", "point_as_believed", "snapshot_as_of", "snapshot_as_believed", "history",
           "diff_week", "divergence", "assert_fact", "assert_many"]
HEAVY_RUNS = {"snapshot_as_of": 3, "snapshot_as_believed": 3, "divergence": 2, "assert_many": 1}
#: Classes timed without a warm-up run (one 100k-row commit is expensive; its first run is the figure).
NO_WARMUP = {"assert_many"}
SYSTEMS = ["tempomem", "sqlite", "postgres", "polars", "floor"]
US = 1_000_000


def _us(t: datetime) -> int:
    return int(t.timestamp()) * US + t.microsecond


# -- shared inputs -------------------------------------------------------------------------------


class Inputs:
    """The parameters every system gets: keys for point queries, probes, rows to assert."""

    def __init__(self, wl: workload.Workload, probes: int, many: int, runs: int) -> None:
        rng = np.random.default_rng(7)
        subjects = rng.integers(0, wl.subjects, runs + 2)
        preds = rng.integers(0, len(workload.PREDICATES), runs + 2)
        self.keys = [(f"e{s:07d}", workload.PREDICATES[p]) for s, p in zip(subjects, preds, strict=True)]
        ps = rng.integers(0, wl.subjects, probes)
        pp = np.array(workload.PREDICATES)[rng.integers(0, len(workload.PREDICATES), probes)]
        t0 = _us(datetime(2026, 1, 1, tzinfo=UTC))
        valid = t0 + rng.integers(0, 200 * 86400 * US, probes)
        believed = valid + rng.integers(0, 30 * 86400 * US, probes)
        self.probes = pl.DataFrame({
            "subject": [f"e{s:07d}" for s in ps], "predicate": pp,
            "valid_at": pl.Series(valid).cast(pl.Datetime("us", "UTC")),
            "believed_at": pl.Series(believed).cast(pl.Datetime("us", "UTC")),
        })
        single_keys = wl.subjects * 4
        existing = min(many // 2, single_keys)
        idx = rng.permutation(single_keys)[:existing]
        self.existing_rows = existing
        subj = [f"e{i // 4:07d}" for i in idx] + [f"n{i:07d}" for i in range(many - existing)]
        pred = [f"p{i % 4}" for i in idx] + [f"p{i % 4}" for i in range(many - existing)]
        self.many = pl.DataFrame({"subject": subj, "predicate": pred})
        self.one_counter = 0

    def many_rows(self, run: int) -> pl.DataFrame:
        """The assert_many batch of run ``run``: a new value on each key, starting a day later per run."""
        start = NEW_START + timedelta(days=run)
        return self.many.with_columns(
            object=pl.lit(f"bulk-{run}"), valid_from=pl.lit(start).cast(pl.Datetime("us", "UTC")))

    def one_row(self) -> tuple[str, str, str, datetime]:
        """One assert_fact: a new value on an existing single-valued key (supersedes its value)."""
        self.one_counter += 1
        s, _ = self.keys[self.one_counter % len(self.keys)]
        # before every assert_many start, so assert_many's values close these (no value starts later)
        return s, "p1", f"one-{self.one_counter}", NEW_START - timedelta(days=40) + timedelta(seconds=self.one_counter)


# -- the systems -----------------------------------------------------------------------------------
# Each system answers every query class it can; `rows` of the answer is compared across systems.
# Skipped classes raise NotImplementedError with the reason.


class Tempomem:
    name = "tempomem"

    def load(self, wl: workload.Workload, tmp: Path) -> None:
        self.mem = wl.open()
        self.mem.as_of(T_VALID, "e0000000", "p0")  # binds the connection

    def point_as_of(self, key):
        return self.mem.as_of(T_VALID, key[0], key[1]).height

    def point_as_believed(self, key):
        return self.mem.as_believed(T_VALID, T_BELIEF, key[0], key[1]).height

    def snapshot_as_of(self, _):
        return self.mem.as_of(T_VALID).height

    def snapshot_as_believed(self, _):
        return self.mem.as_believed(T_VALID, T_BELIEF).height

    def history(self, key):
        return self.mem.history(key[0], key[1]).height

    def diff_week(self, _):
        d = self.mem.diff(DIFF_FROM, DIFF_TO)
        return d.created.height + d.changed.height + d.retracted.height

    def divergence(self, probes):
        return int(tm.probes.divergence(self.mem, probes)["diverged"].sum())

    def assert_fact(self, row):
        s, p, o, vf = row
        self.mem.assert_fact(s, p, o, valid_from=vf)
        return 1

    def assert_many(self, frame):
        return len(self.mem.assert_many(frame))

    def close(self) -> None:
        pass


# The four-timestamp design, as its authors would write it. Times are INTEGER microseconds.
_SQLITE_SCHEMA = """
CREATE TABLE versions (
    id INTEGER PRIMARY KEY, fact_id TEXT NOT NULL, version INTEGER NOT NULL,
    subject TEXT NOT NULL, predicate TEXT NOT NULL, object TEXT,
    valid_from INTEGER, valid_to INTEGER, asserted_at INTEGER NOT NULL, retracted_at INTEGER,
    single INTEGER NOT NULL
);
"""
_SQLITE_INDEXES = """
CREATE UNIQUE INDEX versions_fact ON versions(fact_id, version);
CREATE INDEX versions_key ON versions(subject, predicate, asserted_at);
CREATE INDEX versions_current ON versions(subject, predicate) WHERE retracted_at IS NULL;
CREATE INDEX versions_asserted ON versions(asserted_at);
CREATE INDEX versions_retracted ON versions(retracted_at) WHERE retracted_at IS NOT NULL;
ANALYZE;
"""
_VALID = "(valid_from IS NULL OR valid_from <= :t) AND (valid_to IS NULL OR :t < valid_to)"
_BELIEVED = "asserted_at <= :b AND (retracted_at IS NULL OR :b < retracted_at)"
_COLS = "fact_id, subject, predicate, object, valid_from, valid_to, asserted_at, retracted_at"

# What the store learned in [lo, hi): new facts (created, or changed when a later version of the
# same key was asserted with them, closing an older fact), later versions (changed, with the
# version before), and versions whose belief ended with no successor (corrections).
_DIFF_SQL = """
WITH w AS (SELECT * FROM versions WHERE asserted_at >= :lo AND asserted_at < :hi)
SELECT 'created' AS bucket, n.fact_id, NULL AS before_fact_id, n.object, NULL AS before_object
FROM w AS n
WHERE n.version = 1 AND NOT EXISTS (
    SELECT 1 FROM w AS c WHERE c.version > 1 AND c.subject = n.subject AND c.predicate = n.predicate
      AND c.asserted_at = n.asserted_at)
UNION ALL
SELECT 'changed', c.fact_id, b.fact_id, c.object, b.object
FROM w AS c JOIN versions AS b ON b.fact_id = c.fact_id AND b.version = c.version - 1
WHERE c.version > 1
UNION ALL
SELECT 'retracted', v.fact_id, NULL, v.object, NULL
FROM versions AS v
WHERE v.retracted_at >= :lo AND v.retracted_at < :hi
  AND NOT EXISTS (SELECT 1 FROM versions AS n WHERE n.fact_id = v.fact_id AND n.version = v.version + 1)
"""

# A probe diverged when the facts valid at valid_at in the current slice differ from the facts
# valid at valid_at in the slice believed at believed_at.
_DIVERGENCE_SQL = """
SELECT count(*) FROM (
    SELECT p.pid FROM probes AS p
    JOIN versions AS v ON v.subject = p.subject AND v.predicate = p.predicate
    WHERE (v.valid_from IS NULL OR v.valid_from <= p.valid_at) AND (v.valid_to IS NULL OR p.valid_at < v.valid_to)
    GROUP BY p.pid
    HAVING count(DISTINCT CASE WHEN v.retracted_at IS NULL THEN v.fact_id END)
        <> count(DISTINCT CASE WHEN v.asserted_at <= p.believed_at
                                    AND (v.retracted_at IS NULL OR p.believed_at < v.retracted_at)
                               THEN v.fact_id END)
        OR count(DISTINCT CASE WHEN v.retracted_at IS NULL THEN v.fact_id END)
        <> count(DISTINCT CASE WHEN v.retracted_at IS NULL OR (v.asserted_at <= p.believed_at
                                    AND (v.retracted_at IS NULL OR p.believed_at < v.retracted_at))
                               THEN v.fact_id END)
) AS d
"""


class SQLite:
    name = "sqlite"

    def load(self, wl: workload.Workload, tmp: Path) -> None:
        path = tmp / "four.sqlite"
        self.con = sqlite3.connect(path, isolation_level=None)
        self.con.execute("PRAGMA journal_mode = WAL")
        self.con.execute("PRAGMA synchronous = NORMAL")
        self.con.execute("PRAGMA cache_size = -1000000")  # 1 GB page cache
        self.con.executescript(_SQLITE_SCHEMA)
        src = duckdb.connect()
        res = src.execute(f"""SELECT fact_id, version, subject, predicate, object, epoch_us(valid_from),
                                 epoch_us(valid_to), epoch_us(asserted_at), epoch_us(retracted_at), single::INT
                          FROM read_parquet('{wl.flat}')""")
        self.con.execute("BEGIN")
        ins = ("INSERT INTO versions (fact_id, version, subject, predicate, object, valid_from, valid_to, "
               "asserted_at, retracted_at, single) VALUES (?,?,?,?,?,?,?,?,?,?)")
        while rows := res.fetchmany(200_000):
            self.con.executemany(ins, rows)
        self.con.execute("COMMIT")
        self.con.executescript(_SQLITE_INDEXES)

    def _q(self, sql, **params):
        return self.con.execute(sql, params).fetchall()

    def point_as_of(self, key):
        return len(self._q(f"SELECT {_COLS} FROM versions WHERE subject = :s AND predicate = :p "
                           f"AND retracted_at IS NULL AND {_VALID}", s=key[0], p=key[1], t=_us(T_VALID)))

    def point_as_believed(self, key):
        return len(self._q(f"SELECT {_COLS} FROM versions WHERE subject = :s AND predicate = :p "
                           f"AND {_BELIEVED} AND {_VALID}", s=key[0], p=key[1], t=_us(T_VALID), b=_us(T_BELIEF)))

    def snapshot_as_of(self, _):
        return len(self._q(f"SELECT {_COLS} FROM versions WHERE retracted_at IS NULL AND {_VALID} "
                           "ORDER BY subject, predicate", t=_us(T_VALID)))

    def snapshot_as_believed(self, _):
        return len(self._q(f"SELECT {_COLS} FROM versions WHERE {_BELIEVED} AND {_VALID} "
                           "ORDER BY subject, predicate", t=_us(T_VALID), b=_us(T_BELIEF)))

    def history(self, key):
        # one row per fact (its latest version), in belief order
        return len(self._q(f"""SELECT {_COLS} FROM (
                SELECT *, row_number() OVER (PARTITION BY fact_id ORDER BY version DESC) AS rn
                FROM versions WHERE subject = :s AND predicate = :p) WHERE rn = 1 ORDER BY asserted_at""",
                s=key[0], p=key[1]))

    def diff_week(self, _):
        return len(self._q(_DIFF_SQL, lo=_us(DIFF_FROM), hi=_us(DIFF_TO)))

    def divergence(self, probes):
        self.con.execute("DROP TABLE IF EXISTS temp.probes")
        self.con.execute("CREATE TEMP TABLE probes (pid INTEGER PRIMARY KEY, subject TEXT, predicate TEXT, "
                         "valid_at INTEGER, believed_at INTEGER)")
        rows = probes.select(pl.int_range(pl.len()), "subject", "predicate",
                             pl.col("valid_at").dt.epoch("us"), pl.col("believed_at").dt.epoch("us")).rows()
        self.con.executemany("INSERT INTO probes VALUES (?,?,?,?,?)", rows)
        return self._q(_DIVERGENCE_SQL)[0][0]

    def _assert(self, rows: list[tuple]) -> int:
        """The design's write: close the current value of each single-valued key, add the new facts."""
        now = _us(datetime.now(UTC))
        c = self.con
        c.execute("BEGIN IMMEDIATE")
        c.execute("CREATE TEMP TABLE IF NOT EXISTS incoming (subject TEXT, predicate TEXT, object TEXT, "
                  "valid_from INTEGER, fact_id TEXT)")
        c.execute("DELETE FROM incoming")
        c.executemany("INSERT INTO incoming VALUES (?,?,?,?,?)", rows)
        # current versions of single-valued keys that the new value closes (different object,
        # started earlier, still open at the new start)
        c.execute("""CREATE TEMP TABLE closing AS
            SELECT v.id, v.fact_id, v.version, v.subject, v.predicate, v.object, v.valid_from,
                   i.valid_from AS new_start, i.fact_id AS new_id
            FROM incoming AS i JOIN versions AS v ON v.subject = i.subject AND v.predicate = i.predicate
            WHERE v.retracted_at IS NULL AND v.single = 1 AND v.object IS NOT i.object
              AND (v.valid_from IS NULL OR v.valid_from < i.valid_from)
              AND (v.valid_to IS NULL OR v.valid_to > i.valid_from)""")
        c.execute("UPDATE versions SET retracted_at = ? WHERE id IN (SELECT id FROM temp.closing)", (now,))
        c.execute("""INSERT INTO versions (fact_id, version, subject, predicate, object, valid_from, valid_to,
                                           asserted_at, retracted_at, single)
                     SELECT fact_id, version + 1, subject, predicate, object, valid_from, new_start, ?, NULL, 1
                     FROM temp.closing""", (now,))
        c.execute("""INSERT INTO versions (fact_id, version, subject, predicate, object, valid_from, valid_to,
                                           asserted_at, retracted_at, single)
                     SELECT fact_id, 1, subject, predicate, object, valid_from, NULL, ?, NULL,
                            predicate NOT LIKE 'm%' FROM incoming""", (now,))
        c.execute("DROP TABLE temp.closing")
        c.execute("COMMIT")
        return len(rows)

    def assert_fact(self, row):
        s, p, o, vf = row
        return self._assert([(s, p, o, _us(vf), f"{s}-{p}-{o}")])

    def assert_many(self, frame):
        rows = frame.select("subject", "predicate", "object", pl.col("valid_from").dt.epoch("us"),
                            pl.concat_str("subject", "predicate", "object", separator="-").alias("fact_id")).rows()
        return self._assert(rows)

    def close(self) -> None:
        self.con.close()


# -- PostgreSQL -------------------------------------------------------------------------------------

_PG_SCHEMA = """
CREATE EXTENSION IF NOT EXISTS btree_gist;
CREATE TABLE versions (
    id bigserial PRIMARY KEY, fact_id text NOT NULL, version int NOT NULL,
    subject text NOT NULL, predicate text NOT NULL, object text,
    valid tstzrange NOT NULL, belief tstzrange NOT NULL, single boolean NOT NULL
);
"""
# After the bulk load: the exclusion constraint (one value per valid instant per belief instant
# for single-valued keys), a GiST index for multi-valued keys and time filters, btree indexes.
_PG_INDEXES = """
CREATE UNIQUE INDEX versions_fact ON versions (fact_id, version);
ALTER TABLE versions ADD CONSTRAINT one_value EXCLUDE USING gist
    (subject WITH =, predicate WITH =, valid WITH &&, belief WITH &&) WHERE (single);
CREATE INDEX versions_key_gist ON versions USING gist (subject, predicate, valid, belief);
CREATE INDEX versions_current ON versions (subject, predicate) WHERE upper_inf(belief);
CREATE INDEX versions_asserted ON versions (lower(belief));
CREATE INDEX versions_retracted ON versions (upper(belief)) WHERE NOT upper_inf(belief);
ANALYZE versions;
"""
_PG_COLS = "fact_id, subject, predicate, object, valid, belief"
_PG_DIFF = """
WITH w AS (SELECT * FROM versions WHERE lower(belief) >= %(lo)s AND lower(belief) < %(hi)s)
SELECT 'created', n.fact_id, NULL, n.object, NULL FROM w AS n
WHERE n.version = 1 AND NOT EXISTS (
    SELECT 1 FROM w AS c WHERE c.version > 1 AND c.subject = n.subject AND c.predicate = n.predicate
      AND lower(c.belief) = lower(n.belief))
UNION ALL
SELECT 'changed', c.fact_id, b.fact_id, c.object, b.object
FROM w AS c JOIN versions AS b ON b.fact_id = c.fact_id AND b.version = c.version - 1
WHERE c.version > 1
UNION ALL
SELECT 'retracted', v.fact_id, NULL, v.object, NULL FROM versions AS v
WHERE NOT upper_inf(v.belief) AND upper(v.belief) >= %(lo)s AND upper(v.belief) < %(hi)s
  AND NOT EXISTS (SELECT 1 FROM versions AS n WHERE n.fact_id = v.fact_id AND n.version = v.version + 1)
"""
_PG_DIVERGENCE = """
SELECT count(*) FROM (
    SELECT p.pid FROM probes AS p
    JOIN versions AS v ON v.subject = p.subject AND v.predicate = p.predicate AND v.valid @> p.valid_at
    GROUP BY p.pid
    HAVING count(DISTINCT v.fact_id) FILTER (WHERE upper_inf(v.belief))
        <> count(DISTINCT v.fact_id) FILTER (WHERE v.belief @> p.believed_at)
        OR count(DISTINCT v.fact_id) FILTER (WHERE upper_inf(v.belief))
        <> count(DISTINCT v.fact_id) FILTER (WHERE upper_inf(v.belief) OR v.belief @> p.believed_at)
) AS d
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    name = "postgres"

    def load(self, wl: workload.Workload, tmp: Path) -> None:
        try:
            import psycopg
        except ImportError as exc:
            raise RuntimeError("psycopg is not installed (pip install -e '.[bench]')") from exc
        bindir = Path(shutil.which("initdb") or "/usr/lib/postgresql/15/bin/initdb").parent
        if not (bindir / "initdb").exists() or not (bindir / "pg_ctl").exists():
            raise RuntimeError("PostgreSQL binaries (initdb, pg_ctl) not found")
        self.dir = Path(tempfile.mkdtemp(prefix="tm-pg-"))
        os.chmod(self.dir, 0o755)
        as_user: list[str] = []
        if os.geteuid() == 0:  # postgres refuses to run as root
            as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.dir, "postgres")
        self.pg_ctl = [*as_user, str(bindir / "pg_ctl"), "-D", str(self.dir / "data")]
        subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(self.dir / "data"), "-U", "bench",
                        "--auth=trust", "-E", "UTF8"], check=True, capture_output=True)
        self.port = _free_port()
        opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c shared_buffers=1GB "
                "-c work_mem=64MB -c maintenance_work_mem=1GB -c max_wal_size=4GB -c TimeZone=UTC")
        subprocess.run([*self.pg_ctl, "-o", opts, "-l", str(self.dir / "log"), "-w", "start"],
                       check=True, capture_output=True)
        self.started = True
        self.con = psycopg.connect(host="127.0.0.1", port=self.port, user="bench", dbname="postgres",
                                   autocommit=True)
        self.con.execute(_PG_SCHEMA)
        csv = self.dir / "flat.csv"
        # ranges as text: '[from,to)', an empty bound is infinite
        duckdb.connect().execute(f"""
            SET TimeZone = 'UTC';
            COPY (SELECT fact_id, version, subject, predicate, object,
                         '[' || coalesce(CAST(valid_from AS VARCHAR), '') || ','
                             || coalesce(CAST(valid_to AS VARCHAR), '') || ')',
                         '[' || CAST(asserted_at AS VARCHAR) || ','
                             || coalesce(CAST(retracted_at AS VARCHAR), '') || ')',
                         single
                  FROM read_parquet('{wl.flat}')) TO '{csv}' (HEADER false)""")
        os.chmod(csv, 0o644)
        self.con.execute(f"COPY versions (fact_id, version, subject, predicate, object, valid, belief, single) "
                         f"FROM '{csv}' (FORMAT csv)")
        csv.unlink()
        self.con.execute(_PG_INDEXES)

    def _q(self, sql, **params):
        return self.con.execute(sql, params).fetchall()

    def point_as_of(self, key):
        return len(self._q(f"SELECT {_PG_COLS} FROM versions WHERE subject = %(s)s AND predicate = %(p)s "
                           "AND upper_inf(belief) AND valid @> %(t)s", s=key[0], p=key[1], t=T_VALID))

    def point_as_believed(self, key):
        return len(self._q(f"SELECT {_PG_COLS} FROM versions WHERE subject = %(s)s AND predicate = %(p)s "
                           "AND belief @> %(b)s AND valid @> %(t)s", s=key[0], p=key[1], t=T_VALID, b=T_BELIEF))

    def snapshot_as_of(self, _):
        return len(self._q(f"SELECT {_PG_COLS} FROM versions WHERE upper_inf(belief) AND valid @> %(t)s "
                           "ORDER BY subject, predicate", t=T_VALID))

    def snapshot_as_believed(self, _):
        return len(self._q(f"SELECT {_PG_COLS} FROM versions WHERE belief @> %(b)s AND valid @> %(t)s "
                           "ORDER BY subject, predicate", t=T_VALID, b=T_BELIEF))

    def history(self, key):
        return len(self._q(f"""SELECT * FROM (SELECT DISTINCT ON (fact_id) {_PG_COLS} FROM versions
                               WHERE subject = %(s)s AND predicate = %(p)s ORDER BY fact_id, version DESC) AS h
                               ORDER BY lower(belief)""", s=key[0], p=key[1]))

    def diff_week(self, _):
        return len(self._q(_PG_DIFF, lo=DIFF_FROM, hi=DIFF_TO))

    def divergence(self, probes):
        self.con.execute("DROP TABLE IF EXISTS probes")
        self.con.execute("CREATE TEMP TABLE probes (pid int PRIMARY KEY, subject text, predicate text, "
                         "valid_at timestamptz, believed_at timestamptz)")
        with self.con.cursor().copy("COPY probes FROM STDIN") as copy:
            for row in probes.with_row_index("pid").iter_rows():
                copy.write_row(row)
        self.con.execute("ANALYZE probes")
        return self._q(_PG_DIVERGENCE)[0][0]

    def _assert(self, rows: list[tuple]) -> int:
        with self.con.transaction():
            cur = self.con.cursor()
            cur.execute("CREATE TEMP TABLE IF NOT EXISTS incoming (subject text, predicate text, object text, "
                        "valid_from timestamptz, fact_id text)")
            cur.execute("TRUNCATE incoming")
            with cur.copy("COPY incoming FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            cur.execute("""CREATE TEMP TABLE closing ON COMMIT DROP AS
                SELECT v.id, v.fact_id, v.version, v.subject, v.predicate, v.object, v.valid, i.valid_from AS new_start
                FROM incoming AS i JOIN versions AS v ON v.subject = i.subject AND v.predicate = i.predicate
                WHERE upper_inf(v.belief) AND v.single AND v.object IS DISTINCT FROM i.object
                  AND lower(v.valid) < i.valid_from AND v.valid @> i.valid_from""")
            cur.execute("UPDATE versions AS v SET belief = tstzrange(lower(v.belief), now(), '[)') "
                        "FROM closing AS c WHERE v.id = c.id")
            cur.execute("""INSERT INTO versions (fact_id, version, subject, predicate, object, valid, belief, single)
                           SELECT fact_id, version + 1, subject, predicate, object,
                                  tstzrange(lower(valid), new_start, '[)'), tstzrange(now(), NULL, '[)'), true
                           FROM closing""")
            cur.execute("""INSERT INTO versions (fact_id, version, subject, predicate, object, valid, belief, single)
                           SELECT fact_id, 1, subject, predicate, object, tstzrange(valid_from, NULL, '[)'),
                                  tstzrange(now(), NULL, '[)'), predicate NOT LIKE 'm%%' FROM incoming""")
        return len(rows)

    def assert_fact(self, row):
        s, p, o, vf = row
        return self._assert([(s, p, o, vf, f"{s}-{p}-{o}")])

    def assert_many(self, frame):
        rows = frame.select("subject", "predicate", "object", "valid_from",
                            pl.concat_str("subject", "predicate", "object", separator="-").alias("fact_id")).rows()
        return self._assert(rows)

    def close(self) -> None:
        if getattr(self, "con", None) is not None:
            self.con.close()
        if getattr(self, "started", False):
            subprocess.run([*self.pg_ctl, "-m", "fast", "-w", "stop"], capture_output=True)
        if getattr(self, "dir", None) is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


# -- Polars in memory -----------------------------------------------------------------------------


def _pl_valid(t: datetime) -> pl.Expr:
    return ((pl.col("valid_from").is_null() | (pl.col("valid_from") <= t))
            & (pl.col("valid_to").is_null() | (pl.col("valid_to") > t)))


def _pl_believed(b: datetime) -> pl.Expr:
    return (pl.col("asserted_at") <= b) & (pl.col("retracted_at").is_null() | (pl.col("retracted_at") > b))


class Polars:
    name = "polars"

    def load(self, wl: workload.Workload, tmp: Path) -> None:
        self.df = pl.read_parquet(wl.flat)

    def point_as_of(self, key):
        return self.df.filter(pl.col("subject") == key[0], pl.col("predicate") == key[1],
                              pl.col("retracted_at").is_null(), _pl_valid(T_VALID)).height

    def point_as_believed(self, key):
        return self.df.filter(pl.col("subject") == key[0], pl.col("predicate") == key[1],
                              _pl_believed(T_BELIEF), _pl_valid(T_VALID)).height

    def snapshot_as_of(self, _):
        return self.df.filter(pl.col("retracted_at").is_null(), _pl_valid(T_VALID)).sort("subject", "predicate").height

    def snapshot_as_believed(self, _):
        return self.df.filter(_pl_believed(T_BELIEF), _pl_valid(T_VALID)).sort("subject", "predicate").height

    def history(self, key):
        return (self.df.filter(pl.col("subject") == key[0], pl.col("predicate") == key[1])
                .sort("version").group_by("fact_id").last().sort("asserted_at").height)

    def diff_week(self, _):
        df = self.df
        w = df.filter(pl.col("asserted_at") >= DIFF_FROM, pl.col("asserted_at") < DIFF_TO)
        later = w.filter(pl.col("version") > 1)
        created = (w.filter(pl.col("version") == 1)
                   .join(later.select("subject", "predicate", "asserted_at").unique(),
                         on=["subject", "predicate", "asserted_at"], how="anti"))
        changed = later.join(df.select("fact_id", (pl.col("version") + 1).alias("version"),
                                       pl.col("object").alias("before_object")), on=["fact_id", "version"])
        ended = df.filter(pl.col("retracted_at") >= DIFF_FROM, pl.col("retracted_at") < DIFF_TO)
        retracted = ended.join(df.select("fact_id", (pl.col("version") - 1).alias("version")),
                               on=["fact_id", "version"], how="anti")
        return created.height + changed.height + retracted.height

    def divergence(self, probes):
        hits = (probes.with_row_index("pid")
                .join(self.df, on=["subject", "predicate"])
                .filter((pl.col("valid_from").is_null() | (pl.col("valid_from") <= pl.col("valid_at")))
                        & (pl.col("valid_to").is_null() | (pl.col("valid_to") > pl.col("valid_at"))))
                .with_columns(known=pl.col("retracted_at").is_null(),
                              believed=(pl.col("asserted_at") <= pl.col("believed_at"))
                              & (pl.col("retracted_at").is_null() | (pl.col("retracted_at") > pl.col("believed_at"))))
                .group_by("pid", "fact_id").agg(pl.col("known").any(), pl.col("believed").any()))
        return hits.filter(pl.col("known") != pl.col("believed")).select(pl.col("pid").n_unique()).item()

    def close(self) -> None:
        self.df = None


# -- the floor: DuckDB over the same Parquet, no bitemporal logic -----------------------------------

_FLOOR_VALID = "(valid_from IS NULL OR valid_from <= $t) AND (valid_to IS NULL OR $t < valid_to)"


class Floor:
    name = "floor"

    def load(self, wl: workload.Workload, tmp: Path) -> None:
        self.con = duckdb.connect()
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute("SET parquet_metadata_cache = true")
        files = list(wl.open()._storage.snapshot().files)
        self.con.read_parquet(files).create_view("raw")

    def _n(self, sql, **params) -> int:
        return self.con.sql(sql, params=params).to_arrow_table().num_rows

    def point_as_of(self, key):
        return self._n(f"SELECT * FROM raw WHERE subject = $s AND predicate = $p AND {_FLOOR_VALID}",
                       s=key[0], p=key[1], t=T_VALID)

    def point_as_believed(self, key):
        return self._n(f"SELECT * FROM raw WHERE subject = $s AND predicate = $p AND recorded_at <= $b "
                       f"AND {_FLOOR_VALID}", s=key[0], p=key[1], t=T_VALID, b=T_BELIEF)

    def snapshot_as_of(self, _):
        return self._n(f"SELECT * FROM raw WHERE {_FLOOR_VALID} ORDER BY scope, subject, predicate", t=T_VALID)

    def snapshot_as_believed(self, _):
        return self._n(f"SELECT * FROM raw WHERE recorded_at <= $b AND {_FLOOR_VALID} "
                       "ORDER BY scope, subject, predicate", t=T_VALID, b=T_BELIEF)

    def history(self, key):
        return self._n("SELECT * FROM raw WHERE subject = $s AND predicate = $p ORDER BY recorded_at",
                       s=key[0], p=key[1])

    def diff_week(self, _):
        return self._n("SELECT * FROM raw WHERE recorded_at >= $lo AND recorded_at < $hi", lo=DIFF_FROM, hi=DIFF_TO)

    def divergence(self, probes):
        self.con.register("probes", probes.to_arrow())
        try:
            return self.con.sql("""SELECT count(*) FROM probes AS p JOIN raw AS r
                                   ON r.subject = p.subject AND r.predicate = p.predicate
                                   AND (r.valid_from IS NULL OR r.valid_from <= p.valid_at)
                                   AND (r.valid_to IS NULL OR p.valid_at < r.valid_to)""").fetchall()[0][0]
        finally:
            self.con.unregister("probes")

    def close(self) -> None:
        self.con.close()


_SKIP_REASONS = {
    ("polars", "assert_fact"): "an in-memory frame has no durable commit",
    ("polars", "assert_many"): "an in-memory frame has no durable commit",
    ("floor", "assert_fact"): "the floor is a read-only scan",
    ("floor", "assert_many"): "the floor is a read-only scan",
}
_SYSTEM_CLASSES = {"tempomem": Tempomem, "sqlite": SQLite, "postgres": Postgres, "polars": Polars, "floor": Floor}
# The floor answers a different (non-bitemporal) question: its row counts are not compared.
_COMPARED = {"tempomem", "sqlite", "postgres", "polars"}


def _timed(fn: Callable[[Any], int], args: list[Any], warm_up: bool = True) -> dict[str, Any]:
    rows = fn(args[0]) if warm_up else None
    samples = []
    for a in args[1:]:
        t0 = time.perf_counter()
        rows = fn(a)
        samples.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "max_ms": max(samples),
            "runs": len(samples), "rows": rows}


def run_size(revisions: int, systems: list[str], runs: int, probes: int, many: int, tmp: Path,
             skip_load: dict[str, int]) -> dict[str, Any]:
    """Generate one size, load every system, run every class; returns the figures of this size."""
    t0 = time.perf_counter()
    wl = workload.build(tmp / "wl", revisions)
    # the point-query keys and the probes are drawn after `runs` keys: runs are part of the inputs
    out: dict[str, Any] = {"revisions": wl.revisions, "subjects": wl.subjects, "keys": wl.subjects * 6, "runs": runs,
                           "generate_s": round(time.perf_counter() - t0, 1), "probes": probes,
                           "assert_many_rows": many, "systems": {}, "skipped": {}}
    print(f"\n== {wl.revisions:,} revisions ({wl.subjects * 6:,} keys), generated in {out['generate_s']} s",
          flush=True)
    inputs = Inputs(wl, probes, many, runs)
    out["assert_many_existing_keys"] = inputs.existing_rows
    for name in systems:
        if name in skip_load and wl.revisions > skip_load[name]:
            reason = f"loading {wl.revisions:,} rows exceeds --max-load for {name} ({skip_load[name]:,})"
            print(f"-- {name}: SKIPPED: {reason}", flush=True)
            out["skipped"][name] = reason
            continue
        system = _SYSTEM_CLASSES[name]()
        try:
            t1 = time.perf_counter()
            system.load(wl, tmp)
            load_s = time.perf_counter() - t1
        except Exception as exc:  # a system that cannot run is skipped, loudly
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            print(f"-- {name}: SKIPPED: {reason}", flush=True)
            out["skipped"][name] = reason
            system.close()
            continue
        print(f"-- {name}: loaded in {load_s:.1f} s", flush=True)
        figures: dict[str, Any] = {"load_s": round(load_s, 1), "classes": {}, "load_average_before": _load_average()}
        for cls in CLASSES:
            if (name, cls) in _SKIP_REASONS:
                figures["classes"][cls] = {"skipped": _SKIP_REASONS[(name, cls)]}
                continue
            n = HEAVY_RUNS.get(cls, runs)
            if cls.startswith("point") or cls == "history":
                args = inputs.keys[: n + 1]
            elif cls == "divergence":
                args = [inputs.probes] * (n + 1)
            elif cls == "assert_fact":
                args = [inputs.one_row() for _ in range(n + 1)]
            elif cls == "assert_many":
                args = [inputs.many_rows(i) for i in range(n + 1)]
            else:
                args = [None] * (n + 1)
            try:
                fig = _timed(getattr(system, cls), args if cls not in NO_WARMUP else [None, *args[:n]],
                             warm_up=cls not in NO_WARMUP)
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                print(f"   {cls:22s} FAILED: {reason}", flush=True)
                figures["classes"][cls] = {"skipped": f"failed: {reason}"}
                continue
            figures["classes"][cls] = fig
            print(f"   {cls:22s} {fig['median_ms']:10.2f} ms  (min {fig['min_ms']:.2f}, max {fig['max_ms']:.2f}, "
                  f"{fig['runs']} runs)  rows {fig['rows']}", flush=True)
        system.close()
        figures["load_average_after"] = _load_average()
        figures["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        out["systems"][name] = figures
    shutil.rmtree(tmp / "wl", ignore_errors=True)
    return out


def _merged(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """A run of some systems adds to (or replaces) their figures in an earlier run of the same
    size, so that a slow system (PostgreSQL at 10M) can be measured on its own; the data is the
    same because the generator is deterministic. The size's own fields (generation time, load)
    are the latest run's. Runs of a different workload start afresh."""
    same = ("revisions", "probes", "assert_many_rows", "assert_many_existing_keys", "runs")
    if old is None or any(old.get(k) != new.get(k) for k in same):
        return new
    systems = {**old["systems"], **new["systems"]}
    skipped = {s: r for s, r in {**old.get("skipped", {}), **new["skipped"]}.items() if s not in systems}
    return {**new, "systems": systems, "skipped": skipped}


def _load_average() -> list[float]:
    return list(os.getloadavg())


def machine() -> dict[str, Any]:
    import deltalake
    import pyarrow

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    pg = subprocess.run([shutil.which("postgres") or "postgres", "--version"], capture_output=True, text=True)
    return {
        "cpu": cpu, "cores": os.cpu_count(), "memory_gb": round(mem_gb, 1), "python": platform.python_version(),
        "tempomem": tm.__version__ if hasattr(tm, "__version__") else "0.1.0",
        "duckdb": duckdb.__version__, "polars": pl.__version__, "pyarrow": pyarrow.__version__,
        "deltalake": deltalake.__version__, "sqlite": sqlite3.sqlite_version,
        "postgres": pg.stdout.strip() if pg.returncode == 0 else "unavailable",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e5,1e6", help="comma-separated revision counts, e.g. 1e5,1e6,1e7")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--runs", type=int, default=7, help="timed runs per class after one warm-up")
    parser.add_argument("--probes", type=float, default=1e6, help="divergence probes (capped at the size)")
    parser.add_argument("--many", type=float, default=1e5, help="rows of the assert_many commit")
    parser.add_argument("--max-load", default="", help="e.g. postgres=1e6,sqlite=1e7: skip larger loads")
    parser.add_argument("--tmp", type=Path, default=None, help="work folder (default: a temp dir)")
    parser.add_argument("--results", type=Path, default=HERE / "results.json")
    args = parser.parse_args()
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    systems = [s for s in args.systems.split(",") if s]
    skip_load = {k: int(float(v)) for k, v in (kv.split("=") for kv in args.max_load.split(",") if kv)}
    results = json.loads(args.results.read_text()) if args.results.exists() else {"sizes": {}}
    results["machine"] = machine()
    for size in sizes:
        load_before = _load_average()
        with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
            probes = min(int(args.probes), size)
            fig = run_size(size, systems, args.runs, probes, int(args.many), Path(tmp), skip_load)
        fig["load_average"] = {"before": load_before, "after": _load_average()}
        fig["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        results["sizes"][str(size)] = _merged(results["sizes"].get(str(size)), fig)
        args.results.write_text(json.dumps(results, indent=1))
        import report

        # beside the results file: a run into a scratch file leaves the published tables alone
        report.write(results, args.results.parent / "RESULTS.md", args.results.parent / "results.png")
    print(f"\nwrote {args.results}, {args.results.parent / 'RESULTS.md'}, {args.results.parent / 'results.png'}")


if __name__ == "__main__":
    main()
