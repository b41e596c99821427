"""docs/functions.md is generated from the functions: it must match what they declare now."""

from __future__ import annotations

from iceduck.duckdb.reference import reference_markdown
from tests.conftest import ROOT


def test_function_reference_is_current() -> None:
    written = (ROOT / "docs" / "functions.md").read_text()
    assert written.strip() == reference_markdown().strip(), (
        "docs/functions.md is stale: run `python -m iceduck.duckdb.reference > docs/functions.md`"
    )
