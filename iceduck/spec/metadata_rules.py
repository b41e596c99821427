"""The rules a metadata.json must follow, checked on the JSON object a writer is about to store.

`metadata_json_problems(obj)` lists every rule of the table spec (`table-spec.md`: "Table Metadata
Fields", "Snapshots", "Schemas", "Default values", "Row Lineage", Appendix C) that the JSON object
breaks, each as one line naming where (`schemas[1].fields[3].initial-default: ...`);
`check_metadata_json(obj, table=...)` raises `InvalidMetadataError` with the first of them. Writers
call it on the serialised form (not the model), so a serialisation slip is caught too: a JSON
`null` where the spec wants the key left out made Java Iceberg 1.10 refuse every snapshot of a table
with `NullPointerException: Cannot create expression literal from null`.

Pure: a decoded JSON object in, a list of strings out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from iceduck.errors import IcebergError, InvalidMetadataError
from iceduck.spec.types import NULL_DEFAULT_ONLY_TYPES, V3_ONLY_TYPES, parse_type
from iceduck.spec.values import from_json

# "Iceberg tables must not use field ids greater than 2147483447 (`Integer.MAX_VALUE - 200`)."
MAX_FIELD_ID = 2147483447

_REQUIRED = {
    1: ("format-version", "location", "last-updated-ms", "last-column-id", "schema", "partition-spec"),
    2: (
        "format-version",
        "table-uuid",
        "location",
        "last-sequence-number",
        "last-updated-ms",
        "last-column-id",
        "schemas",
        "current-schema-id",
        "partition-specs",
        "default-spec-id",
        "last-partition-id",
        "sort-orders",
        "default-sort-order-id",
    ),
}
_REQUIRED[3] = (*_REQUIRED[2], "next-row-id")
_V3_ONLY_KEYS = ("next-row-id", "encryption-keys")
_SNAPSHOT_REQUIRED = {
    1: ("snapshot-id", "timestamp-ms"),
    2: ("snapshot-id", "sequence-number", "timestamp-ms", "manifest-list", "summary"),
    # first-row-id and added-rows too, checked apart: snapshots from before an upgrade to v3 have none
    3: ("snapshot-id", "sequence-number", "timestamp-ms", "manifest-list", "summary"),
}
_OPERATIONS = ("append", "replace", "overwrite", "delete")
_NULL_VALUE = re.compile(r"[\[:,]\s*null\b")


def check_metadata_json(obj: Mapping[str, Any], *, table: str, text: str | None = None) -> None:
    """Raise `InvalidMetadataError` naming `table` when `obj` breaks a rule of the spec. `text`, the
    JSON text of `obj` when the caller has it, spares the search for nulls where it has no `null`."""
    problems = metadata_json_problems(obj, text=text)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InvalidMetadataError(
            f"{table}: refusing to write metadata that breaks the table spec: {problems[0]}{more}"
        )


def metadata_json_problems(obj: Mapping[str, Any], *, text: str | None = None) -> list[str]:
    """Every rule of the spec the metadata JSON object breaks (empty when it is valid). With `text`
    (`obj` as JSON) the walk for nulls is skipped when no `null` in the text can be a value (one
    follows `:`, `[` or `,`; `null-order` and a string's `null` do not count unless spelled so)."""
    if not isinstance(obj, Mapping):
        return [f"metadata must be a JSON object, not {type(obj).__name__}"]
    nulls = _nulls(obj, "") if text is None or _NULL_VALUE.search(text) else iter(())
    out = [f"{where}: JSON null (an absent optional field is left out)" for where in nulls]
    version = obj.get("format-version")
    if version not in (1, 2, 3):
        return [*out, f"format-version: {version!r} is not 1, 2 or 3"]
    out += [
        f"{key}: missing, required in format-version {version}"
        for key in _REQUIRED[version]
        if key not in obj
    ]
    if version < 3:
        out += [f"{key}: not allowed before format-version 3" for key in _V3_ONLY_KEYS if key in obj]

    schemas = _schemas(obj, version)
    last_column_id = obj.get("last-column-id")
    for where, schema in schemas:
        out += _schema_problems(schema, where, version, last_column_id)
    schema_ids = [s.get("schema-id") for _, s in schemas if isinstance(s, Mapping)]
    out += _unique(schema_ids, "schemas", "schema-id")
    if "current-schema-id" in obj and obj["current-schema-id"] not in schema_ids:
        out.append(f"current-schema-id: {obj['current-schema-id']} refers to no schema")

    out += _spec_problems(obj, version, schemas)
    out += _sort_order_problems(obj)
    out += _snapshot_problems(obj, version)

    props = obj.get("properties", {})
    if not isinstance(props, Mapping):
        out.append("properties: must be a string to string map")
    else:
        out += [
            f"properties.{k}: value {v!r} is not a string" for k, v in props.items() if not isinstance(v, str)
        ]
    return out


def _nulls(value: Any, where: str) -> Iterator[str]:
    if value is None:
        yield where or "(document)"
    elif isinstance(value, dict):  # decoded JSON: dicts and lists (cheaper to test than Mapping)
        for k, v in value.items():
            if v is None or isinstance(v, dict | list):
                yield from _nulls(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nulls(v, f"{where}[{i}]")


def _unique(ids: list[Any], where: str, key: str) -> list[str]:
    seen: set[Any] = set()
    out = []
    for i in ids:
        if i in seen:
            out.append(f"{where}: duplicate {key} {i}")
        seen.add(i)
    return out


def _schemas(obj: Mapping[str, Any], version: int) -> list[tuple[str, Any]]:
    found = [(f"schemas[{i}]", s) for i, s in enumerate(obj.get("schemas") or ())]
    if version == 1 and "schema" in obj and not found:
        found.append(("schema", obj["schema"]))
    return found


def _schema_problems(schema: Any, where: str, version: int, last_column_id: Any) -> list[str]:
    if (
        not isinstance(schema, Mapping)
        or schema.get("type") != "struct"
        or not isinstance(schema.get("fields"), list)
    ):
        return [f"{where}: a schema is a struct object with 'fields'"]
    out: list[str] = []
    if version >= 2 and "schema-id" not in schema:
        out.append(f"{where}: missing schema-id")
    ids: list[int] = []
    fields: dict[
        int, tuple[Mapping[str, Any], bool]
    ] = {}  # id -> (field, reachable through required structs only)
    _walk_struct(
        schema["fields"],
        f"{where}.fields",
        version,
        ids,
        fields,
        out,
        required_path=True,
        in_collection=False,
    )
    out += _unique(ids, where, "field id")
    if isinstance(last_column_id, int):
        out += [
            f"{where}: field id {i} is above last-column-id {last_column_id}"
            for i in ids
            if i > last_column_id
        ]
    for fid in schema.get("identifier-field-ids", ()):
        found = fields.get(fid)
        if found is None:
            out.append(f"{where}.identifier-field-ids: {fid} is no primitive field outside maps and lists")
            continue
        f, required_path = found
        if not required_path or not f.get("required"):
            out.append(f"{where}.identifier-field-ids: field {fid} is optional (or in an optional struct)")
        if f.get("type") in ("float", "double"):
            out.append(f"{where}.identifier-field-ids: field {fid} is {f.get('type')}, not allowed")
    return out


def _walk_struct(
    fields: list[Any],
    where: str,
    version: int,
    ids: list[int],
    found: dict[int, tuple[Mapping[str, Any], bool]],
    out: list[str],
    *,
    required_path: bool,
    in_collection: bool,
) -> None:
    names: set[Any] = set()
    for i, f in enumerate(fields):
        here = f"{where}[{i}]"
        if not isinstance(f, Mapping):
            out.append(f"{here}: a struct field is an object")
            continue
        missing = [k for k in ("id", "name", "required", "type") if k not in f]
        if missing:
            out.append(f"{here}: missing {', '.join(missing)}")
            continue
        fid, t = f["id"], f["type"]
        if not isinstance(fid, int) or isinstance(fid, bool) or fid > MAX_FIELD_ID:
            out.append(f"{here}.id: {fid!r} is not a field id (an integer up to {MAX_FIELD_ID})")
        else:
            ids.append(fid)
        if not isinstance(f["required"], bool):
            out.append(f"{here}.required: {f['required']!r} is not a boolean")
        if f["name"] in names:
            out.append(f"{here}.name: duplicate name {f['name']!r} in one struct")
        names.add(f["name"])
        if not in_collection and isinstance(fid, int) and not isinstance(t, Mapping):
            found[fid] = (f, required_path)
        out += _default_problems(f, here, version)
        _walk_type(
            t,
            f"{here}.type",
            version,
            ids,
            found,
            out,
            required_path=required_path and f["required"] is True,
            in_collection=in_collection,
        )


def _walk_type(
    t: Any,
    where: str,
    version: int,
    ids: list[int],
    found: dict[int, tuple[Mapping[str, Any], bool]],
    out: list[str],
    *,
    required_path: bool,
    in_collection: bool,
) -> None:
    if isinstance(t, str):
        base = t.split("(", 1)[0]
        if base in V3_ONLY_TYPES and version < 3:
            out.append(f"{where}: type {t} needs format-version 3")
        return
    if not isinstance(t, Mapping):
        out.append(f"{where}: {t!r} is not a type")
        return
    kind = t.get("type")
    if kind == "struct" and isinstance(t.get("fields"), list):
        _walk_struct(
            t["fields"],
            f"{where}.fields",
            version,
            ids,
            found,
            out,
            required_path=required_path,
            in_collection=in_collection,
        )
    elif kind == "list" and {"element-id", "element", "element-required"} <= t.keys():
        ids.append(t["element-id"])
        _walk_type(
            t["element"],
            f"{where}.element",
            version,
            ids,
            found,
            out,
            required_path=False,
            in_collection=True,
        )
    elif kind == "map" and {"key-id", "key", "value-id", "value", "value-required"} <= t.keys():
        ids += [t["key-id"], t["value-id"]]
        _walk_type(
            t["key"], f"{where}.key", version, ids, found, out, required_path=False, in_collection=True
        )
        _walk_type(
            t["value"], f"{where}.value", version, ids, found, out, required_path=False, in_collection=True
        )
    else:
        out.append(f"{where}: malformed {kind!r} type")


def _default_problems(f: Mapping[str, Any], where: str, version: int) -> list[str]:
    out = []
    for key in ("initial-default", "write-default"):
        if key not in f or f[key] is None:  # a null was reported already
            continue
        if version < 3:
            out.append(f"{where}.{key}: default values need format-version 3")
            continue
        t = f["type"]
        if isinstance(t, str) and t.split("(", 1)[0] in NULL_DEFAULT_ONLY_TYPES:
            out.append(f"{where}.{key}: a {t} column must default to null (leave the key out)")
            continue
        if isinstance(t, Mapping) and t.get("type") == "struct":
            # "the default stored for a nested struct may be either null or a non-null struct with no
            # field values"
            if f[key] != {}:
                out.append(f"{where}.{key}: a struct's default is {{}} (its fields carry their own)")
            continue
        try:
            from_json(parse_type(t), f[key])
        except IcebergError as e:
            out.append(f"{where}.{key}: {f[key]!r} is not a {t} value ({e})")
    return out


def _spec_problems(obj: Mapping[str, Any], version: int, schemas: list[tuple[str, Any]]) -> list[str]:
    out: list[str] = []
    specs = obj.get("partition-specs")
    if specs is None:
        return out
    known_ids: set[Any] = set()
    for _, s in schemas:
        if isinstance(s, Mapping):
            ids: list[int] = []
            _walk_struct(
                s.get("fields") or [], "", version, ids, {}, [], required_path=True, in_collection=False
            )
            known_ids.update(ids)
    spec_ids = [s.get("spec-id") for s in specs if isinstance(s, Mapping)]
    out += _unique(spec_ids, "partition-specs", "spec-id")
    if "default-spec-id" in obj and obj["default-spec-id"] not in spec_ids:
        out.append(f"default-spec-id: {obj['default-spec-id']} refers to no partition spec")
    last = obj.get("last-partition-id")
    for i, s in enumerate(specs):
        where = f"partition-specs[{i}]"
        fields = s.get("fields", []) if isinstance(s, Mapping) else []
        names = [pf.get("name") for pf in fields]
        out += _unique(names, where, "partition field name")
        for j, pf in enumerate(fields):
            here = f"{where}.fields[{j}]"
            sources = pf.get("source-ids") or ([pf["source-id"]] if "source-id" in pf else [])
            if version < 3 and "source-ids" in pf and len(pf["source-ids"]) > 1:
                out.append(f"{here}: multi-argument transforms need format-version 3")
            out += [
                f"{here}: source-id {sid} is a field of no schema" for sid in sources if sid not in known_ids
            ]
            if not isinstance(pf.get("transform"), str):
                out.append(f"{here}: missing transform")
            fid = pf.get("field-id")
            if version >= 2 and fid is None:
                out.append(f"{here}: missing field-id")
            if isinstance(fid, int) and isinstance(last, int) and fid > last:
                out.append(f"{here}: field-id {fid} is above last-partition-id {last}")
    return out


def _sort_order_problems(obj: Mapping[str, Any]) -> list[str]:
    orders = obj.get("sort-orders")
    if orders is None:
        return []
    out: list[str] = []
    order_ids = [o.get("order-id") for o in orders if isinstance(o, Mapping)]
    out += _unique(order_ids, "sort-orders", "order-id")
    if "default-sort-order-id" in obj and obj["default-sort-order-id"] not in order_ids:
        out.append(f"default-sort-order-id: {obj['default-sort-order-id']} refers to no sort order")
    for i, o in enumerate(orders):
        if isinstance(o, Mapping) and o.get("order-id") == 0 and o.get("fields"):
            out.append(f"sort-orders[{i}]: order-id 0 is reserved for the unsorted order")
        for j, sf in enumerate(o.get("fields", []) if isinstance(o, Mapping) else []):
            if sf.get("direction") not in ("asc", "desc") or sf.get("null-order") not in (
                "nulls-first",
                "nulls-last",
            ):
                out.append(
                    f"sort-orders[{i}].fields[{j}]: direction / null-order not asc|desc, nulls-first|nulls-last"
                )
    return out


def _snapshot_problems(obj: Mapping[str, Any], version: int) -> list[str]:
    out: list[str] = []
    snapshots = obj.get("snapshots", [])
    ids = [s.get("snapshot-id") for s in snapshots if isinstance(s, Mapping)]
    out += _unique(ids, "snapshots", "snapshot-id")
    known = set(ids)
    last_seq = obj.get("last-sequence-number")
    next_row_id = obj.get("next-row-id")
    for i, s in enumerate(snapshots):
        where = f"snapshots[{i}]"
        out += [f"{where}: missing {k}" for k in _SNAPSHOT_REQUIRED[version] if k not in s]
        if version >= 2 and "manifests" in s:
            out.append(f"{where}: 'manifests' is v1 only (v2+ use manifest-list)")
        if version < 3:
            out += [
                f"{where}: {k} is not allowed before format-version 3"
                for k in ("first-row-id", "added-rows", "key-id")
                if k in s
            ]
        summary = s.get("summary")
        if summary is not None:
            if summary.get("operation") not in _OPERATIONS:
                out.append(
                    f"{where}.summary.operation: {summary.get('operation')!r} is not one of {', '.join(_OPERATIONS)}"
                )
            out += [
                f"{where}.summary.{k}: value is not a string"
                for k, v in summary.items()
                if not isinstance(v, str)
            ]
        seq = s.get("sequence-number")
        if isinstance(seq, int) and isinstance(last_seq, int) and seq > last_seq:
            out.append(f"{where}: sequence-number {seq} is above last-sequence-number {last_seq}")
        first, added = s.get("first-row-id"), s.get("added-rows")
        if (
            isinstance(first, int)
            and isinstance(added, int)
            and isinstance(next_row_id, int)
            and first + added > next_row_id
        ):
            out.append(
                f"{where}: first-row-id {first} + added-rows {added} is above next-row-id {next_row_id}"
            )
    if version >= 3:
        out += _row_id_problems(snapshots)
    current = obj.get("current-snapshot-id")
    if current is not None and current != -1 and current not in known:
        out.append(f"current-snapshot-id: {current} refers to no snapshot")
    refs = obj.get("refs", {})
    for name, ref in refs.items() if isinstance(refs, Mapping) else ():
        if ref.get("snapshot-id") not in known:
            out.append(f"refs.{name}: snapshot-id {ref.get('snapshot-id')} refers to no snapshot")
        if ref.get("type") not in ("branch", "tag"):
            out.append(f"refs.{name}: type {ref.get('type')!r} is not branch or tag")
    main = refs.get("main") if isinstance(refs, Mapping) else None
    main_id = main.get("snapshot-id") if isinstance(main, Mapping) else None
    if main_id is not None and main_id != current:
        out.append(f"refs.main: snapshot-id {main_id} is not current-snapshot-id {current}")
    if isinstance(refs, Mapping) and main is None and current not in (None, -1) and version >= 2 and refs:
        out.append(f"refs: no main branch although current-snapshot-id is {current}")
    return out


def _row_id_problems(snapshots: list[Any]) -> list[str]:
    """v3 snapshots carry `first-row-id` and `added-rows`, except those from before an upgrade: "When a
    table is upgraded to v3, [...] existing snapshots are not modified (that is, `first-row-id` remains
    unset or null)". So a snapshot without them must be older than every snapshot with them (with none
    yet, a snapshot written by a v3 writer cannot be told from one of before the upgrade)."""
    out = []
    with_ids = [
        s.get("sequence-number", 0) for s in snapshots if isinstance(s, Mapping) and "first-row-id" in s
    ]
    first_v3 = min(with_ids, default=None)
    for i, s in enumerate(snapshots):
        if not isinstance(s, Mapping):
            continue
        if ("first-row-id" in s) != ("added-rows" in s):
            out.append(f"snapshots[{i}]: first-row-id and added-rows go together")
        elif "first-row-id" not in s and first_v3 is not None and s.get("sequence-number", 0) >= first_v3:
            out.append(
                f"snapshots[{i}]: missing first-row-id, required in format-version 3 for a snapshot "
                "written after the upgrade"
            )
    return out
