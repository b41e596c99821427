"""Commits from several processes at once, and writers killed mid-commit.

* Concurrency: 8 processes append to one table while 2 processes delete from it. Every acknowledged
  append is present exactly once, no unacknowledged one is, every acknowledged delete took effect,
  and the final rows are exactly what the acknowledgements say.
* Crashes: a writer process exits abruptly (`os._exit`, no cleanup) after writing its data files,
  after writing its snapshot, after writing its metadata file, inside the SQLite transaction that
  swaps the pointer (statement run, never committed), and right after the swap. The table is at
  its previous state in the first four cases and at its new state in the last; it stays readable
  and writable, and the files the crash left are not referenced. Each runs on a local warehouse
  and again on S3 (moto).
* A writer appending to a table on S3 is killed with SIGKILL at moments chosen at random (during
  uploads, commits, anywhere): every acknowledged append is there, the one in flight is there
  whole or not at all.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from iceduck.lake import connect
from tests.conftest import ROOT
from tests.support.s3_fixture import child_env, s3_warehouse
from tests.support.write_helpers import SCHEMA, arrow_rows, new_lake, pyiceberg_rows, table_files

PRELUDE = """
import json, os, sys, time
sys.path.insert(0, {root!r})
import pyarrow as pa
import iceduck
from tests.support.s3_fixture import settings_from_env
from tests.support.write_helpers import arrow_rows
settings_from_env()
"""


def _run(script: str, *, env: dict[str, str] | None = None, wait: bool = True) -> subprocess.Popen[str]:
    code = PRELUDE.format(root=str(ROOT)) + textwrap.dedent(script)
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **child_env(), **(env or {})},
        cwd=ROOT,
    )
    if wait:
        proc.wait(timeout=120)
    return proc


APPENDER = """
lake = iceduck.connect({warehouse!r})
t = lake.table("ns.t")
acked = []
for k in range({rounds}):
    start = 10_000 + {worker} * 1000 + k * 10
    try:
        t.append(arrow_rows(3, start))
        acked.append(start)
    except iceduck.errors.CommitConflictError:
        pass
print(json.dumps(acked))
"""

DELETER = """
lake = iceduck.connect({warehouse!r})
t = lake.table("ns.t")
acked = []
for k in range({rounds}):
    low = {worker} * 500 + k * 50
    predicate = f"id >= {{low}} AND id < {{low + 50}} AND id % 3 = {worker}"
    try:
        t.delete(predicate)
        acked.append(low)
    except iceduck.errors.CommitConflictError:
        pass
print(json.dumps(acked))
"""


def test_eight_appenders_and_two_deleters(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    lake = new_lake(Path(warehouse))
    t = lake.create_table(
        "ns.t",
        SCHEMA,
        partition_by=["day"],
        properties={
            "commit.retry.num-retries": "60",
            "commit.retry.min-wait-ms": "5",
            "commit.retry.max-wait-ms": "100",
        },
    )
    t.append(arrow_rows(1000))  # rows the deleters delete from
    rounds = 4
    import iceduck.errors  # noqa: F401  (the scripts use it)

    procs = [
        _run(APPENDER.format(warehouse=warehouse, worker=w, rounds=rounds), wait=False) for w in range(8)
    ]
    procs += [
        _run(DELETER.format(warehouse=warehouse, worker=w, rounds=rounds), wait=False) for w in range(2)
    ]
    outputs = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        outputs.append(json.loads(out.strip().splitlines()[-1]))
    appended = [start for acked in outputs[:8] for start in acked]
    deleted_ranges = [(w, low) for w, acked in enumerate(outputs[8:]) for low in acked]
    expected = set(range(1000))
    for w, low in deleted_ranges:
        expected -= {i for i in range(low, low + 50) if i % 3 == w}
    expected_list = sorted(expected) + sorted(i for start in appended for i in range(start, start + 3))
    ids = sorted(r["id"] for r in pyiceberg_rows(t.metadata_location))
    assert ids == sorted(expected_list)  # exactly once each, nothing unacknowledged
    assert len(appended) == 8 * rounds and len(deleted_ranges) == 2 * rounds  # with generous retries all land
    md = t.load().metadata
    assert [s.sequence_number for s in md.snapshots] == list(range(1, len(md.snapshots) + 1))
    assert len(md.snapshots) == 1 + 8 * rounds + 2 * rounds
    # row ids stay unique across all those concurrent commits
    ranges = sorted((s.first_row_id, s.first_row_id + s.added_rows) for s in md.snapshots)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges))
    lake.close()


CRASHER = """
from iceduck.catalog import sql as sqlmod
import contextlib
lake = iceduck.connect({warehouse!r}, catalog={catalog!r})
t = lake.table("ns.t")
if os.environ.get("CRASH_IN_SWAP"):
    @contextlib.contextmanager
    def crashing(self):
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            yield conn
            os._exit(77)  # the pointer UPDATE ran; COMMIT never does
    sqlmod.SqlCatalog._write = crashing
{operation}
print("survived")
"""

STAGES = [
    ("data-written", False),
    ("snapshot-written", False),
    ("metadata-written", False),
    ("in-swap", False),
    ("committed", True),
]


@pytest.mark.parametrize(
    "operation",
    ["t.append(arrow_rows(5, 100))", "t.delete('id < 3')", "t.update({'name': \"'x'\"}, 'id = 5')"],
)
@pytest.mark.parametrize(("stage", "lands"), STAGES)
def test_killed_writer_leaves_old_or_new_state(warehouse: str, operation: str, stage: str, lands: bool) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
    t.append(arrow_rows(10))
    before_location = t.metadata_location
    before_rows = sorted((r["id"], r["name"]) for r in pyiceberg_rows(before_location))
    before_files = table_files(t.location)
    env = {"CRASH_IN_SWAP": "1"} if stage == "in-swap" else {"ICEDUCK_TEST_CRASH_AT": stage}
    proc = _run(CRASHER.format(warehouse=warehouse, catalog="sql", operation=operation), env=env)
    assert proc.returncode == 77, proc.stderr.read() if proc.stderr else ""

    fresh = connect(warehouse)
    table = fresh.table("ns.t")
    after_location = table.metadata_location
    rows = sorted((r["id"], r["name"]) for r in pyiceberg_rows(after_location))
    if lands:
        assert after_location != before_location
        assert rows != before_rows
    else:
        assert after_location == before_location
        assert rows == before_rows
        # whatever the crash wrote is not referenced by the table
        loaded = table.load()
        referenced = {loaded.metadata_location}
        for snap in loaded.metadata.snapshots:
            referenced.add(snap.manifest_list)
            for mf in loaded.manifests(snap):
                referenced.add(mf.manifest_path)
                referenced.update(e.data_file.file_path for e in loaded.manifest(mf).entries)
        leftovers = table_files(loaded.metadata.location) - before_files
        assert not (leftovers & referenced)
    # the table takes new commits afterwards
    table.append(arrow_rows(1, 500))
    assert 500 in {r["id"] for r in pyiceberg_rows(table.metadata_location)}
    fresh.close()
    lake.close()


def test_killed_writer_on_a_folder_catalog(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "fw")
    lake = new_lake(Path(warehouse), catalog="folder")
    t = lake.create_table("ns.t", SCHEMA)
    t.append(arrow_rows(10))
    before = t.metadata_location
    for stage in ("metadata-written", "committed"):
        proc = _run(
            CRASHER.format(warehouse=warehouse, catalog="folder", operation="t.delete('id = 1')"),
            env={"ICEDUCK_TEST_CRASH_AT": stage},
        )
        assert proc.returncode == 77
        ids = sorted(r["id"] for r in pyiceberg_rows(lake.table("ns.t").metadata_location))
        assert ids == (list(range(10)) if stage == "metadata-written" else [0, *range(2, 10)])
    assert lake.table("ns.t").metadata_location != before
    lake.close()


@pytest.fixture
def s3_warehouse_path(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh warehouse on S3 (moto)."""
    return s3_warehouse(request, tmp_path)


SIGKILLED = """
lake = iceduck.connect({warehouse!r})
t = lake.table("ns.t")
for k in range({base}, {base} + 100):
    print("start", k, flush=True)
    t.append(arrow_rows(2000, 10_000 * (k + 1)))
    print("acked", k, flush=True)
"""


def test_sigkilled_writer_on_s3_leaves_every_acknowledged_append_and_the_last_whole_or_not(
    s3_warehouse_path: str,
) -> None:
    lake = new_lake(s3_warehouse_path)
    t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
    t.append(arrow_rows(10))
    rng = random.Random(10)
    acked: set[int] = set()
    for round_ in range(3):
        proc = _run(SIGKILLED.format(warehouse=s3_warehouse_path, base=100 * round_), wait=False)
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the child is up (imports done, table loaded)
        assert first.startswith("start"), proc.stderr.read() if proc.stderr else first
        time.sleep(rng.uniform(0.2, 2.5))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
        lines = [first, *out.splitlines()]
        acked |= {10_000 * (int(x.split()[1]) + 1) for x in lines if x.startswith("acked")}
        in_flight = {10_000 * (int(x.split()[1]) + 1) for x in lines if x.startswith("start")} - acked
        ids = [r["id"] for r in pyiceberg_rows(lake.table("ns.t").metadata_location)]
        starts = {i for i in ids if i >= 10_000 and i % 10_000 == 0}
        assert starts - acked <= in_flight  # nothing but the append in flight, which ...
        landed = acked | (starts & in_flight)
        acked = landed  # ... counts as acknowledged from now on when it landed
        expected = sorted([*range(10), *(i for s in landed for i in range(s, s + 2000))])
        assert sorted(ids) == expected  # ... is there whole or not at all, each row once
    # the table stays writable
    lake.table("ns.t").append(arrow_rows(1, 5))
    assert 5 in {r["id"] for r in pyiceberg_rows(lake.table("ns.t").metadata_location)}
    lake.close()
