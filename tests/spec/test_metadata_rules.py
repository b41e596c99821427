"""The writer-side check of metadata.json (iceduck/spec/metadata_rules.py) and what iceduck writes.

* After `ALTER TABLE ... ADD COLUMN` of an optional column without a default, the schema JSON has no
  `initial-default` / `write-default` key (iceduck wrote JSON nulls there, which Java Iceberg 1.10
  refuses on every snapshot with a NullPointerException).
* Property: any sequence of schema changes (add with and without defaults, nested, required with a
  default; drop; rename; promote) on v2 and v3 tables commits metadata whose JSON holds no null
  anywhere, the defaults given and no others, unique field ids up to `last-column-id`, and the columns
  of an independent model of the changes; the checker finds nothing in it.
* The checker finds each kind of broken JSON (the spec's rules), and the commit path refuses to
  write such metadata, leaving no file behind.
"""

from __future__ import annotations

import copy
import datetime as dt
import glob
import json
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import iceduck
from iceduck.errors import InvalidMetadataError, ValidationError
from iceduck.spec.metadata_rules import check_metadata_json, metadata_json_problems


def _newest_metadata(table_dir: Path) -> dict[str, Any]:
    files = glob.glob(str(table_dir / "metadata" / "*.metadata.json"))
    newest = max(files, key=lambda p: int(os.path.basename(p).split("-")[0]))
    return json.loads(Path(newest).read_text())  # type: ignore[no-any-return]


def _nulls(value: Any, where: str = "") -> list[str]:
    if value is None:
        return [where]
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in _nulls(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [n for i, v in enumerate(value) for n in _nulls(v, f"{where}[{i}]")]
    return []


def test_add_column_without_default_writes_no_default_keys(tmp_path: Path) -> None:
    with iceduck.connect(str(tmp_path / "wh")) as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t (id BIGINT) WITH ('format-version' = '3')")
        lake.sql("INSERT INTO ns.t VALUES (1)")
        lake.sql("ALTER TABLE ns.t ADD COLUMN c VARCHAR")
        lake.sql("ALTER TABLE ns.t ADD COLUMN d INTEGER DEFAULT 5")
    md = _newest_metadata(tmp_path / "wh" / "ns" / "t")
    fields = {f["name"]: f for f in md["schemas"][-1]["fields"]}
    assert fields["c"] == {"id": 2, "name": "c", "required": False, "type": "string"}
    assert (fields["d"]["initial-default"], fields["d"]["write-default"]) == (5, 5)
    assert _nulls(md) == []


# -- property: schema changes commit spec-valid JSON ------------------------------------------------

_TYPES = {"int": "INTEGER", "long": "BIGINT", "float": "FLOAT", "double": "DOUBLE", "string": "VARCHAR",
          "date": "DATE", "decimal(9, 2)": "DECIMAL(9,2)", "boolean": "BOOLEAN"}  # fmt: skip
# type -> (the default given, its JSON single-value form in the spec's Appendix D)
_DEFAULTS = {"int": (7, 7), "long": (-3, -3), "float": (1.5, 1.5), "double": (2.25, 2.25), "string": ("eu", "eu"),
             "date": (dt.date(2020, 1, 2), "2020-01-02"), "decimal(9, 2)": (Decimal("1.25"), "1.25"),
             "boolean": (True, True)}  # fmt: skip
_WIDEN = {"int": "long", "float": "double", "decimal(9, 2)": "decimal(12, 2)"}

_op = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(sorted(_TYPES)), st.booleans(), st.booleans()),
    st.tuples(st.just("add_struct"), st.booleans()),
    st.tuples(st.just("drop"), st.integers(0, 20)),
    st.tuples(st.just("rename"), st.integers(0, 20)),
    st.tuples(st.just("widen"), st.integers(0, 20)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(version=st.sampled_from([2, 3]), ops=st.lists(_op, min_size=1, max_size=6))
def test_schema_changes_commit_spec_valid_json(
    tmp_path: Path, version: int, ops: list[tuple[Any, ...]]
) -> None:
    where = tmp_path / f"wh{abs(hash((version, tuple(ops))))}"
    # the model: column name -> (iceberg type, initial-default, write-default, required)
    model: dict[str, tuple[str, Any, Any, bool]] = {"id": ("long", None, None, False)}
    counter = 0
    with iceduck.connect(str(where)) as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", [("id", "BIGINT")], format_version=version)
        for op in ops:
            counter += 1
            names = sorted(model)
            try:
                with t.update_schema() as u:
                    if op[0] == "add":
                        _, typ, with_default, required = op
                        given_default, json_default = (
                            _DEFAULTS[typ] if with_default and version >= 3 else (None, None)
                        )
                        required = required and given_default is not None
                        name = f"c{counter}"
                        u.add_column(name, _TYPES[typ], initial_default=given_default, required=required)
                        model[name] = (typ, json_default, json_default, required)
                    elif op[0] == "add_struct":
                        name = f"s{counter}"
                        u.add_column(name, "STRUCT(x INTEGER, y VARCHAR)")
                        model[name] = ("struct", None, None, False)
                        if op[1] and version >= 3:
                            u.add_column(f"{name}.z", "INTEGER", initial_default=4)
                    elif op[0] == "drop":
                        name = names[op[1] % len(names)]
                        if len(model) == 1:
                            continue
                        u.drop_column(name)
                        del model[name]
                    elif op[0] == "rename":
                        name = names[op[1] % len(names)]
                        u.rename_column(name, f"r{counter}")
                        model[f"r{counter}"] = model.pop(name)
                    else:
                        widenable = [n for n in names if model[n][0] in _WIDEN]
                        if not widenable:
                            continue
                        name = widenable[op[1] % len(widenable)]
                        new = _WIDEN[model[name][0]]
                        u.widen_column(name, new)
                        model[name] = (new, *model[name][1:])
            except ValidationError:
                pytest.fail(f"iceduck refused a valid change {op}")
            md = _newest_metadata(where / "ns" / "t")
            assert _nulls(md) == [], op
            assert metadata_json_problems(md) == []
            schema = next(s for s in md["schemas"] if s["schema-id"] == md["current-schema-id"])
            got = {f["name"]: f for f in schema["fields"]}
            assert sorted(got) == sorted(model)
            for name, (typ, initial, write, required) in model.items():
                f = got[name]
                kind = f["type"]["type"] if isinstance(f["type"], dict) else f["type"]
                assert kind == typ and f["required"] is required, (name, f)
                assert f.get("initial-default") == initial, f
                assert f.get("write-default") == write, f
                if version < 3:
                    assert "initial-default" not in f and "write-default" not in f
            ids = [i for s in md["schemas"] for i in _field_ids(s)]
            for s in md["schemas"]:
                own = _field_ids(s)
                assert len(own) == len(set(own)) and max(own) <= md["last-column-id"]
            assert max(ids) == md["last-column-id"]


def _field_ids(t: Any) -> list[int]:
    if not isinstance(t, dict):
        return []
    if t.get("type") == "struct":
        return [i for f in t["fields"] for i in [f["id"], *_field_ids(f["type"])]]
    if t.get("type") == "list":
        return [t["element-id"], *_field_ids(t["element"])]
    if t.get("type") == "map":
        return [t["key-id"], t["value-id"], *_field_ids(t["key"]), *_field_ids(t["value"])]
    return []


# -- the checker finds each broken form ------------------------------------------------------------


@pytest.fixture(scope="module")
def valid_v3(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("v3")
    with iceduck.connect(str(where / "wh")) as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t (id BIGINT, s STRUCT(a INTEGER), ts TIMESTAMP) "
                 "PARTITIONED BY (day(ts)) WITH ('format-version' = '3')")  # fmt: skip
        lake.sql("INSERT INTO ns.t VALUES (1, {'a': 1}, TIMESTAMP '2024-01-01 00:00:00')")
        lake.sql("ALTER TABLE ns.t ADD COLUMN d INTEGER DEFAULT 5")
        lake.sql("INSERT INTO ns.t VALUES (2, {'a': 2}, TIMESTAMP '2024-01-02 00:00:00', 6)")
    md = _newest_metadata(where / "wh" / "ns" / "t")
    assert metadata_json_problems(md) == []
    return md


def _field(md: dict[str, Any], name: str) -> dict[str, Any]:
    schema = next(s for s in md["schemas"] if s["schema-id"] == md["current-schema-id"])
    return next(f for f in schema["fields"] if f["name"] == name)  # type: ignore[no-any-return]


def _set(key: str, value: Any) -> Any:
    return lambda md: md.__setitem__(key, value)


BROKEN = {
    "null initial-default": (lambda md: _field(md, "s").__setitem__("initial-default", None), "JSON null"),
    "null write-default": (lambda md: _field(md, "id").__setitem__("write-default", None), "JSON null"),
    "default of the wrong type": (
        lambda md: _field(md, "d").__setitem__("initial-default", "x"),
        "not a int",
    ),
    "struct default with values": (lambda md: _field(md, "s").__setitem__("write-default", {"1": 1}), "{}"),
    "variant default": (
        lambda md: _field(md, "d").update({"type": "variant", "initial-default": 1}),
        "must default to null",
    ),
    "duplicate field id": (lambda md: _field(md, "d").__setitem__("id", 1), "duplicate field id 1"),
    "id above last-column-id": (lambda md: md.__setitem__("last-column-id", 2), "above last-column-id"),
    "missing next-row-id": (lambda md: md.pop("next-row-id"), "next-row-id: missing"),
    "row ids beyond next-row-id": (lambda md: md.__setitem__("next-row-id", 1), "above next-row-id"),
    "snapshot after upgrade without first-row-id": (
        lambda md: md["snapshots"][-1].pop("first-row-id"),
        "first-row-id and added-rows go together",
    ),
    "unknown operation": (
        lambda md: md["snapshots"][0]["summary"].__setitem__("operation", "x"),
        "operation",
    ),
    "current schema missing": (_set("current-schema-id", 9), "current-schema-id: 9 refers to no schema"),
    "main disagrees": (
        lambda md: md["refs"]["main"].__setitem__("snapshot-id", md["snapshots"][0]["snapshot-id"]),
        "refs.main",
    ),
    "property not a string": (lambda md: md["properties"].__setitem__("k", 1), "properties.k"),
    "partition source missing": (
        lambda md: md["partition-specs"][0]["fields"][0].__setitem__("source-id", 99),
        "source-id 99",
    ),
    "identifier field optional": (
        lambda md: md["schemas"][-1].__setitem__("identifier-field-ids", [1]),
        "identifier-field-ids",
    ),
    "format-version 4": (_set("format-version", 4), "format-version"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_checker_finds_broken_metadata(valid_v3: dict[str, Any], case: str) -> None:
    md = copy.deepcopy(valid_v3)
    mutate, expected = BROKEN[case]
    mutate(md)
    problems = metadata_json_problems(md)
    assert any(expected in p for p in problems), problems
    with pytest.raises(InvalidMetadataError, match="refusing to write metadata"):
        check_metadata_json(md, table="ns.t")


def test_v2_rules(valid_v3: dict[str, Any]) -> None:
    md = copy.deepcopy(valid_v3)
    md["format-version"] = 2
    problems = metadata_json_problems(md)
    assert any(p.startswith("next-row-id: not allowed") for p in problems)
    assert any("initial-default: default values need format-version 3" in p for p in problems)
    assert any("first-row-id is not allowed before format-version 3" in p for p in problems)
    md = copy.deepcopy(valid_v3)
    _field(md, "id")["type"] = "timestamp_ns"
    md["format-version"] = 2
    assert any("type timestamp_ns needs format-version 3" in p for p in metadata_json_problems(md))


def test_commit_refuses_metadata_the_checker_rejects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import iceduck.catalog.commit as commit

    with iceduck.connect(str(tmp_path / "wh")) as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t (id BIGINT) WITH ('format-version' = '3')")
        before = sorted(glob.glob(str(tmp_path / "wh" / "ns" / "t" / "metadata" / "*.metadata.json")))
        real = commit.table_metadata_to_json

        def with_null(md: Any) -> dict[str, Any]:
            out = real(md)
            out["schemas"][-1]["fields"][-1]["initial-default"] = None
            return out

        monkeypatch.setattr(commit, "table_metadata_to_json", with_null)
        with pytest.raises(
            InvalidMetadataError, match=r"ns/t: refusing .*fields\[\d\]\.initial-default: JSON null"
        ):
            lake.sql("ALTER TABLE ns.t ADD COLUMN c VARCHAR")
        after = sorted(glob.glob(str(tmp_path / "wh" / "ns" / "t" / "metadata" / "*.metadata.json")))
        assert after == before


def test_a_commit_repairs_json_null_defaults_of_an_older_writer(tmp_path: Path) -> None:
    """Metadata an older iceduck wrote (JSON null defaults, which Java refuses) is written again without
    them by the next commit: a JSON null default reads as no default."""
    with iceduck.connect(str(tmp_path / "wh")) as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t (id BIGINT) WITH ('format-version' = '3')")
        lake.sql("ALTER TABLE ns.t ADD COLUMN c VARCHAR")
        files = glob.glob(str(tmp_path / "wh" / "ns" / "t" / "metadata" / "*.metadata.json"))
        newest = Path(max(files, key=lambda p: int(os.path.basename(p).split("-")[0])))
        md = json.loads(newest.read_text())
        md["schemas"][-1]["fields"][-1].update({"initial-default": None, "write-default": None})
        newest.write_text(json.dumps(md))
        lake.sql("ALTER TABLE ns.t SET ('k' = 'v')")
    md = _newest_metadata(tmp_path / "wh" / "ns" / "t")
    assert md["properties"]["k"] == "v" and _nulls(md) == []
