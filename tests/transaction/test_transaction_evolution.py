"""Schema, partition spec, sort order and property evolution; metadata hygiene (logs, summaries)."""

from __future__ import annotations

import datetime as dt
import json
import os
from decimal import Decimal

import pyarrow as pa
import pytest

from iceduck.errors import ValidationError
from iceduck.spec.types import DecimalType, parse_type
from tests.support import maintenance_helpers as mh
from tests.support.write_helpers import SCHEMA, arrow_rows, manifest_entries, pyiceberg_rows


def test_add_rename_drop_widen(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table(
        "ns.t", [("id", "INTEGER"), ("v", "FLOAT"), ("amount", "DECIMAL(9, 2)"), ("gone", "VARCHAR")]
    )
    t.append(
        pa.table(
            {
                "id": pa.array([1], pa.int32()),
                "v": pa.array([0.5], pa.float32()),
                "amount": pa.array([Decimal("1.25")], pa.decimal128(9, 2)),
                "gone": ["x"],
            }
        )
    )
    with t.update_schema() as u:
        u.add_column("region", "string", doc="where", initial_default="eu", write_default="us")
        u.add_column("created", "date", initial_default=dt.date(2020, 1, 1))
        u.add_column("loc", "STRUCT(lat DOUBLE, lon DOUBLE)")
        u.rename_column("v", "value")
        u.drop_column("gone")
        u.widen_column("id", "long")
        u.widen_column("value", "DOUBLE")
        u.widen_column("amount", "decimal(12, 2)")
    assert u.result is not None and u.result.operation == "update-schema"
    md = t.load().metadata
    assert len(md.schemas) == 2 and md.current_schema_id == 1
    fields = {f.name: f for f in md.schema.fields}
    assert [f.name for f in md.schema.fields] == ["id", "value", "amount", "region", "created", "loc"]
    assert (fields["id"].id, str(fields["id"].type)) == (1, "long")
    assert (fields["value"].id, str(fields["value"].type)) == (2, "double")
    assert fields["amount"].type == DecimalType(12, 2)
    region = fields["region"]
    assert (region.id, region.doc, region.initial_default, region.write_default) == (5, "where", "eu", "us")
    assert fields["created"].initial_default == "2020-01-01"
    assert [f.id for f in fields["loc"].type.fields] == [8, 9]  # type: ignore[union-attr]
    assert md.last_column_id == 9
    # new writes get the write-default for a column the data leaves out
    t.append(pa.table({"id": [2], "value": [1.0]}))
    raw = json.loads(mh.file_bytes(t.metadata_location))
    assert raw["schemas"][1]["fields"][3]["initial-default"] == "eu"
    rows = pyiceberg_rows(t.metadata_location, sort_by="id")
    assert rows[1]["region"] == "us" and rows[1]["created"] == dt.date(2020, 1, 1)
    assert rows[0]["value"] == 0.5 and rows[0]["amount"] == Decimal("1.25")


def test_schema_change_errors(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table(
        "ns.t", [("id", "BIGINT"), ("s", "VARCHAR"), ("d", "DATE")], partition_by=["bucket(4, d)"]
    )
    before = t.metadata_location
    cases = [
        (lambda u: u.widen_column("s", "int"), "cannot change column s from string to int"),
        (lambda u: u.widen_column("id", "int"), "cannot change column id from long to int"),
        (lambda u: u.widen_column("d", "timestamp"), "partition field d_bucket"),
        (lambda u: u.drop_column("d"), "the current partition spec uses it"),
        (lambda u: u.drop_column("nope"), "no column 'nope'"),
        (lambda u: u.add_column("s", "int"), "a column of that name exists"),
        (lambda u: u.add_column("r", "int", required=True), "without an initial default"),
        (lambda u: u.rename_column("id", "s"), "a column of that name exists"),
        (lambda u: u.add_column("x", "int", initial_default="abc"), "does not fit type int"),
    ]
    for change, message in cases:
        with pytest.raises(ValidationError, match=message), t.update_schema() as u:
            change(u)
    assert t.metadata_location == before
    v2 = lake.create_table("ns.v2", [("id", "BIGINT")], format_version=2)
    with (
        pytest.raises(ValidationError, match="default values need format version 3"),
        v2.update_schema() as u,
    ):
        u.add_column("x", "int", initial_default=1)
    # an error inside the block commits nothing
    with pytest.raises(RuntimeError), t.update_schema() as u:
        u.add_column("fine", "int")
        raise RuntimeError("stop")
    assert t.metadata_location == before


def test_partition_spec_evolution(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
    t.append(arrow_rows(8))
    r = t.update_spec(["bucket(2, id)", "day"])
    assert r.operation == "update-spec"
    md = t.load().metadata
    assert md.default_spec_id == 1
    # the identity field keeps its id; the new field continues after last-partition-id
    assert [(f.name, f.field_id) for f in md.default_spec.fields] == [("id_bucket", 1001), ("day", 1000)]
    t.append(arrow_rows(8, 8))
    specs = sorted(
        {
            (e["data_file"]["partition"].get("day"), mf["partition_spec_id"])
            for mf, e in manifest_entries(t.metadata_location)
        },
        key=repr,
    )
    assert {s for _, s in specs} == {0, 1}
    t.delete("id IN (1, 9)")  # deletes in files of both specs
    assert sorted(r["id"] for r in pyiceberg_rows(t.metadata_location)) == [
        i for i in range(16) if i not in (1, 9)
    ]
    # going back to an equivalent spec reuses it
    t.update_spec(["day"])
    assert t.load().metadata.default_spec_id == 0
    with pytest.raises(ValidationError, match="unknown transform"):
        t.update_spec(["weekday(day)"])
    with pytest.raises(ValidationError, match="cannot be applied to type string"):
        t.update_spec(["year(name)"])


def test_sort_order_and_properties(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("ns.t", SCHEMA)
    t.set_sort_order(["score DESC"])
    t.set_properties({"a": "1", "b": 2})
    t.unset_properties(["a", "missing"])
    md = t.load().metadata
    assert md.properties == {"b": "2"}
    assert md.default_sort_order.order_id == 1
    t.append(arrow_rows(20))
    (entry,) = [e for _, e in manifest_entries(t.metadata_location)]
    assert entry["data_file"]["sort_order_id"] == 1
    with pytest.raises(ValidationError, match="format-version is not a table property"):
        t.set_properties({"format-version": "2"})


def test_metadata_log_and_pruning(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("ns.t", SCHEMA, properties={"write.metadata.previous-versions-max": "2"})
    first = t.metadata_location
    names = [os.path.basename(first)]
    for i in range(3):
        t.append(arrow_rows(1, i))
        names.append(os.path.basename(t.metadata_location))
    assert [n.split("-")[0] for n in names] == ["00000", "00001", "00002", "00003"]
    md = t.load().metadata
    assert [os.path.basename(e.metadata_file) for e in md.metadata_log] == names[1:3]
    assert mh.exists(first)  # kept without delete-after-commit
    t.set_properties({"write.metadata.delete-after-commit.enabled": "true"})
    t.append(arrow_rows(1, 10))
    md = t.load().metadata
    assert [os.path.basename(e.metadata_file) for e in md.metadata_log] == [
        *names[3:],
        os.path.basename(md.metadata_log[-1].metadata_file),
    ]
    folder = first.rsplit("/", 1)[0]
    assert not mh.exists(f"{folder}/{names[2]}")  # pruned from the log and deleted
    assert mh.exists(f"{folder}/{names[3]}")
    assert [e.snapshot_id for e in md.snapshot_log] == [s.snapshot_id for s in md.snapshots]


def test_snapshot_summaries(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
    t.append(arrow_rows(40))
    s1 = dict(t.current_snapshot().summary)
    sizes = {
        e["data_file"]["file_path"]: e["data_file"]["file_size_in_bytes"]
        for _, e in manifest_entries(t.metadata_location)
    }
    assert s1["operation"] == "append"
    assert (s1["added-data-files"], s1["added-records"], s1["changed-partition-count"]) == ("4", "40", "4")
    assert s1["added-files-size"] == s1["total-files-size"] == str(sum(sizes.values()))
    assert (s1["total-records"], s1["total-data-files"], s1["total-delete-files"]) == ("40", "4", "0")
    assert (s1["total-position-deletes"], s1["total-equality-deletes"]) == ("0", "0")
    t.delete("id IN (0, 1, 2)")
    s2 = dict(t.current_snapshot().summary)
    dvs = [e["data_file"] for _, e in manifest_entries(t.metadata_location) if e["data_file"]["content"] == 1]
    assert (s2["operation"], s2["added-dvs"], s2["added-delete-files"], s2["added-position-deletes"]) == (
        "delete",
        "3",
        "3",
        "3",
    )
    assert "added-position-delete-files" not in s2  # DVs are not position delete files
    assert s2["added-files-size"] == str(sum(d["content_size_in_bytes"] for d in dvs))
    assert (s2["total-records"], s2["total-delete-files"], s2["total-position-deletes"]) == ("40", "3", "3")
    t.delete("id = 4")  # same file as 0: its DV is replaced
    s3 = dict(t.current_snapshot().summary)
    assert (
        s3["added-dvs"],
        s3["removed-dvs"],
        s3["added-position-deletes"],
        s3["removed-position-deletes"],
    ) == ("1", "1", "2", "1")
    assert (s3["total-delete-files"], s3["total-position-deletes"]) == ("3", "4")
    t.overwrite(arrow_rows(2, 100))
    s4 = dict(t.current_snapshot().summary)
    assert (s4["operation"], s4["deleted-data-files"], s4["deleted-records"], s4["removed-dvs"]) == (
        "overwrite",
        "4",
        "40",
        "3",
    )
    assert (
        s4["total-records"],
        s4["total-data-files"],
        s4["total-delete-files"],
        s4["total-position-deletes"],
    ) == ("2", "2", "0", "0")
    assert s4["engine-name"] == "iceduck"


def test_types_parse_for_add_column(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("ns.t", [("id", "BIGINT")])
    with t.update_schema() as u:
        u.add_column("a", "VARCHAR[]")
        u.add_column("m", "MAP(VARCHAR, INTEGER)")
        u.add_column("ts", "timestamptz")
        u.add_column("n", pa.int16())
        u.add_column("dec", parse_type("decimal(5, 1)"))
    types = {f.name: str(f.type) for f in t.schema.fields}
    assert types == {
        "id": "long",
        "a": "list<string>",
        "m": "map<string, int>",
        "ts": "timestamptz",
        "n": "int",
        "dec": "decimal(5, 1)",
    }


def test_rewrites_keep_nested_values_after_nested_renames(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table(
        "ns.t",
        [
            ("id", "BIGINT"),
            ("st", "STRUCT(a INTEGER, b VARCHAR)"),
            ("tags", "VARCHAR[]"),
            ("m", "MAP(VARCHAR, INTEGER)"),
        ],
        properties={"write.update.mode": "copy-on-write"},
    )
    t.append(
        lake.con.sql(
            "SELECT i::BIGINT AS id, {'a': i::INTEGER, 'b': 'b' || i} AS st, ['t' || i] AS tags, MAP {'k': i::INTEGER} AS m FROM range(4) t(i)"
        )
    )
    with t.update_schema() as u:
        u.rename_column("st.b", "bee")
        u.add_column("st.c", "int", initial_default=7)
    r = t.update({"id": "id + 100"}, "id = 1")  # rewrites the file, every row moves
    assert r.removed_data_files == 1
    rows = {row["id"]: row for row in pyiceberg_rows(t.metadata_location)}
    assert rows[101]["st"] == {"a": 1, "bee": "b1", "c": 7}
    assert rows[2]["st"] == {"a": 2, "bee": "b2", "c": 7} and rows[2]["tags"] == ["t2"]
    assert dict(rows[3]["m"]) == {"k": 3}
