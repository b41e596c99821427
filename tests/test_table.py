"""iceduck.table: the byte-bounded manifest cache and chunked manifest decoding, against the rows a
table builder wrote (its own truth) and against reads with an unbounded cache."""

from __future__ import annotations

import gc
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from iceduck import table as table_module
from iceduck.errors import FileNotFoundInTableError, IcebergError
from iceduck.scan.planner import plan_scan
from iceduck.spec import _avro_schemas
from iceduck.spec.manifest import Manifest
from iceduck.table import Table, _FileCache, clear_caches
from tests.support.tablebuilder import TableBuilder


def test_the_cache_evicts_least_recently_used_items_by_bytes(tmp_path: Any) -> None:
    paths = []
    for i in range(4):
        p = tmp_path / f"f{i}"
        p.write_text("x")
        paths.append(str(p))
    cache = _FileCache(100, max_bytes=100, weigh=len)
    loads: list[str] = []

    def loader(value: str) -> Callable[[], str]:
        def load() -> str:
            loads.append(value)
            return value

        return load

    cache.get(paths[0], loader("a" * 40))
    cache.get(paths[1], loader("b" * 40))
    assert cache.get(paths[0], loader("never")) == "a" * 40  # a hit, and now the most recent
    cache.get(paths[2], loader("c" * 40))  # 120 bytes: the least recent (b) goes
    assert len(cache) == 2 and cache.bytes == 80
    assert cache.get(paths[1], loader("b" * 40)) == "b" * 40  # decoded again
    assert loads == ["a" * 40, "b" * 40, "c" * 40, "b" * 40]
    # An item heavier than the whole budget is returned, not kept (nothing else is pushed out).
    before = cache.bytes
    assert cache.get(paths[3], loader("d" * 101)) == "d" * 101
    assert cache.bytes == before and len(cache) == 2
    cache.clear()
    assert cache.bytes == 0 and len(cache) == 0


def _many_manifests(make: Callable[..., TableBuilder], commits: int) -> TableBuilder:
    b = make(format_version=3)
    for k in range(commits):
        paths = [b.add_data_file(rows=4) for _ in range(3)]
        b.commit(dvs={paths[-1]: [k % 4]} if k % 3 == 0 else None)
    return b


def test_reads_agree_when_the_cache_holds_a_few_manifests(
    table_builder: Callable[..., TableBuilder], monkeypatch: pytest.MonkeyPatch
) -> None:
    b = _many_manifests(table_builder, 9)
    t = Table.load(b.metadata_path)
    snapshot = t.snapshot()
    mfs = t.manifests(snapshot)
    assert len(mfs) >= 10

    clear_caches()
    con = duckdb.connect()
    import iceduck

    iceduck.register(con)
    files_sql = f"SELECT file_path, record_count FROM iceberg_files('{b.metadata_path}') ORDER BY 1"
    rows_sql = f"SELECT id FROM iceberg_scan('{b.metadata_path}') ORDER BY 1"
    expected_files = con.execute(files_sql).fetchall()
    expected_plan = [task.path for task in plan_scan(t, snapshot).tasks]
    assert [r[0] for r in con.execute(rows_sql).fetchall()] == b.live_ids()

    # A budget of about two manifests: every read still sees every file, and the cache stays in it.
    one = Manifest.approx_bytes(t.manifest(mfs[0]))
    small = _FileCache(16384, max_bytes=2 * one + 1, weigh=Manifest.approx_bytes)
    monkeypatch.setattr(table_module, "_MANIFESTS", small)
    monkeypatch.setattr(table_module, "MANIFEST_CHUNK", 3)
    assert [m for m, _ in t.iter_manifests(mfs, chunk=3)] == list(mfs)
    assert small.bytes <= 2 * one + 1 and len(small) <= 2
    assert con.execute(files_sql).fetchall() == expected_files
    assert [task.path for task in plan_scan(t, snapshot).tasks] == expected_plan
    assert gc.isenabled()
    assert [r[0] for r in con.execute(rows_sql).fetchall()] == b.live_ids()
    assert small.bytes <= 2 * one + 1


def test_manifests_decoded_together_equal_one_by_one_and_fail_in_order(
    table_builder: Callable[..., TableBuilder], monkeypatch: pytest.MonkeyPatch
) -> None:
    # With polars decoding, the manifests a read lacks are decoded in one polars call per Avro
    # schema (spec.manifest.read_manifests); each manifest's entries must be what it reads alone.
    monkeypatch.setattr(_avro_schemas, "use_polars", lambda size: True)
    batches: list[int] = []
    batch = _avro_schemas._polars_batch
    monkeypatch.setattr(
        _avro_schemas,
        "_polars_batch",
        lambda meta, sync, blocks: batches.append(len(blocks)) or batch(meta, sync, blocks),
    )
    b = _many_manifests(table_builder, 6)
    t = Table.load(b.metadata_path)
    mfs = t.manifests(t.snapshot())
    clear_caches()
    together = t.read_manifests(mfs)
    assert batches and max(batches) > 1
    clear_caches()
    alone = [t.manifest(mf) for mf in mfs]
    assert [m.entries for m in together] == [m.entries for m in alone]
    assert sum(len(m) for m in together) > len(mfs)
    assert t.read_manifests(mfs)[0] is alone[0]  # cached ones are not decoded again

    # The first failing manifest in order raises, naming its file: a damaged one before a missing one,
    # then (the damaged one mended) the missing one.
    clear_caches()
    damaged, missing = (t.resolve(mfs[k].manifest_path) for k in (1, 3))
    good = Path(damaged).read_bytes()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF
    Path(damaged).write_bytes(bytes(bad))
    Path(missing).rename(missing + ".gone")
    with pytest.raises(IcebergError) as info:
        t.read_manifests(mfs)
    assert damaged in str(info.value) and missing not in str(info.value)
    Path(damaged).write_bytes(good)
    clear_caches()
    with pytest.raises(FileNotFoundInTableError, match=re.escape(missing)):
        t.read_manifests(mfs)
    assert gc.isenabled()  # decoding holds the cyclic collector off (iceduck._gc) only while it runs
