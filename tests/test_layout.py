"""The layout rules of issue 18, checked on the source tree.

- imports inside ``tempomem`` run one way: no cycle, counting every import statement (inside
  functions and ``TYPE_CHECKING`` blocks too: a cycle of type-only imports is still two
  modules that each need the other to be read);
- no Python module over :data:`MAX_LINES` lines (SQL files have their own limit);
- ``deltalake`` is imported only under ``tempomem/storage/``;
- the store clock is written by the engine only;
- ``tempomem.frames`` is the one reader of caller frames (:func:`frame_readings`);
- ruff's SLF001 (no use of another module's private attributes) is on for the package;
- no module imports another's private names (but those :data:`PRIVATE_IMPORTS_LEFT` lists);
- the features' SQL is in ``.sql`` files of named parts, each part whole statements with its
  values bound as parameters (no hole that text is pasted into);
- the public API matches the snapshot taken before the layout moved
  (``tests/fixtures/api_snapshot.json``, made by ``tests/api_surface.py``).
"""

from __future__ import annotations

import ast
import json
import re
import tomllib
from pathlib import Path

import duckdb
from api_surface import surface

from tempomem.connection import sql_parts

TESTS = Path(__file__).parent
ROOT = TESTS.parent
PACKAGE = ROOT / "tempomem"
MAX_LINES = 400
#: macros.sql holds every view and macro a plain DuckDB session loads; one file per concern
#: keeps the others well under it.
MAX_SQL_LINES = 800
#: The SQL of the features, out of their Python (issue 18), one file per concern.
FEATURE_SQL = ("probes.sql", "reports.sql", "recall.sql", "graph.sql", "queries.sql", "backfill_flags.sql",
               "backfill_replay.sql", "importers.sql", "backfill_input.sql", "backfill_checks.sql",
               "backfill_write.sql", "backfill_parse.sql")


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _source_module(name: str, path: Path, node: ast.ImportFrom) -> str:
    """The dotted name of the module a ``from … import`` of module ``name`` (at ``path``) reads."""
    if not node.level:
        return node.module or ""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    return ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))


def _imported(name: str, path: Path, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The package's modules that one import statement of module ``name`` loads."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    base = _source_module(name, path, node)
    # `from pkg import sub` loads the submodule; only names that are not modules come from pkg
    # itself. A submodule's own parent package is not an edge: Python runs it first anyway.
    subs = {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules}
    others = len(subs) < len(node.names)
    return subs | ({base} if others and base in modules and not name.startswith(f"{base}.") else set())


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, from every import statement in its source."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges |= _imported(name, path, node, modules)
        graph[name] = edges - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_sees_imports_inside_functions() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    tree = ast.parse("def f():\n    from .b import x\n")
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom))
    modules = {"tempomem": Path("__init__.py"), "tempomem.a": Path("a.py"), "tempomem.b": Path("b.py")}
    assert _imported("tempomem.a", Path("a.py"), node, modules) == {"tempomem.b"}


def test_every_relative_import_names_a_module_of_the_package() -> None:
    # A relative import inside a function is only resolved when it runs: a moved module
    # would otherwise fail late, in the one command that uses it.
    modules = _modules()
    unresolved = []
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level and _source_module(name, path, node) not in modules:
                unresolved.append(f"{name}: {'.' * node.level}{node.module or ''}")
    assert unresolved == []


def test_imports_inside_the_package_run_one_way() -> None:
    assert cycles(import_graph()) == []


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
    sql = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.sql")}
    assert {name: n for name, n in sql.items() if n > MAX_SQL_LINES} == {}


def test_only_storage_imports_deltalake() -> None:
    users = set()
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(n == "deltalake" or n.startswith("deltalake.") for n in names):
                users.add(name)
    assert users, "the storage package imports deltalake"
    assert {n for n in users if not n.startswith("tempomem.storage")} == set()


def test_only_the_engine_writes_the_clock() -> None:
    writers = {name for name, path in _modules().items()
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.Attribute) and node.attr == "write_clock" and isinstance(node.ctx, ast.Load)}
    assert writers == {"tempomem.engine"}


#: The types a caller's frame may have (Arrow, Polars, DuckDB, pandas), by attribute name.
FRAME_TYPES = {"Table", "RecordBatchReader", "DataFrame", "LazyFrame", "DuckDBPyRelation"}
#: Methods that turn one kind of frame into another.
CONVERSIONS = {"to_arrow", "to_arrow_table", "fetch_arrow_table", "arrow", "collect", "read_all", "to_pandas",
               "df", "pl"}
#: Calls that build a frame from another, or from rows.
BUILDERS = {"from_arrow", "from_pandas", "from_dicts", "from_records", "from_pylist", "from_pydict", "table",
            "DataFrame"}


def frame_readings(source: str) -> list[str]:
    """The places where ``source`` reads a caller's frame itself: any mention of pandas, or, on a
    parameter of the enclosing function, an ``isinstance`` test against a frame type
    (:data:`FRAME_TYPES`), a conversion (:data:`CONVERSIONS`) or a builder (:data:`BUILDERS`).
    The package's own conversions and type checks work on what its queries return or on its
    locals, never on a parameter as given.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            if any(n and n.split(".")[0] == "pandas" for n in names):
                found.append(f"line {node.lineno}: imports pandas")
        elif isinstance(node, ast.Attribute) and node.attr == "from_pandas":
            found.append(f"line {node.lineno}: from_pandas")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("pandas"):
            found.append(f"line {node.lineno}: tells pandas by name")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            params = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)} - {"self", "cls"}
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and _reads_a_frame(call) in params:
                    found.append(f"line {call.lineno}: {ast.unparse(call)}")
    return found


def _reads_a_frame(call: ast.Call) -> str | None:
    """The name of the value ``call`` tests for a frame type, converts or builds a frame from."""
    func, target = call.func, None
    if isinstance(func, ast.Name) and func.id == "isinstance" and len(call.args) == 2:
        if any(isinstance(t, ast.Attribute) and t.attr in FRAME_TYPES for t in ast.walk(call.args[1])):
            target = call.args[0]
    elif isinstance(func, ast.Attribute) and func.attr in CONVERSIONS:
        target = func.value
    elif isinstance(func, ast.Attribute) and func.attr in BUILDERS and call.args:
        target = call.args[0]
    return target.id if isinstance(target, ast.Name) else None


def test_the_frame_rule_sees_each_kind_of_reading() -> None:
    assert frame_readings("def f(rows):\n    return rows.to_arrow()\n")
    assert frame_readings("def f(rows):\n    return pl.from_arrow(rows)\n")
    assert frame_readings("def f(rows):\n    return isinstance(rows, (list, pl.LazyFrame))\n")
    assert frame_readings("def f(rows):\n    return type(rows).__module__.startswith('pandas')\n")
    # what the package does with its own results and locals is not a caller's frame
    assert not frame_readings("def f(con):\n    t = pl.from_arrow(con.sql('SELECT 1').to_arrow_table())\n"
                              "    assert isinstance(t, pl.DataFrame)\n")


def test_only_frames_reads_caller_frames() -> None:
    readings = {name: frame_readings(path.read_text()) for name, path in _modules().items()}
    assert readings.pop("tempomem.frames"), "frames.py reads the frames"
    assert {name: found for name, found in readings.items() if found} == {}


#: Private names a module still imports from another (ruff's SLF001 sees attributes only): left
#: to the owners of the importing modules, which are being changed beside issue 18. The list
#: may only shrink.
PRIVATE_IMPORTS_LEFT: set[str] = set()


def test_no_module_imports_another_modules_private_names() -> None:
    found = set()
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                source = _source_module(name, path, node)
                found |= {f"{name}: {source}.{alias.name}" for alias in node.names
                          if alias.name.startswith("_") and not alias.name.startswith("__") and source != name}
    assert found <= PRIVATE_IMPORTS_LEFT, sorted(found - PRIVATE_IMPORTS_LEFT)


def test_ruff_forbids_private_access_in_the_package() -> None:
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert "SLF001" in lint["select"] or "SLF" in lint["select"]
    assert not any(rule.startswith("SLF") for rule in lint.get("ignore", []))
    for pattern, rules in lint.get("per-file-ignores", {}).items():
        if any(rule.startswith("SLF") for rule in rules):
            assert pattern.startswith(("tests/", "benchmarks/")), f"{pattern} may not ignore SLF001"


def test_the_public_api_matches_the_snapshot() -> None:
    snapshot = json.loads((TESTS / "fixtures" / "api_snapshot.json").read_text())
    assert surface() == snapshot


def test_the_features_sql_is_whole_statements_with_bound_values() -> None:
    con = duckdb.connect()
    for file in FEATURE_SQL:
        parts = sql_parts(file)
        assert parts, f"{file} has no -- @part"
        for name, text in parts.items():
            code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
            # a `{name}` hole would mean Python pastes text into the query; values are `$name`
            assert not re.search(r"\{\w*\}", code), f"{file}: {name} has a hole for pasted text"
            assert con.extract_statements(text), f"{file}: {name} holds no statement"  # raises when it does not parse
