"""`read_avro`: any Avro file as DuckDB rows, checked against DuckDB's own avro extension (the peer).

DuckDB 2.0 here has no avro extension (and cannot download one offline), so iceduck registers its
own `read_avro`. It must give what DuckDB 1.5.5's avro extension gives: the same column types and
the same rows for every Avro file of the conformance corpus, and for a file using every Avro type.
The one deliberate difference: a decimal stored as `bytes` is a DECIMAL (the extension gives its
raw BLOB).
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from pathlib import Path
from typing import Any

import duckdb
import fastavro
import pytest

import iceduck
from iceduck.duckdb.extension import avro_extension_loaded
from tests.support.peer import Peer, sql_string


@pytest.fixture
def con() -> Any:
    c = duckdb.connect()
    iceduck.register(c)
    yield c
    c.close()


def _ours(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    rel = con.sql(sql)
    return [str(t) for t in rel.types], rel.fetchall()


def _peers(peer: Peer, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    return [r[1] for r in peer.query(f"DESCRIBE {sql}")], peer.query(sql)


def test_every_avro_file_of_the_corpus_reads_as_duckdbs_avro_extension_reads_it(
    conformance: Path, con: duckdb.DuckDBPyConnection, peer: Peer
) -> None:
    files = sorted(conformance.rglob("*.avro"))
    assert len(files) > 250
    same = refused = 0
    for f in files:
        sql = f"SELECT * FROM read_avro({sql_string(str(f))})"
        try:
            expected = _peers(peer, sql)
        except Exception:  # not an Avro file (encrypted, empty, broken header): both refuse
            with pytest.raises(duckdb.Error) as failure:
                con.sql(sql).fetchall()
            text = str(failure.value)
            assert text.startswith(f"Invalid Input Error: read_avro: {f}: "), text
            assert "\n" not in text and "Python" not in text and "__iceduck" not in text
            refused += 1
            continue
        assert _ours(con, sql) == expected, f
        same += 1
    assert same > 250 and refused >= 3


_NESTED_UNIONS = ("unions_in_list", "unions_in_map", "union_in_record")


def _every_type_file(path: Path, *, nested_unions: bool) -> None:
    enum = {"type": "enum", "name": "Colour", "symbols": ["RED", "GREEN"]}
    inner = {
        "type": "record",
        "name": "inner",
        "fields": [{"name": "a", "type": "int"}, {"name": "c", "type": "Colour"}],
    }
    schema = {
        "type": "record",
        "name": "every",
        "fields": [
            {"name": "nullable_union", "type": ["null", "int", "string"]},
            {"name": "union", "type": ["long", "string"]},
            {"name": "colour", "type": enum},
            {"name": "fixed", "type": {"type": "fixed", "name": "four", "size": 4}},
            {"name": "map", "type": {"type": "map", "values": "long"}},
            {"name": "ts_millis", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "ts_micros", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "time_millis", "type": {"type": "int", "logicalType": "time-millis"}},
            {"name": "time_micros", "type": {"type": "long", "logicalType": "time-micros"}},
            {"name": "date", "type": {"type": "int", "logicalType": "date"}},
            {
                "name": "fixed_decimal",
                "type": {
                    "type": "fixed",
                    "name": "d8",
                    "size": 8,
                    "logicalType": "decimal",
                    "precision": 12,
                    "scale": 3,
                },
            },
            {"name": "uuid_text", "type": {"type": "string", "logicalType": "uuid"}},
            {
                "name": "uuid_fixed",
                "type": {"type": "fixed", "name": "u16", "size": 16, "logicalType": "uuid"},
            },
            {"name": "nothing", "type": "null"},
            {"name": "doubles", "type": {"type": "array", "items": ["null", "double"]}},
            {"name": "record", "type": ["null", inner]},
            {"name": "unions_in_list", "type": {"type": "array", "items": ["null", "int", "string"]}},
            {"name": "unions_in_map", "type": {"type": "map", "values": ["boolean", "string"]}},
            {
                "name": "union_in_record",
                "type": {
                    "type": "record",
                    "name": "holder",
                    "fields": [{"name": "u", "type": ["int", "string"]}, {"name": "b", "type": "boolean"}],
                },
            },
            {"name": "f32", "type": "float"},
            {"name": "bytes", "type": "bytes"},
            {"name": "flag", "type": "boolean"},
        ],
    }
    if not nested_unions:  # the extension refuses unions below the top level ("Can't remap type")
        schema["fields"] = [f for f in schema["fields"] if f["name"] not in _NESTED_UNIONS]
    utc = dt.UTC
    rows = [
        {
            "nullable_union": 1,
            "union": "x",
            "colour": "GREEN",
            "fixed": b"abcd",
            "map": {"k": 1},
            "ts_millis": dt.datetime(2020, 1, 1, 0, 0, 0, 123000, tzinfo=utc),
            "ts_micros": dt.datetime(1960, 1, 1, 1, 2, 3, 456789, tzinfo=utc),
            "time_millis": dt.time(1, 2, 3, 4000),
            "time_micros": dt.time(23, 59, 59, 999999),
            "date": dt.date(1900, 1, 2),
            "fixed_decimal": decimal.Decimal("-1.234"),
            "uuid_text": uuid.UUID(int=5),
            "uuid_fixed": uuid.UUID(int=2**127 + 9).bytes,
            "nothing": None,
            "doubles": [1.0, None, float("inf")],
            "record": {"a": 3, "c": "RED"},
            "unions_in_list": [1, None, "two"],
            "unions_in_map": {"a": True, "b": "no"},
            "union_in_record": {"u": "s", "b": True},
            "f32": 1.5,
            "bytes": b"\x00\xff",
            "flag": True,
        },
        {
            "nullable_union": None,
            "union": 3,
            "colour": "RED",
            "fixed": b"wxyz",
            "map": {},
            "ts_millis": dt.datetime(2021, 1, 1, tzinfo=utc),
            "ts_micros": dt.datetime(2021, 1, 1, tzinfo=utc),
            "time_millis": dt.time(0),
            "time_micros": dt.time(0),
            "date": dt.date(2026, 12, 1),
            "fixed_decimal": decimal.Decimal("123456789.000"),
            "uuid_text": uuid.UUID(int=6),
            "uuid_fixed": uuid.UUID(int=1).bytes,
            "nothing": None,
            "doubles": [],
            "record": None,
            "unions_in_list": [],
            "unions_in_map": {},
            "union_in_record": {"u": 7, "b": False},
            "f32": -0.0,
            "bytes": b"",
            "flag": False,
        },
    ]
    with path.open("wb") as f:
        fastavro.writer(
            f,
            schema,
            rows
            if nested_unions
            else [{k: v for k, v in r.items() if k not in _NESTED_UNIONS} for r in rows],
        )


def test_every_avro_type_reads_as_duckdbs_avro_extension_reads_it(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, peer: Peer
) -> None:
    path = tmp_path / "every.avro"
    _every_type_file(path, nested_unions=False)
    sql = f"SELECT * FROM read_avro({sql_string(str(path))})"
    assert _ours(con, sql) == _peers(peer, sql)
    # unions answer union_tag as the extension's do (members named u<index in the Avro union>)
    tags = f'SELECT union_tag(nullable_union), union_tag("union") FROM read_avro({sql_string(str(path))})'
    assert con.sql(tags).fetchall() == peer.query(tags) == [("u1", "u1"), (None, "u0")]


def test_unions_below_the_top_level_keep_their_values_and_branches(
    tmp_path: Path, con: duckdb.DuckDBPyConnection
) -> None:
    path = tmp_path / "nested.avro"
    _every_type_file(path, nested_unions=True)
    sql = f"SELECT {', '.join(_NESTED_UNIONS)} FROM read_avro({sql_string(str(path))})"
    types, rows = _ours(con, sql)
    assert types == [
        "UNION(u1 INTEGER, u2 VARCHAR)[]",
        "MAP(VARCHAR, UNION(u0 BOOLEAN, u1 VARCHAR))",
        "STRUCT(u UNION(u0 INTEGER, u1 VARCHAR), b BOOLEAN)",
    ]
    with path.open("rb") as f:  # what was written, as fastavro reads it back
        written = [tuple(r[n] for n in _NESTED_UNIONS) for r in fastavro.reader(f)]
    assert rows == written
    tags = (
        "SELECT list_transform(unions_in_list, lambda x: union_tag(x)), map_values(unions_in_map).list_transform("
        f"lambda x: union_tag(x)), union_tag(union_in_record.u) FROM read_avro({sql_string(str(path))})"
    )
    assert con.sql(tags).fetchall() == [(["u1", None, "u2"], ["u0", "u1"], "u1"), ([], [], "u0")]


def test_a_decimal_stored_as_bytes_is_a_decimal(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, peer: Peer
) -> None:
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}}
        ],
    }
    path = tmp_path / "decimal.avro"
    with path.open("wb") as f:
        fastavro.writer(f, schema, [{"d": decimal.Decimal("12.34")}, {"d": decimal.Decimal("-0.05")}])
    sql = f"SELECT d FROM read_avro({sql_string(str(path))})"
    assert _ours(con, sql) == (["DECIMAL(10,2)"], [(decimal.Decimal("12.34"),), (decimal.Decimal("-0.05"),)])
    # the extension hands over the stored two's-complement bytes of the same unscaled values
    assert _peers(peer, sql) == (
        ["BLOB"],
        [((1234).to_bytes(2, "big", signed=True),), ((-5).to_bytes(1, "big", signed=True),)],
    )


def test_globs_lists_and_filename(tmp_path: Path, con: duckdb.DuckDBPyConnection, peer: Peer) -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "i", "type": "long"}]}
    for name, values in (("b.avro", [3, 4]), ("a.avro", [1, 2]), ("c.avro", [])):
        with (tmp_path / name).open("wb") as f:
            fastavro.writer(f, schema, [{"i": v} for v in values])
    pattern = sql_string(str(tmp_path / "*.avro"))
    for sql in (
        f"SELECT i, filename FROM read_avro({pattern}, filename := true)",
        f"SELECT i FROM read_avro([{sql_string(str(tmp_path / 'b.avro'))}, {sql_string(str(tmp_path / 'a.avro'))}])",
    ):
        assert _ours(con, sql) == _peers(peer, sql)
    assert con.sql(f"SELECT i, filename FROM read_avro({pattern}, filename := true)").fetchall() == [
        (1, str(tmp_path / "a.avro")),
        (2, str(tmp_path / "a.avro")),
        (3, str(tmp_path / "b.avro")),
        (4, str(tmp_path / "b.avro")),
    ]


def _error(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    with pytest.raises(duckdb.Error) as failure:
        con.sql(sql).fetchall()
    return str(failure.value)


def test_errors_are_one_line_naming_the_file(tmp_path: Path, con: duckdb.DuckDBPyConnection) -> None:
    missing = tmp_path / "nope" / "*.avro"
    assert _error(con, f"SELECT * FROM read_avro('{missing}')") == (
        f'Invalid Input Error: read_avro: No files found that match the pattern "{missing}"'
    )
    text = tmp_path / "notes.avro"
    text.write_text("hello")
    assert _error(con, f"SELECT * FROM read_avro('{text}')") == (
        f"Invalid Input Error: read_avro: {text}: not an Avro file (no Avro magic bytes at its start)"
    )
    assert _error(con, "SELECT * FROM read_avro(NULL)") == (
        "Invalid Input Error: read_avro: the path argument is required (got NULL)"
    )
    ambiguous = tmp_path / "ambiguous.avro"
    schema = {"type": "record", "name": "r", "fields": [{"name": "u", "type": ["int", "long"]}]}
    with ambiguous.open("wb") as f:
        fastavro.writer(f, schema, [{"u": 1}])
    assert _error(con, f"SELECT * FROM read_avro('{ambiguous}')") == (
        f'Invalid Input Error: read_avro: {ambiguous}: Avro union ["int", "long"]: '
        "its branches cannot be told apart when decoded"
    )


def test_read_avro_is_iceducks_only_while_duckdbs_avro_extension_is_not_loaded(
    con: duckdb.DuckDBPyConnection,
) -> None:
    # DuckDB would otherwise try to download the extension for read_avro (and fail offline)
    assert not avro_extension_loaded(con)
    kinds = con.sql(
        "SELECT function_type FROM duckdb_functions() WHERE function_name = 'read_avro'"
    ).fetchall()
    assert kinds == [("table_macro",)]
