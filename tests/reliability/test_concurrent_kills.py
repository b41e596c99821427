"""kill -9 during concurrent commits (issue 15, faults).

Several writer processes commit to one table through the embedded SQLite catalog at the same time
(appends, DELETEs that write deletion vectors, UPDATEs), while a maintenance process compacts
(rewrite) and expires snapshots. Random processes are SIGKILLed at random moments (seeded), over
several rounds. After each round, with every process gone:

* the table reads (iceduck, and the independent fastavro/pyarrow reader of
  `tests/support/maintenance_helpers`, which agree);
* every operation a writer acknowledged (it printed the snapshot id after the commit returned) is
  in the rows, and its snapshot is on `main` unless expiry removed it (only snapshots older than
  every retained one can have been expired);
* an operation that failed, or that was in flight when its process died, is there whole or not at
  all (in flight) or not at all (failed): no ghost rows, no half-applied delete or update;
* the rows equal an independent model: the landed operations replayed in plain DuckDB;
* every file of every retained snapshot exists (nothing referenced was deleted);
* row ids stay unique.

At the end every file is aged past the orphan cut-off and orphan removal runs: it deletes only
files no retained snapshot or metadata file references, afterwards exactly those are left, and
the rows are unchanged.

The operations commute by construction, so the model does not depend on the order in which the
commits landed: appends add fresh ids; each DELETE removes its own ids (no two deletes share an
id); an UPDATE appends its own tag to the `tags` of its ids (tags compared as sets; the order of
the acknowledged updates' tags must follow their sequence numbers). Updates and deletes overlap
freely, so an UPDATE and a DELETE of the same rows race (the race that found the DELETE that left
a concurrently updated row alive, fixed with this test).

CI: 3 rounds of 4 writers + 1 maintenance process on the embedded catalog, one round through
`iceduck serve` and one on S3 (moto). Releases (30 rounds, 28 of them through the server and on S3):
`ICEDUCK_CONCURRENT_KILL_ROUNDS=30 python -m pytest tests/reliability/test_concurrent_kills.py`
(`ICEDUCK_CONCURRENT_KILL_SEED` picks another seed).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from iceduck.io.storage import default_io, is_remote
from iceduck.lake import Lake, connect
from tests.conftest import ROOT
from tests.support import maintenance_helpers as mh
from tests.support.rest_helpers import serving
from tests.support.s3_fixture import child_env, s3_warehouse
from tests.support.write_helpers import new_lake, table_files

ROUNDS = int(os.environ.get("ICEDUCK_CONCURRENT_KILL_ROUNDS", "3"))
SEED = int(os.environ.get("ICEDUCK_CONCURRENT_KILL_SEED", "15"))
WRITERS = 4
OPS_PER_WRITER = 6
MAINTENANCE_OPS = 4
INITIAL = 240

WORKER = """
import json, sys
sys.path.insert(0, {root!r})
import pyarrow as pa
import iceduck
from iceduck.errors import CommitConflictError, IcebergError
from tests.support.s3_fixture import settings_from_env
settings_from_env()
lake = iceduck.connect({target!r}, **json.loads({options!r}))
t = lake.table("ns.t")
ops = json.loads({ops!r})
print("ready", flush=True)
for k, op in enumerate(ops):
    print("start", k, flush=True)
    try:
        if op["kind"] == "append":
            ids = op["ids"]
            r = t.append(pa.table({{"id": pa.array(ids, pa.int64()), "p": pa.array([i % 4 for i in ids], pa.int32()),
                                   "tags": pa.array([""] * len(ids), pa.string())}}))
        elif op["kind"] == "delete":
            r = t.delete("id IN (" + ", ".join(map(str, op["ids"])) + ")")
        elif op["kind"] == "update":
            r = t.update({{"tags": "tags || ',{{}}'".format(op["tag"])}}, "id IN (" + ", ".join(map(str, op["ids"])) + ")")
        else:
            out = lake.con.execute(op["sql"]).fetchall()
            print("ack", k, json.dumps(None), json.dumps(None), json.dumps(repr(out)), flush=True)
            continue
        landed = r.attempts > 0  # 0: nothing matched, nothing committed
        print("ack", k, json.dumps(r.snapshot_id if landed else None),
              json.dumps(r.sequence_number if landed else None), json.dumps(r.operation), flush=True)
    except CommitConflictError as e:
        print("conflict", k, json.dumps(str(e)), flush=True)
    except IcebergError as e:
        print("error", k, json.dumps(type(e).__name__ + ": " + str(e)), flush=True)
print("end", flush=True)
"""

REWRITE = "SELECT * FROM iceberg_rewrite_data_files('ns.t', min_input_files := 2, dry_run := false)"
EXPIRE = (
    "SELECT * FROM iceberg_expire_snapshots('ns.t', older_than := now(), retain_last := 6, dry_run := false)"
)


@dataclass(frozen=True)
class Target:
    """Where the workers and the checks connect: a warehouse folder, or a REST catalog's URL with
    `iceduck.connect` options."""

    where: str
    options: dict[str, str] = field(default_factory=dict)

    def connect(self) -> Lake:
        return connect(self.where, **self.options)


@dataclass
class Op:
    """One operation of one worker, and what became of it."""

    kind: str
    ids: list[int] = field(default_factory=list)
    tag: str = ""
    sql: str = ""
    outcome: str = "not started"  # ack | conflict | error | in flight | not started
    snapshot_id: int | None = None
    sequence_number: int | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "ids": self.ids, "tag": self.tag, "sql": self.sql}


@dataclass
class Pool:
    """What the workers may target next: ids that exist (or may), fresh ids, tags."""

    present: list[int]
    next_id: int = 1_000_000
    next_tag: int = 0
    deleted: set[int] = field(default_factory=set)  # ids some delete op has claimed (deletes never share an id)

    def fresh(self, n: int) -> list[int]:
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        return ids


def _plan(rng: random.Random, pool: Pool) -> list[list[Op]]:
    """The operations of every worker of one round (the last worker is the maintenance one)."""
    workers: list[list[Op]] = []
    for _ in range(WRITERS):
        ops: list[Op] = []
        for _ in range(OPS_PER_WRITER):
            kind = rng.choice(["append", "delete", "update", "update", "delete"])
            if kind == "append":
                ops.append(Op("append", pool.fresh(rng.randint(1, 12))))
            elif kind == "delete":
                candidates = [i for i in pool.present if i not in pool.deleted]
                ids = rng.sample(candidates, min(len(candidates), rng.randint(1, 6)))
                pool.deleted.update(ids)
                ops.append(Op("delete", ids))
            else:
                ids = rng.sample(pool.present, min(len(pool.present), rng.randint(1, 10)))
                pool.next_tag += 1
                ops.append(Op("update", ids, tag=f"u{pool.next_tag}"))
        workers.append(ops)
    workers.append([Op("maintenance", sql=rng.choice([REWRITE, EXPIRE])) for _ in range(MAINTENANCE_OPS)])
    return workers


def _spawn(target: Target, ops: list[Op], logs: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """A worker process whose stdout and stderr go to files under `logs` (what a killed process
    printed stays readable; a pipe read through a buffer could lose lines)."""
    code = WORKER.format(
        root=str(ROOT), target=target.where, options=json.dumps(target.options),
        ops=json.dumps([o.to_json() for o in ops]),
    )  # fmt: skip
    with open(logs.with_suffix(".out"), "w") as out, open(logs.with_suffix(".err"), "w") as err:
        return subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code)], stdout=out, stderr=err, text=True, cwd=ROOT,
            env={**os.environ, **(env or {})},
        )  # fmt: skip


def _record(ops: list[Op], out: str) -> bool:
    """Fill in each op's outcome from a worker's output; True if the worker reached its end."""
    for line in out.splitlines():
        word, _, rest = line.partition(" ")
        if word == "start":
            ops[int(rest)].outcome = "in flight"
        elif word == "ack":
            k, sid, seq, detail = rest.split(" ", 3)
            op = ops[int(k)]
            op.outcome, op.snapshot_id, op.sequence_number = "ack", json.loads(sid), json.loads(seq)
            op.detail = json.loads(detail)
        elif word in ("conflict", "error"):
            k, detail = rest.split(" ", 1)
            ops[int(k)].outcome, ops[int(k)].detail = word, json.loads(detail)
    return out.rstrip().endswith("end")


def run_round(
    target: Target, workers: list[list[Op]], rng: random.Random, logs: Path, env: dict[str, str] | None = None
) -> int:
    """Start every worker, SIGKILL some at random moments, wait for the rest; the number killed."""
    logs.mkdir(parents=True, exist_ok=True)
    names = [logs / f"worker{i}" for i in range(len(workers))]
    procs = [_spawn(target, ops, name, env) for ops, name in zip(workers, names, strict=True)]
    try:
        deadline = time.monotonic() + 120
        for p, name in zip(procs, names, strict=True):  # every worker is up (imports done, table loaded)
            while not name.with_suffix(".out").read_text().startswith("ready"):
                assert p.poll() is None, name.with_suffix(".err").read_text()[-3000:]
                assert time.monotonic() < deadline, "a worker did not start"
                time.sleep(0.02)
        started = time.monotonic()
        victims = sorted((rng.uniform(0.0, 4.0), i) for i in rng.sample(range(len(procs)), rng.randint(1, 3)))
        for delay, i in victims:
            time.sleep(max(0.0, started + delay - time.monotonic()))
            if procs[i].poll() is None:
                procs[i].send_signal(signal.SIGKILL)
        killed = 0
        for p, ops, name in zip(procs, workers, names, strict=True):
            p.wait(timeout=240)
            out, err = name.with_suffix(".out").read_text(), name.with_suffix(".err").read_text()
            if p.returncode == -signal.SIGKILL:
                killed += 1
                _record(ops, out)
            else:
                assert p.returncode == 0, err[-3000:]
                assert _record(ops, out), out[-2000:]
                assert "Traceback" not in err, err[-3000:]
        return killed
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


# -- the checks -----------------------------------------------------------------------------------


def _tags(text: str) -> tuple[str, ...]:
    return tuple(sorted(t for t in text.split(",") if t))


def _normal(rows: list[tuple[int, int, str]]) -> list[tuple[int, int, tuple[str, ...]]]:
    return sorted((i, p, _tags(tags)) for i, p, tags in rows)


def _resolve_in_flight(ops: list[Op], rows: dict[int, str]) -> None:
    """Decide from the rows whether each op in flight when its process died landed (it must have
    landed whole or not at all); failed ops must not have landed."""
    for op in ops:
        if op.kind == "maintenance" or op.outcome in ("ack", "not started"):
            continue
        if op.kind == "append":
            there = [i in rows for i in op.ids]
        elif op.kind == "delete":
            there = [i not in rows for i in op.ids]
        else:
            alive = [i for i in op.ids if i in rows]
            there = [op.tag in _tags(rows[i]) for i in alive]
        landed = any(there)
        if op.outcome in ("conflict", "error"):
            assert not landed, f"a {op.kind} that failed ({op.detail}) is in the table: {op.ids}"
            continue
        assert all(there) or not landed, f"an interrupted {op.kind} landed in part: {op.ids} {there}"
        op.outcome = "landed in flight" if landed else "lost in flight"


def _model(initial: list[int], history: list[Op]) -> list[tuple[int, int, tuple[str, ...]]]:
    """The rows the landed operations give, replayed in plain DuckDB (acknowledged ones in sequence
    order, those that landed in flight after them: the operations commute)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE m (id BIGINT, p INTEGER, tags VARCHAR)")
    con.execute("INSERT INTO m SELECT i, i % 4, '' FROM unnest(?::BIGINT[]) t(i)", [initial])
    landed = [o for o in history if o.kind != "maintenance" and o.outcome in ("ack", "landed in flight")]
    landed.sort(key=lambda o: (o.sequence_number is None, o.sequence_number or 0))
    for op in landed:
        if op.kind == "append":
            con.execute("INSERT INTO m SELECT i, i % 4, '' FROM unnest(?::BIGINT[]) t(i)", [op.ids])
        elif op.kind == "delete":
            con.execute("DELETE FROM m WHERE list_contains(?::BIGINT[], id)", [op.ids])
        else:
            con.execute("UPDATE m SET tags = tags || ',' || ? WHERE list_contains(?::BIGINT[], id)", [op.tag, op.ids])
    return _normal(con.execute("SELECT id, p, tags FROM m").fetchall())


def _referenced(location: str) -> set[str]:
    """Every file the current metadata reaches: itself, the metadata files it logs, and every file
    of every retained snapshot."""
    md = mh.metadata(location)
    files = {mh.norm(location)} | {mh.norm(e["metadata-file"]) for e in md.get("metadata-log", [])}
    for snap in md.get("snapshots", []):
        files |= mh.snapshot_files(location, snap["snapshot-id"])
    return files


def _reachable_through_log(location: str) -> set[str]:
    """What orphan removal must also keep: every file of every snapshot an older metadata file in
    the log still lists (expiry dropped them from the current metadata, and a killed expiry can leave
    their files behind, yet a reader of that metadata file reaches them), DELETED entries included."""
    files: set[str] = set()
    for logged in mh.metadata(location).get("metadata-log", []):
        if not mh.exists(logged["metadata-file"]):
            continue
        for snap in mh.metadata(logged["metadata-file"]).get("snapshots", []):
            if not mh.exists(snap["manifest-list"]):
                continue
            files.add(mh.norm(snap["manifest-list"]))
            for mf in mh.avro(snap["manifest-list"]):
                if mh.exists(mf["manifest_path"]):
                    files.add(mh.norm(mf["manifest_path"]))
                    files |= {mh.norm(e["data_file"]["file_path"]) for e in mh.avro(mf["manifest_path"])}
    return files


def _iceduck_rows(target: Target, snapshot_id: int | None = None) -> list[tuple[int, int, str]]:
    lake = target.connect()
    try:
        at = "" if snapshot_id is None else f", snapshot_id := {snapshot_id}"
        return lake.con.execute(f"SELECT id, p, tags FROM iceberg_scan('ns.t'{at})").fetchall()
    finally:
        lake.close()


def check_table(
    target: Target, lake: Lake, initial: list[int], history: list[Op], latest: list[Op], rng: random.Random
) -> None:
    """Every property of the module docstring but orphan removal, on the table as it is now
    (`latest`: the operations of the round that just ended, part of `history`)."""
    location = lake.table("ns.t").load().metadata_location
    md = mh.metadata(location)
    independent = [(r["id"], r["p"], r["tags"]) for r in mh.rows(location)]
    assert _normal(_iceduck_rows(target)) == _normal(independent)
    ids = [i for i, _, _ in independent]
    assert len(ids) == len(set(ids)), "a row is there twice"
    row_ids = [r["_row_id"] for r in mh.rows(location)]
    assert len(row_ids) == len(set(row_ids)), "row ids repeat"
    by_id = {i: tags for i, _, tags in independent}
    _resolve_in_flight(latest, by_id)
    assert _normal(independent) == _model(initial, history)
    # acknowledged commits: on main, unless expired (then older than everything retained)
    main: set[int] = set()
    cursor = md.get("current-snapshot-id")
    snaps = {s["snapshot-id"]: s for s in md.get("snapshots", [])}
    while cursor in snaps:
        main.add(cursor)
        cursor = snaps[cursor].get("parent-snapshot-id")
    oldest = min(snaps[s]["sequence-number"] for s in main)
    acked = [o for o in history if o.outcome == "ack" and o.snapshot_id is not None]
    assert len({o.sequence_number for o in acked}) == len(acked), "two acknowledged commits share a sequence number"
    for op in acked:
        if op.snapshot_id in snaps or op.sequence_number >= oldest:  # type: ignore[operator]
            assert op.snapshot_id in main, f"acknowledged {op.kind} {op.snapshot_id} is not on main"
    # the acknowledged updates of a row applied in the order they committed
    seq_of = {o.tag: o.sequence_number for o in acked if o.kind == "update"}
    for tags in by_id.values():
        order = [seq_of[t] for t in tags.split(",") if t in seq_of]
        assert order == sorted(order), f"updates applied out of commit order: {tags}"
    # every file of every retained snapshot is there; two of them read the same by both readers
    missing = sorted(f for f in _referenced(location) if not mh.exists(f))
    assert not missing, f"referenced files deleted: {missing[:3]}"
    for sid in rng.sample(sorted(snaps), min(2, len(snaps))):
        theirs = [(r["id"], r["p"], r["tags"]) for r in mh.rows(location, sid)]
        assert _normal(_iceduck_rows(target, sid)) == _normal(theirs)


def check_orphan_removal(target: Target, lake: Lake) -> None:
    """Age every file, remove orphans: only unreferenced files go, all of them, rows unchanged."""
    t = lake.table("ns.t")
    location, folder = t.load().metadata_location, t.location
    before_rows = _normal(_iceduck_rows(target))
    referenced = _referenced(location) | _reachable_through_log(location)
    files = {mh.norm(f) for f in table_files(folder)}
    # besides what killed writers left: a file no snapshot references, as a crashed writer leaves one
    planted = mh.norm(f"{folder}/data/p=1/left-by-a-crash.parquet")
    default_io().write_new(planted, b"PAR1 never committed PAR1")
    files.add(planted)
    unreferenced = files - referenced
    if is_remote(folder):  # objects cannot be aged: every writer has ended, so young files may go
        cutoff = "older_than := now() + INTERVAL 1 MINUTE, allow_recent := true"
    else:
        old = time.time() - 3 * 24 * 3600
        for f in files:
            os.utime(f, (old, old))
        cutoff = "older_than := now() - INTERVAL 1 HOUR"
    lake.con.execute(f"SELECT * FROM iceberg_remove_orphan_files('ns.t', {cutoff}, dry_run := false)").fetchall()
    after = {mh.norm(f) for f in table_files(folder)}
    assert files - after <= unreferenced, f"orphan removal deleted referenced files: {sorted(files - after - unreferenced)[:3]}"
    assert after == referenced & files, f"unreferenced files left: {sorted(after - referenced)[:3]}"
    assert planted not in after
    assert lake.table("ns.t").load().metadata_location == location
    assert _normal(_iceduck_rows(target)) == before_rows
    assert _normal([(r["id"], r["p"], r["tags"]) for r in mh.rows(location)]) == before_rows


# -- the tests ------------------------------------------------------------------------------------


def _status(op: Op) -> str:
    """The status column of a maintenance statement's result row (`succeeded`, `failed`, ...)."""
    found = re.search(r"'(succeeded|failed|nothing_to_do|partial|incomplete|already_running|refused|deferred)'", op.detail)
    return found.group(1) if found else op.detail[:80]


def _create(lake: Lake, initial: list[int]) -> None:
    t = lake.create_table(
        "ns.t", [("id", "BIGINT"), ("p", "INTEGER"), ("tags", "VARCHAR")], partition_by=["p"],
        properties={
            "commit.retry.num-retries": "40", "commit.retry.min-wait-ms": "5",
            "commit.retry.max-wait-ms": "200", "iceduck.maintenance.lease-ttl-ms": "300",
        },
    )  # fmt: skip
    for chunk in (initial[i::3] for i in range(3)):  # several files per partition, for compaction
        t.append(pa.table({
            "id": pa.array(chunk, pa.int64()), "p": pa.array([i % 4 for i in chunk], pa.int32()),
            "tags": pa.array([""] * len(chunk), pa.string()),
        }))  # fmt: skip


def rounds(
    target: Target, lake: Lake, rng: random.Random, logs: Path, count: int = ROUNDS,
    env: dict[str, str] | None = None,
) -> Iterator[int]:
    """Run the rounds on a table `ns.t` the caller has not created yet (worker output under `logs`);
    yields the kills per round."""
    initial = list(range(INITIAL))
    _create(lake, initial)
    pool = Pool(present=list(initial))
    history: list[Op] = []
    for n in range(count):
        workers = _plan(rng, pool)
        killed = run_round(target, workers, rng, logs / f"round{n}", env)
        ops = [o for w in workers for o in w]
        history += ops
        check_table(target, lake, initial, history, ops, rng)
        # what may exist next round: whatever landed (appends in flight that landed count too)
        pool.present += [i for o in ops if o.kind == "append" and o.outcome in ("ack", "landed in flight") for i in o.ids]
        gone = {i for o in ops if o.kind == "delete" and o.outcome in ("ack", "landed in flight") for i in o.ids}
        pool.present = [i for i in pool.present if i not in gone]
        yield killed
    statuses = [_status(o) for o in history if o.kind == "maintenance" and o.outcome == "ack"]
    print("outcomes:", sorted(Counter((o.kind, o.outcome) for o in history).items()), "maintenance:", statuses)
    outcomes = [o.outcome for o in history if o.kind != "maintenance"]
    assert outcomes.count("ack") >= len(outcomes) // 3, f"too few commits landed: {outcomes}"


def test_writers_and_maintenance_killed_at_random_lose_no_acknowledged_commit(tmp_path: Path) -> None:
    target = Target(str(tmp_path / "wh"))
    lake = new_lake(target.where)
    rng = random.Random(SEED)
    kills = list(rounds(target, lake, rng, tmp_path / "logs"))
    assert sum(kills) >= ROUNDS, f"too few kills landed before their process ended: {kills}"
    check_orphan_removal(target, lake)
    lake.close()


def test_the_same_through_iceduck_serve(tmp_path: Path) -> None:
    """The same over REST: the workers are clients of one `iceduck serve` (its commits, its SQLite
    catalog); a client killed mid-request leaves a commit the server made or did not make."""
    warehouse = tmp_path / "wh"
    new_lake(warehouse).close()
    with serving(warehouse) as server:
        target = Target(server.url, {"authorization_type": "none"})
        lake = target.connect()
        rng = random.Random(SEED + 1)
        count = max(1, ROUNDS - 2)
        kills = list(rounds(target, lake, rng, tmp_path / "logs", count))
        assert sum(kills) >= count, f"too few kills landed before their process ended: {kills}"
        check_orphan_removal(target, lake)
        lake.close()


def test_the_same_on_s3(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The same on S3 (moto): data, manifests and metadata are objects; the catalog stays SQLite."""
    target = Target(s3_warehouse(request, tmp_path))
    lake = new_lake(target.where)
    rng = random.Random(SEED + 2)
    count = max(1, ROUNDS - 2)
    kills = list(rounds(target, lake, rng, tmp_path / "logs", count, env=child_env()))
    assert sum(kills) >= count, f"too few kills landed before their process ended: {kills}"
    check_orphan_removal(target, lake)
    lake.close()
