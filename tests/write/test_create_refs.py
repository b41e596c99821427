"""Branches and tags made by iceduck (`TableHandle.create_tag` / `create_branch` / `drop_ref`): each is a
metadata commit other readers see (tests/interop/test_interop_serve.py has Java read them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import iceduck
from iceduck.errors import AlreadyExistsError, ValidationError


def test_tags_and_branches_name_snapshots(tmp_path: Path) -> None:
    with iceduck.connect(str(tmp_path / "wh")) as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t (id INTEGER) WITH ('format-version' = '3')")
        table = lake.table("ns.t")
        with pytest.raises(ValidationError, match="no snapshot"):
            table.create_tag("empty")
        lake.sql("INSERT INTO ns.t VALUES (1), (2)")
        table.create_tag("v1", max_ref_age_ms=1000)
        first = table.load().metadata.current_snapshot_id
        lake.sql("INSERT INTO ns.t VALUES (3)")
        table.create_branch("audit", first, min_snapshots_to_keep=2, max_snapshot_age_ms=5000)
        refs = lake.sql("SELECT name, type, snapshot_id FROM iceberg_refs('ns.t') ORDER BY name").fetchall()
        current = table.load().metadata.current_snapshot_id
        assert [(n, t.upper(), s) for n, t, s in refs] == [
            ("audit", "BRANCH", first),
            ("main", "BRANCH", current),
            ("v1", "TAG", first),
        ]
        for ref in ("v1", "audit"):
            assert sorted(lake.sql(f"SELECT id FROM iceberg_scan('ns.t', ref := '{ref}')").fetchall()) == [
                (1,),
                (2,),
            ]
        # the metadata file holds them as the spec spells refs
        with open(table.load().metadata_location) as f:
            written = json.load(f)["refs"]
        assert written["v1"] == {"snapshot-id": first, "type": "tag", "max-ref-age-ms": 1000}
        assert written["audit"] == {
            "snapshot-id": first,
            "type": "branch",
            "max-snapshot-age-ms": 5000,
            "min-snapshots-to-keep": 2,
        }
        with pytest.raises(AlreadyExistsError, match="v1"):
            table.create_branch("v1")
        with pytest.raises(ValidationError, match="main"):
            table.create_tag("main")
        with pytest.raises(ValidationError, match="no snapshot 42"):
            table.create_tag("x", 42)
        with pytest.raises(ValidationError, match="keeps no snapshots"):
            table.create_tag("y", min_snapshots_to_keep=1)
        table.drop_ref("v1")
        names = [r[0] for r in lake.sql("SELECT name FROM iceberg_refs('ns.t')").fetchall()]
        assert sorted(names) == ["audit", "main"]
        with pytest.raises(ValidationError, match="no branch or tag"):
            table.drop_ref("v1")
        with pytest.raises(ValidationError, match="main"):
            table.drop_ref("main")
