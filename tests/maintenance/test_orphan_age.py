"""Orphan age as a policy property: `iceduck.maintenance.orphans.older-than` sets how old an
unreferenced file must be before orphan removal deletes it (file ages set with os.utime)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from iceduck.errors import ValidationError
from iceduck.maintenance import Maintainer
from iceduck.maintenance.policy import parse_policy
from tests.support.write_helpers import new_lake

HOUR = 3600


def _aged(path: Path, hours: float) -> Path:
    path.write_bytes(b"x")
    t = time.time() - hours * HOUR
    os.utime(path, (t, t))
    return path


def test_the_orphan_age_property_sets_the_cutoff(tmp_path: Path) -> None:
    lake = new_lake(tmp_path / "wh")
    lake.sql("CREATE SCHEMA lake.s")
    lake.sql("CREATE TABLE lake.s.t (k BIGINT)")
    lake.sql("INSERT INTO lake.s.t VALUES (1)")
    data = Path(lake.table("s.t").location) / "data"
    young, middle, old = (_aged(data / f"stray-{h}.parquet", h) for h in (1.5, 30, 100))
    m = Maintainer.for_lake(lake, "s.t")
    # the default: 3 days
    assert {Path(c).name for c in m.remove_orphan_files().plan.candidates_list()} == {old.name}
    lake.table("s.t").set_properties({"iceduck.maintenance.orphans.older-than": "2h"})
    r = m.remove_orphan_files(dry_run=False)
    assert r.status == "succeeded", r.error
    assert young.exists() and not middle.exists() and not old.exists()
    assert lake.sql("SELECT k FROM lake.s.t").fetchall() == [(1,)]
    # an explicit older_than still wins over the property
    hour_ago = int(time.time() * 1000) - 3600_000
    assert [Path(c).name for c in m.remove_orphan_files(older_than=hour_ago).plan.candidates_list()] == [
        young.name
    ]
    lake.close()


def test_the_orphan_age_property_is_checked() -> None:
    assert parse_policy({"iceduck.maintenance.orphans.older-than": "6h"}).orphan_age_ms == 6 * HOUR * 1000
    assert parse_policy({}).orphan_age_ms == 72 * HOUR * 1000
    with pytest.raises(
        ValidationError, match=r"t: property iceduck.maintenance.orphans.older-than must be at least 1h"
    ):
        parse_policy({"iceduck.maintenance.orphans.older-than": "10m"}, table="t")
    with pytest.raises(ValidationError, match=r"iceduck.maintenance.orphans.older-than"):
        parse_policy({"iceduck.maintenance.orphans.older-than": "soon"}, table="t")
