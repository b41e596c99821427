"""Commit latency of a one-row INSERT on an object-store warehouse, by catalog: this machine's SQLite
file (`catalog="sql"`), the catalog on the bucket (`catalog="folder"`), and `iceduck serve` (a REST
catalog in another process on the same warehouse), against local emulators: moto (S3),
fake-gcs-server (GCS) and Azurite (Azure), each started here on loopback.

    python -m benchmarks.catalog_commit [--inserts 15] [--stores s3,gcs,azure]

Prints one line per store and catalog: median and fastest seconds per INSERT, and the ratio of
the medians to the SQLite catalog's in the same run. Not one of the `bench_*` cases (it starts
three emulators and a server).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import iceduck


@contextlib.contextmanager
def _store(kind: str) -> Iterator[tuple[str, dict[str, str]]]:
    """(root `scheme://lake`, environment reaching the store for a child process)."""
    from tests.support import s3_fixture

    # imported by name: mypy need not check the pytest fixtures module from here
    store_fixture: Any = importlib.import_module("tests.support.store_fixture")

    if kind == "s3":
        with s3_fixture.moto_server() as server, s3_fixture.registered(server):
            yield f"s3://{s3_fixture.BUCKET}", s3_fixture.aws_env()
        return
    emulator = store_fixture.gcs_emulator if kind == "gcs" else store_fixture.azurite
    with emulator() as store, store_fixture.registered(store):
        if kind == "gcs":
            env = {"STORAGE_EMULATOR_HOST": store.endpoint}
        else:
            env = {"AZURE_STORAGE_CONNECTION_STRING": str(store.secret_options()["CONNECTION_STRING"])}
        yield store.root(), env


@contextlib.contextmanager
def _served(warehouse: str, env: dict[str, str]) -> Iterator[str]:
    from tests.support.s3_fixture import _wait_listening, die_with_parent, free_port

    port = free_port()
    cmd = [
        sys.executable, "-c", "from iceduck.cli import main; raise SystemExit(main())", "serve",
        "--warehouse", warehouse, "--create", "--port", str(port),
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "serve.log"
        child_env = {**os.environ, **env, "ICEDUCK_CACHE_DIR": os.path.join(tmp, "cache")}
        with open(log, "wb") as out:
            proc = subprocess.Popen(die_with_parent(cmd), stdout=out, stderr=subprocess.STDOUT, env=child_env)
        try:
            _wait_listening(proc, port, "iceduck serve", log)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(20)


def _time_inserts(lake: iceduck.Lake, table: str, inserts: int) -> list[float]:
    lake.sql(f"CREATE TABLE {table} (i INTEGER)")
    lake.sql(f"INSERT INTO lake.{table} VALUES (-1)")  # warm: the first commit loads what later ones reuse
    times = []
    for i in range(inserts):
        started = time.perf_counter()
        lake.sql(f"INSERT INTO lake.{table} VALUES ({i})")
        times.append(time.perf_counter() - started)
    rows = lake.sql(f"SELECT count(*) FROM lake.{table}")
    assert rows is not None and rows.fetchall() == [(inserts + 1,)]
    return times


def measure(kind: str, inserts: int) -> list[tuple[str, list[float]]]:
    out: list[tuple[str, list[float]]] = []
    with _store(kind) as (root, env), tempfile.TemporaryDirectory() as cache:
        os.environ["ICEDUCK_CACHE_DIR"] = cache
        for catalog in ("sql", "folder"):
            warehouse = f"{root}/{uuid.uuid4().hex}/wh"
            with iceduck.connect(warehouse, catalog=catalog) as lake:
                lake.sql("CREATE SCHEMA s")
                out.append((catalog, _time_inserts(lake, "s.t", inserts)))
        warehouse = f"{root}/{uuid.uuid4().hex}/wh"
        with _served(warehouse, env) as url, iceduck.connect(url) as lake:
            lake.sql("CREATE SCHEMA s")
            out.append(("serve", _time_inserts(lake, "s.t", inserts)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.catalog_commit", description=__doc__)
    parser.add_argument("--inserts", type=int, default=15)
    parser.add_argument("--stores", default="s3,gcs,azure")
    args = parser.parse_args(argv)
    for kind in args.stores.split(","):
        results = measure(kind, args.inserts)
        base = statistics.median(results[0][1])
        for catalog, times in results:
            median = statistics.median(times)
            print(
                f"{kind:6} {catalog:7} median {median * 1000:7.1f} ms  fastest {min(times) * 1000:7.1f} ms  "
                f"{median / base:4.2f}x the SQLite catalog",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
