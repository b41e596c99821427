"""How iceduck reads S3 objects: one GET of an object's tail answers its size, its footer and
DuckDB's first read; every other read is the exact range asked for. Checked on the wire (every
request s3fs sends is recorded) against a local moto server, and on s3rver for its misreading of
suffix ranges."""

from __future__ import annotations

import itertools
import os
import random
import uuid
from collections.abc import Iterator
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import s3fs

import iceduck
from iceduck.errors import StorageError
from iceduck.io import s3_clients, s3_reads, s3_settings
from iceduck.io.fileio import parquet_footer
from iceduck.io.s3_readers import ObstoreReader
from iceduck.io.storage import default_io
from iceduck.table import clear_caches
from tests.support.s3_fixture import BUCKET, S3Server, registered

IO = default_io()


class Wire:
    """Every S3 request made while recording, through s3fs or obstore: (operation, key, Range
    header or '')."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    def of(self, suffix: str) -> list[tuple[str, str, str]]:
        return [c for c in self.calls if c[1].endswith(suffix)]


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Iterator[Wire]:
    found = Wire()
    original = s3fs.S3FileSystem._call_s3

    async def recording(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        found.calls.append((method, str(kwargs.get("Key", "")), str(kwargs.get("Range", ""))))
        return await original(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", recording)
    # reads through obstore (io.s3_readers): the same record, one entry per request
    get, info, read_all = ObstoreReader.get, ObstoreReader.info, ObstoreReader.read_all

    def recorded_get(self: ObstoreReader, key: str, wanted: str, etag: str | None) -> Any:
        found.calls.append(("get_object", key.partition("/")[2], wanted))
        return get(self, key, wanted, etag)

    def recorded_info(self: ObstoreReader, key: str) -> Any:
        found.calls.append(("head_object", key.partition("/")[2], ""))
        return info(self, key)

    def recorded_read_all(self: ObstoreReader, key: str) -> Any:
        found.calls.append(("get_object", key.partition("/")[2], ""))
        return read_all(self, key)

    monkeypatch.setattr(ObstoreReader, "get", recorded_get)
    monkeypatch.setattr(ObstoreReader, "info", recorded_info)
    monkeypatch.setattr(ObstoreReader, "read_all", recorded_read_all)
    s3_reads.forget_seen()
    yield found
    s3_reads.forget_seen()


def _cold_scan(wire: Wire, sql: str, metadata: str) -> list[Any]:
    """`sql` on a fresh connection with every cache emptied (iceduck's and DuckDB's external file
    cache) and the wire log cleared, so the log holds exactly this scan's requests."""
    clear_caches()
    s3_reads.forget_seen()
    wire.calls.clear()
    con = duckdb.connect()
    try:
        iceduck.register(con)
        con.execute("SET enable_external_file_cache = false")
        return con.execute(sql, [metadata]).fetchall()
    finally:
        con.close()


def _span(header: str, size: int) -> tuple[int, int]:
    """[first, end) of a Range header against an object of `size` bytes."""
    first, _, last = header.removeprefix("bytes=").partition("-")
    if not first:
        return max(0, size - int(last)), size
    return int(first), min(size, int(last) + 1)


def _blob(n: int) -> bytes:
    return random.Random(n).randbytes(n)


@pytest.mark.parametrize("expected", [None, "true", 100, 10**6])
def test_tail_read_is_checked_against_the_store(
    s3_prefix: str, wire: Wire, expected: int | str | None
) -> None:
    data = _blob(40_000)
    path = f"{s3_prefix}/blob.bin"
    IO.write_new(path, data)
    s3_reads.forget_seen()
    wire.calls.clear()
    hint = len(data) if expected == "true" else expected
    with IO.open_input(path, expected_size=hint if isinstance(hint, int) else None) as f:
        assert f.size == len(data)
        assert f.read_at(len(data) - 8, 8) == data[-8:]
        assert f.read_at(len(data) - s3_reads.TAIL_BYTES, s3_reads.TAIL_BYTES) == data[-s3_reads.TAIL_BYTES :]
        gets_for_tail = len(wire.calls)
        assert f.read_at(0, 4) == data[:4]
        assert f.read_at(1000, 3000) == data[1000:4000]
    # a right (or no) size hint: the tail in one GET; a wrong one costs exactly one more request
    # (too small: the answer's Content-Range tells the size; too big: refused, then a suffix range)
    assert [c[0] for c in wire.calls].count("head_object") == 0
    assert gets_for_tail == (1 if expected in (None, "true") else 2)
    assert wire.calls[-2:] == [
        ("get_object", path.split(f"{BUCKET}/", 1)[1], "bytes=0-3"),
        ("get_object", path.split(f"{BUCKET}/", 1)[1], "bytes=1000-3999"),
    ]


def test_small_and_empty_objects(s3_prefix: str) -> None:
    IO.write_new(f"{s3_prefix}/empty", b"")
    IO.write_new(f"{s3_prefix}/small", b"0123456789")
    s3_reads.forget_seen()
    with IO.open_input(f"{s3_prefix}/empty") as f:
        assert f.size == 0 and f.read_at(0, 0) == b""
    with IO.open_input(f"{s3_prefix}/small", expected_size=10) as f:
        assert f.size == 10 and f.read_at(2, 5) == b"23456"
    with IO.open_stream(f"{s3_prefix}/small") as stream:
        stream.seek(-3, os.SEEK_END)
        assert stream.read() == b"789"
        stream.seek(1)
        assert stream.read(2) == b"12"


def test_a_rewritten_object_is_not_answered_from_what_was_seen(s3_prefix: str) -> None:
    path = f"{s3_prefix}/version-hint.text"
    IO.write_atomic(path, b"1")
    with IO.open_input(path) as f:
        assert f.read_at(0, 1) == b"1"
    IO.write_atomic(path, b"22")
    with IO.open_input(path) as f:
        assert (f.size, f.read_at(0, 2)) == (2, b"22")


def test_an_object_replaced_behind_iceduck_is_refused_not_mixed(s3_prefix: str, moto_s3: S3Server) -> None:
    path = f"{s3_prefix}/data.parquet"
    old, new = _blob(60_000), _blob(60_001)[:60_000]
    IO.write_new(path, old)
    with IO.open_input(path) as f:
        assert f.read_at(f.size - 8, 8) == old[-8:]  # the tail, kept
        client: Any = moto_s3.client()
        client.put_object(Bucket=BUCKET, Key=path.split(f"{BUCKET}/", 1)[1], Body=new)
        assert f.read_at(f.size - 8, 8) == old[-8:]  # still the old object's own bytes
        with pytest.raises(StorageError, match=r"data\.parquet: the object changed while it was being read"):
            f.read_at(0, 1000)  # a range from the store: If-Match refuses the new object
    with IO.open_input(path) as f:  # opened again: the new object
        assert f.read_at(0, 1000) == new[:1000]


def test_s3rver_misreading_suffix_ranges_costs_a_get_not_wrong_bytes(s3rver: S3Server, wire: Wire) -> None:
    # s3rver answers `Range: bytes=-N` with the FIRST N+1 bytes; the Content-Range check notices
    data = _blob(50_000)
    path = f"s3://{BUCKET}/{uuid.uuid4().hex}/blob.bin"
    with registered(s3rver):
        IO.write_new(path, data)
        s3_reads.forget_seen()
        wire.calls.clear()
        with IO.open_input(path) as f:
            assert f.size == len(data)
            assert f.read_at(len(data) - 100, 100) == data[-100:]
        assert [c[2] for c in wire.calls if c[0] == "get_object"] == [
            f"bytes=-{s3_reads.TAIL_BYTES}",
            f"bytes={len(data) - s3_reads.TAIL_BYTES}-{len(data) - 1}",
        ]
        # s3fs reads the size from the answer's Content-Range; obstore refuses the misread answer
        # itself, without its size: then one HEAD asks it
        heads = [c for c in wire.calls if c[0] == "head_object"]
        assert len(heads) == (1 if isinstance(s3_clients.reader(s3_settings.REGISTRY.settings_for(path)), ObstoreReader) else 0)


def test_parquet_footer_of_a_file_that_is_not_parquet(s3_prefix: str) -> None:
    IO.write_new(f"{s3_prefix}/x.parquet", b"PAR1" + b"\0" * 40 + b"not parquet!")
    with (
        IO.open_input(f"{s3_prefix}/x.parquet") as f,
        pytest.raises(Exception, match=r"x\.parquet: not a Parquet file"),
    ):
        parquet_footer(f)


def test_a_cold_scan_heads_no_data_file_and_fetches_no_byte_twice(
    moto_s3: S3Server, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    lake = iceduck.connect(f"s3://{BUCKET}/{uuid.uuid4().hex}/wh")
    try:
        lake.sql("CREATE SCHEMA s")
        lake.sql(
            "CREATE TABLE s.t PARTITIONED BY (p) AS SELECT i AS id, i % 4 AS p, 'v' || (i % 13) AS v "
            "FROM range(20000) r(i)"
        )
        lake.sql("DELETE FROM s.t WHERE id % 10 = 3")
        metadata = lake.table("s.t").metadata_location
    finally:
        lake.close()
    truth = duckdb.sql(
        "SELECT count(*), sum(i), count(DISTINCT 'v' || (i % 13)) FROM range(20000) r(i) WHERE i % 10 <> 3"
    ).fetchall()

    got = _cold_scan(wire, "SELECT count(*), sum(id), count(DISTINCT v) FROM iceberg_scan(?)", metadata)
    assert got == truth

    client: Any = moto_s3.client()
    data_keys = [c[1] for c in wire.calls if c[1].endswith(".parquet")]
    assert len(set(data_keys)) == 4  # one file per partition
    for key in set(data_keys):
        calls = [c for c in wire.calls if c[1] == key]
        assert all(op == "get_object" and rng for op, _, rng in calls), calls  # no HEAD, no whole-object GET
        size = client.head_object(Bucket=BUCKET, Key=key)["ContentLength"]
        spans = sorted(_span(rng, size) for _, _, rng in calls)
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end <= start, f"{key}: bytes fetched twice: {spans}"
    # metadata files: one GET each, no HEAD before it
    for suffix in (".avro", ".puffin"):
        assert all(op == "get_object" for op, _, _ in wire.of(suffix)), wire.of(suffix)


def test_a_puffin_file_of_many_deletion_vectors_is_fetched_in_one_range(
    moto_s3: S3Server, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    """One DELETE writes the DVs of every file into one Puffin file, larger than the tail a GET
    fetches on opening: a cold scan reading the files in one group fetches the blobs in one more
    request, not a few per DV."""
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    lake = iceduck.connect(f"s3://{BUCKET}/{uuid.uuid4().hex}/wh")
    try:
        lake.sql("CREATE SCHEMA s")
        lake.sql("CREATE TABLE s.t AS SELECT i AS id FROM range(200000) r(i)")
        for start in (200000, 400000):
            lake.sql(f"INSERT INTO s.t SELECT i FROM range({start}, {start + 200000}) r(i)")
        lake.sql("DELETE FROM s.t WHERE hash(id) % 10 < 3")
        metadata = lake.table("s.t").metadata_location
    finally:
        lake.close()
    truth = duckdb.sql("SELECT count(*), sum(i) FROM range(600000) r(i) WHERE hash(i) % 10 >= 3").fetchall()

    got = _cold_scan(wire, "SELECT count(*), sum(id) FROM iceberg_scan(?)", metadata)
    assert got == truth
    (puffin,) = {key for _, key, _ in wire.of(".puffin")}
    size = moto_s3.client().head_object(Bucket=BUCKET, Key=puffin)["ContentLength"]
    assert size > 2 * s3_reads.TAIL_BYTES  # three DVs of 30% of 200,000 rows: bitset containers
    gets = [rng for op, _, rng in wire.of(".puffin") if op == "get_object"]
    assert len(wire.of(".puffin")) == len(gets) <= 2, wire.of(".puffin")  # the tail, then one range


def test_a_selective_scan_fetches_no_column_it_does_not_need(
    moto_s3: S3Server, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    """`id` and `s` are needed, `v` lies between them: no byte of `v`'s column chunk is fetched
    (DuckDB's cost model would coalesce the two reads across it into one GET; see
    `iceduck.io.s3.exact_column_ranges`)."""
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    lake = iceduck.connect(f"s3://{BUCKET}/{uuid.uuid4().hex}/wh")
    try:
        lake.sql("CREATE SCHEMA s")
        lake.sql(
            "CREATE TABLE s.t AS SELECT i AS id, (i % 1000) / 7.0 AS v, 's' || (i % 97) AS s, "
            "TIMESTAMP '2026-01-01' + to_seconds(i) AS ts FROM range(50000) r(i)"
        )
        table = lake.table("s.t")
        metadata = table.metadata_location
        (data,) = [r[0] for r in lake.sql(f"SELECT file_path FROM iceberg_files('{metadata}')").fetchall()]
    finally:
        lake.close()
    with IO.open_input(data) as f:
        footer = pq.read_metadata(pa.BufferReader(parquet_footer(f)))
    chunks: dict[str, list[tuple[int, int]]] = {"id": [], "v": [], "s": [], "ts": []}
    for g in range(footer.num_row_groups):
        for c in range(footer.num_columns):
            col = footer.row_group(g).column(c)
            start = col.dictionary_page_offset or col.data_page_offset
            chunks[col.path_in_schema].append((start, start + col.total_compressed_size))

    got = _cold_scan(
        wire, "SELECT count(*), sum(id), min(s) FROM iceberg_scan(?, filter := 'id BETWEEN 20000 AND 20099')", metadata
    )
    assert got == [(100, sum(range(20000, 20100)), min(f"s{i % 97}" for i in range(20000, 20100)))]
    key = data.removeprefix(f"s3://{BUCKET}/")
    size = moto_s3.client().head_object(Bucket=BUCKET, Key=key)["ContentLength"]  # type: ignore[attr-defined]
    spans = [_span(rng, size) for _, _, rng in wire.of(key.rsplit("/", 1)[1])]
    assert spans
    for start, end in chunks["v"]:
        assert not any(a < end and start < b for a, b in spans), f"v's chunk {start}-{end} fetched: {spans}"
