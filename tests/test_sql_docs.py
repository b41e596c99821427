"""docs/sql.md is one shell session whose outputs are stored under each block: running the page in a
fresh warehouse prints them again (masked: what changes from run to run, such as sizes in bytes).

The ```sql blocks run through the shell (`iceduck.shell.Shell`, box mode) on one lake, ```python
blocks with `lake` in scope; the ```text block after each is what it printed. The REST part runs
against an `iceduck serve` on a free port standing in for the page's 8181. Refresh the outputs with

    python -m tests.test_sql_docs
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import iceduck
from iceduck.shell import Shell
from tests.support.rest_helpers import serving

PAGE = Path(__file__).resolve().parents[1] / "docs" / "sql.md"
BLOCK = re.compile(r"```(sql|python)\n(.*?)```\n\n```text\n(.*?)```", re.S)
PORT = "http://127.0.0.1:8181"


@contextlib.contextmanager
def _session(folder: Path) -> Iterator[tuple[iceduck.Lake, Shell, io.StringIO, str]]:
    with serving(folder / "other") as server, iceduck.connect(folder / "wh") as lake:
        out = io.StringIO()
        yield lake, Shell(lake, out=out, err=out, mode="box", max_width=100), out, server.url


def _outputs(folder: Path) -> list[str]:
    """What each block of the page prints, in order."""
    printed = []
    with _session(folder) as (lake, shell, out, url):
        for kind, code, _ in BLOCK.findall(PAGE.read_text()):
            out.seek(0)
            out.truncate()
            if kind == "sql":
                shell.run_text(code.replace(PORT, url))
            else:
                with contextlib.redirect_stdout(out):
                    exec(code, {"lake": lake})
            printed.append(out.getvalue())
    return printed


_VOLATILE = (
    (re.compile(r"\b\d{4,}\b"), "N"),  # sizes in bytes, ids
    (re.compile(r"[─═┬┴┼├┤┌┐└┘]+"), "─"),
    (re.compile(r"[ \t]+"), " "),
)


def _masked(text: str) -> str:
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return text.strip()


def test_the_pages_outputs_are_what_it_prints(tmp_path: Path) -> None:
    stored = [expected for _, _, expected in BLOCK.findall(PAGE.read_text())]
    assert len(stored) >= 10 and all(s.strip() for s in stored), "docs/sql.md stored without outputs"
    printed = _outputs(tmp_path)
    assert "Error" not in "".join(printed)
    for (_, code, _), old, new in zip(BLOCK.findall(PAGE.read_text()), stored, printed, strict=True):
        assert _masked(old) == _masked(new), f"docs/sql.md is stale (python -m tests.test_sql_docs) at:\n{code}"


def refresh() -> None:
    text = PAGE.read_text()
    with tempfile.TemporaryDirectory() as folder:
        printed = iter(_outputs(Path(folder)))
    page = BLOCK.sub(lambda m: f"```{m[1]}\n{m[2]}```\n\n```text\n{next(printed)}```", text)
    PAGE.write_text(page)
    print(f"stored {PAGE} with its outputs", file=sys.stderr)


if __name__ == "__main__":
    refresh()
