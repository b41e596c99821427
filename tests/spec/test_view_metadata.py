"""The view spec's metadata (`iceduck.spec.view_metadata`): parse, rules, serialise, updates.

Truth: a view metadata file Java Iceberg 1.10.2 wrote (Spark 3.5.7 `CREATE VIEW` through `iceduck
serve`, the fields as Java wrote them) read and written back unchanged; the view spec's rules
(format-version 1, required fields, one SQL per dialect, known schema and current version).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from iceduck.errors import CommitConflictError, InvalidMetadataError, ValidationError
from iceduck.spec import view_metadata as vm
from iceduck.spec.types import NestedField, PrimitiveType, Schema

# as Java Iceberg 1.10.2 (Spark 3.5.7) wrote it for `CREATE VIEW sv AS SELECT a * 2 AS a2 FROM t WHERE a < 3`
JAVA_WRITTEN: dict[str, Any] = {
    "view-uuid": "e5c1c457-4b15-4804-9960-fd0fc47d5fdb",
    "format-version": 1,
    "location": "/tmp/vw3/ns/sv",
    "schemas": [
        {
            "type": "struct",
            "schema-id": 0,
            "fields": [{"id": 0, "name": "a2", "required": False, "type": "int"}],
        }
    ],
    "current-version-id": 1,
    "versions": [
        {
            "version-id": 1,
            "timestamp-ms": 1796599343583,
            "schema-id": 0,
            "summary": {
                "engine-version": "3.5.7",
                "app-id": "local-1796599309356",
                "engine-name": "spark",
                "iceberg-version": "Apache Iceberg 1.10.2 (commit 57396d628cb9f92e121f9c2919398475393f0a3a)",
            },
            "representations": [
                {"type": "sql", "sql": "SELECT a * 2 AS a2 FROM t WHERE a < 3", "dialect": "spark"}
            ],
            "default-namespace": ["ns"],
        }
    ],
    "version-log": [{"timestamp-ms": 1796599343583, "version-id": 1}],
    "properties": {
        "engine_version": "Spark 3.5.7",
        "create_engine_version": "Spark 3.5.7",
        "spark.query-column-names": "a2",
    },
}

SCHEMA = Schema((NestedField(1, "a", PrimitiveType("int")), NestedField(2, "b", PrimitiveType("string"))))


def _version(sql: str = "SELECT a, b FROM ns.t", dialect: str = "duckdb", ts: int = 1000) -> vm.ViewVersion:
    return vm.ViewVersion(
        version_id=1,
        timestamp_ms=ts,
        schema_id=0,
        representations=(vm.ViewRepresentation(sql, dialect),),
        default_namespace=("ns",),
    )


def test_a_java_written_view_reads_and_writes_back_unchanged() -> None:
    m = vm.parse_view_metadata(JAVA_WRITTEN, path="x.metadata.json")
    assert m.current_version.representation("SPARK") is not None
    assert m.schema.fields[0].name == "a2" and m.current_version.default_catalog is None
    assert vm.view_metadata_to_json(m) == JAVA_WRITTEN
    assert json.loads(vm.view_metadata_bytes(m)) == JAVA_WRITTEN
    assert vm.read_view_metadata(json.dumps(JAVA_WRITTEN).encode(), path="p") == m


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda o: o.update({"format-version": 2}), "format-version must be 1"),
        (lambda o: o.pop("view-uuid"), "missing 'view-uuid'"),
        (lambda o: o.update({"view-uuid": "nope"}), "not a UUID"),
        (lambda o: o.update({"current-version-id": 7}), "current-version-id 7 is none of the versions"),
        (lambda o: o["versions"][0].update({"schema-id": 3}), "schema-id 3 is none of the view's schemas"),
        (lambda o: o["versions"][0]["representations"].append(dict(o["versions"][0]["representations"][0])),
         "dialect 'spark' appears twice"),
        (lambda o: o["versions"][0]["representations"][0].update({"type": "substrait"}), "type must be 'sql'"),
        (lambda o: o["versions"][0].pop("default-namespace"), "'default-namespace' must be a list"),
        (lambda o: o["versions"].append(dict(o["versions"][0])), "version-id 1 appears twice"),
        (lambda o: o.update({"properties": {"k": 1}}), "'properties' must be a map of strings"),
        (lambda o: o.update({"schemas": []}), "'schemas' must be a non-empty list"),
    ],
)  # fmt: skip
def test_metadata_breaking_a_rule_is_refused_naming_it(change: Any, problem: str) -> None:
    broken = copy.deepcopy(JAVA_WRITTEN)
    change(broken)
    with pytest.raises(InvalidMetadataError, match=f"f.json: view metadata: .*{problem}"):
        vm.parse_view_metadata(broken, path="f.json")
    with pytest.raises(InvalidMetadataError, match="view v: metadata breaks the view spec"):
        vm.check_view_metadata_json(broken, view="v")


def test_not_json_names_the_file() -> None:
    with pytest.raises(InvalidMetadataError, match=r"m\.json: not a JSON view metadata file"):
        vm.read_view_metadata(b"{nope", path="m.json")


def test_a_new_view_starts_at_version_1_and_schema_0() -> None:
    m = vm.new_view_metadata(
        location="/wh/ns/v/", schema=SCHEMA, version=_version(), properties={"comment": "c"}
    )
    assert (m.location, m.current_version_id, m.schema.schema_id) == ("/wh/ns/v", 1, 0)
    assert [(e.version_id, e.timestamp_ms) for e in m.version_log] == [(1, 1000)]
    assert vm.view_metadata_to_json(m)["properties"] == {"comment": "c"}


def test_replacing_adds_a_version_logs_it_and_reuses_an_equal_one() -> None:
    m = vm.new_view_metadata(location="/wh/ns/v", schema=SCHEMA, version=_version())
    other = Schema((NestedField(1, "a", PrimitiveType("int")),))
    m2 = vm.apply_view_updates(
        m,
        vm.replace_version_updates(m, schema=other, version=_version("SELECT a FROM ns.t", ts=2000)),
        now_ms=2000,
    )
    assert (m2.current_version_id, m2.schema.schema_id, len(m2.schemas)) == (2, 1, 2)
    assert [e.version_id for e in m2.version_log] == [1, 2]
    # back to the first definition: version 1 again, no third version
    m3 = vm.apply_view_updates(
        m2, vm.replace_version_updates(m2, schema=SCHEMA, version=_version()), now_ms=3000
    )
    assert m3.current_version_id == 1 and len(m3.versions) == 2
    assert [e.version_id for e in m3.version_log] == [1, 2, 1]


def test_old_versions_beyond_the_history_property_are_dropped() -> None:
    m = vm.new_view_metadata(
        location="/wh/ns/v", schema=SCHEMA, version=_version(), properties={vm.HISTORY_ENTRIES: "2"}
    )
    for i in range(4):
        m = vm.apply_view_updates(
            m,
            vm.replace_version_updates(m, schema=SCHEMA, version=_version(f"SELECT {i} AS a, 'x' AS b")),
            now_ms=i,
        )
    assert [v.version_id for v in m.versions] == [4, 5] and m.current_version_id == 5
    assert {e.version_id for e in m.version_log} <= {4, 5}


def test_dropping_a_dialect_needs_the_property() -> None:
    both = vm.ViewVersion(
        1,
        1,
        0,
        (vm.ViewRepresentation("SELECT 1", "duckdb"), vm.ViewRepresentation("SELECT 1", "spark")),
        ("ns",),
    )
    m = vm.new_view_metadata(location="/wh/ns/v", schema=SCHEMA, version=both)
    updates = vm.replace_version_updates(m, schema=SCHEMA, version=_version("SELECT 2"))
    with pytest.raises(
        ValidationError, match=r"drops dialect\(s\) \['spark'\].*replace.drop-dialect.allowed"
    ):
        vm.apply_view_updates(m, updates, now_ms=5)
    allowed = vm.apply_view_updates(
        m, [vm.SetProperties({vm.DROP_DIALECT_ALLOWED: "true"}), *updates], now_ms=5
    )
    assert allowed.current_version.dialects == ("duckdb",)


def test_updates_and_requirements_from_json() -> None:
    m = vm.new_view_metadata(location="/wh/ns/v", schema=SCHEMA, version=_version())
    wire = [
        vm.view_update_to_json(u)
        for u in vm.replace_version_updates(m, schema=SCHEMA, version=_version("SELECT 9"))
    ]
    parsed = [vm.view_update_from_json(json.loads(json.dumps(u))) for u in wire]
    assert vm.apply_view_updates(m, parsed, now_ms=1).current_version.representations[0].sql == "SELECT 9"
    with pytest.raises(ValidationError, match="'add-snapshot' is not one a view takes"):
        vm.view_update_from_json({"action": "add-snapshot", "snapshot": {}})
    with pytest.raises(ValidationError, match="view-version: 'representations' must be a non-empty list"):
        vm.view_update_from_json(
            {"action": "add-view-version", "view-version": {**wire[1]["view-version"], "representations": []}}
        )
    with pytest.raises(ValidationError, match="only assert-view-uuid"):
        vm.view_requirement_from_json({"type": "assert-table-uuid", "uuid": m.view_uuid})
    vm.check_view_requirements(m, [vm.AssertViewUUID(m.view_uuid)], view="ns.v")
    with pytest.raises(CommitConflictError, match=r"ns\.v: requirement assert-view-uuid failed"):
        vm.check_view_requirements(
            m, [vm.AssertViewUUID("00000000-0000-0000-0000-000000000000")], view="ns.v"
        )
    with pytest.raises(ValidationError, match="no view version 9"):
        vm.apply_view_updates(m, [vm.SetCurrentViewVersion(9)], now_ms=1)
