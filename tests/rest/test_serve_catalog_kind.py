"""`iceduck serve` serves a warehouse's SQLite catalog only: asked for the folder catalog (`--catalog
folder`, or a bucket whose catalog `iceduck migrate-catalog` moved onto it) it refuses with one line
before serving anything, where it used to serve the SQLite catalog regardless (an empty one for a
migrated bucket, beside the tables every other machine commits to).

Truth: the exit code, the one line on stderr, and the files on disk (no catalog.db made).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ICEDUCK = [sys.executable, "-c", "import sys; from iceduck.cli import main; sys.exit(main())"]


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ICEDUCK, "serve", "--port", "0", *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})},
    )  # fmt: skip


def one_line_refusal(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: iceduck serve serves"), done.stderr
    for word in words:
        assert word in lines[0]


def test_serve_refuses_the_folder_catalog_with_one_line(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    wh.mkdir()
    for flags in (["--catalog", "folder", "--warehouse", str(wh)], ["--warehouse", str(wh), "--catalog", "folder"]):
        one_line_refusal(serve(*flags), "--catalog folder", str(wh), "iceduck --catalog folder")
    assert not (wh / "catalog.db").exists()


def test_serve_refuses_a_bucket_whose_catalog_moved_onto_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    moved = cache / "warehouses" / "s3" / "bucket" / "wh"
    moved.mkdir(parents=True)
    (moved / "catalog.db.migrated").write_bytes(b"")
    done = serve("--warehouse", "s3://bucket/wh", env={"ICEDUCK_CACHE_DIR": str(cache)})
    one_line_refusal(done, "moved onto the bucket", "s3://bucket/wh")
    assert not (moved / "catalog.db").exists()


def test_the_sql_catalog_is_still_served(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*ICEDUCK, "serve", "--catalog", "sql", "--warehouse", str(tmp_path / "wh"), "--create", "--port", "0"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        assert "iceduck serve: warehouse" in banner, banner
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert (tmp_path / "wh" / "catalog.db").exists()
