"""Guessing a folder's newest metadata file never falls back to an older one because the newest
is damaged (issue 15: the fuzzer read such folders at an older version, without a word)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

import iceduck
from iceduck.catalog.locate import locate_table
from iceduck.errors import InvalidMetadataError

FOLDER = "duckdb-iceberg/data/persistent/equality_delete_extra_column/warehouse/ns/t"
OLDER = "00001-55453390-51ec-4023-a1fa-290a9ae468fa.metadata.json"


@pytest.fixture
def folder(conformance: Path, tmp_path: Path) -> Path:
    """A table without a version hint whose finalists are `00001-...` and the unnumbered `vfinal`."""
    dst = tmp_path / "t"
    shutil.copytree(conformance / FOLDER, dst)
    assert locate_table(str(dst)).metadata_location == f"{dst}/metadata/vfinal.metadata.json"
    return dst


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],  # truncated
        lambda b: b.replace(b'"last-updated-ms"', b'"last-updated-xx"'),  # a required field gone
        lambda b: b"\x00" + b[1:],  # not JSON any more
    ],
    ids=["truncated", "field", "bytes"],
)
def test_a_damaged_finalist_is_an_error_naming_it(folder: Path, damage: object) -> None:
    path = folder / "metadata/vfinal.metadata.json"
    path.write_bytes(damage(path.read_bytes()))  # type: ignore[operator]
    with pytest.raises(InvalidMetadataError, match=r"vfinal\.metadata\.json.*pass version := ") as e:
        locate_table(str(folder))
    assert "\n" not in str(e.value)
    con = duckdb.connect()
    iceduck.register(con)
    with pytest.raises(duckdb.Error, match=r"vfinal\.metadata\.json") as d:
        con.execute("SELECT * FROM iceberg_scan(?)", [str(folder)]).fetchall()
    assert "Traceback" not in str(d.value)
    # the older version is still there to read when asked for by name
    assert locate_table(str(folder), version=OLDER).metadata_location.endswith(OLDER)


def test_a_file_another_finalist_logs_is_older_whatever_its_clock(folder: Path) -> None:
    md = folder / "metadata"
    final = json.loads((md / "vfinal.metadata.json").read_text())
    # 00001 claims a later clock than vfinal, but vfinal's metadata-log names it: vfinal is newer.
    older = json.loads((md / OLDER).read_text())
    older["last-updated-ms"] = final["last-updated-ms"] + 10_000
    (md / OLDER).write_text(json.dumps(older))
    assert locate_table(str(folder)).metadata_location.endswith(OLDER)  # by clock alone
    final["metadata-log"].append({"metadata-file": f"metadata/{OLDER}", "timestamp-ms": older["last-updated-ms"]})
    (md / "vfinal.metadata.json").write_text(json.dumps(final))
    assert locate_table(str(folder)).metadata_location.endswith("vfinal.metadata.json")
