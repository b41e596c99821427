"""A maintenance window that closes during a run stops it at the next file group boundary: the
groups done are committed, the rest are left for the next window, and the run records where it
stopped. The clock is fake (the loop's `clock`), moved past the window's end once the first group is
written; truth comes from the metadata JSON, not from the loop's accounts."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import iceduck.maintenance.rewrite_data as rewrite_data
from iceduck.maintenance import Maintainer
from iceduck.maintenance.loop import MaintenanceLoop
from iceduck.maintenance.policy import HOUR_MS
from iceduck.maintenance.store import now_ms
from tests.support import maintenance_helpers as mh
from tests.support.write_helpers import new_lake


def _files_per_partition(location: str) -> dict[Any, int]:
    md = mh.metadata(location)
    out: dict[Any, int] = {}
    for mf, e in mh.live_entries(md):
        if mf["content"] == 0:
            day = e["data_file"]["partition"]["day"]
            out[day] = out.get(day, 0) + 1
    return out


def test_a_window_closing_mid_run_stops_at_a_group_boundary(
    warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table(
        "ns.t", [("id", "BIGINT"), ("day", "DATE")], partition_by=["day"],
        properties={"iceduck.maintenance.window": "01:00-03:00", "iceduck.health.max-compactable-files": "2"},
    )  # fmt: skip
    for i in range(12):
        t.append(pa.table({"id": pa.array([i], pa.int64()), "day": pa.array([19000 + i % 2], pa.date32())}))
    assert sorted(_files_per_partition(t.metadata_location).values()) == [6, 6]
    real = now_ms()
    midnight = real - real % (24 * HOUR_MS)
    clock = {"at": midnight + 2 * HOUR_MS}  # inside the window
    write_group = rewrite_data.write_group

    def writing(*args: Any, **kwargs: Any) -> Any:
        out = write_group(*args, **kwargs)
        clock["at"] = midnight + 4 * HOUR_MS  # the window closes while the first group is written
        return out

    monkeypatch.setattr(rewrite_data, "write_group", writing)
    MaintenanceLoop.for_lake(lake, clock=lambda: clock["at"]).run()
    after = _files_per_partition(lake.table("ns.t").metadata_location)
    assert sorted(after.values()) == [1, 6]  # one partition compacted, the other left for the next window
    (run,) = [r for r in Maintainer.for_lake(lake, "ns.t").log() if r.action == "rewrite_data_files"]
    assert run.status == "succeeded"
    assert run.summary["groups_committed"] == 1 and len(run.summary["groups_left"]) == 1
    assert "closed at" in run.summary["stopped"] and "01:00-03:00" in run.summary["stopped"]
    assert sorted(o.outcome for o in run.outcomes if o.kind == "file_group") == ["committed", "deferred"]
    lake.close()
