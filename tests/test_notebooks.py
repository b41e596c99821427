"""Every notebook in notebooks/ runs from top to bottom on this venv's Python (as CI runs them).

The kernel is a kernelspec installed for the test into a temporary Jupyter path, pointing at the
interpreter running the tests, so a python3 kernel installed elsewhere on the machine cannot stand in.
Notebooks are kept in git without outputs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
kernelspec = pytest.importorskip("ipykernel.kernelspec")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL = "iceduck-tests"


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    prefix = tmp_path_factory.mktemp("jupyter")
    kernelspec.install(kernel_name=KERNEL, display_name="iceduck tests", prefix=str(prefix))
    spec = prefix / "share" / "jupyter" / "kernels" / KERNEL / "kernel.json"
    assert sys.executable in spec.read_text()
    saved = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (str(prefix / "share" / "jupyter"), saved) if p)
    try:
        yield KERNEL
    finally:
        if saved is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = saved


def execute(path: Path, kernel: str, cwd: Path) -> object:
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name=kernel, resources={"metadata": {"path": str(cwd)}}
    )
    client.execute()  # CellExecutionError names the failing cell
    return nb


def outputs_text(nb: object) -> str:
    parts = []
    for cell in nb.cells:  # type: ignore[attr-defined]
        for out in cell.get("outputs", []):
            parts.append(out.get("text", ""))
            parts.append(out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def test_there_are_notebooks() -> None:
    assert [p.name for p in NOTEBOOKS][:1] == ["01_walk_the_tree.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


# Facts a notebook's outputs must show: for 01, what DuckDB alone gives for the statements it runs
# (the demo's statements; see tests/test_demo.py).
EXPECTED = {
    "01_walk_the_tree.ipynb": (
        "commit 1, three days: [(3000,)]",
        "commit 3, a delete: [(194,)]",
        "(seq 3, delete): 3806 rows",
    ),
}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, kernel_name: str, tmp_path: Path) -> None:
    text = outputs_text(execute(path, kernel_name, tmp_path))
    assert not any(tmp_path.iterdir())  # notebooks clean up after themselves
    for fact in EXPECTED.get(path.name, ()):
        assert fact in text
    assert "BROKEN" not in text
