"""The catalog on the bucket on GCS and Azure (`iceduck.connect("gs://b/wh", catalog="folder")`,
`az://...`): processes that share nothing but the store share its tables, concurrent commits all
land, and a writer killed mid-commit leaves a table that reads and takes the next commit.

Truth: the rows each writer process inserted (it says which, and numbers them); the emulators'
own answers to a second exclusive create (checked here first: fake-gcs-server honours
`ifGenerationMatch=0` on the multipart uploads gcsfs sends below 50 MiB, Azurite honours
`If-None-Match: *`); each process with its own empty cache folder and only the environment
(`STORAGE_EMULATOR_HOST`, `AZURE_STORAGE_CONNECTION_STRING`) to reach the store.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import iceduck
from iceduck.catalog.bucket import BucketCatalog
from iceduck.errors import AlreadyExistsError
from iceduck.io import fsspec_store
from tests.support.s3_fixture import ROOT
from tests.support.store_fixture import StoreServer

WORKER = """
import sys
import iceduck
warehouse, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with iceduck.connect(warehouse, catalog="folder") as lake:
    for i in range(count):
        lake.sql(f"INSERT INTO lake.s.t VALUES ('{who}', {i})")
        print(i, flush=True)
"""


def _env(store: StoreServer, cache: Path) -> dict[str, str]:
    """A child's environment: the store reached only the way a user's shell would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_STORAGE", "STORAGE_EMULATOR"))}
    env.update({"PYTHONPATH": str(ROOT), "ICEDUCK_CACHE_DIR": str(cache)})
    if store.kind == "gcs":
        env["STORAGE_EMULATOR_HOST"] = f"127.0.0.1:{store.port}"
    else:
        env["AZURE_STORAGE_CONNECTION_STRING"] = str(dict(store.options)["CONNECTION_STRING"])
    return env


def _warehouse(store: StoreServer) -> str:
    return f"{store.root()}/{uuid.uuid4().hex}/wh"


def test_the_store_lets_one_of_many_racing_creates_win(store: StoreServer) -> None:
    """The premise, on the backend calls `write_new` makes: of 6 writers creating one object at
    once, exactly one wins and its bytes are the object's, on every one of 10 objects."""
    io = fsspec_store.StoreFileIO()
    for _ in range(10):
        path = f"{store.root()}/{uuid.uuid4().hex}/v2.metadata.json"
        fs, loc = io._fs(path)
        barrier = threading.Barrier(6)

        def create(
            w: int, fs: object = fs, fs_path: str = loc.fs_path, barrier: threading.Barrier = barrier
        ) -> int | None:
            barrier.wait()
            try:
                if store.kind == "gcs":
                    fs.pipe_file(fs_path, f"w{w}".encode(), mode="create")  # type: ignore[attr-defined]
                else:
                    fs.pipe_file(fs_path, f"w{w}".encode(), overwrite=False)  # type: ignore[attr-defined]
            except FileExistsError:
                return None
            return w

        with ThreadPoolExecutor(6) as pool:
            winners = [w for w in pool.map(create, range(6)) if w is not None]
        assert len(winners) == 1
        assert io.read(path) == f"w{winners[0]}".encode()
        with pytest.raises(AlreadyExistsError):
            io.write_new(path, b"again")


def test_a_table_made_in_one_lake_is_in_every_other(
    store: StoreServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warehouse = _warehouse(store)
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache-a"))
    with iceduck.connect(warehouse, catalog="folder") as a:
        a.sql("CREATE SCHEMA s")
        a.sql("CREATE TABLE s.t (who VARCHAR, i INTEGER)")
        a.sql("INSERT INTO lake.s.t VALUES ('a', 1)")
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache-b"))  # nothing local in common
    with iceduck.connect(warehouse, catalog="folder") as b:
        assert isinstance(b.catalog, BucketCatalog)
        assert b.list_namespaces() == ("s",)
        assert b.list_tables("s") == ("t",)
        assert b.sql("SELECT * FROM lake.s.t").fetchall() == [("a", 1)]
        b.sql("INSERT INTO lake.s.t VALUES ('b', 2)")
        names = {f.path.rsplit("/", 1)[1] for f in b.io.list_prefix(f"{warehouse}/s/t/metadata")}
        assert {"v1.metadata.json", "v2.metadata.json", "v3.metadata.json", "version-hint.text"} <= names
        assert b.io.read(f"{warehouse}/s/t/metadata/version-hint.text") == b"3"
        b.drop_table("s.t")
        assert b.list_tables("s") == ()
        b.drop_namespace("s")
        assert b.list_namespaces() == ()


def test_writers_in_several_processes_lose_no_commit(store: StoreServer, tmp_path: Path) -> None:
    warehouse = _warehouse(store)
    with iceduck.connect(warehouse, catalog="folder") as lake:
        lake.sql("CREATE SCHEMA s")
        lake.sql(
            "CREATE TABLE s.t (who VARCHAR, i INTEGER) WITH ('commit.retry.num-retries' = '100', "
            "'commit.retry.min-wait-ms' = '10', 'commit.retry.max-wait-ms' = '200')"
        )
    writers, count = 3, 5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, warehouse, f"w{w}", str(count)],
            cwd=ROOT,
            env=_env(store, tmp_path / f"cache-{w}"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(writers)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    with iceduck.connect(warehouse, catalog="folder") as lake:
        rows = sorted(lake.sql("SELECT who, i FROM lake.s.t").fetchall())
        assert rows == sorted((f"w{w}", i) for w in range(writers) for i in range(count))
        assert lake.sql("SELECT count(*) FROM iceberg_snapshots('s.t')").fetchall() == [(writers * count,)]
        assert lake.catalog.load_table("s", "t").endswith(f"/v{writers * count + 1}.metadata.json")


KILLED = """
import sys
import iceduck
with iceduck.connect(sys.argv[1], catalog="folder") as lake:
    lake.sql("DELETE FROM lake.s.t WHERE i = " + sys.argv[2])
print("survived")
"""


@pytest.mark.parametrize(("stage", "lands"), [("metadata-written", False), ("committed", True)])
def test_a_writer_killed_mid_commit_leaves_the_old_or_the_new_version(
    store: StoreServer, tmp_path: Path, stage: str, lands: bool
) -> None:
    """Killed (os._exit, no cleanup) before the exclusive create of v{N+1}, or after it and before
    the hint moves: the table reads the old rows or the new ones, and takes the next commit."""
    warehouse = _warehouse(store)
    with iceduck.connect(warehouse, catalog="folder") as lake:
        lake.sql("CREATE SCHEMA s")
        lake.sql("CREATE TABLE s.t AS SELECT range AS i FROM range(10)")
        hint_before = lake.io.read(f"{warehouse}/s/t/metadata/version-hint.text")
    env = {**_env(store, tmp_path / "cache-killed"), "ICEDUCK_TEST_CRASH_AT": stage}
    proc = subprocess.run(
        [sys.executable, "-c", KILLED, warehouse, "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 77, proc.stderr[-2000:]
    with iceduck.connect(warehouse, catalog="folder") as lake:
        expected = [i for i in range(10) if not (lands and i == 1)]
        assert sorted(r[0] for r in lake.sql("SELECT i FROM lake.s.t").fetchall()) == expected
        assert lake.io.read(f"{warehouse}/s/t/metadata/version-hint.text") == hint_before
        version = int(hint_before)
        assert lake.catalog.load_table("s", "t").endswith(
            f"/v{version + 1 if lands else version}.metadata.json"
        )
        lake.sql("DELETE FROM lake.s.t WHERE i = 2")
        assert sorted(r[0] for r in lake.sql("SELECT i FROM lake.s.t").fetchall()) == [
            i for i in expected if i != 2
        ]


def test_a_writer_killed_with_sigkill_leaves_a_table_that_reads(store: StoreServer, tmp_path: Path) -> None:
    """SIGKILL at an arbitrary moment of a stream of inserts: the table holds the inserts the
    writer reported done (and at most the one in flight), and takes the next commit."""
    warehouse = _warehouse(store)
    with iceduck.connect(warehouse, catalog="folder") as lake:
        lake.sql("CREATE SCHEMA s")
        lake.sql("CREATE TABLE s.t (who VARCHAR, i INTEGER)")
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, warehouse, "k", "1000"],
        cwd=ROOT,
        env=_env(store, tmp_path / "cache-k"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    done = -1
    deadline = time.monotonic() + 120
    while done < 3 and time.monotonic() < deadline:  # a few commits in, then mid-stream
        line = proc.stdout.readline()
        if not line:
            break
        done = int(line)
    time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert done >= 3, err[-2000:]
    done = max([done, *(int(x) for x in out.split())])
    with iceduck.connect(warehouse, catalog="folder") as lake:
        found = sorted(r[0] for r in lake.sql("SELECT i FROM lake.s.t").fetchall())
        assert found in (list(range(done + 1)), list(range(done + 2)))
        lake.sql("INSERT INTO lake.s.t VALUES ('after', -1)")
        assert lake.sql("SELECT count(*) FROM lake.s.t WHERE who = 'after'").fetchall() == [(1,)]
