"""iceduck._gc.gc_paused: the cyclic collector is off inside, back as it was after (nested blocks,
threads, errors, a process that had disabled it), and reading table metadata leaves it as it was."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from iceduck._gc import gc_paused
from iceduck.errors import InvalidMetadataError
from iceduck.spec.table_metadata import read_table_metadata


@pytest.fixture(autouse=True)
def _collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()  # a test below disables it
    else:
        gc.disable()


def test_paused_inside_restored_after_nested_blocks_and_errors() -> None:
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block still holds the pause
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError), gc_paused():
        _ = 1 / 0
    assert gc.isenabled()


def test_a_collector_the_process_disabled_stays_disabled() -> None:
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_concurrent_blocks_share_one_pause() -> None:
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with gc_paused():
            inside.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(10)
    with gc_paused():
        pass
    assert not gc.isenabled()  # the other thread's block is still open
    release.set()
    t.join()
    assert gc.isenabled()


def test_reading_table_metadata_leaves_the_collector_on() -> None:
    text = b'{"format-version": 2, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1"'
    with pytest.raises(InvalidMetadataError):
        read_table_metadata(text, path="m.json")
    assert gc.isenabled()


def test_reading_corpus_metadata_leaves_the_collector_on(conformance: Path) -> None:
    read = 0
    for path in sorted((conformance / "duckdb-iceberg" / "data" / "persistent").rglob("*.metadata.json"))[:40]:
        with contextlib.suppress(InvalidMetadataError):  # damaged on purpose
            read += len(read_table_metadata(path.read_bytes(), path=str(path), lazy=True).snapshot_ids) >= 0
        assert gc.isenabled()
    assert read > 10
