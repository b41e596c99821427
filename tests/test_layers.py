"""The package's layering: what a low layer loads, and the module import graph.

The import graph is read from the source with `ast` (every `import`/`from ... import` at any depth,
inside functions and `TYPE_CHECKING` blocks too), so an import moved into a function to dodge a cycle
still counts as an edge.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import iceduck


def _loaded_after(statement: str) -> set[str]:
    """Top-level module names in sys.modules after running `statement` in a fresh interpreter."""
    code = f"{statement}\nimport sys\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_spec_layer_does_not_load_duckdb() -> None:
    loaded = _loaded_after("import iceduck.spec.types, iceduck.spec.table_metadata, iceduck.spec.manifest")
    assert "duckdb" not in loaded
    assert "pyarrow" not in loaded
    assert "duckdb" not in _loaded_after("import iceduck.puffin, iceduck.io.fileio, iceduck.catalog.locate")


def test_the_spec_layer_does_no_process_io() -> None:
    # codecs are pure: holding stderr (fd 2) for native decoders is iceduck._stderr's, at the bottom
    io_calls = {"dup", "dup2", "write", "pread", "ftruncate", "lseek", "open", "remove", "replace"}
    found = []
    for path in sorted((PACKAGE / "spec").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found += [f"{path.name}: import {n}" for n in names if n.split(".")[0] in ("tempfile", "shutil")]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "os"
                and node.func.attr in io_calls
            ):
                found.append(f"{path.name}:{node.lineno}: os.{node.func.attr}")
    assert found == []


def test_package_root_names_load_on_first_use() -> None:
    assert "duckdb" not in _loaded_after("import iceduck; iceduck.__version__")
    assert "duckdb" in _loaded_after("import iceduck; iceduck.connect")
    assert set(iceduck.__all__) <= set(dir(iceduck))
    assert callable(iceduck.register) and callable(iceduck.connect) and isinstance(iceduck.Lake, type)


# -- the import graph ---------------------------------------------------------------------------------

PACKAGE = Path(iceduck.__file__).resolve().parent


def _modules(package: Path) -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, is a package's __init__)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the iceduck modules it imports anywhere in its source (functions, TYPE_CHECKING too).

    `from a.b import c` counts as importing `a.b.c` when that is a module, else `a.b`; relative
    imports resolve against the importing module's package. `from iceduck import c` (or `from .. import
    c` that lands on the root) also counts as importing the root `iceduck`: the name is looked up on the
    package face, whose lazy names load the top layers. Implicit imports of parent packages
    (running `a/__init__.py` before `a.b`) are not edges: they are cycles only if `__init__` imports
    back, which its own edges show.
    """
    modules = _modules(package)
    root = package.name

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    targets.add(full if full in modules else known(source))
                if source == root:
                    targets.add(root)
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    # the checker itself, on a package with a cycle hidden in a function and one in a relative import
    pkg = tmp_path / "iceduck"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import b\n")
    (pkg / "a.py").write_text("def f():\n    from iceduck.sub import b\n")
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import iceduck.a\n"
    )
    (pkg / "sub" / "c.py").write_text("from .. import a\nfrom .b import x\n")
    graph = import_graph(pkg)
    assert graph["iceduck.a"] == {"iceduck.sub.b"}
    assert graph["iceduck.sub"] == {"iceduck.sub.b"}
    assert graph["iceduck.sub.b"] == {"iceduck.a"}
    assert graph["iceduck.sub.c"] == {"iceduck", "iceduck.a", "iceduck.sub.b"}  # `from .. import a`: the root
    assert import_cycles(graph) == [["iceduck.a", "iceduck.sub.b"]]


def test_no_import_cycles_among_iceduck_modules() -> None:
    graph = import_graph()
    assert {"iceduck.tables", "iceduck.duckdb.capture"} <= graph["iceduck.sql.router"]  # the graph is read
    cycles = import_cycles(graph)
    described = ["; ".join(f"{m} -> {', '.join(sorted(graph[m] & set(c)))}" for m in c) for c in cycles]
    assert not cycles, "import cycles:\n" + "\n".join(described)


def test_a_shell_query_imports_only_what_it_uses(tmp_path: Path) -> None:
    # `iceduck -c "select 1"`: no maintenance actions, no subcommand modules, no PyIceberg, no pandas
    code = (
        "import sys\nfrom iceduck.cli import main\n"
        f"assert main(['--warehouse', {str(tmp_path / 'wh')!r}, '--create', '-c', 'select 41 + 1']) == 0\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    lines = out.stdout.splitlines()
    assert any("42" in line for line in lines[:-1])  # the query ran
    loaded = set(lines[-1].split())
    assert "iceduck.duckdb.binding" in loaded and "iceduck.sql.router" in loaded
    # what `select 1` does not use: the write stack, maintenance beyond health's column names, the
    # ORC/Avro copy readers, pyarrow's compute module, polars (manifest decoding), subcommands
    heavy = {
        "iceduck.maintenance.actions",
        "iceduck.maintenance.rewrite_data",
        "iceduck.maintenance.commits",
        "iceduck.maintenance.audit",
        "iceduck.maintenance.reachability",
        "iceduck.maintenance.health.metrics",
        "iceduck.maintenance.health.rules",
        "iceduck.maintenance_cli",
        "iceduck.transaction.operations",
        "iceduck.transaction.row_level",
        "iceduck.transaction.write_input",
        "iceduck.transaction.create",
        "iceduck.transaction.evolve",
        "iceduck.transaction.commit",
        "iceduck.transaction.changes",
        "iceduck.write.parquet",
        "iceduck.write.deletes",
        "iceduck.read.orc",
        "iceduck.read.avro",
        "iceduck.demo",
        "iceduck.describe",
        "iceduck.serve.server",
        "pyarrow.compute",
        "pyarrow.orc",
        "polars",
        "pyiceberg",
        "pandas",
    }
    assert not heavy & loaded, sorted(heavy & loaded)


def test_maintenance_package_names_load_on_first_use() -> None:
    code = (
        "import sys, iceduck.maintenance.health as h, iceduck.maintenance as m\n"
        "print('iceduck.maintenance.actions' in sys.modules)\n"
        "m.Maintainer\n"
        "print('iceduck.maintenance.actions' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


# The layer map of docs/architecture.md: a module may import its own layer and those below. Every
# entry is a top-level module or folder: a folder sits on one layer (a front end kept in a lower
# layer's folder, as the REST server and `iceduck maintain` once were, makes that folder import upward).
LAYERS: dict[str, int] = {
    "iceduck._gc": 0,
    "iceduck._stderr": 0,
    "iceduck._lazy": 0,
    "iceduck._version": 0,
    "iceduck.errors": 0,
    "iceduck.spec": 1,
    "iceduck.vocabulary": 2,
    "iceduck.io": 3,
    "iceduck.puffin": 3,
    "iceduck.catalog": 3,
    "iceduck.rest": 3,
    "iceduck.table": 4,
    "iceduck.expr": 5,
    "iceduck.scan": 5,
    "iceduck.read": 5,
    "iceduck.inspect": 5,
    "iceduck.write": 6,
    "iceduck.transaction": 6,
    "iceduck.maintenance": 7,
    "iceduck.duckdb": 8,
    "iceduck.tables": 9,
    "iceduck.sql": 9,
    "iceduck.lake": 9,
    "iceduck.shell": 10,
    "iceduck.completion": 10,
    "iceduck.cli": 10,
    "iceduck.commands": 10,
    "iceduck.maintenance_cli": 10,
    "iceduck.demo": 10,
    "iceduck.describe": 10,
    "iceduck.describe_cli": 10,
    "iceduck.catalog_cli": 10,
    "iceduck.serve": 10,
}


def layer_of(module: str) -> int | None:
    """The layer of a module by its top-level module or folder, None when that is not listed."""
    return LAYERS.get(".".join(module.split(".")[:2]))


def test_each_folder_sits_on_one_layer() -> None:
    assert [p for p in LAYERS if p.count(".") != 1] == []


def test_every_import_points_down_the_layer_map() -> None:
    graph = import_graph()
    unplaced = sorted(m for m in graph if m != "iceduck" and layer_of(m) is None)
    assert not unplaced, f"place these modules in LAYERS (and docs/architecture.md's layer map): {unplaced}"
    upward = [
        f"{m} (layer {layer_of(m)}) imports {d} (layer {layer_of(d)})"
        for m, deps in sorted(graph.items())
        if m != "iceduck"
        for d in sorted(deps)
        if d != "iceduck" and (layer_of(d) or 0) > (layer_of(m) or 0)
    ]
    assert not upward, "imports pointing up the layer map:\n" + "\n".join(upward)
    # the package root is imported by nothing inside the package (it loads the top layers)
    assert not [m for m, deps in graph.items() if "iceduck" in deps]


def test_front_ends_share_iceduck_commands_and_do_not_import_each_other() -> None:
    graph = import_graph()
    fronts = [
        "iceduck.demo",
        "iceduck.describe_cli",
        "iceduck.maintenance_cli",
        "iceduck.catalog_cli",
        "iceduck.serve.server",
    ]
    assert {m: "iceduck.cli" in graph[m] for m in fronts} == dict.fromkeys(fronts, False)
    assert all("iceduck.commands" in graph[m] for m in fronts)
