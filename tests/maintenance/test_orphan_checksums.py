"""Hadoop checksum files (`.<name>.crc`, written beside every file by Spark and Java on local and HDFS
paths) of live files are not orphans; those of orphans go with them. Java's own orphan removal never
lists them (Hadoop hides them), so it never deletes a live file's checksum; iceduck did before."""

from __future__ import annotations

import os
import time
from pathlib import Path

from iceduck.maintenance import Maintainer
from iceduck.maintenance.orphans import checksum_sidecar_of
from tests.support.write_helpers import new_lake

OLD = time.time() - 5 * 24 * 3600


def test_checksums_of_live_files_stay(tmp_path: Path) -> None:
    lake = new_lake(tmp_path / "wh")
    lake.sql("CREATE SCHEMA lake.s")
    lake.sql("CREATE TABLE lake.s.t (k BIGINT)")
    lake.sql("INSERT INTO lake.s.t VALUES (1)")
    location = Path(lake.table("s.t").location)
    (live,) = [p for p in (location / "data").rglob("*.parquet")]
    live_crc = live.parent / f".{live.name}.crc"
    orphan = location / "data" / "stray.parquet"
    orphan_crc = location / "data" / ".stray.parquet.crc"
    lonely_crc = location / "data" / ".gone.parquet.crc"  # its file is gone: an orphan itself
    for p in (live_crc, orphan, orphan_crc, lonely_crc):
        p.write_bytes(b"x")
    for root, _, files in os.walk(location):
        for name in files:
            os.utime(os.path.join(root, name), (OLD, OLD))
    r = Maintainer.for_lake(lake, "s.t").remove_orphan_files(dry_run=False)
    assert r.status == "succeeded", r.error
    assert live.exists() and live_crc.exists()
    assert not orphan.exists() and not orphan_crc.exists() and not lonely_crc.exists()
    assert lake.sql("SELECT k FROM lake.s.t").fetchall() == [(1,)]


def test_checksum_sidecar_names() -> None:
    assert checksum_sidecar_of("/t/data/.f.parquet.crc") == "/t/data/f.parquet"
    assert (
        checksum_sidecar_of("s3://b/t/metadata/.v1.metadata.json.crc") == "s3://b/t/metadata/v1.metadata.json"
    )
    assert checksum_sidecar_of("/t/data/f.parquet") is None
    assert checksum_sidecar_of("/t/data/.crc") is None
    assert checksum_sidecar_of("/t/data/x.crc") is None
