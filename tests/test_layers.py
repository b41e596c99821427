"""The package's layering: what a low layer loads, and the module import graph.

The import graph is read from the source with `ast` (every `import`/`from ... import` at any depth,
inside functions and `TYPE_CHECKING` blocks too), so an import moved into a function to dodge a cycle
still counts as an edge.
"""

from __future__ import annotations

import subprocess
import sys

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


def test_package_root_names_load_on_first_use() -> None:
    assert "duckdb" not in _loaded_after("import iceduck; iceduck.__version__")
    assert "duckdb" in _loaded_after("import iceduck; iceduck.connect")
    assert set(iceduck.__all__) <= set(dir(iceduck))
    assert callable(iceduck.register) and callable(iceduck.connect) and isinstance(iceduck.Lake, type)
