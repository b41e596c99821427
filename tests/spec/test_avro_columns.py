"""Avro decoding (`AvroContainer.columns`): polars' columns hold the same values as fastavro's
records, for every manifest and manifest list of the corpus and for the schemas polars refuses
(decoded by fastavro); manifests read the same entries through either decoder."""

from __future__ import annotations

import dataclasses
import io
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import fastavro
import pytest

from iceduck.errors import CorruptFileError
from iceduck.spec import _avro_schemas
from iceduck.spec._avro_schemas import AvroContainer
from iceduck.spec.manifest import read_manifest, read_manifest_list


def _norm(v: Any) -> Any:
    """Comparable form: NaN equal to itself, tuples as lists."""
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_norm(x) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return v


def _like(columns: Any, record: Any) -> Any:
    """`record` restricted to the keys `columns` has (zero-width fields are absent from the columns;
    they hold only nulls and empty records)."""
    if isinstance(columns, dict) and isinstance(record, dict):
        for k in record.keys() - columns.keys():
            assert record[k] in (None, {}), (k, record[k])
        return {k: _like(columns[k], record.get(k)) for k in columns}
    if isinstance(columns, list) and isinstance(record, list):
        return [_like(c, r) for c, r in zip(columns, record, strict=True)]
    return record


def _agrees(data: bytes, path: str) -> bool:
    avro = AvroContainer(data, path=path, what="manifest")
    records = list(avro.records())
    rows = avro.columns().values()
    assert len(rows) == len(records), path
    assert _norm(rows) == _norm(_like(rows, records)), path
    return len(records) > 0


@pytest.fixture(params=["polars", "fastavro"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which decoder `AvroContainer.columns` uses (a process picks by what it has decoded so far)."""
    monkeypatch.setattr(_avro_schemas, "use_polars", lambda size: request.param == "polars")
    return str(request.param)


def test_every_corpus_avro_file_decodes_to_the_same_values(conformance: Path, decoder: str) -> None:
    checked = 0
    for path in sorted(conformance.rglob("*.avro")):
        data = path.read_bytes()
        try:
            AvroContainer(data, path=str(path), what="manifest").read_all()
        except Exception:
            continue  # damaged on purpose (the corrupt-input tests cover those)
        checked += _agrees(data, str(path))
    assert checked > 200


def _container(schema: dict[str, Any], records: list[dict[str, Any]], codec: str = "deflate") -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, codec=codec)
    return buf.getvalue()


def test_schemas_polars_refuses_decode_through_fastavro_to_the_same_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_avro_schemas, "use_polars", lambda size: True)
    # An Avro map and a union with an empty record: polars cannot read either.
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "m", "type": ["null", {"type": "map", "values": "long"}]},
            {"name": "e", "type": ["null", {"type": "record", "name": "empty", "fields": []}]},
            {"name": "x", "type": "long", "default": 0},
            {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        ],
    }
    records = [{"m": {"1": 5, "2": 7}, "e": {}, "x": 3, "d": 19725}, {"m": None, "e": None, "x": -1, "d": -5}]
    data = _container(schema, records)
    calls: list[bool] = []
    decode = _avro_schemas._polars_decode

    def spy(*args: Any) -> Any:
        result = decode(*args)
        calls.append(result is None)
        return result

    monkeypatch.setattr(_avro_schemas, "_polars_decode", spy)
    rows = AvroContainer(data, path="x.avro", what="manifest").columns().values()
    assert calls == [True]  # polars refused; fastavro decoded
    assert [r["x"] for r in rows] == [3, -1]
    assert [r["d"] for r in rows] == [19725, -5]  # stored days, no date conversion
    assert [dict(r["m"]) if r["m"] is not None else None for r in rows] == [{"1": 5, "2": 7}, None]


def test_a_damaged_block_is_a_corrupt_file_on_either_path(decoder: str) -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}]}
    data = bytearray(_container(schema, [{"s": "a" * 50} for _ in range(20)]))
    data[-30:-20] = b"\xff" * 10  # inside the deflated block
    with pytest.raises(CorruptFileError, match=r"x\.avro"):
        AvroContainer(bytes(data), path="x.avro", what="manifest").columns()


def test_record_data_polars_panics_on_prints_nothing_and_is_one_corrupt_file_error(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # A string length past the end of its block: polars' reader panics, and Rust's panic hook writes
    # the panic (and, under RUST_BACKTRACE, a backtrace) to stderr before polars raises.
    schema = {"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}, {"name": "n", "type": "long"}]}
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), [{"s": "a" * 20, "n": i} for i in range(30)], codec="null")
    data = bytearray(buf.getvalue())
    data[data.rfind(b"\x28" + b"a" * 20)] = 0x7E  # the last string: 20 bytes -> 63
    with pytest.raises(CorruptFileError, match=r"^x\.avro: truncated or corrupt Avro: manifest: ") as raised:
        AvroContainer(bytes(data), path="x.avro", what="manifest").columns(polars=True)
    assert "\n" not in str(raised.value)
    err = capfd.readouterr().err
    assert "panicked" not in err and err == ""
    # what other code writes to stderr around and between decodes still reaches it, in order
    os.write(2, b"before\n")
    AvroContainer(_container(schema, [{"s": "b", "n": 1}]), path="y.avro", what="manifest").columns(polars=True)
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "before\nafter\n"


def test_an_empty_file_reads_as_no_rows(decoder: str) -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}
    columns = AvroContainer(_container(schema, []), path="x.avro", what="manifest").columns()
    a = columns.field("a")
    assert len(columns) == 0 and a is not None and a.values() == [] and a.nulls() is None


def test_a_process_imports_polars_only_after_enough_avro_to_pay_for_it(tmp_path: Path) -> None:
    # A fresh process: small containers decode with fastavro (polars, ~28 MB and ~0.1 s to import,
    # stays out); past POLARS_AFTER_BYTES polars is imported and then decodes every container of
    # FASTAVRO_BELOW bytes of blocks or more, and fastavro the tinier ones.
    schema = {"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}]}
    records = [{"s": f"value {i}" * 20} for i in range(200)]
    small = tmp_path / "small.avro"
    small.write_bytes(_container(schema, records, codec="null"))
    tiny = tmp_path / "tiny.avro"
    tiny.write_bytes(_container(schema, records[:5], codec="null"))
    code = f"""
import sys
from pathlib import Path
from iceduck.spec import _avro_schemas as a
data = Path({str(small)!r}).read_bytes()
size = len(data)
decoded = []
real = a._polars_decode
a._polars_decode = lambda *args: decoded.append(size) or real(*args)
first = a.AvroContainer(data, path="small.avro", what="manifest").columns()
print("polars" in sys.modules, len(decoded))
for _ in range(2 * (a.POLARS_AFTER_BYTES // size + 1)):  # blocks are most of each file
    assert a.AvroContainer(data, path="small.avro", what="manifest").columns().values() == first.values()
print("polars" in sys.modules, len(decoded) > 0)
tiny = a.AvroContainer(Path({str(tiny)!r}).read_bytes(), path="tiny.avro", what="manifest")
before = len(decoded)
assert tiny.columns().values() == first.values()[:5]
print(tiny.block_bytes < a.FASTAVRO_BELOW <= a.AvroContainer(data, path="small.avro", what="manifest").block_bytes,
      len(decoded) == before)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "0", "True", "True", "True", "True"]


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_many_small_blocks_decode_as_one_to_the_same_values(codec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # PyIceberg writes one record per block; polars gets them inflated and joined into one block.
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "s", "type": "string"},
            {"name": "n", "type": ["null", "long"]},
            {"name": "kv", "type": {"type": "array", "items": {
                "type": "record", "name": "kv", "fields": [{"name": "k", "type": "int"}, {"name": "v", "type": "bytes"}],
            }}},
        ],
    }  # fmt: skip
    records = [
        {"s": f"file-{i}" * (i % 7), "n": None if i % 3 else i, "kv": [{"k": j, "v": bytes([j] * i)} for j in range(i % 4)]}
        for i in range(300)
    ]  # fmt: skip
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, codec=codec, sync_interval=1)
    data = buf.getvalue()
    meta, start = _avro_schemas.parse_header(data, path=None, what="manifest")
    sync = data[start - 16 : start]
    block = _avro_schemas._one_block(meta.get("avro.codec", b"null"), sync, data, start)
    assert block is not None and block.endswith(sync)
    assert _avro_schemas._read_long(block, 0)[0] == len(records)  # one block holds every record
    calls: list[bool] = []
    decode = _avro_schemas._polars_decode

    def spy(*args: Any) -> Any:
        result = decode(*args)
        calls.append(result is None)
        return result

    monkeypatch.setattr(_avro_schemas, "_polars_decode", spy)
    monkeypatch.setattr(_avro_schemas, "use_polars", lambda size: True)
    assert _agrees(data, "x.avro")
    assert calls == [False]  # polars decoded it


def test_a_damaged_middle_block_is_a_corrupt_file() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}]}
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), [{"s": "b" * 40} for _ in range(50)], codec="deflate", sync_interval=1)
    data = bytearray(buf.getvalue())
    middle = len(data) // 2
    data[middle : middle + 6] = b"\xff" * 6
    with pytest.raises(CorruptFileError, match=r"x\.avro"):
        AvroContainer(bytes(data), path="x.avro", what="manifest").columns()


def _outcome(read: Any, data: bytes, path: str) -> Any:
    """What a codec makes of a file: its values, or the error's type and text."""
    try:
        result = read(data, path=path)
    except Exception as e:
        return ("error", type(e).__name__, str(e))
    if isinstance(result, tuple):  # a manifest list
        return ("read", _norm([list(dataclasses.astuple(m)) for m in result]))
    return ("read", _norm([dataclasses.astuple(e) for e in result.entries]))


def test_every_corpus_manifest_and_list_reads_the_same_through_either_decoder(
    conformance: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The codecs read both decoders' columns through one view (`Column`): entries, metrics maps,
    # partitions, inheritance and every refusal must come out the same.
    readers = (read_manifest, read_manifest_list)
    found = {read: 0 for read in readers}
    for path in sorted(conformance.rglob("*.avro")):
        data = path.read_bytes()
        for read in readers:
            outcomes = []
            for polars in (True, False):
                monkeypatch.setattr(_avro_schemas, "use_polars", lambda size, polars=polars: polars)
                outcomes.append(_outcome(read, data, str(path)))
            assert outcomes[0] == outcomes[1], path
            found[read] += outcomes[0][0] == "read"
    assert found[read_manifest] > 100 and found[read_manifest_list] > 100


def test_metrics_maps_with_null_items_and_avro_maps_read_the_same_through_either_decoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Nullable-union map items (skipped) and a null map (empty) through the fastavro view.
    kv = {"type": "array", "items": ["null", {
        "type": "record", "name": "k_v", "fields": [
            {"name": "key", "type": "int", "field-id": 119}, {"name": "value", "type": "long", "field-id": 120},
        ]}]}  # fmt: skip
    schema = {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {"name": "status", "type": "int", "field-id": 0},
            {"name": "snapshot_id", "type": ["null", "long"], "field-id": 1},
            {"name": "data_file", "field-id": 2, "type": {"type": "record", "name": "r2", "fields": [
                {"name": "file_path", "type": "string", "field-id": 100},
                {"name": "file_format", "type": "string", "field-id": 101},
                {"name": "partition", "type": {"type": "record", "name": "r102", "fields": []}, "field-id": 102},
                {"name": "record_count", "type": "long", "field-id": 103},
                {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
                {"name": "value_counts", "type": ["null", kv], "field-id": 109},
            ]}},
        ],
    }  # fmt: skip
    records = [
        {"status": 1, "snapshot_id": 7, "data_file": {"file_path": f"f{i}.parquet", "file_format": "PARQUET",
         "partition": {}, "record_count": 10, "file_size_in_bytes": 100,
         "value_counts": None if i == 1 else [{"key": 1, "value": i}, None, {"key": 2, "value": 5}]}}
        for i in range(3)
    ]  # fmt: skip
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, metadata={"format-version": "1"})
    data = buf.getvalue()
    seen = []
    for polars in (True, False):
        monkeypatch.setattr(_avro_schemas, "use_polars", lambda size, polars=polars: polars)
        seen.append([e.data_file.value_counts for e in read_manifest(data, path="m.avro").entries])
    assert seen[0] == seen[1] == [{1: 0, 2: 5}, {}, {1: 2, 2: 5}]
