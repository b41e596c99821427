"""Benchmark data sets: built on first use under ``benchmarks/.data/`` (gitignored), then reused.

Each kind of data set is built by PyIceberg in a child process (``python -m benchmarks.datasets
build KIND --scale SCALE``) so that the harness process does not carry PyIceberg's memory into the
peak-RSS numbers of the in-process iceduck measurements. A finished build leaves ``dataset.json``
(parameters, current metadata location, counts, build time); anything else is rebuilt from scratch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import fastavro

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(__file__).resolve().parent / ".data"
SCALES = ("small", "full")

# Bump when a builder changes what it writes: cached data sets of an older format are rebuilt.
_FORMAT = 1


@dataclass(frozen=True, slots=True)
class Dataset:
    """A built data set: where it lives and what the builder recorded about it (``info``)."""

    kind: str
    name: str
    root: Path
    metadata_location: str  # plain absolute path of the current metadata.json
    info: dict[str, Any]
    build_seconds: float | None  # None when reused from an earlier run
    waited_seconds: float = 0.0  # time spent waiting for a concurrent run that was building it

    @property
    def reused(self) -> bool:
        """True when the data set came from the cache rather than being built now."""
        return self.build_seconds is None


@dataclass(frozen=True, slots=True)
class _Kind:
    params: Callable[[str], dict[str, int]]  # scale -> parameters
    name: Callable[[dict[str, int]], str]  # parameters -> directory name
    build: Callable[[Path, dict[str, int]], dict[str, Any]]  # (root, parameters) -> info


def _plain_path(location: str) -> str:
    return location.removeprefix("file://")


# -- "files": many tiny data files in exactly M manifests of F files -----------------------------------


def _files_params(scale: str) -> dict[str, int]:
    if scale == "small":
        return {"manifests": 10, "files_per_manifest": 10, "rows_per_file": 3}
    return {"manifests": 100, "files_per_manifest": 100, "rows_per_file": 3}


def _files_name(params: dict[str, int]) -> str:
    return f"files_{params['manifests']}x{params['files_per_manifest']}"


def _build_files(root: Path, params: dict[str, int]) -> dict[str, Any]:
    """A v2 table partitioned by identity(part) whose current snapshot has M manifests of F files.

    Each of the M fast appends writes F groups of ``rows_per_file`` rows, one group per distinct
    ``part`` value, so PyIceberg writes exactly one tiny data file per partition: F files in one new
    manifest. Manifest merging is disabled, so every append keeps the earlier manifests as they are.
    """
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import IntegerType, LongType, NestedField, StringType

    manifests, per_manifest, rows = params["manifests"], params["files_per_manifest"], params["rows_per_file"]
    catalog = SqlCatalog(
        "bench", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=(root / "warehouse").as_uri()
    )
    catalog.create_namespace("bench")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "part", IntegerType(), required=False),
        NestedField(3, "name", StringType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="part")
    )
    table = catalog.create_table(
        "bench.files",
        schema=schema,
        partition_spec=spec,
        properties={"format-version": "2", "commit.manifest-merge.enabled": "false"},
    )
    arrow_schema = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("name", pa.string())])
    next_id = 0
    for _ in range(manifests):
        ids = list(range(next_id, next_id + per_manifest * rows))
        next_id += len(ids)
        batch = pa.table(
            {"id": ids, "part": [i // rows for i in range(len(ids))], "name": [f"row-{i}" for i in ids]},
            schema=arrow_schema,
        )
        table.append(batch)
    table = catalog.load_table("bench.files")
    metadata_location = _plain_path(table.metadata_location)
    counts = _verify_manifests(metadata_location, manifests, per_manifest)
    return {
        "metadata_location": metadata_location,
        "table_location": _plain_path(table.location()),
        "snapshots": len(table.metadata.snapshots),
        "manifests": counts["manifests"],
        "data_files": counts["data_files"],
        "records": counts["records"],
    }


def _verify_manifests(metadata_location: str, manifests: int, per_manifest: int) -> dict[str, int]:
    """Read the current manifest list and manifests with fastavro: M data manifests of F live files."""
    metadata = json.loads(Path(metadata_location).read_text())
    (snapshot,) = [s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"]]
    entries = _avro_records(snapshot["manifest-list"])
    if len(entries) != manifests:
        raise RuntimeError(
            f"{metadata_location}: manifest list has {len(entries)} manifests, wanted {manifests}"
        )
    data_files = records = 0
    for entry in entries:
        path = _plain_path(entry["manifest_path"])
        listed = entry["added_files_count"] + entry["existing_files_count"]
        live = [e for e in _avro_records(path) if e["status"] != 2]  # 2 = DELETED
        if entry["content"] != 0 or listed != per_manifest or len(live) != per_manifest:
            raise RuntimeError(
                f"{path}: content {entry['content']}, {listed} files in the manifest list, "
                f"{len(live)} live entries; wanted a data manifest of {per_manifest} files"
            )
        data_files += len(live)
        records += sum(e["data_file"]["record_count"] for e in live)
    return {"manifests": len(entries), "data_files": data_files, "records": records}


def _avro_records(location: str) -> list[dict[str, Any]]:
    with open(_plain_path(location), "rb") as handle:
        return [cast(dict[str, Any], record) for record in fastavro.reader(handle)]


KINDS: dict[str, _Kind] = {
    "files": _Kind(_files_params, _files_name, _build_files),
}


# -- cache --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialize builds of one data set across concurrent harness runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _cached(kind: str, root: Path, params: dict[str, int]) -> dict[str, Any] | None:
    try:
        info: dict[str, Any] = json.loads((root / "dataset.json").read_text())
    except (OSError, ValueError):
        return None
    valid = (
        info.get("format") == _FORMAT
        and info.get("kind") == kind
        and info.get("params") == params
        and info.get("root") == str(root)  # absolute paths inside the metadata must still hold
        and Path(info.get("metadata_location", "")).is_file()
    )
    return info if valid else None


def dataset(kind: str, scale: str) -> Dataset:
    """The data set ``kind`` at ``scale``, built (in a child process) unless a valid cached copy exists."""
    spec = KINDS[kind]
    params = spec.params(scale)
    name = spec.name(params)
    root = DATA_DIR / name
    asked = time.perf_counter()
    with _locked(DATA_DIR / f".{name}.lock"):
        waited = time.perf_counter() - asked
        info = _cached(kind, root, params)
        built: float | None = None
        if info is None:
            started = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "benchmarks.datasets", "build", kind, "--scale", scale],
                cwd=REPO_ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
            built = time.perf_counter() - started
            info = _cached(kind, root, params)
            if proc.returncode != 0 or info is None:
                raise RuntimeError(
                    f"building data set {name} in {root} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
                )
    return Dataset(kind, name, root, info["metadata_location"], info, built, round(waited, 1))


def build(kind: str, scale: str) -> dict[str, Any]:
    """Build ``kind`` at ``scale`` in this process, replacing whatever is at its directory."""
    spec = KINDS[kind]
    params = spec.params(scale)
    root = DATA_DIR / spec.name(params)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    started = time.perf_counter()
    info = spec.build(root, params)
    import pyiceberg

    info.update(
        format=_FORMAT,
        kind=kind,
        params=params,
        root=str(root),
        build_seconds=round(time.perf_counter() - started, 3),
        built_with=f"pyiceberg {pyiceberg.__version__}",
    )
    # written last: its presence marks a complete, verified build
    (root / "dataset.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.datasets build KIND [--scale small|full]`` (used by :func:`dataset`)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.datasets")
    parser.add_argument("command", choices=["build"])
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("--scale", choices=SCALES, default="full")
    args = parser.parse_args(argv)
    info = build(args.kind, args.scale)
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
