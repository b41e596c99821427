"""Iceberg view metadata (the view spec, format-version 1) as pure values: parse, check, serialise,
and the REST protocol's view updates and requirement.

A view's metadata file holds its location, schemas, versions (each a query in one or more SQL
dialects, the schema it produces, the default catalog and namespace its unqualified names resolve
in), the log of which version was current when, and string properties:

    {"view-uuid", "format-version": 1, "location", "schemas": [...], "current-version-id",
     "versions": [{"version-id", "timestamp-ms", "schema-id", "summary": {...},
                   "representations": [{"type": "sql", "sql", "dialect"}],
                   "default-catalog"?, "default-namespace": [...]}],
     "version-log": [{"timestamp-ms", "version-id"}], "properties"?: {...}}

The rules checked (`view_metadata_problems`, on the JSON object before every write and after every
read): format-version 1; the required fields and their types; unique schema ids and version ids;
every version's schema-id names a schema; the current version exists; a version holds at most one
representation per dialect (case-insensitive), each of type `sql`; the version log names known
versions. Files are `<location>/metadata/<NNNNN>-<uuid>.metadata.json`, numbered as table metadata.

Pure: no I/O.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from iceduck.errors import CommitConflictError, InvalidMetadataError, ValidationError
from iceduck.spec.json_fields import EMPTY_MAP, JsonFields, all_str, frozen_map
from iceduck.spec.types import Schema, parse_schema, schema_to_json

FORMAT_VERSION = 1
SQL_TYPE = "sql"
DUCKDB_DIALECT = "duckdb"
# view properties the view spec and Java Iceberg read
HISTORY_ENTRIES = "version.history.num-entries"  # how many versions a metadata file keeps
DEFAULT_HISTORY_ENTRIES = 10
DROP_DIALECT_ALLOWED = "replace.drop-dialect.allowed"
COMMENT = "comment"
LAST_ADDED = -1


@dataclass(frozen=True, slots=True)
class ViewRepresentation:
    """One SQL text of a version, in one dialect (`duckdb`, `spark`, `trino`, ...)."""

    sql: str
    dialect: str
    type: str = SQL_TYPE


@dataclass(frozen=True, slots=True)
class ViewVersion:
    version_id: int
    timestamp_ms: int
    schema_id: int
    representations: tuple[ViewRepresentation, ...]
    default_namespace: tuple[str, ...]
    summary: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    default_catalog: str | None = None

    def representation(self, dialect: str) -> ViewRepresentation | None:
        """The SQL of `dialect` (case-insensitive), or None."""
        wanted = dialect.lower()
        return next((r for r in self.representations if r.dialect.lower() == wanted), None)

    @property
    def dialects(self) -> tuple[str, ...]:
        return tuple(r.dialect for r in self.representations)

    def same_definition(self, other: ViewVersion) -> bool:
        """Equal but for id, time and summary (a replace by the same definition adds no version)."""
        return (
            self.schema_id == other.schema_id
            and self.representations == other.representations
            and self.default_namespace == other.default_namespace
            and self.default_catalog == other.default_catalog
        )


@dataclass(frozen=True, slots=True)
class ViewHistoryEntry:
    version_id: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ViewMetadata:
    view_uuid: str
    location: str
    schemas: tuple[Schema, ...]
    current_version_id: int
    versions: tuple[ViewVersion, ...]
    version_log: tuple[ViewHistoryEntry, ...]
    properties: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    format_version: int = FORMAT_VERSION

    def version(self, version_id: int) -> ViewVersion | None:
        return next((v for v in self.versions if v.version_id == version_id), None)

    @property
    def current_version(self) -> ViewVersion:
        found = self.version(self.current_version_id)
        if found is None:  # pragma: no cover - parse and apply refuse such metadata
            raise InvalidMetadataError(f"view {self.location}: no current version {self.current_version_id}")
        return found

    def schema_of(self, schema_id: int) -> Schema | None:
        return next((s for s in self.schemas if s.schema_id == schema_id), None)

    @property
    def schema(self) -> Schema:
        """The schema the current version produces."""
        found = self.schema_of(self.current_version.schema_id)
        if found is None:  # pragma: no cover - parse and apply refuse such metadata
            raise InvalidMetadataError(f"view {self.location}: no schema {self.current_version.schema_id}")
        return found


# -- JSON -------------------------------------------------------------------------------------------


def representation_to_json(r: ViewRepresentation) -> dict[str, Any]:
    return {"type": r.type, "sql": r.sql, "dialect": r.dialect}


def view_version_to_json(v: ViewVersion) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version-id": v.version_id,
        "timestamp-ms": v.timestamp_ms,
        "schema-id": v.schema_id,
        "summary": dict(v.summary),
        "representations": [representation_to_json(r) for r in v.representations],
    }
    if v.default_catalog is not None:  # absent, never null
        out["default-catalog"] = v.default_catalog
    out["default-namespace"] = list(v.default_namespace)
    return out


def view_metadata_to_json(m: ViewMetadata) -> dict[str, Any]:
    out: dict[str, Any] = {
        "view-uuid": m.view_uuid,
        "format-version": m.format_version,
        "location": m.location,
        "schemas": [schema_to_json(s) for s in m.schemas],
        "current-version-id": m.current_version_id,
        "versions": [view_version_to_json(v) for v in m.versions],
        "version-log": [{"timestamp-ms": e.timestamp_ms, "version-id": e.version_id} for e in m.version_log],
    }
    if m.properties:
        out["properties"] = dict(m.properties)
    return out


def view_metadata_bytes(m: ViewMetadata) -> bytes:
    """The bytes of a view metadata file (indented JSON), checked against the rules first."""
    obj = view_metadata_to_json(m)
    check_view_metadata_json(obj, view=m.location)
    return json.dumps(obj, indent=2).encode()


def parse_representation(
    obj: Any, *, path: str | None = None, where: str = "representation"
) -> ViewRepresentation:
    f = JsonFields(obj, path, where)
    kind = f.string("type")
    if kind.lower() != SQL_TYPE:
        raise f.fail(f"representation type {kind!r} is not supported (only 'sql')")
    return ViewRepresentation(sql=f.string("sql"), dialect=f.string("dialect"), type=SQL_TYPE)


def parse_view_version(obj: Any, *, path: str | None = None, where: str = "view-version") -> ViewVersion:
    f = JsonFields(obj, path, where)
    namespace = f.array("default-namespace")
    if not all(isinstance(level, str) for level in namespace):
        raise f.fail(f"'default-namespace' must be a list of strings, not {namespace!r}")
    catalog = f.string("default-catalog", None)
    reps = f.array("representations")
    return ViewVersion(
        version_id=f.integer("version-id"),
        timestamp_ms=f.integer("timestamp-ms"),
        schema_id=f.integer("schema-id"),
        summary=f.str_map("summary") if f.has("summary") else EMPTY_MAP,
        representations=tuple(
            parse_representation(r, path=path, where=f"{where}.representations[{i}]")
            for i, r in enumerate(reps)
        ),
        default_namespace=tuple(namespace),
        default_catalog=catalog,
    )


def parse_view_metadata(obj: Any, *, path: str | None = None) -> ViewMetadata:
    """The view metadata of a decoded JSON object; `InvalidMetadataError` naming `path` and the
    first rule it breaks."""
    problems = view_metadata_problems(obj)
    if problems:
        prefix = f"{path}: " if path else ""
        raise InvalidMetadataError(f"{prefix}view metadata: {problems[0]}")
    f = JsonFields(obj, path, "view metadata")
    schemas = []
    for i, s in enumerate(f.array("schemas")):
        try:
            schemas.append(parse_schema(s))
        except InvalidMetadataError as e:
            raise f.fail(f"schemas[{i}]: {e}") from None
    return ViewMetadata(
        view_uuid=f.string("view-uuid"),
        format_version=f.integer("format-version"),
        location=f.string("location"),
        schemas=tuple(schemas),
        current_version_id=f.integer("current-version-id"),
        versions=tuple(
            parse_view_version(v, path=path, where=f"versions[{i}]")
            for i, v in enumerate(f.array("versions"))
        ),
        version_log=tuple(
            _history_entry(JsonFields(e, path, f"version-log[{i}]")) for i, e in enumerate(f.array("version-log"))
        ),
        properties=f.str_map("properties"),
    )


def _history_entry(f: JsonFields) -> ViewHistoryEntry:
    return ViewHistoryEntry(version_id=f.integer("version-id"), timestamp_ms=f.integer("timestamp-ms"))


def read_view_metadata(data: bytes, *, path: str) -> ViewMetadata:
    """A view metadata file's bytes (plain JSON; gzip when they start with its magic)."""
    if data[:2] == b"\x1f\x8b":
        import gzip

        data = gzip.decompress(data)
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidMetadataError(f"{path}: not a JSON view metadata file: {e}") from None
    return parse_view_metadata(obj, path=path)


# -- rules -------------------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return type(value) is int


def _string_map_problems(obj: Mapping[str, Any], key: str) -> list[str]:
    """The problem of an optional `key` that must be a map of strings to strings (none: [])."""
    value = obj.get(key)
    if value is None or (isinstance(value, Mapping) and all_str(value)):
        return []
    return [f"{key!r} must be a map of strings to strings"]


def view_metadata_problems(obj: Any) -> list[str]:
    """Every rule of the view spec the JSON object breaks, one line each (empty: none)."""
    if not isinstance(obj, Mapping):
        return [f"must be a JSON object, not {type(obj).__name__}"]
    problems: list[str] = []
    for key in (
        "view-uuid",
        "format-version",
        "location",
        "current-version-id",
        "versions",
        "version-log",
        "schemas",
    ):
        if obj.get(key) is None:
            problems.append(f"missing {key!r}")
    if problems:
        return problems
    if obj["format-version"] != FORMAT_VERSION or not _is_int(obj["format-version"]):
        problems.append(f"format-version must be 1, not {obj['format-version']!r}")
    for key in ("view-uuid", "location"):
        if not isinstance(obj[key], str) or not obj[key]:
            problems.append(f"{key!r} must be a non-empty string, not {obj[key]!r}")
    if isinstance(obj.get("view-uuid"), str):
        try:
            uuid.UUID(obj["view-uuid"])
        except ValueError:
            problems.append(f"view-uuid {obj['view-uuid']!r} is not a UUID")
    problems += _string_map_problems(obj, "properties")
    schema_ids: list[int] = []
    if not isinstance(obj["schemas"], list) or not obj["schemas"]:
        problems.append("'schemas' must be a non-empty list")
    else:
        for i, s in enumerate(obj["schemas"]):
            sid = s.get("schema-id") if isinstance(s, Mapping) else None
            if not isinstance(sid, int) or not _is_int(sid):
                problems.append(f"schemas[{i}]: 'schema-id' must be an integer, not {sid!r}")
            elif sid in schema_ids:
                problems.append(f"schemas[{i}]: schema-id {sid} appears twice")
            else:
                schema_ids.append(sid)
    version_ids: list[int] = []
    if not isinstance(obj["versions"], list) or not obj["versions"]:
        problems.append("'versions' must be a non-empty list")
    else:
        for i, v in enumerate(obj["versions"]):
            problems.extend(f"versions[{i}]: {p}" for p in version_problems(v, schema_ids))
            vid = v.get("version-id") if isinstance(v, Mapping) else None
            if isinstance(vid, int) and _is_int(vid):
                if vid in version_ids:
                    problems.append(f"versions[{i}]: version-id {vid} appears twice")
                version_ids.append(vid)
    current = obj["current-version-id"]
    if not _is_int(current):
        problems.append(f"current-version-id must be an integer, not {current!r}")
    elif version_ids and current not in version_ids:
        problems.append(f"current-version-id {current} is none of the versions {version_ids}")
    if not isinstance(obj["version-log"], list):
        problems.append("'version-log' must be a list")
    else:
        for i, e in enumerate(obj["version-log"]):
            if (
                not isinstance(e, Mapping)
                or not _is_int(e.get("version-id"))
                or not _is_int(e.get("timestamp-ms"))
            ):
                problems.append(f"version-log[{i}]: needs integer 'version-id' and 'timestamp-ms'")
    return problems


def version_problems(v: Any, schema_ids: Sequence[int] | None = None) -> list[str]:
    """The rules one view version breaks (`schema_ids`: the schemas it may name; None: unchecked)."""
    if not isinstance(v, Mapping):
        return ["must be a JSON object"]
    problems: list[str] = []
    for key, bits in (("version-id", 32), ("timestamp-ms", 64), ("schema-id", 32)):
        if not _is_int(v.get(key)):
            problems.append(f"{key!r} must be an integer, not {v.get(key)!r}")
        elif not -(2 ** (bits - 1)) <= v[key] < 2 ** (bits - 1):  # Java's int and long
            problems.append(f"{key!r} {v[key]} is beyond a signed {bits}-bit integer")
    if schema_ids is not None and _is_int(v.get("schema-id")) and v["schema-id"] not in schema_ids:
        problems.append(f"schema-id {v['schema-id']} is none of the view's schemas {list(schema_ids)}")
    problems += _string_map_problems(v, "summary")
    namespace = v.get("default-namespace")
    if not isinstance(namespace, list) or not all(isinstance(level, str) for level in namespace):
        problems.append(f"'default-namespace' must be a list of strings, not {namespace!r}")
    catalog = v.get("default-catalog")
    if catalog is not None and not isinstance(catalog, str):
        problems.append(f"'default-catalog' must be a string, not {catalog!r}")
    reps = v.get("representations")
    if not isinstance(reps, list) or not reps:
        problems.append("'representations' must be a non-empty list")
        return problems
    seen: set[str] = set()
    for j, r in enumerate(reps):
        if not isinstance(r, Mapping):
            problems.append(f"representations[{j}]: must be a JSON object")
            continue
        if not isinstance(r.get("type"), str) or r["type"].lower() != SQL_TYPE:
            problems.append(f"representations[{j}]: type must be 'sql', not {r.get('type')!r}")
        if not isinstance(r.get("sql"), str) or not r["sql"].strip():
            problems.append(f"representations[{j}]: 'sql' must be a non-empty string")
        dialect = r.get("dialect")
        if not isinstance(dialect, str) or not dialect:
            problems.append(f"representations[{j}]: 'dialect' must be a non-empty string")
        elif dialect.lower() in seen:
            problems.append(f"representations[{j}]: dialect {dialect!r} appears twice in one version")
        else:
            seen.add(dialect.lower())
    return problems


def check_view_metadata_json(obj: Mapping[str, Any], *, view: str) -> None:
    """`InvalidMetadataError` naming `view` and the first rule `obj` breaks."""
    problems = view_metadata_problems(obj)
    if problems:
        raise InvalidMetadataError(f"view {view}: metadata breaks the view spec: {problems[0]}")


# -- building and changing ----------------------------------------------------------------------------


def history_entries(properties: Mapping[str, str]) -> int:
    text = properties.get(HISTORY_ENTRIES)
    try:
        value = int(text) if text is not None else DEFAULT_HISTORY_ENTRIES
    except ValueError:
        value = DEFAULT_HISTORY_ENTRIES
    return max(value, 1)


def new_view_metadata(
    *,
    location: str,
    schema: Schema,
    version: ViewVersion,
    properties: Mapping[str, str] | None = None,
    view_uuid: str | None = None,
) -> ViewMetadata:
    """The metadata of a new view: `schema` (its id becomes 0) and `version` (id 1, naming it)."""
    schema = replace(schema, schema_id=0)
    first = replace(version, version_id=1, schema_id=0)
    metadata = ViewMetadata(
        view_uuid=view_uuid or str(uuid.uuid4()),
        location=location.rstrip("/"),
        schemas=(schema,),
        current_version_id=1,
        versions=(first,),
        version_log=(ViewHistoryEntry(1, first.timestamp_ms),),
        properties=frozen_map(properties or {}),
    )
    check_view_metadata_json(view_metadata_to_json(metadata), view=metadata.location)
    return metadata


# The REST protocol's view updates and requirement (CommitViewRequest).


@dataclass(frozen=True, slots=True)
class AssignUUID:
    uuid: str


@dataclass(frozen=True, slots=True)
class UpgradeFormatVersion:
    format_version: int


@dataclass(frozen=True, slots=True)
class AddSchema:
    schema: Schema


@dataclass(frozen=True, slots=True)
class SetLocation:
    location: str


@dataclass(frozen=True, slots=True)
class SetProperties:
    updates: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class RemoveProperties:
    removals: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AddViewVersion:
    version: ViewVersion


@dataclass(frozen=True, slots=True)
class SetCurrentViewVersion:
    version_id: int


@dataclass(frozen=True, slots=True)
class AssertViewUUID:
    uuid: str


ViewUpdate = (
    AssignUUID
    | UpgradeFormatVersion
    | AddSchema
    | SetLocation
    | SetProperties
    | RemoveProperties
    | AddViewVersion
    | SetCurrentViewVersion
)


def view_update_to_json(u: ViewUpdate) -> dict[str, Any]:
    if isinstance(u, AssignUUID):
        return {"action": "assign-uuid", "uuid": u.uuid}
    if isinstance(u, UpgradeFormatVersion):
        return {"action": "upgrade-format-version", "format-version": u.format_version}
    if isinstance(u, AddSchema):
        return {"action": "add-schema", "schema": schema_to_json(u.schema)}
    if isinstance(u, SetLocation):
        return {"action": "set-location", "location": u.location}
    if isinstance(u, SetProperties):
        return {"action": "set-properties", "updates": dict(u.updates)}
    if isinstance(u, RemoveProperties):
        return {"action": "remove-properties", "removals": list(u.removals)}
    if isinstance(u, AddViewVersion):
        return {"action": "add-view-version", "view-version": view_version_to_json(u.version)}
    return {"action": "set-current-view-version", "view-version-id": u.version_id}


def view_update_from_json(obj: Any) -> ViewUpdate:
    """One view update of a CommitViewRequest; `ValidationError` naming what is wrong."""
    try:
        f = JsonFields(obj, None, "view update")
        action = f.string("action")
        if action == "assign-uuid":
            return AssignUUID(str(uuid.UUID(f.string("uuid"))))
        if action == "upgrade-format-version":
            return UpgradeFormatVersion(f.integer("format-version"))
        if action == "add-schema":
            return AddSchema(parse_schema(JsonFields(f.obj.get("schema"), None, "add-schema.schema").obj))
        if action == "set-location":
            return SetLocation(f.string("location"))
        if action == "set-properties":
            return SetProperties(frozen_map(f.str_map("updates")))
        if action == "remove-properties":
            removals = f.array("removals")
            if not all(isinstance(k, str) for k in removals):
                raise f.fail("'removals' must be a list of strings")
            return RemoveProperties(tuple(removals))
        if action == "add-view-version":
            raw = f.obj.get("view-version")
            problems = version_problems(raw)
            if problems:
                raise f.fail(f"view-version: {problems[0]}")
            return AddViewVersion(parse_view_version(raw))
        if action == "set-current-view-version":
            return SetCurrentViewVersion(f.integer("view-version-id"))
    except (InvalidMetadataError, ValueError) as e:
        raise ValidationError(f"invalid view update: {e}") from None
    raise ValidationError(f"view update action {action!r} is not one a view takes")


def view_requirement_from_json(obj: Any) -> AssertViewUUID:
    try:
        f = JsonFields(obj, None, "view requirement")
        kind = f.string("type")
        if kind != "assert-view-uuid":
            raise ValidationError(
                f"view requirement {kind!r} is not one a view takes (only assert-view-uuid)"
            )
        return AssertViewUUID(f.string("uuid"))
    except InvalidMetadataError as e:
        raise ValidationError(f"invalid view requirement: {e}") from None


def check_view_requirements(base: ViewMetadata, requirements: Sequence[AssertViewUUID], *, view: str) -> None:
    """`CommitConflictError` naming the view when a requirement fails on `base`."""
    for r in requirements:
        if r.uuid != base.view_uuid:
            raise CommitConflictError(
                f"view {view}: requirement assert-view-uuid failed: the view's uuid is {base.view_uuid}, not {r.uuid}"
            )


def apply_view_updates(base: ViewMetadata, updates: Sequence[ViewUpdate], *, now_ms: int) -> ViewMetadata:
    """`base` with `updates` applied, as the view spec and Java's view metadata builder do: a
    schema equal to a known one is that one; an added version defining the same view as a known
    one reuses that version's id; `-1` means the last schema or version added by these updates; a
    version change is logged; versions beyond `version.history.num-entries` are dropped, oldest
    first, never the current one; dropping a dialect the current version has needs
    `replace.drop-dialect.allowed`. `ValidationError` for an update that cannot apply."""
    schemas = list(base.schemas)
    versions = list(base.versions)
    log = list(base.version_log)
    props = dict(base.properties)
    location = base.location
    view_uuid = base.view_uuid
    current = base.current_version_id
    last_schema: int | None = None
    last_version: int | None = None
    changed_version = False
    for u in updates:
        if isinstance(u, AssignUUID):
            if u.uuid != view_uuid:
                raise ValidationError(f"view {location}: cannot assign a new uuid to an existing view")
        elif isinstance(u, UpgradeFormatVersion):
            if u.format_version != FORMAT_VERSION:
                raise ValidationError(
                    f"view {location}: format-version {u.format_version} is not supported (only 1)"
                )
        elif isinstance(u, AddSchema):
            same = next((s for s in schemas if s.fields == u.schema.fields), None)
            if same is not None:
                last_schema = same.schema_id
            else:
                new_id = max((s.schema_id for s in schemas), default=-1) + 1
                schemas.append(replace(u.schema, schema_id=new_id))
                last_schema = new_id
        elif isinstance(u, SetLocation):
            if not u.location:
                raise ValidationError(f"view {location}: set-location needs a location")
            location = u.location.rstrip("/")
        elif isinstance(u, SetProperties):
            props.update(u.updates)
        elif isinstance(u, RemoveProperties):
            for key in u.removals:
                props.pop(key, None)
        elif isinstance(u, AddViewVersion):
            version = u.version
            if version.schema_id == LAST_ADDED:
                if last_schema is None:
                    raise ValidationError(
                        f"view {location}: add-view-version names the last added schema, but none was added"
                    )
                version = replace(version, schema_id=last_schema)
            if all(s.schema_id != version.schema_id for s in schemas):
                raise ValidationError(
                    f"view {location}: add-view-version names unknown schema {version.schema_id}"
                )
            dialects = [r.dialect.lower() for r in version.representations]
            if len(set(dialects)) != len(dialects):
                raise ValidationError(f"view {location}: a view version holds one SQL per dialect")
            same_version = next((v for v in versions if v.same_definition(version)), None)
            if same_version is not None:
                last_version = same_version.version_id
            else:
                new_id = max((v.version_id for v in versions), default=0) + 1
                versions.append(replace(version, version_id=new_id))
                last_version = new_id
        elif isinstance(u, SetCurrentViewVersion):
            wanted = u.version_id
            if wanted == LAST_ADDED:
                if last_version is None:
                    raise ValidationError(
                        f"view {location}: set-current-view-version -1, but no version was added"
                    )
                wanted = last_version
            target = next((v for v in versions if v.version_id == wanted), None)
            if target is None:
                raise ValidationError(f"view {location}: no view version {wanted} to make current")
            if wanted != current:
                old = next((v for v in versions if v.version_id == current), None)
                if old is not None and props.get(DROP_DIALECT_ALLOWED, "false").lower() != "true":
                    dropped = {r.dialect.lower() for r in old.representations} - {
                        r.dialect.lower() for r in target.representations
                    }
                    if dropped:
                        raise ValidationError(
                            f"view {location}: the new version drops dialect(s) {sorted(dropped)} of the current "
                            f"one; set the view property {DROP_DIALECT_ALLOWED}=true to allow that"
                        )
                current = wanted
                changed_version = True
                log.append(
                    ViewHistoryEntry(wanted, now_ms if target.timestamp_ms <= 0 else target.timestamp_ms)
                )
        else:  # pragma: no cover - the union above is exhaustive
            raise ValidationError(f"view {location}: unknown update {u!r}")
    if changed_version:
        keep = history_entries(props)
        if len(versions) > keep:
            ordered = sorted(versions, key=lambda v: v.version_id)
            dropped_ids = {v.version_id for v in ordered[: len(versions) - keep] if v.version_id != current}
            versions = [v for v in versions if v.version_id not in dropped_ids]
            log = [e for e in log if e.version_id not in dropped_ids]
    used = {v.schema_id for v in versions}
    schemas = [s for s in schemas if s.schema_id in used] or schemas
    metadata = ViewMetadata(
        view_uuid=view_uuid,
        location=location,
        schemas=tuple(schemas),
        current_version_id=current,
        versions=tuple(versions),
        version_log=tuple(log),
        properties=frozen_map(props),
    )
    check_view_metadata_json(view_metadata_to_json(metadata), view=location)
    return metadata


def replace_version_updates(
    base: ViewMetadata | None,
    *,
    schema: Schema,
    version: ViewVersion,
    properties: Mapping[str, str] | None = None,
) -> list[ViewUpdate]:
    """The updates replacing a view's definition (what `CREATE OR REPLACE VIEW` sends): the schema,
    the version naming it (-1), that version current; `properties` set."""
    updates: list[ViewUpdate] = [
        AddSchema(schema),
        AddViewVersion(replace(version, schema_id=LAST_ADDED)),
        SetCurrentViewVersion(LAST_ADDED),
    ]
    if properties:
        updates.append(SetProperties(frozen_map(properties)))
    return updates
