"""The embedded catalog creates only names a folder can carry: the same rule as `iceduck serve`."""

from __future__ import annotations

from pathlib import Path

import pytest

import iceduck
from iceduck.errors import ValidationError


@pytest.mark.parametrize(
    "statement",
    [
        'CREATE SCHEMA "a/b"',
        'CREATE SCHEMA "x\x1by"',
        'CREATE TABLE ok."x/y" (i INT)',
        'CREATE TABLE ok."x\ny" (i INT)',
        'CREATE TABLE ok."' + "n" * 256 + '" (i INT)',
        'ALTER TABLE ok.t RENAME TO "q/r"',
    ],
)
def test_a_name_no_folder_can_carry_is_refused_and_nothing_is_made(tmp_path: Path, statement: str) -> None:
    lake = iceduck.connect(tmp_path / "wh")
    try:
        lake.sql("CREATE SCHEMA ok")
        lake.sql("CREATE TABLE ok.t (i INT)")
        before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "catalog" not in p.name)
        with pytest.raises(ValidationError, match=r"^invalid (namespace level|table name) '"):
            lake.sql(statement)
        assert lake.list_namespaces() == ("ok",) or set(lake.list_namespaces()) == {"ok"}
        assert [str(t) for t in lake.list_tables("ok")] in (["ok.t"], ["t"])
        after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "catalog" not in p.name)
        assert after == before
    finally:
        lake.close()


def test_the_python_api_applies_the_same_rule(tmp_path: Path) -> None:
    lake = iceduck.connect(tmp_path / "wh")
    try:
        with pytest.raises(ValidationError, match="control characters"):
            lake.create_namespace("x\x1by")
        with pytest.raises(ValidationError, match="one folder"):
            lake.create_namespace("a/b")
    finally:
        lake.close()
