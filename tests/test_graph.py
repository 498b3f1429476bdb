"""Typed-link traversal over one time slice, and the multi-hop dependency question (issue 7)."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import ts

import tempomem as tm

OUTAGE = "2026-03-15T08:00:00Z"


def _edge(subject: str, obj: str, link_type: str = "entity", weight: float = 1.0, **extra) -> dict:
    return {"subject": subject, "predicate": extra.pop("predicate", "links_to"), "object": obj,
            "link_type": link_type, "weight": weight, **extra}


@pytest.fixture
def graph_mem(store_path, clock) -> tm.Memory:
    return tm.open(store_path, create=True, clock=clock,
                   predicates={"links_to": "multi", "depends_on": "multi"})


def _facts_of(mem: tm.Memory) -> dict[tuple[str, str], str]:
    rows = mem.sql("SELECT subject, object, fact_id FROM facts").fetchall()
    return {(s, o): f for s, o, f in rows}


def test_causal_neighbour_ranks_above_semantic_at_equal_depth(graph_mem: tm.Memory, clock) -> None:
    clock.set("2026-02-01T00:00:00Z")
    graph_mem.assert_many([
        _edge("a", "s", "semantic"),
        _edge("a", "c", "causal"),
        _edge("a", "t", "temporal"),
        _edge("s", "x"), _edge("c", "x"), _edge("t", "x"),  # make s, c, t, x entities with facts
        {"subject": "x", "predicate": "kind", "object": "leaf"},
    ])
    out = tm.graph.traverse(graph_mem, "a", depth=1)
    assert out["entity"].to_list() == ["c", "t", "s"]
    assert out["depth"].to_list() == [1, 1, 1]
    assert out["score"].to_list() == pytest.approx([1.5, 1.0, 0.8])
    ids = _facts_of(graph_mem)
    assert out["path"].to_list() == [[ids["a", "c"]], [ids["a", "t"]], [ids["a", "s"]]]
    # Depth 2 reaches x three ways; the best path is through the causal link: 1.5 × 1.2.
    x = tm.graph.traverse(graph_mem, "a", depth=2).filter(pl.col("entity") == "x").row(0, named=True)
    assert x["depth"] == 2 and x["score"] == pytest.approx(1.8)
    assert x["path"] == [ids["a", "c"], ids["c", "x"]]
    # Multipliers are a parameter: make semantic links the strongest.
    flipped = tm.graph.traverse(graph_mem, "a", depth=1, multipliers={"semantic": 2.0})
    assert flipped["entity"].to_list() == ["s", "c", "t"]


def test_best_path_may_be_longer_than_the_shortest(graph_mem: tm.Memory, clock) -> None:
    clock.set("2026-02-01T00:00:00Z")
    graph_mem.assert_many([
        _edge("a", "b", "entity"), _edge("b", "c", "causal"), _edge("a", "c", "semantic", weight=0.5),
        _edge("c", "a", "causal"),  # a cycle back to the start: never walked twice
    ])
    ids = _facts_of(graph_mem)
    out = tm.graph.traverse(graph_mem, "a", depth=3)
    assert out["entity"].to_list() == ["c", "b"]
    c = out.row(0, named=True)
    assert c["depth"] == 1  # shortest: the direct semantic link (0.8 × 0.5 = 0.4)
    assert c["score"] == pytest.approx(1.2 * 1.5)  # best: a -> b -> c
    assert c["path"] == [ids["a", "b"], ids["b", "c"]]


def test_ended_or_not_yet_believed_links_are_not_traversed(graph_mem: tm.Memory, clock) -> None:
    clock.set("2026-01-05T09:12:00Z")
    graph_mem.assert_many([
        _edge("checkout-api", "payments-db", predicate="depends_on", valid_from="2025-11-01"),
        _edge("checkout-api", "legacy-auth", predicate="depends_on", valid_from="2025-01-01", valid_to="2026-03-01"),
        _edge("legacy-auth", "ldap", predicate="depends_on", valid_from="2025-01-01"),
        {"subject": "payments-db", "predicate": "version", "object": "15"},
        {"subject": "ldap", "predicate": "version", "object": "3"},
    ])
    clock.set("2026-03-16T10:30:00Z")  # learned late: valid since the 10th
    graph_mem.assert_fact("checkout-api", "depends_on", "session-cache", valid_from="2026-03-10")
    graph_mem.assert_fact("session-cache", "ttl", "300s", valid_from="2026-03-10")

    at_outage = tm.graph.traverse(graph_mem, "checkout-api", depth=3, valid_at=OUTAGE)
    assert sorted(at_outage["entity"]) == ["payments-db", "session-cache"]  # legacy-auth ended on 03-01
    before_end = tm.graph.traverse(graph_mem, "checkout-api", depth=3, valid_at="2026-02-01")
    assert sorted(before_end["entity"]) == ["ldap", "legacy-auth", "payments-db"]
    assert before_end.filter(pl.col("entity") == "ldap")["depth"].to_list() == [2]
    as_agent_knew = tm.graph.traverse(graph_mem, "checkout-api", depth=3, valid_at=OUTAGE, believed_at=OUTAGE)
    assert as_agent_knew["entity"].to_list() == ["payments-db"]


def test_retracted_link_is_not_traversed(graph_mem: tm.Memory, clock) -> None:
    clock.set("2026-02-01T00:00:00Z")
    wrong = graph_mem.assert_fact("a", "links_to", "b")
    graph_mem.assert_fact("b", "kind", "service")
    clock.set("2026-02-02T00:00:00Z")
    graph_mem.correct(wrong.fact_id, reason="never linked")
    assert tm.graph.traverse(graph_mem, "a").is_empty()
    assert tm.graph.traverse(graph_mem, "a", believed_at="2026-02-01T12:00Z")["entity"].to_list() == ["b"]


def test_only_entities_are_nodes(graph_mem: tm.Memory, clock) -> None:
    clock.set("2026-02-01T00:00:00Z")
    graph_mem.assert_many([
        {"subject": "checkout-api", "predicate": "replicas", "object": "4"},
        _edge("checkout-api", "payments-db"),
        {"subject": "payments-db", "predicate": "engine", "object": "postgres"},
    ])
    assert tm.graph.traverse(graph_mem, "checkout-api", depth=3)["entity"].to_list() == ["payments-db"]


def test_sql_macro_and_python_api_give_identical_results(graph_mem: tm.Memory, clock) -> None:
    clock.set("2026-02-01T00:00:00Z")
    graph_mem.assert_many([
        _edge("a", "b", "causal", 0.9), _edge("a", "c", "semantic"), _edge("b", "d", "temporal", 0.7),
        _edge("c", "d", "entity", 0.3), _edge("d", "e", "causal"), _edge("b", "a", "entity"),
        {"subject": "e", "predicate": "kind", "object": "leaf"},
    ])
    py = tm.graph.traverse(graph_mem, "a", depth=3, valid_at="2026-02-02", believed_at="2026-02-02")
    sql = graph_mem.connect().sql(
        "SELECT * FROM tm_traverse('a', 3, TIMESTAMPTZ '2026-02-02', TIMESTAMPTZ '2026-02-02')").pl()
    assert py.equals(sql)
    # b: causal 1.5 × 0.9 = 1.35; c: semantic 0.8; d: via b 1.35 × 0.7 = 0.945 (via c only
    # 0.8 × 1.2 × 0.3 = 0.288); e: 0.945 × 1.5 = 1.4175. b -> a goes back to the start: not walked.
    assert py["entity"].to_list() == ["e", "b", "d", "c"]
    assert py["depth"].to_list() == [3, 1, 2, 1]
    assert py["score"].to_list() == pytest.approx([1.4175, 1.35, 0.945, 0.8])


def _walked(mem: tm.Memory, start: str, at: str, *, believed_at: str | None = None) -> list[str]:
    """Entities reached in 3 hops, by the Python API; the SQL macro must give the same frame."""
    py = tm.graph.traverse(mem, start, depth=3, valid_at=at, believed_at=believed_at or at)
    sql = mem.connect().sql("SELECT * FROM tm_traverse($s, 3, $v, $b)",
                            params={"s": start, "v": ts(at), "b": ts(believed_at or at)}).pl()
    assert py.equals(sql)
    return py["entity"].to_list()


def test_traversal_follows_every_new_version_and_rewinds_past_it(graph_mem: tm.Memory, clock, store_path) -> None:
    # tempomem's connection keeps the links in memory; each commit must be seen, none served stale.
    clock.set("2026-02-01T00:00:00Z")
    first = graph_mem.assert_many([_edge("a", "b", "causal"), _edge("b", "c"),
                                   {"subject": "c", "predicate": "kind", "object": "db"}])
    assert _walked(graph_mem, "a", "2026-02-01T06:00Z") == ["c", "b"]  # c: 1.5 × 1.2 = 1.8; b: 1.5
    clock.set("2026-02-02T00:00:00Z")
    graph_mem.assert_fact("a", "links_to", "d", link_type="semantic")  # d is no entity yet: a leaf
    assert _walked(graph_mem, "a", "2026-02-02T06:00Z") == ["c", "b"]
    clock.set("2026-02-03T00:00:00Z")
    other = tm.open(store_path, clock=clock)  # another writer: only the store version tells
    other.assert_many([{"subject": "d", "predicate": "kind", "object": "cache"},
                       _edge("c", "e", "temporal", 0.5), {"subject": "e", "predicate": "kind", "object": "queue"}])
    # e: 1.8 × 0.5 = 0.9 at depth 3; d (semantic, 0.8) is a node now that a fact about it is held.
    assert _walked(graph_mem, "a", "2026-02-03T06:00Z") == ["c", "b", "e", "d"]
    # Rewound to before the c -> e link was believed; d counts as an entity at every belief time
    # (entities are the subjects of the store's facts), so a -> d is walked.
    assert _walked(graph_mem, "a", "2026-02-03T06:00Z", believed_at="2026-02-02T12:00Z") == ["c", "b", "d"]
    clock.set("2026-02-04T00:00:00Z")
    b_to_c = next(f for f in first if f.subject == "b")
    other.correct(b_to_c.fact_id, reason="b never used c")
    assert _walked(graph_mem, "a", "2026-02-04T06:00Z") == ["b", "d"]  # c and e hung on b -> c
    assert _walked(graph_mem, "a", "2026-02-04T06:00Z", believed_at="2026-02-03T12:00Z") == ["c", "b", "e", "d"]
    clock.set("2026-02-05T00:00:00Z")
    graph_mem.forget("e", reason="erasure request")  # erased: gone from every belief time
    assert _walked(graph_mem, "a", "2026-02-05T06:00Z", believed_at="2026-02-03T12:00Z") == ["c", "b", "d"]


def test_bad_traversal_input(graph_mem: tm.Memory) -> None:
    with pytest.raises(tm.TempomemError, match="depth"):
        tm.graph.traverse(graph_mem, "a", depth=0)
    with pytest.raises(tm.TempomemError, match="multipliers: unknown link_type 'kausal'"):
        tm.graph.traverse(graph_mem, "a", multipliers={"kausal": 2.0})
    with pytest.raises(tm.TempomemError, match="start"):
        tm.graph.traverse(graph_mem, "")


@pytest.fixture
def incident(graph_mem: tm.Memory, clock) -> tm.Memory:
    """checkout-api's dependencies around the 2026-03-15T08:00Z outage."""
    clock.set("2026-01-05T09:12:00Z")
    graph_mem.assert_many([
        _edge("checkout-api", "payments-db", "causal", predicate="depends_on", valid_from="2025-11-01"),
        _edge("checkout-api", "session-cache", predicate="depends_on", valid_from="2026-01-05"),
        _edge("session-cache", "redis-cluster", predicate="depends_on", valid_from="2026-01-05"),
        _edge("checkout-api", "legacy-auth", predicate="depends_on", valid_from="2025-01-01", valid_to="2026-03-01"),
        {"subject": "payments-db", "predicate": "version", "object": "15", "valid_from": "2025-01-01"},
        {"subject": "session-cache", "predicate": "ttl", "object": "300s", "valid_from": "2025-06-01"},
        {"subject": "redis-cluster", "predicate": "nodes", "object": "3", "valid_from": "2025-06-01"},
        {"subject": "legacy-auth", "predicate": "version", "object": "1", "valid_from": "2025-01-01"},
        {"subject": "checkout-api", "predicate": "owner", "object": "payments-team", "valid_from": "2025-01-01"},
    ])
    clock.set("2026-03-13T10:00:00Z")  # a change outside the 24-hour window
    graph_mem.assert_fact("redis-cluster", "nodes", "5", valid_from="2026-03-13T09:00Z")
    clock.set("2026-03-15T02:00:00Z")  # known before the outage
    graph_mem.assert_fact("payments-db", "version", "16", valid_from="2026-03-14T23:00Z")
    graph_mem.assert_fact("legacy-auth", "version", "2", valid_from="2026-03-15T01:00Z")  # no longer a dependency
    clock.set("2026-03-15T12:00:00Z")  # learned after the outage
    graph_mem.assert_fact("session-cache", "ttl", "30s", valid_from="2026-03-15T06:00Z")
    return graph_mem


def test_which_dependencies_changed_before_the_outage_and_were_they_known(incident: tm.Memory) -> None:
    out = tm.graph.dependency_changes(incident, "checkout-api", OUTAGE, "24 hours")
    rows = out.select("dependency", "depth", "object", "change", "changed_at", "learned_at", "known_at_time").rows()
    assert rows == [
        ("payments-db", 1, "15", "ended", ts("2026-03-14T23:00Z"), ts("2026-03-15T02:00Z"), True),
        ("payments-db", 1, "16", "started", ts("2026-03-14T23:00Z"), ts("2026-03-15T02:00Z"), True),
        ("session-cache", 1, "300s", "ended", ts("2026-03-15T06:00Z"), ts("2026-03-15T12:00Z"), False),
        ("session-cache", 1, "30s", "started", ts("2026-03-15T06:00Z"), ts("2026-03-15T12:00Z"), False),
    ]
    # The same question in SQL, through the macro, gives the same frame.
    sql = incident.connect().sql(
        "SELECT * FROM dependency_changes('checkout-api', TIMESTAMPTZ '2026-03-15 08:00:00+00', '24 hours')").pl()
    assert sql.equals(out)
    # A 3-day window also reaches the redis-cluster change, two hops away.
    wide = tm.graph.dependency_changes(incident, "checkout-api", OUTAGE, "3 days")
    redis = wide.filter(pl.col("dependency") == "redis-cluster")
    assert redis.select("depth", "object", "change", "known_at_time").rows() == [
        (2, "3", "ended", True), (2, "5", "started", True)]
    with pytest.raises(tm.TempomemError, match="lookback"):
        tm.graph.dependency_changes(incident, "checkout-api", OUTAGE, "a day or so")


def test_cli_traverse(graph_mem: tm.Memory, clock, store_path) -> None:
    import json

    from click.testing import CliRunner

    from tempomem.cli import cli

    clock.set("2026-02-01T00:00:00Z")
    graph_mem.assert_many([_edge("a", "c", "causal"), _edge("a", "s", "semantic"),
                           {"subject": "c", "predicate": "kind", "object": "x"},
                           {"subject": "s", "predicate": "kind", "object": "x"}])
    out = CliRunner().invoke(cli, ["--store", str(store_path), "traverse", "a", "--at", "2026-02-02", "--json"])
    assert out.exit_code == 0, out.output
    assert [(r["entity"], r["depth"], r["score"]) for r in json.loads(out.output)] == [("c", 1, 1.5), ("s", 1, 0.8)]
