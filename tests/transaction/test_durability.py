"""Durability order (issue 15, faults): every file a commit references is fsync'ed (and the folder
holding it, so its name survives a power cut) before the catalog pointer moves to the new
metadata, for data files, delete files, manifests, manifest lists and the metadata file alike.

`os.fsync` is wrapped to record the inode of each file and folder it makes durable; the catalog's
`commit` (the pointer swap) records when it runs. Inodes, not names: files are written under a
temporary name and linked or renamed into place."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from iceduck.catalog.folder import FolderCatalog
from iceduck.catalog.sql import SqlCatalog
from iceduck.lake import Lake
from tests.support import maintenance_helpers as mh

LAKE_NAMESPACES = ("s",)


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    log: list[tuple[str, Any]] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        log.append(("fsync", (st.st_dev, st.st_ino)))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    for cls in (SqlCatalog, FolderCatalog):
        original: Callable[..., str] = cls.commit

        def commit(self: Any, *args: Any, _original: Callable[..., str] = original) -> str:
            log.append(("pointer", args[-1]))
            return _original(self, *args)

        monkeypatch.setattr(cls, "commit", commit)
    return log


def _inode(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino)


@pytest.mark.parametrize(
    "statements",
    [
        ["INSERT INTO s.t SELECT i, 'p' || (i % 3) FROM range(30) t(i)"],
        ["DELETE FROM s.t WHERE id % 4 = 0"],  # delete files: v3 deletion vectors
        ["UPDATE s.t SET p = 'q' WHERE id < 5"],
    ],
    ids=["insert", "delete", "update"],
)
@pytest.mark.local_only("fsync and inode order are local-file facts (an S3 PUT is visible whole or not at all)")
def test_everything_a_commit_references_is_durable_before_the_pointer_moves(
    lake: Lake, events: list[tuple[str, Any]], statements: list[str]
) -> None:
    lake.sql("CREATE TABLE s.t (id BIGINT, p VARCHAR) PARTITIONED BY (p)")
    lake.sql("INSERT INTO s.t SELECT i, 'p' || (i % 3) FROM range(30) t(i)")
    before = mh.snapshot_files(str(lake.table("s.t").metadata_location))
    events.clear()
    for statement in statements:
        lake.sql(statement)
    md = str(lake.table("s.t").metadata_location)
    written = (mh.snapshot_files(md) - before) | {md}
    assert len(written) >= 3  # a manifest list, a manifest and the metadata file at least
    pointer = next(i for i, (kind, arg) in enumerate(events) if kind == "pointer" and arg == md)
    durable = {arg for kind, arg in events[:pointer] if kind == "fsync"}
    late = sorted(p for p in written if _inode(p) not in durable)
    assert not late, f"not fsync'ed before the catalog pointer moved: {late}"
    folders = sorted({str(Path(p).parent) for p in written if _inode(str(Path(p).parent)) not in durable})
    assert not folders, f"folders whose new entries were not fsync'ed before the pointer moved: {folders}"
