"""The 20-minute fuzz run's findings (seed 2026, 17,761 mutations), each mutated the way the fuzzer
did on a copy of its table: every one now gives the rows the table has or one error line naming
the damaged file, never a bare built-in exception (TypeError, IndexError, UnicodeDecodeError,
KeyError) or NULLs in place of a column.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import duckdb
import pytest

from iceduck.lake import connect
from tests.reliability.test_fuzz import BUILTINS, _only_optional_defaults_changed

DUCK = "duckdb-iceberg/data/persistent"
TRINO_AVRO = (
    "more/trinodb-trino/plugin/trino-iceberg/src/test/resources/iceberg/invalid_compression_codec/none_avro"
)
# (table folder, its current metadata file, the schema and field the fuzzer changed)
FIELD_ID_TABLES = [
    ("equality_delete_extra_column/warehouse/ns/t", "vfinal.metadata.json", ("schemas", 0, "fields", 0)),
    (
        "add_columns_with_defaults/default.db/add_columns_with_defaults",
        "00003-3f1801a5-7dfb-4072-b14a-39cd12f9279b.metadata.json",
        ("schemas", 1, "fields", 11),
    ),
    ("iceberg_v1_deprecated/default/legacy_v1", "v2.metadata.json", ("schema", "fields", 1)),
]


def _copy(conformance: Path, rel: str, tmp_path: Path) -> Path:
    dest = tmp_path / rel.rsplit("/", 1)[-1]
    shutil.copytree(conformance / rel, dest)
    return dest


def _scan_error(con: duckdb.DuckDBPyConnection, target: Path | str) -> str:
    with pytest.raises(duckdb.Error) as info:
        con.sql(f"SELECT * FROM iceberg_scan('{target}')").fetchall()
    return str(info.value)


def _assert_one_clear_line(message: str, damaged: Path) -> None:
    first = message.split("\n\nLINE ")[0]
    assert damaged.name in first, message
    assert "Traceback" not in message
    assert not re.search(r"(?:^|[\s:(])(" + "|".join(re.escape(b) for b in BUILTINS) + r")\b", first), message


def _field(doc: dict, at: tuple) -> dict:
    for key in at:
        doc = doc[key]
    return doc


@pytest.mark.parametrize("value", [None, {}, {"a": 1}, "x", 1.5, True, -1, 2**31])
@pytest.mark.parametrize("table", FIELD_ID_TABLES, ids=lambda t: t[0].split("/")[0])
def test_a_schema_field_id_that_is_no_id_is_named(
    conformance: Path, tmp_path: Path, con: duckdb.DuckDBPyConnection, table: tuple, value: object
) -> None:
    # was: TypeError: int() argument must be a string, ... not 'NoneType' (also {} and {'a': 1})
    folder, name, at = table
    root = _copy(conformance, f"{DUCK}/{folder}", tmp_path)
    meta = root / "metadata" / name
    doc = json.loads(meta.read_text())
    _field(doc, at)["id"] = value
    meta.write_text(json.dumps(doc))
    message = _scan_error(con, meta)
    _assert_one_clear_line(message, meta)
    assert "'id'" in message


@pytest.mark.parametrize(("key", "value"), [("required", "false"), ("name", None), ("doc", 7)])
def test_a_schema_field_of_the_wrong_json_type_is_refused(
    conformance: Path, tmp_path: Path, con: duckdb.DuckDBPyConnection, key: str, value: object
) -> None:
    # `bool("false")` read a required flag of "false" as true; `str(None)` named a column "None"
    folder, name, at = FIELD_ID_TABLES[0]
    root = _copy(conformance, f"{DUCK}/{folder}", tmp_path)
    meta = root / "metadata" / name
    doc = json.loads(meta.read_text())
    _field(doc, at)[key] = value
    meta.write_text(json.dumps(doc))
    _assert_one_clear_line(_scan_error(con, meta), meta)


def test_a_field_id_above_last_column_id_is_refused(
    conformance: Path, tmp_path: Path, con: duckdb.DuckDBPyConnection
) -> None:
    # an id never assigned matches no data file's column: the column read as NULL, silently
    root = _copy(conformance, f"{DUCK}/iceberg_v1_deprecated/default/legacy_v1", tmp_path)
    meta = root / "metadata" / "v2.metadata.json"
    doc = json.loads(meta.read_text())
    doc["schema"]["fields"][2]["id"] = doc["last-column-id"] + 1
    for schema in doc.get("schemas", []):
        schema["fields"][1]["id"] = doc["last-column-id"] + 1
    meta.write_text(json.dumps(doc))
    message = _scan_error(con, meta)
    _assert_one_clear_line(message, meta)
    assert "above last-column-id" in message


def _required_table(tmp_path: Path) -> tuple[Path, list[tuple[int, str]]]:
    with connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA s")
        lake.sql("CREATE TABLE s.r (id BIGINT NOT NULL, v VARCHAR)")
        lake.sql("INSERT INTO s.r VALUES (1, 'a'), (2, 'b')")
        return Path(str(lake.table("s.r").metadata_location)), [(1, "a"), (2, "b")]


@pytest.mark.parametrize("required", [True, False])
def test_a_field_id_matching_no_column_reads_null_only_when_optional(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, required: bool
) -> None:
    meta, rows = _required_table(tmp_path)
    assert sorted(con.sql(f"SELECT * FROM iceberg_scan('{meta}')").fetchall()) == rows
    doc = json.loads(meta.read_text())
    field = doc["schemas"][0]["fields"][0]
    field["id"], field["required"] = 0, required  # an unused id below last-column-id
    meta.write_text(json.dumps(doc))
    if required:
        # a required field without an initial-default must be in every data file
        message = _scan_error(con, meta)
        assert "no column for the required field 'id' (id 0)" in message and meta.name in message
    else:
        # an optional column the files lack is NULL: a column added after they were written is
        # the same table, so this one id change stays invisible (as a flipped Parquet page)
        assert sorted(con.sql(f"SELECT * FROM iceberg_scan('{meta}')").fetchall()) == [
            (None, "a"),
            (None, "b"),
        ]


@pytest.mark.parametrize(
    "mutation",
    [("truncate", 160), ("truncate", 18), ("flip", 275, 0x0F), ("flip", 40, 0x28), ("flip", 65, 0x41)],
)
def test_a_damaged_avro_data_file_is_named(
    conformance: Path, tmp_path: Path, con: duckdb.DuckDBPyConnection, mutation: tuple
) -> None:
    # was: IndexError: string index out of range / list index out of range, SchemaParseException
    root = _copy(conformance, TRINO_AVRO, tmp_path)
    (data,) = (root / "data").glob("*.avro")
    raw = data.read_bytes()
    assert len(raw) == 305
    if mutation[0] == "truncate":
        data.write_bytes(raw[: mutation[1]])
    else:
        at, xor = mutation[1], mutation[2]
        data.write_bytes(raw[:at] + bytes([raw[at] ^ xor]) + raw[at + 1 :])
    (meta,) = sorted((root / "metadata").glob("00001-*.metadata.json"))
    # a fresh copy cache: the copy of the intact file is keyed by size and mtime, not reused
    message = _scan_error(con, meta)
    _assert_one_clear_line(message, data)


def _v2_with_deletes(tmp_path: Path) -> tuple[Path, Path]:
    with connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA s")
        lake.sql("CREATE TABLE s.v2 (id INTEGER, s VARCHAR) WITH ('format-version' = '2')")
        lake.sql("INSERT INTO s.v2 SELECT i, 's' || i FROM range(40) t(i)")
        lake.sql("DELETE FROM s.v2 WHERE id % 4 = 1")
        handle = lake.table("s.v2")
        (deletes,) = Path(handle.location).rglob("*-deletes.parquet")
        return Path(str(handle.metadata_location)), deletes


def test_a_position_delete_file_whose_column_name_is_not_utf8_is_named(
    tmp_path: Path, con: duckdb.DuckDBPyConnection
) -> None:
    # was: UnicodeDecodeError inside __iceduck_scan_bits (a flipped byte in the footer's schema)
    meta, deletes = _v2_with_deletes(tmp_path)
    raw = deletes.read_bytes()
    # the column's name in the footer's schema (and its chunk's path): no longer UTF-8
    deletes.write_bytes(raw.replace(b"file_path", b"\xffile_path"[:9]))
    _assert_one_clear_line(_scan_error(con, meta), deletes)


def test_a_manifest_whose_metrics_map_schema_is_damaged_is_named(
    tmp_path: Path, con: duckdb.DuckDBPyConnection
) -> None:
    # was: KeyError: 'key' (a flip turned "fields" of a key/value record into "fiplds")
    with connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA s")
        lake.sql("CREATE TABLE s.t (id BIGINT, v VARCHAR)")
        lake.sql("INSERT INTO s.t VALUES (1, 'a')")
        handle = lake.table("s.t")
        meta = Path(str(handle.metadata_location))
    (manifest,) = meta.parent.glob("*-m0.avro")
    raw = manifest.read_bytes()
    at = raw.index(b'"name": "k117_v118", "fields"') + len(b'"name": "k117_v118", "fi')
    manifest.write_bytes(raw[:at] + b"p" + raw[at + 1 :])
    _assert_one_clear_line(_scan_error(con, meta), manifest)


def test_the_fuzzer_counts_apart_only_optional_defaults_changed_to_valid_values(conformance: Path) -> None:
    meta = conformance / DUCK / FIELD_ID_TABLES[1][0] / "metadata" / FIELD_ID_TABLES[1][1]
    raw = meta.read_bytes()
    doc = json.loads(raw)

    def changed(edit: object) -> bool:
        new = json.loads(raw)
        edit(new)  # type: ignore[operator]
        return _only_optional_defaults_changed(raw, json.dumps(new).encode())

    fields = doc["schemas"][1]["fields"]
    assert fields[12]["name"] == "col_uuid" and not fields[12]["required"]
    assert changed(lambda d: d["schemas"][1]["fields"][3].pop("initial-default"))
    assert changed(
        lambda d: d["schemas"][1]["fields"][12].update(
            {"initial-default": str(fields[12]["initial-default"]).replace("a479", "a469")}
        )
    )
    # a default of the wrong type, a required field's, or anything else changed: not this class
    assert not changed(lambda d: d["schemas"][1]["fields"][12].update({"initial-default": "not a uuid"}))
    assert not changed(
        lambda d: d["schemas"][1]["fields"][3].update({"initial-default": 1, "required": True})
    )
    assert not changed(lambda d: d["schemas"][1]["fields"][3].update({"initial-default": 1, "doc": "x"}))
    assert not changed(lambda d: None)
