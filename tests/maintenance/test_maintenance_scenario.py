"""The streaming-table scenario of issue 5: 300 small appends and 50 deletion-vector deletes make a
table that needs maintenance; the recommended actions bring it back to HEALTHY without changing a
row, a row id, or any retained snapshot; the reference peer reads the result.

Truth comes from `tests/support/maintenance_helpers.py` (metadata JSON, fastavro, pyarrow), not from
iceduck's readers; iceduck's own scan must agree with it too.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from iceduck.maintenance import Maintainer
from iceduck.maintenance.health import HEALTHY, MAINTENANCE_DUE
from tests.support import maintenance_helpers as mh
from tests.support.peer import Peer, sql_string
from tests.support.write_helpers import new_lake

APPENDS = 300
DELETES = 50
ROWS_PER_APPEND = 10
RETAIN = 20
COLUMNS = ["id", "day", "v", "amount"]


def build_streaming_table(folder: Path) -> tuple[Any, Any]:
    """300 appends of 10 rows (3 day partitions) and 50 deletes of 8 random ids each."""
    lake = new_lake(folder)
    t = lake.create_table(
        "ns.stream",
        [("id", "BIGINT"), ("day", "DATE"), ("v", "VARCHAR"), ("amount", "DOUBLE")],
        partition_by=["day"],
        properties={
            # retention short enough that a test run sees snapshots expire, long enough to keep RETAIN
            "history.expire.max-snapshot-age-ms": "1000",
            "history.expire.min-snapshots-to-keep": str(RETAIN),
        },
    )
    for i in range(APPENDS):
        ids = list(range(i * ROWS_PER_APPEND, (i + 1) * ROWS_PER_APPEND))
        t.append(
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "day": pa.array([19000 + i % 3] * ROWS_PER_APPEND, pa.date32()),
                    "v": [f"v{x}" for x in ids],
                    "amount": [x * 0.25 for x in ids],
                }
            )
        )
    rng = random.Random(5)
    for _ in range(DELETES):
        picked = rng.sample(range(APPENDS * ROWS_PER_APPEND), 8)
        t.delete(f"id IN ({', '.join(map(str, picked))})")
    return lake, t


@pytest.mark.peer
@pytest.mark.slow
@pytest.mark.local_only("about 100 commits: minutes on moto; the twins of the maintenance tests cover each action on S3")
def test_streaming_table_scenario(warehouse: str, peer: Peer) -> None:
    started = time.monotonic()
    lake, t = build_streaming_table(warehouse)
    built = time.monotonic() - started
    m = Maintainer.for_lake(lake, "ns.stream")
    location = t.metadata_location
    before = mh.rows(location)
    before_sum = mh.checksum(before, COLUMNS)
    lineage = {r["id"]: (r["_row_id"], r["_last_updated_sequence_number"]) for r in before}
    assert len(before) == len({r["_row_id"] for r in before}) > 2500
    # every snapshot that can survive expiry: the newest RETAIN, read now
    md = mh.metadata(location)
    newest = sorted(md["snapshots"], key=lambda s: s["sequence-number"])[-RETAIN:]
    at_snapshot = {
        s["snapshot-id"]: mh.checksum(mh.rows(location, s["snapshot-id"]), COLUMNS) for s in newest
    }
    files_of = {s["snapshot-id"]: mh.snapshot_files(location, s["snapshot-id"]) for s in md["snapshots"]}
    time.sleep(1.3)  # every append is now past the 1 s retention (+20% grace)

    health = m.health(record=True)
    assert health.state == MAINTENANCE_DUE, health.reasons
    checks = {r.check for r in health.reasons}
    assert {"small_files", "deleted_rows", "manifests", "snapshots"} <= checks
    # DVs are at most one per data file: their debt is the deleted share, not a delete-file count
    assert "delete_files" not in checks and health.metrics["delete_file_ratio"] == 0.0
    for r in health.reasons:
        assert r.value >= r.threshold and r.message
    assert health.metrics["data_files"] == APPENDS
    assert health.metrics["compactable_files"] == APPENDS - 3  # one file per day partition once packed
    assert health.metrics["snapshots"] == APPENDS + DELETES
    deleted = APPENDS * ROWS_PER_APPEND - len(before)
    assert health.metrics["deleted_rows"] == deleted
    assert [a.action for a in health.actions] == [
        "rewrite_data_files",
        "rewrite_manifests",
        "expire_snapshots",
    ]

    plans = m.maintain(dry_run=True)
    assert [p.status for p in plans] == ["planned"] * 3
    assert mh.metadata(t.metadata_location) == md  # planning changed nothing

    results = m.maintain(dry_run=False)
    assert [r.status for r in results] == ["succeeded"] * 3, [r.error for r in results]
    after_health = m.health(record=True)
    assert after_health.state == HEALTHY, after_health.reasons
    assert after_health.metrics["data_files"] == 3
    assert after_health.metrics["delete_files"] == 0
    assert after_health.metrics["manifests"] == 1
    assert after_health.metrics["snapshots"] == RETAIN

    # same rows, same row ids and sequence numbers, read independently and by iceduck's scan
    final = t.metadata_location
    after = mh.rows(final)
    assert mh.checksum(after, COLUMNS) == before_sum
    assert {r["id"]: (r["_row_id"], r["_last_updated_sequence_number"]) for r in after} == lineage
    scanned = lake.sql(
        f"SELECT id, day, v, amount, _row_id FROM iceberg_scan({sql_string(final)}, row_lineage := true)"
    ).fetchall()
    assert sorted(scanned, key=repr) == sorted(
        ((r["id"], r["day"], r["v"], r["amount"], r["_row_id"]) for r in before), key=repr
    )

    # time travel to every retained snapshot: the files are there and the rows are what they were
    final_md = mh.metadata(final)
    retained = {s["snapshot-id"] for s in final_md["snapshots"]}
    assert len(retained) == RETAIN
    for sid in retained:
        for path in mh.snapshot_files(final, sid):
            assert mh.exists(path), f"snapshot {sid} lost {path}"
        got = mh.checksum(mh.rows(final, sid), COLUMNS)
        assert got == at_snapshot.get(sid, before_sum)
        n = lake.con.execute(
            f"SELECT count(*) FROM iceberg_scan({sql_string(final)}, snapshot_id := {sid})"
        ).fetchone()
        assert n is not None and n[0] == len(got)
    # files only expired snapshots reached are gone; the small files kept snapshots still read survive
    expired = {s["snapshot-id"] for s in md["snapshots"]} - retained
    doomed = set().union(*(files_of[s] for s in expired)) - set().union(
        *(mh.snapshot_files(final, s) for s in retained)
    )
    assert doomed and not any(mh.exists(p) for p in doomed)

    # the reference peer reads the maintained table: same rows and row ids
    got_peer = peer.query(f"SELECT id, day, v, amount, _row_id FROM iceberg_scan({sql_string(final)})")
    assert sorted(got_peer, key=repr) == sorted(scanned, key=repr)

    # the log tells the story, health before and after included
    log = m.log()
    assert [(r.action, r.status) for r in log] == [
        ("rewrite_data_files", "succeeded"),
        ("rewrite_manifests", "succeeded"),
        ("expire_snapshots", "succeeded"),
    ]
    assert log[0].health_before is not None and log[0].health_before["state"] == MAINTENANCE_DUE
    assert log[-1].health_after is not None and log[-1].health_after["state"] == HEALTHY
    assert [h["state"] for h in m.health_history()] == [MAINTENANCE_DUE, HEALTHY]
    print(f"built in {built:.1f} s, maintained in {time.monotonic() - started - built:.1f} s")
    lake.close()
