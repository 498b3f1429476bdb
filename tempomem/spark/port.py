"""Derive the Spark SQL of tempomem from the ``.sql`` files DuckDB runs: sqlglot, plus the named
rewrites of :mod:`tempomem.spark.rules`.

Each statement of ``revisions.sql`` and ``macros.sql`` (``CREATE OR REPLACE VIEW`` or ``MACRO``)
is split off with sqlglot's tokenizer, its body parsed as DuckDB SQL, rewritten, and written as
Spark SQL: a view becomes a temporary view, a macro a temporary SQL function with typed
parameters (``RETURNS TABLE`` for a table macro). A few rewrites need the columns a star or a
branch of a union yields; DuckDB itself lists them, binding the body on an empty store (the
same views and macros, no rows), so no column list is kept by hand either.

>>> [p.statement.name for p in port_file("macros.sql")][:3]
['tm_is_empty', 'tm_contains', 'tm_overlaps']
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import duckdb
import sqlglot
from sqlglot import exp, transforms
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import TokenType

from ..connection import bind_files, new_connection, sql_file
from ..errors import TempomemError
from . import rules

#: The files whose statements are ported, in the order Spark must create them.
FILES = ("revisions.sql", "macros.sql")

_HEADER = re.compile(
    r"CREATE\s+OR\s+REPLACE\s+(?P<kind>VIEW|MACRO)\s+(?P<name>\w+)\s*(?:\((?P<params>[^)]*)\))?\s+AS\s+"
    r"(?P<table>TABLE\s+)?(?P<body>.*)\Z", re.S | re.I)


class SparkSQL(Spark):
    """sqlglot's Spark dialect, keeping QUALIFY (rewrite `qualify`)."""

    class Generator(Spark.Generator):
        TRANSFORMS = {**Spark.Generator.TRANSFORMS,  # noqa: RUF012 (sqlglot's own class attribute)
                      exp.Select: transforms.preprocess([transforms.eliminate_distinct_on,
                                                         transforms.unnest_to_explode,
                                                         transforms.any_to_exists])}


class PortError(TempomemError):
    """A statement of the ``.sql`` files that the port cannot carry to Spark."""


@dataclass(frozen=True)
class Statement:
    """One ``CREATE OR REPLACE VIEW/MACRO`` of a ``.sql`` file, as DuckDB reads it."""

    file: str
    name: str
    kind: str                                   # "view" or "macro"
    params: tuple[tuple[str, str | None], ...]  # (name, default SQL or None)
    table: bool                                 # a table macro (or a view)
    body: str


@dataclass(frozen=True)
class Ported:
    """A statement and the Spark SQL derived from it (``body``: the query or expression alone)."""

    statement: Statement
    spark: str
    body: str


def statements(file: str) -> list[Statement]:
    """Every statement of one of the package's ``.sql`` files, in file order."""
    text = sql_file(file)
    out, start = [], 0
    for token in sqlglot.tokenize(text, read="duckdb"):
        if token.token_type == TokenType.SEMICOLON:
            out.append(_statement(file, text[start:token.start]))
            start = token.end + 1
    if text[start:].strip() and _strip_comments(text[start:]).strip():
        out.append(_statement(file, text[start:]))
    return out


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def _statement(file: str, text: str) -> Statement:
    match = _HEADER.match(_strip_comments(text).strip())
    if match is None:
        raise PortError(f"{file}: not a CREATE OR REPLACE VIEW/MACRO statement: {text.strip()[:80]!r}")
    params: list[tuple[str, str | None]] = []
    for part in filter(None, (p.strip() for p in _top_level_split(match["params"] or ""))):
        name, _, default = part.partition(":=")
        params.append((name.strip(), default.strip() or None))
    kind = match["kind"].lower()
    return Statement(file, match["name"], kind, tuple(params), kind == "view" or bool(match["table"]),
                     match["body"].strip())


def _top_level_split(text: str) -> list[str]:
    """``text`` cut at the commas outside brackets and quotes (a default may be a list or map)."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch in "([{":
            depth += 1
        elif not quoted and ch in ")]}":
            depth -= 1
        elif not quoted and depth == 0 and ch == ",":
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


def port_file(file: str) -> list[Ported]:
    """The Spark SQL of every statement of ``file`` not in :data:`rules.LEFT_OUT`."""
    return list(_port_file(file))


@cache
def _port_file(file: str) -> tuple[Ported, ...]:
    signatures = {s.name: s for f in FILES for s in statements(f)}
    ported = []
    for st in statements(file):
        if (file, st.name) in rules.LEFT_OUT:
            continue
        try:
            ported.append(Ported(st, *_create(st, signatures)))
        except PortError:
            raise
        except Exception as exc:  # sqlglot or DuckDB refusing a body: name the statement
            raise PortError(f"{file}: {st.name}: cannot port to Spark SQL: {exc}") from exc
    return tuple(ported)


def port_query(text: str) -> str:
    """The Spark SQL of a DuckDB query with no macro parameters (the analytics of analytics.sql);
    DuckDB's ``$name`` parameters become Spark's ``:name``."""
    tree = sqlglot.parse_one(text, read="duckdb")
    return _rewrite(tree, {}, {}).sql(dialect=SparkSQL)


def _create(st: Statement, signatures: dict[str, Statement]) -> tuple[str, str]:
    params = {name: default for name, default in st.params}
    for name in params:
        if name not in rules.PARAM_TYPES and not _is_table_param(st, name):
            raise PortError(f"{st.file}: {st.name}: parameter {name!r} has no type in rules.PARAM_TYPES")
    tree = sqlglot.parse_one(st.body, read="duckdb")
    tree = _query_table_default(tree, st)
    kept = {n: d for n, d in params.items() if not _is_table_param(st, n)}
    body = _rewrite(tree, kept, signatures).sql(dialect=SparkSQL)
    if st.kind == "view":
        return f"CREATE OR REPLACE TEMPORARY VIEW {st.name} AS {body}", body
    decl = ", ".join(
        f"{rules.PARAM_PREFIX}{n} {rules.PARAM_TYPES[n][0]}" + (f" DEFAULT {d}" if d is not None else "")
        for n, d in kept.items())
    returns = "TABLE" if st.table else rules.SCALAR_RETURNS.get(st.name)
    if returns is None:
        raise PortError(f"{st.file}: {st.name}: scalar macro with no return type in rules.SCALAR_RETURNS")
    return f"CREATE OR REPLACE TEMPORARY FUNCTION {st.name}({decl}) RETURNS {returns} RETURN {body}", body


def _is_table_param(st: Statement, name: str) -> bool:
    return f"query_table({name})" in st.body.replace(" ", "")


# -- the rewrites ------------------------------------------------------------------------------

def _query_table_default(tree: exp.Expression, st: Statement) -> exp.Expression:
    defaults = {n: d for n, d in st.params if _is_table_param(st, n)}
    for call in list(tree.find_all(exp.Anonymous)):
        if call.name.lower() == "query_table":
            arg = call.expressions[0]
            default = defaults.get(arg.name)
            if default is None:
                raise PortError(f"{st.file}: {st.name}: query_table({arg.sql()}) has no default table")
            call.replace(exp.to_table(default.strip("'")))
    # a Table node wrapping the replaced call keeps its alias; unwrap Table(Table(...))
    for table in list(tree.find_all(exp.Table)):
        if isinstance(table.this, exp.Table):
            inner = table.this
            table.set("this", inner.this)
    return tree


def _named_arguments(tree: exp.Expression, params: dict, signatures: dict[str, Statement]) -> exp.Expression:
    for call in list(tree.find_all(exp.Anonymous)):
        callee = signatures.get(call.name)
        named = [a for a in call.expressions if isinstance(a, exp.PropertyEQ | exp.Kwarg)]
        if callee is None or not named:
            continue
        order = [n for n, _ in callee.params]
        given = {a.this.name: a.expression for a in named}
        positional = [a for a in call.expressions if not isinstance(a, exp.PropertyEQ | exp.Kwarg)]
        args = positional + [given.get(n, exp.Null()) for n in order[len(positional):]]
        while args and len(args) > len(positional) and order[len(args) - 1] not in given:
            args.pop()  # trailing defaults stay defaults
        call.set("expressions", args)
    return tree


def _window_macros(tree: exp.Expression, signatures: dict[str, Statement]) -> exp.Expression:
    """Each call of a scalar macro whose body is one window expression, written out in place."""
    for call in list(tree.find_all(exp.Anonymous)):
        callee = signatures.get(call.name)
        if callee is None or callee.table:
            continue
        body = sqlglot.parse_one(callee.body, read="duckdb")
        if not isinstance(body, exp.Window):
            continue
        args = dict(zip((name for name, _ in callee.params), call.expressions, strict=True))
        for column in list(body.find_all(exp.Column)):
            if not column.table and column.name in args:
                column.replace(args[column.name].copy())
        call.replace(body)
    return tree


@cache
def _binder() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection on an empty store, with every view and macro: it lists the columns a
    star or a branch yields, which the star and union rewrites spell out."""
    con = new_connection()
    bind_files(con, (), first=True)
    con.execute("CREATE TABLE _tm_probes (_tm_row BIGINT, scope VARCHAR, subject VARCHAR, predicate VARCHAR, "
                "valid_at TIMESTAMPTZ, believed_at TIMESTAMPTZ)")
    return con


def _columns(root: exp.Expression, node: exp.Expression, params: dict) -> list[str]:
    """The column names DuckDB gives ``node`` (a query inside ``root``), with root's CTEs in scope
    and the macro parameters as typed NULLs."""
    probe = node.copy()
    with_ = root.args.get("with_")
    if with_ is not None and node is not root:
        probe.set("with_", with_.copy())
    for col in list(probe.find_all(exp.Column)):
        if not col.table and col.name in params:
            col.replace(exp.cast(exp.Null(), exp.DataType.build(rules.PARAM_TYPES[col.name][1], dialect="duckdb")))
    return list(_binder().sql(probe.sql(dialect="duckdb")).columns)


def _qualifier(select: exp.Select) -> str | None:
    sources = [select.args.get("from_"), *(select.args.get("joins") or [])]
    aliases = [s.this.alias_or_name for s in sources if s is not None]
    return aliases[0] if len(aliases) == 1 else None


def _star_replace(root: exp.Expression, params: dict) -> exp.Expression:
    for select in list(root.find_all(exp.Select)):
        out, changed = [], False
        for proj in select.expressions:
            star = proj.this if isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star) else proj
            if isinstance(star, exp.Star) and star.args.get("replace"):
                only = select.copy()
                only.set("expressions", [proj.copy()])
                replaced = {a.alias: a.this for a in star.args["replace"]}
                table = proj.table if isinstance(proj, exp.Column) else None
                for name in _columns(root, only, params):
                    out.append(exp.alias_(replaced[name].copy(), name) if name in replaced
                               else exp.column(name, table=table))
                changed = True
            elif isinstance(proj, exp.Columns):
                only = select.copy()
                only.set("expressions", [proj.copy()])
                table = _qualifier(select)
                out.extend(exp.column(n, table=table) for n in _columns(root, only, params))
                changed = True
            else:
                out.append(proj)
        if changed:
            select.set("expressions", out)
    return root


def _union_by_name(root: exp.Expression, params: dict) -> exp.Expression:
    for union in list(root.find_all(exp.Union)):
        if not union.args.get("by_name") or (union.parent is not None and _chained(union)):
            continue
        branches = _flatten(union)
        names: list[str] = []
        listed = []
        for branch in branches:
            cols = _columns(root, branch, params)
            listed.append(cols)
            names.extend(c for c in cols if c not in names)
        rebuilt = None
        for branch, cols in zip(branches, listed, strict=True):
            sub = exp.select(*[exp.column(n, table="_tm_u") if n in cols else exp.alias_(exp.Null(), n)
                               for n in names]).from_(exp.Subquery(this=branch.copy(), alias=exp.TableAlias(
                                   this=exp.to_identifier("_tm_u"))))
            rebuilt = sub if rebuilt is None else exp.Union(this=rebuilt, expression=sub, distinct=False)
        if union.args.get("with_") is not None:
            rebuilt.set("with_", union.args["with_"])
        union.replace(rebuilt)
        if union is root:
            root = rebuilt
    return root


def _chained(union: exp.Union) -> bool:
    """Whether ``union`` is the left part of a longer BY NAME chain (handled with the chain)."""
    return isinstance(union.parent, exp.Union) and union.parent.args.get("by_name") and union.arg_key == "this"


def _flatten(union: exp.Expression) -> list[exp.Expression]:
    if isinstance(union, exp.Union) and union.args.get("by_name"):
        return _flatten(union.this) + _flatten(union.expression)
    return [union]


def _parameter_names(tree: exp.Expression, params: dict) -> exp.Expression:
    for col in list(tree.find_all(exp.Column)):
        if not col.table and col.name in params:
            col.set("this", exp.to_identifier(rules.PARAM_PREFIX + col.name))
    return tree


def _fn(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def _syntax(node: exp.Expression) -> exp.Expression:
    """The rewrites that need nothing but the node (list_length … ordered_list)."""
    if isinstance(node, exp.Length):
        return _fn("size", node.this)
    if isinstance(node, exp.Anonymous) and node.name.lower() == "epoch_us":
        return _fn("unix_micros", *node.expressions)
    if isinstance(node, exp.Anonymous) and node.name.lower() == "make_timestamptz" and len(node.expressions) == 1:
        return _fn("timestamp_micros", *node.expressions)
    if isinstance(node, exp.TimeToUnix):
        arg = node.this
        if (isinstance(arg, exp.Cast) and arg.to.is_type("interval")) or (isinstance(arg, exp.Column) and \
                arg.name in rules.INTERVAL_COLUMNS):
            arg = exp.Add(this=exp.cast(exp.Literal.string("1970-01-01 00:00:00"), "TIMESTAMP"), expression=arg)
        return exp.Div(this=_fn("unix_micros", arg), expression=exp.Literal.number("1000000.0"))
    if isinstance(node, exp.Cast) and node.to.is_type("interval"):
        return node.this
    if isinstance(node, exp.Anonymous) and node.name.lower() == "error":
        return _fn("raise_error", *node.expressions)
    if isinstance(node, exp.PercentileDisc):
        within = exp.WithinGroup(this=_fn("percentile_disc", node.expression),
                                 expression=exp.Order(expressions=[exp.Ordered(this=node.this)]))
        return exp.cast(within, "BIGINT")
    if isinstance(node, exp.ArrayAgg) and isinstance(node.this, exp.Order):
        keys: list[exp.Expression] = []
        for i, key in enumerate(node.this.expressions):
            if key.args.get("desc"):
                raise PortError("list(... ORDER BY ... DESC) has no rewrite")
            test = exp.Is(this=key.this.copy(), expression=exp.Null())
            # false sorts before true: NOT (k IS NULL) puts NULL keys first
            keys += [exp.Literal.string(f"n{i}"), exp.not_(test) if key.args.get("nulls_first") else test,
                     exp.Literal.string(f"k{i}"), key.this]
        struct = _fn("named_struct", *keys, exp.Literal.string("v"), node.this.this)
        lam = exp.Lambda(this=exp.column("v", table="e"), expressions=[exp.to_identifier("e")])
        return _fn("transform", _fn("sort_array", _fn("collect_list", struct)), lam)
    return node


#: The rewrites by name (rules.REWRITES gives the order and the reasons).
REWRITES: dict[str, Callable[..., exp.Expression]] = {
    "query_table_default": lambda tree, params, sigs: tree,   # applied in _create, before the rest
    "named_arguments": lambda tree, params, sigs: _named_arguments(tree, params, sigs),
    "window_macros": lambda tree, params, sigs: _window_macros(tree, sigs),
    "star_replace": lambda tree, params, sigs: _star_replace(tree, params),
    "columns_lambda": lambda tree, params, sigs: tree,        # spelled out with star_replace
    "union_by_name": lambda tree, params, sigs: _union_by_name(tree, params),
    "parameter_names": lambda tree, params, sigs: _parameter_names(tree, params),
    "list_length": lambda tree, params, sigs: tree,           # the rest: _syntax, in one pass
    "epoch": lambda tree, params, sigs: tree,
    "timestamp_micros": lambda tree, params, sigs: tree,
    "interval_cast": lambda tree, params, sigs: tree,
    "error": lambda tree, params, sigs: tree,
    "quantile_disc": lambda tree, params, sigs: tree,
    "ordered_list": lambda tree, params, sigs: _bottom_up(tree, _syntax),
    "qualify": lambda tree, params, sigs: tree,               # SparkSQL, the dialect written
}


def _bottom_up(tree: exp.Expression, fun: Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
    """``fun`` applied until nothing changes: sqlglot's transform does not descend into a node it
    has just replaced, whose children may need a rewrite too."""
    for _ in range(10):
        before = tree.sql(dialect="duckdb")
        tree = tree.transform(fun, copy=False)
        if tree.sql(dialect="duckdb") == before:
            return tree
    raise PortError(f"rewrites do not settle on {tree.sql()[:80]!r}")


def _rewrite(tree: exp.Expression, params: dict, signatures: dict[str, Statement]) -> exp.Expression:
    for name, _why in rules.REWRITES:
        tree = REWRITES[name](tree, params, signatures)
    return tree
