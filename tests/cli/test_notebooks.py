"""Every notebook in notebooks/ runs from top to bottom on this venv's Python (as CI runs them).

The kernel is a kernelspec installed for the test into a temporary Jupyter path, pointing at the
interpreter running the tests, so a python3 kernel installed elsewhere on the machine cannot stand in.
Notebooks are kept in git with their outputs, so someone browsing them sees the results and the
plots; the test checks the stored outputs are what the notebook prints today (after masking what
changes from run to run: ids, times, temporary paths, table widths). Refresh them with

    python tests/cli/test_notebooks.py
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
kernelspec = pytest.importorskip("ipykernel.kernelspec")

ROOT = Path(__file__).resolve().parents[2]
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


# Facts a notebook's outputs must show: for 01, what DuckDB alone gives for the statements it runs
# (the demo's statements; see tests/cli/test_demo.py).
EXPECTED = {
    "01_walk_the_tree.ipynb": (
        "commit 1, three days: [(3000,)]",
        "commit 3, a delete: [(194,)]",
        "(seq 3, delete): 3806 rows",
    ),
    # 04: the view's one-hour WHERE opens only that day's 3 files, the raw connection all 30
    "04_your_views_prune.ipynb": (
        "view, one hour                   rows    189  avg F 146.37  files read  3 of 30",
        "EXECUTE, one hour                rows    189  avg F 146.37  files read  3 of 30",
        "view, one hour, raw connection   rows    189  avg F 146.37  files read 30 of 30",
    ),
    # 05: another connection sees nothing of a transaction until COMMIT, then all of it; the
    # rollback brings back the tagged snapshot's rows
    "05_writing_with_sql.ipynb": (
        "inside, this lake sees    [(1,)] [(30,)]",
        "inside, the REST client   [(0,)] [(50,)]",
        "after COMMIT, REST client [(1,)] [(30,)]",
        "at the tag: [(61,)]  now: [(0,)]",
        "snapshot 5  overwrite   61 units",
    ),
}


_EXECUTED: dict[Path, Any] = {}


@pytest.fixture
def executed(kernel_name: str, tmp_path: Path) -> Any:
    """Run a notebook once per session (both tests below look at the same run)."""

    def run(path: Path) -> Any:
        if path not in _EXECUTED:
            _EXECUTED[path] = execute(path, kernel_name, tmp_path)
            assert not any(tmp_path.iterdir())  # notebooks clean up after themselves
        return _EXECUTED[path]

    return run


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, executed: Any) -> None:
    text = outputs_text(executed(path))
    for fact in EXPECTED.get(path.name, ()):
        assert fact in text
    assert "BROKEN" not in text


# What changes between two runs of the same notebook: numbers (ids, times, sizes), hex and uuids,
# temporary folders, and the widths of tables that hold them.
_VOLATILE = (
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "UUID"),
    (re.compile(r"/tmp/[^\s'\"│|,)]*|/[^\s'\"]*/pytest-of-[^\s'\"]*"), "PATH"),
    (re.compile(r"\b[0-9a-f]*[0-9][0-9a-f]*\b"), "N"),
    (re.compile(r"[─═┬┴┼├┤┌┐└┘]+"), "─"),
    (re.compile(r"[ \t]+"), " "),
)


def _masked(text: str) -> str:
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def _head(text: str) -> str:
    # The first lines (a table's header and types, a tree's top): what a stale output shows first.
    # The rest may depend on the clock (health ages, expirable snapshots) and is not compared.
    return "\n".join(_masked(text).splitlines()[:3])


def _cell_outputs(cell: Any) -> list[tuple[str, str]]:
    """(kind, masked text) of a code cell's outputs; an image counts by its kind alone."""
    out = []
    stream_name, stream_text = None, ""
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream" and o.get("name", "stream") == stream_name:
            # the kernel splits one print run into chunks by timing: compare the joined text
            stream_text += o.get("text", "")
            out[-1] = (stream_name, _head(stream_text))
            continue
        stream_name, stream_text = None, ""
        data = o.get("data", {})
        if "image/png" in data:
            out.append(("image/png", ""))
        elif o.get("output_type") == "stream":
            stream_name, stream_text = o.get("name", "stream"), o.get("text", "")
            out.append((stream_name, _head(stream_text)))
        else:
            out.append((o.get("output_type", ""), _head(data.get("text/plain", "") or o.get("evalue", ""))))
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_stored_outputs_are_fresh(path: Path, executed: Any) -> None:
    stored = nbformat.read(path, as_version=4)
    ran = executed(path)
    code = [c for c in stored.cells if c.cell_type == "code"]
    assert code and all(c.execution_count is not None for c in code), f"{path.name}: stored without outputs"
    for old, new in zip(code, (c for c in ran.cells if c.cell_type == "code"), strict=True):
        # the first output of each cell (a later one may depend on timing, e.g. what a run found)
        assert _cell_outputs(old)[:1] == _cell_outputs(new)[:1], (
            f"{path.name}: the stored outputs of this cell are stale (refresh: python tests/cli/test_notebooks.py):\n"
            + old.source[:200]
        )
        assert any(k == "image/png" for k, _ in _cell_outputs(old)) == any(
            k == "image/png" for k, _ in _cell_outputs(new)
        ), f"{path.name}: a plot is missing from the stored outputs"
    plots = [o for c in code for o in _cell_outputs(c) if o[0] == "image/png"]
    if "plt.show()" in "".join(c.source for c in code):
        assert plots, f"{path.name}: a plot cell stored no image"


def refresh() -> None:
    """Run every notebook and store it with its outputs (in a temporary working folder)."""
    from ipykernel.kernelspec import install

    prefix = tempfile.mkdtemp()
    install(kernel_name=KERNEL, display_name="iceduck tests", prefix=prefix)
    os.environ["JUPYTER_PATH"] = os.path.join(prefix, "share", "jupyter")
    for path in NOTEBOOKS:
        original = nbformat.read(path, as_version=4)
        with tempfile.TemporaryDirectory() as cwd:
            nb: Any = execute(path, KERNEL, Path(cwd))
        nb.metadata = original.metadata  # the kernel a reader has, not the tests' own
        nbformat.write(nb, path)
        print(f"stored {path.relative_to(ROOT)} with its outputs")


if __name__ == "__main__":
    refresh()
