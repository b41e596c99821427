"""Parquet footers read without pyarrow (`iceduck.read.footer`): the same columns, names, field
ids and row count as pyarrow gives for every Parquet file of the corpus and for nested schemas;
damage is either refused (pyarrow then judges) or read as pyarrow reads it, never differently
(damage past the schema that pyarrow refuses is left to DuckDB, which names the file)."""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iceduck.errors import CorruptFileError
from iceduck.read import parquet_columns as read_columns
from iceduck.read.footer import footer_schema
from iceduck.read.parquet_columns import ParquetColumns, parquet_columns


def _footer(data: bytes) -> bytes:
    length = int.from_bytes(data[-8:-4], "little")
    return b"PAR1" + data[-8 - length : -8] + data[-8:]


def _by_pyarrow(footer: bytes) -> tuple[ParquetColumns, int] | None:
    """What pyarrow's footer reading says: the columns and the row count (None: it refuses)."""
    try:
        metadata = pq.read_metadata(pa.BufferReader(footer))
        schema = metadata.schema.to_arrow_schema()
    except Exception:
        return None
    has_ids = any(b"PARQUET:field_id" in (f.metadata or {}) for f in schema)
    return ParquetColumns(has_ids, tuple(schema.names), frozenset(read_columns._field_ids(schema))), metadata.num_rows


def _by_footer(footer: bytes) -> tuple[ParquetColumns, int] | None:
    read = footer_schema(footer)
    if read is None:
        return None
    root, top = read.root, read.root.children
    columns = ParquetColumns(
        any(c.field_id is not None for c in top), tuple(c.name for c in top), frozenset(root.field_ids())
    )
    return columns, read.num_rows


def _corpus_footers(conformance: Path) -> list[tuple[Path, bytes]]:
    out = []
    for path in sorted(conformance.rglob("*.parquet")):
        data = path.read_bytes()
        if len(data) >= 12 and data[-4:] == b"PAR1" and int.from_bytes(data[-8:-4], "little") <= len(data) - 12:
            out.append((path, _footer(data)))
    return out


def test_every_corpus_footer_reads_as_pyarrow_reads_it(conformance: Path) -> None:
    footers = _corpus_footers(conformance)
    assert len(footers) > 200
    with_ids = 0
    for path, footer in footers:
        expected = _by_pyarrow(footer)
        assert expected is not None, path
        assert _by_footer(footer) == expected, path
        with_ids += expected[0].has_ids
    assert 0 < with_ids < len(footers)  # files with and without field ids are both covered


def _written(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _field(name: str, t: pa.DataType, fid: int | None) -> pa.Field:
    return pa.field(name, t, metadata=None if fid is None else {b"PARQUET:field_id": str(fid).encode()})


def test_nested_columns_give_every_field_id() -> None:
    item = _field("element", pa.int64(), 4)
    struct = pa.struct([_field("a", pa.string(), 6), _field("b", pa.list_(_field("element", pa.int32(), 8)), 7)])
    mapped = pa.map_(_field("key", pa.string(), 10).with_nullable(False), _field("value", pa.float64(), 11))
    schema = pa.schema(
        [
            _field("id", pa.int64(), 1),
            _field("xs", pa.list_(item), 3),
            _field("s", struct, 5),
            _field("m", mapped, 9),
            _field("plain", pa.bool_(), None),
        ]
    )
    table = pa.Table.from_pylist(
        [{"id": 1, "xs": [1, 2], "s": {"a": "x", "b": [3]}, "m": [("k", 1.5)], "plain": True}], schema=schema
    )
    footer = _footer(_written(table))
    read = _by_footer(footer)
    assert read == _by_pyarrow(footer)
    assert read is not None and read[1] == 1
    got = read[0]
    assert got.has_ids and got.names == ("id", "xs", "s", "m", "plain")
    assert got.ids == frozenset(range(1, 12)) - {2}


def test_no_field_ids_reads_as_none() -> None:
    footer = _footer(_written(pa.table({"a": [1, 2], "b": ["x", "y"]})))
    assert _by_footer(footer) == (ParquetColumns(False, ("a", "b"), frozenset()), 2)


def test_damaged_footers_are_refused_or_read_as_pyarrow_reads_them(conformance: Path) -> None:
    rng = random.Random(2026)
    footers = _corpus_footers(conformance)
    outcomes = {"same": 0, "refused": 0}
    for _ in range(1500):
        path, footer = rng.choice(footers)
        damaged = bytearray(footer)
        at = rng.randrange(4, len(footer) - 8)
        damaged[at] ^= rng.choice([0x01, 0x10, 0x80, 0xFF])
        mine = _by_footer(bytes(damaged))
        theirs = _by_pyarrow(bytes(damaged))
        if mine is None:
            outcomes["refused"] += 1
        elif theirs is not None:
            assert mine == theirs, (path, at)
            outcomes["same"] += 1
        # else: pyarrow refuses what DuckDB reads or names itself (a damaged Arrow schema or
        # statistic); the field ids DuckDB binds by are decoded exactly
    assert outcomes["same"] > 100 and outcomes["refused"] > 100
    for cut in range(1, 30, 3):  # thrift truncated inside the schema
        _, footer = footers[0]
        assert footer_schema(footer[: 4 + cut] + footer[-8:]) is None


@pytest.mark.parametrize("damage", ["truncated", "not thrift"])
def test_a_footer_the_reader_refuses_is_judged_by_pyarrow(
    tmp_path: Path, damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _written(pa.table({"a": [1, 2, 3]}))
    length = int.from_bytes(data[-8:-4], "little")
    meta = data[-8 - length : -8]
    bad = meta[:12] if damage == "truncated" else b"\xff" * length  # cut inside the schema
    path = tmp_path / "bad.parquet"
    path.write_bytes(data[: -8 - length] + bad + len(bad).to_bytes(4, "little") + b"PAR1")
    asked: list[Any] = []
    real = read_columns.footer_schema
    monkeypatch.setattr(read_columns, "footer_schema", lambda f: asked.append(real(f)) or asked[-1])
    with pytest.raises(CorruptFileError, match=r"bad\.parquet: damaged Parquet footer"):
        parquet_columns(str(path))
    assert asked == [None]
