"""The REST catalog's operations on one warehouse (`Warehouse`), for `iceduck serve`.

Namespaces, tables and commits over the warehouse's SQLite catalog, with the server's rules: every
location a request names or implies stays inside the warehouse and clear of other tables, bodies are
checked before anything is written, and commits go through the catalog's one pipeline
(`iceduck.catalog.commit`; a pointer swap lost to another process is tried again while the
requirements still hold). `routes.Router` maps HTTP requests onto these operations.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from iceduck.catalog.base import check_new_name, check_new_namespace, namespace_contents
from iceduck.catalog.commit import (
    METADATA_PATH,
    CommittedTable,
    MetadataCheck,
    TableChange,
    metadata_folder,
)
from iceduck.catalog.locate import TableLocation, table_folder_of
from iceduck.catalog.locations import check_location_free, known_tables, overlap
from iceduck.catalog.sql import NAMESPACE_LOCATION_PROPERTY, SqlCatalog
from iceduck.errors import (
    AlreadyExistsError,
    CommitConflictError,
    NamespaceNotFoundError,
    TableNotFoundError,
    ValidationError,
)
from iceduck.io import fsspec_store, s3_settings
from iceduck.io.fileio import FileIO, local_path
from iceduck.io.paths import check_inside, is_under, normalize_path
from iceduck.io.storage import default_io, is_remote
from iceduck.maintenance.neighbours import Neighbours
from iceduck.rest import protocol as wire
from iceduck.serve.asgi import HttpError, Reply
from iceduck.spec import updates as upd
from iceduck.spec.partitioning import PartitionSpec, parse_partition_fields
from iceduck.spec.sorting import UNSORTED, SortOrder, parse_sort_order
from iceduck.spec.table_metadata import TableMetadata, read_table_metadata, table_metadata_to_json
from iceduck.spec.types import parse_schema
from iceduck.table import Table
from iceduck.tables import purge_files
from iceduck.transaction.metadata import create_table_updates

log = logging.getLogger("iceduck.serve")

DEFAULT_FORMAT_VERSION = 2  # what other REST catalogs create when the client names none


COMMIT_ATTEMPTS = 10  # pointer swaps lost to other processes before a commit is reported as a conflict


# table properties naming where files go: each must stay inside the table's location
WRITE_PATH_PROPERTIES = (
    METADATA_PATH,
    "write.data.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)


class Warehouse:
    """The REST operations over one SQLite catalog (no HTTP here: tests and handlers call these)."""

    def __init__(self, warehouse: str, *, io: FileIO | None = None, vend_credentials: bool = False) -> None:
        self.catalog = SqlCatalog.open(warehouse, public=True)  # errors name no server file
        self.io = io or default_io()
        self.vend_credentials = vend_credentials
        self.root = str(self.catalog.warehouse)  # every path a request names must lie below it
        # the server's own files, which no path a request names may be or lie under: a table at
        # `<wh>/catalog.db-journal` made SQLite's journal a folder, and every later write failed
        database = self.catalog.database
        self.metrics_path = os.path.join(os.path.dirname(database), METRICS_FILE_NAME)
        self.server_files = (
            *(database + suffix for suffix in ("", "-journal", "-wal", "-shm")),
            *(self.metrics_path + suffix for suffix in ("", ".1")),
        )
        # One writer at a time inside this process; other processes are kept honest by the CAS.
        self._write_lock = threading.Lock()

    @property
    def prefix(self) -> str:
        return self.catalog.name

    @property
    def write_lock(self) -> threading.Lock:
        """The lock every change of this process takes (the view operations too)."""
        return self._write_lock

    def vended_config(self, location: str) -> dict[str, str]:
        """The S3, GCS or Azure settings (PyIceberg's names) this server itself reaches `location` with: what it
        vends to clients asking for `vended-credentials`. Empty for local tables and with vending off
        (the default: `iceduck serve --vend-credentials`, which needs `--credentials`, turns it on).
        No STS here: a client gets the server's own keys."""
        if self.vend_credentials and fsspec_store.is_store_path(location):  # gcs.* / adls.*
            return fsspec_store.vended_properties(location)
        if not self.vend_credentials or not s3_settings.is_s3(location):
            return {}
        return s3_settings.properties_from_settings(s3_settings.effective_settings(location))

    def storage_credentials(self, location: str) -> list[dict[str, Any]]:
        """The spec's `storage-credentials` for a table at `location` (one, for its location)."""
        config = self.vended_config(location)
        return [{"prefix": location, "config": config}] if config else []

    # -- the location guard ---------------------------------------------------------------------
    # Every path a request names or implies is checked before anything is read, written or deleted
    # (`iceduck.io.paths.is_under`: `..`, `.`, `//`, %2e%2e, symlinks, scheme aliases and buckets):
    # a table location strictly inside the warehouse and clear of other tables, every file a commit
    # names inside the table's location. Refusals are 400s that name the client's path, never ours.

    def check_inside(self, location: str, what: str) -> None:
        """`ValidationError` unless `location` lies strictly inside the warehouse, and is none of
        the server's own files nor below one."""
        check_inside(location, self.root, what, strict=True)
        if any(is_under(location, f) for f in self.server_files):
            raise ValidationError(f"{what} {shown(location, 300)} is a file of the catalog server itself")

    def check_table_location(self, location: str, identifier: str) -> None:
        """A location a table may have here: inside the warehouse, not an existing file, not the
        location of another table nor inside or around one (purge and orphan removal of one table
        would have to tell its files from the other's)."""
        self.check_inside(location, f"table location of {identifier}")
        if (
            not is_remote(location)
            and os.path.lexists(local_path(location))
            and not os.path.isdir(local_path(location))
        ):
            raise ValidationError(f"table location {location!r} of {identifier} is a file, not a folder")
        check_location_free(self.catalog, identifier, location, self.io, served=True)

    def check_metadata(
        self, identifier: str, base: TableMetadata | None, base_location: str | None, new: TableMetadata
    ) -> None:
        """Every path the commit from `base` (read from `base_location`) to `new` adds: the location
        (when it moves), the `write.*.path` properties (when they change), the manifest lists and
        manifests of new snapshots, new statistics and partition statistics files, and the folder
        the server writes the next metadata file to. Paths `base` already had are not checked again."""
        location = new.location
        if base is None or normalize_path(base.location) != normalize_path(location):
            self.check_table_location(location, identifier)
        else:
            self.check_inside(location, f"table location of {identifier}")
        own = f"the location of table {identifier}"

        def inside_table(path: str, what: str, *, strict: bool = True) -> None:
            self.check_inside(path, what)
            check_inside(path, location, what, strict=strict, where=own)

        before = base.properties if base is not None else {}
        for key in WRITE_PATH_PROPERTIES:
            value = new.properties.get(key)
            if value is not None and value != before.get(key):
                inside_table(value, f"property {key}", strict=False)
        old_snapshots = {s.snapshot_id for s in base.snapshots} if base is not None else set()
        for snap in new.snapshots:
            if snap.snapshot_id in old_snapshots:
                continue
            if snap.manifest_list is not None:
                inside_table(snap.manifest_list, f"manifest-list of snapshot {snap.snapshot_id}")
            for manifest in snap.manifests or ():
                inside_table(manifest, f"manifest of snapshot {snap.snapshot_id}")
        old_stats = (
            {(f.snapshot_id, f.statistics_path) for f in base.statistics} if base is not None else set()
        )
        for stats in new.statistics:
            if (stats.snapshot_id, stats.statistics_path) not in old_stats:
                inside_table(stats.statistics_path, f"statistics-path of snapshot {stats.snapshot_id}")
        old_part = (
            {(f.snapshot_id, f.statistics_path) for f in base.partition_statistics}
            if base is not None
            else set()
        )
        for pstats in new.partition_statistics:
            if (pstats.snapshot_id, pstats.statistics_path) not in old_part:
                inside_table(
                    pstats.statistics_path, f"partition statistics-path of snapshot {pstats.snapshot_id}"
                )
        if base is not None and base_location is not None:
            # where the new metadata file goes (`write.metadata.path` of the base, else beside it):
            # inside the folder the table is in (a registered file's `location` and
            # `write.metadata.path` were never checked, and may name another table's folder)
            folder = metadata_folder(base, base_location)
            what = f"metadata folder of {identifier}"
            self.check_inside(folder, what)
            check_inside(
                folder, table_folder_of(base_location), what, where=f"the folder of table {identifier}"
            )

    def _checker(self, namespace: str, name: str) -> MetadataCheck:
        def check(base: TableMetadata | None, base_location: str | None, new: TableMetadata) -> None:
            self.check_metadata(f"{namespace}.{name}", base, base_location, new)

        return check

    def check_updates(self, updates: Sequence[upd.TableUpdate]) -> None:
        """A first look at the updates themselves, before any table is read: every path they name
        lies inside the warehouse. (`check_metadata` then places each inside its table.)"""
        for u in updates:
            if isinstance(u, upd.SetLocation):
                self.check_inside(u.location, "set-location")
            elif isinstance(u, upd.SetProperties):
                for key in WRITE_PATH_PROPERTIES:
                    if key in u.updates:
                        self.check_inside(u.updates[key], f"property {key}")
            elif isinstance(u, upd.AddSnapshot):
                snap = u.snapshot
                for path in (snap.manifest_list, *(snap.manifests or ())):
                    if path is not None:
                        self.check_inside(path, f"manifest-list of snapshot {snap.snapshot_id}")
            elif isinstance(u, upd.SetStatistics):
                self.check_inside(u.statistics.statistics_path, "statistics-path")
            elif isinstance(u, upd.SetPartitionStatistics):
                self.check_inside(u.partition_statistics.statistics_path, "partition statistics-path")

    # -- namespaces ---------------------------------------------------------------------------

    def list_namespaces(self, parent: str | None) -> dict[str, Any]:
        names = self.catalog.list_namespaces(parent)
        return {"namespaces": [wire.namespace_parts(n) for n in names]}

    def create_namespace(self, body: Any) -> dict[str, Any]:
        obj = json_object(body, "CreateNamespaceRequest")
        namespace = _new_namespace(obj.get("namespace"))
        props = string_map(obj.get("properties"), "properties")
        if NAMESPACE_LOCATION_PROPERTY in props:
            self.check_inside(
                props[NAMESPACE_LOCATION_PROPERTY], f"namespace property {NAMESPACE_LOCATION_PROPERTY}"
            )
        self.catalog.create_namespace(namespace, props or None)
        return {"namespace": wire.namespace_parts(namespace), "properties": props}

    def load_namespace(self, namespace: str) -> dict[str, Any]:
        props = self.catalog.namespace_properties(namespace)
        return {"namespace": wire.namespace_parts(namespace), "properties": props}

    def drop_namespace(self, namespace: str) -> None:
        with self._write_lock:
            if not self.catalog.namespace_exists(namespace):
                raise NamespaceNotFoundError(f"namespace '{namespace}' does not exist")
            held = [self.catalog.list_tables(namespace), self.catalog.list_views(namespace)]
            held.append(self.catalog.list_namespaces(namespace))
            if any(held):
                what = namespace_contents(*held)
                raise HttpError(409, wire.NAMESPACE_NOT_EMPTY, f"namespace '{namespace}' is not empty: {what}")
            self.catalog.drop_namespace(namespace)

    def update_namespace_properties(self, namespace: str, body: Any) -> dict[str, Any]:
        obj = json_object(body, "UpdateNamespacePropertiesRequest")
        updates = string_map(obj.get("updates"), "updates")
        removals = obj.get("removals") or []
        if not isinstance(removals, list) or not all(isinstance(k, str) for k in removals):
            raise ValidationError(f"'removals' must be a list of strings, not {removals!r}")
        if both := sorted(set(removals) & updates.keys()):
            raise HttpError(422, wire.UNPROCESSABLE, f"keys both updated and removed: {both}")
        if NAMESPACE_LOCATION_PROPERTY in updates:
            self.check_inside(
                updates[NAMESPACE_LOCATION_PROPERTY], f"namespace property {NAMESPACE_LOCATION_PROPERTY}"
            )
        with self._write_lock:
            before = self.catalog.namespace_properties(namespace)
            self.catalog.update_namespace_properties(namespace, updates, set(removals))
        return {
            "updated": sorted(updates),
            "removed": sorted(k for k in set(removals) if k in before),
            "missing": sorted(k for k in set(removals) if k not in before),
        }

    # -- tables -------------------------------------------------------------------------------

    def list_tables(self, namespace: str) -> dict[str, Any]:
        return {
            "identifiers": [wire.table_identifier(namespace, t) for t in self.catalog.list_tables(namespace)]
        }

    def _read(self, location: str) -> TableMetadata:
        return read_table_metadata(self.io.read(location), path=location)

    def load_table(self, namespace: str, name: str, snapshots: str = "all") -> Reply:
        location = self.catalog.load_table(namespace, name)
        metadata = self._read(location)
        body = table_metadata_to_json(metadata)
        if snapshots == "refs":
            referenced = {ref.snapshot_id for ref in metadata.refs.values()}
            body["snapshots"] = [s for s in body.get("snapshots", []) if s.get("snapshot-id") in referenced]
        return table_reply(location, body)

    def table_exists(self, namespace: str, name: str) -> bool:
        return self.catalog.table_exists(namespace, name)

    def create_table(self, namespace: str, body: Any) -> Reply:
        obj = json_object(body, "CreateTableRequest")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise ValidationError(f"CreateTableRequest needs a table 'name', not {name!r}")
        check_new_name(name, "table name")
        if self.catalog.view_exists(namespace, name):  # 409 before the location check (it holds the view)
            raise AlreadyExistsError(f"a view {namespace}.{name} exists already")
        updates = self._create_updates(namespace, name, obj)
        check = self._checker(namespace, name)
        if obj.get("stage-create"):
            if not self.catalog.namespace_exists(namespace):
                raise NamespaceNotFoundError(
                    f"cannot create table {namespace}.{name}: namespace '{namespace}' does not exist"
                )
            if self.catalog.table_exists(namespace, name):
                raise AlreadyExistsError(f"table {namespace}.{name} exists already")
            # nothing to keep: the commit that completes the create carries every update
            staged = upd.apply_updates(None, updates)
            check(None, None, staged)
            self._prepare_location(staged)
            return Reply(
                200, {"metadata-location": None, "metadata": table_metadata_to_json(staged), "config": {}}
            )
        with self._write_lock:
            committed = self.catalog.commit_table(namespace, name, [upd.AssertCreate()], updates, check=check)
        return table_reply(committed.metadata_location, table_metadata_to_json(committed.metadata))

    def _create_updates(self, namespace: str, name: str, obj: Mapping[str, Any]) -> list[upd.TableUpdate]:
        """The updates that build the table a `CreateTableRequest` asks for."""
        props = string_map(obj.get("properties"), "properties")
        version_text = props.pop("format-version", str(DEFAULT_FORMAT_VERSION))
        try:
            format_version = int(version_text)
        except ValueError:
            raise ValidationError(
                f"property format-version must be 1, 2 or 3, not {version_text!r}"
            ) from None
        schema = parse_schema(json_object(obj.get("schema"), "schema"))
        spec = PartitionSpec(0, ())
        if obj.get("partition-spec") is not None:
            raw = json_object(obj["partition-spec"], "partition-spec")
            spec = parse_partition_fields(
                _with_partition_field_ids(raw.get("fields", [])), format_version=format_version
            )
        order: SortOrder = UNSORTED
        if obj.get("write-order") is not None:
            raw = dict(json_object(obj["write-order"], "write-order"))
            raw.setdefault("order-id", 1 if raw.get("fields") else 0)
            order = parse_sort_order(raw, format_version=format_version)
        location = obj.get("location")
        if location is not None and not isinstance(location, str):
            raise ValidationError(f"'location' must be a string, not {location!r}")
        table_location = (location or self.catalog.default_table_location(namespace, name)).rstrip("/")
        self.check_inside(table_location, "table location")
        for key in WRITE_PATH_PROPERTIES:
            if key in props:
                check_inside(props[key], table_location, f"property {key}", where="the table's location")
        return create_table_updates(
            location=table_location, schema=schema, spec=spec, sort_order=order, properties=props,
            format_version=format_version,
        )  # fmt: skip

    def _prepare_location(self, metadata: TableMetadata) -> None:
        """The folders a client writes into first, made for a table on local disk: a staged create
        hands out a location where nothing exists yet, and DuckDB's extension writes its manifest
        into `<location>/metadata/` without creating the folder."""
        if is_remote(metadata.location):
            return
        folder = local_path(metadata.location)
        for sub in ("metadata", "data"):
            os.makedirs(os.path.join(folder, sub), exist_ok=True)

    def register_table(self, namespace: str, body: Any) -> Reply:
        obj = json_object(body, "RegisterTableRequest")
        name, location = obj.get("name"), obj.get("metadata-location")
        if not isinstance(name, str) or not isinstance(location, str) or not name or not location:
            raise ValidationError("RegisterTableRequest needs 'name' and 'metadata-location'")
        check_new_name(name, "table name")
        # before the file is read: a path outside answers the same whether or not a file is there
        self.check_inside(location, "metadata-location")
        if obj.get("overwrite") and self.catalog.table_exists(namespace, name):
            raise AlreadyExistsError(
                f"table {namespace}.{name} exists already; this catalog does not register over a table"
            )
        if not self.io.exists(location):
            raise TableNotFoundError(f"cannot register {namespace}.{name}: no metadata file {location!r}")
        metadata = self._read(location)
        check_location_free(
            self.catalog, f"{namespace}.{name}", table_folder_of(location), self.io, served=True
        )
        with self._write_lock:
            self.catalog.register_table(namespace, name, location)
        return table_reply(location, table_metadata_to_json(metadata))

    def drop_table(self, namespace: str, name: str, purge: bool) -> None:
        with self._write_lock:
            table = None
            if purge:
                location = self.catalog.load_table(namespace, name)
                folder = table_folder_of(location)
                # again now: a folder that became a link out would have purge compare with its target
                self.check_inside(folder, f"table location of {namespace}.{name}")
                table = Table.from_location(TableLocation(location, folder), io=self.io)
            self.catalog.drop_table(namespace, name)
        if table is not None:
            # only files the table's metadata reaches inside its own location, none of another table
            others = Neighbours.of(table, known_tables(self.catalog, self.io), name=f"{namespace}.{name}")
            report = purge_files(table, others.owner)
            for path, why in report.left:
                log.warning("purge of %s.%s left %s: %s", namespace, name, path, why)

    def unregister_table(self, namespace: str, name: str) -> dict[str, Any]:
        """Forget the table, keeping its files; its last metadata location and metadata."""
        with self._write_lock:
            location = self.catalog.load_table(namespace, name)
            metadata = self._read(location)
            self.catalog.drop_table(namespace, name)
        return {"metadata-location": location, "metadata": table_metadata_to_json(metadata)}

    def rename_table(self, body: Any) -> None:
        obj = json_object(body, "RenameTableRequest")
        ns, name = wire.parse_table_identifier(obj.get("source"))
        new_ns, new_name = wire.parse_table_identifier(obj.get("destination"))
        check_new_name(new_name, "table name")
        with self._write_lock:
            self.catalog.rename_table(ns, name, new_ns, new_name)

    # -- commits ------------------------------------------------------------------------------

    def commit_table(self, namespace: str | None, name: str | None, body: Any) -> Reply:
        obj = json_object(body, "CommitTableRequest")
        if namespace is None or name is None:
            namespace, name = wire.parse_table_identifier(obj.get("identifier"))
        elif obj.get("identifier") is not None:
            ident = wire.parse_table_identifier(obj["identifier"])
            if ident != (namespace, name):
                raise ValidationError(
                    f"commit for {namespace}.{name} names another table in its identifier: {ident[0]}.{ident[1]}"
                )
        requirements, updates = self._parse_change(obj)
        committed = self._commit_one(namespace, name, requirements, updates)
        return table_reply(committed.metadata_location, table_metadata_to_json(committed.metadata))

    def _parse_change(self, obj: Mapping[str, Any]) -> tuple[Any, Any]:
        requirements = obj.get("requirements")
        updates = obj.get("updates")
        if not isinstance(requirements, list) or not isinstance(updates, list):
            raise ValidationError("a table commit needs 'requirements' and 'updates' lists")
        parsed = upd.updates_from_json(updates)
        self.check_updates(parsed)
        return upd.requirements_from_json(requirements), parsed

    def _commit_one(
        self,
        namespace: str,
        name: str,
        requirements: Sequence[upd.TableRequirement],
        updates: Sequence[upd.TableUpdate],
    ) -> CommittedTable:
        """`catalog.commit_table`, again while only the pointer swap was lost to another process
        (the requirements still hold on its state); 409 naming the requirement once one fails."""
        creating = any(isinstance(r, upd.AssertCreate) for r in requirements)
        with self._write_lock:
            try:
                return self.catalog.commit_table(
                    namespace,
                    name,
                    requirements,
                    updates,
                    check=self._checker(namespace, name),
                    attempts=COMMIT_ATTEMPTS,
                )
            except AlreadyExistsError:
                if not creating:
                    raise
                raise CommitConflictError(
                    f"table {namespace}.{name}: requirement assert-create failed: the table exists already"
                ) from None

    def commit_transaction(self, body: Any) -> None:
        obj = json_object(body, "CommitTransactionRequest")
        changes = obj.get("table-changes")
        if not isinstance(changes, list) or not changes:
            raise ValidationError("CommitTransactionRequest needs a non-empty 'table-changes' list")
        parsed = []
        seen: set[tuple[str, str]] = set()
        for change in changes:
            change_obj = json_object(change, "table change")
            ns, name = wire.parse_table_identifier(change_obj.get("identifier"))
            if (ns, name) in seen:
                raise ValidationError(f"transaction changes table {ns}.{name} twice")
            seen.add((ns, name))
            parsed.append((ns, name, *self._parse_change(change_obj)))
        # each table's new location is checked against the catalog as it is: not against the others moved here
        moved = [
            (f"{ns}.{n}", u.location)
            for ns, n, _, ups in parsed
            for u in ups
            if isinstance(u, upd.SetLocation)
        ]
        for i, (who, where) in enumerate(moved):
            for other, there in moved[:i]:
                if other != who and overlap(where, there) is not None:
                    raise ValidationError(
                        f"transaction puts tables {other} and {who} in overlapping folders ({shown(where)})"
                    )
        self._commit(parsed)

    def _commit(self, changes: Sequence[tuple[str, str, Any, Any]]) -> list[CommittedTable]:
        """A transaction: the catalog's `commit_tables` (every change checked, applied, checked by
        `check_metadata` and written, then all pointers swapped in one SQLite transaction, or none);
        again while only a swap was lost to another process and the requirements still hold on its
        state (409 naming the requirement once one fails), as `_commit_one` does for one table."""
        batch = [TableChange(ns, name, tuple(reqs), tuple(updates)) for ns, name, reqs, updates in changes]
        with self._write_lock:
            return self.catalog.commit_tables(batch, check=self._check_change, attempts=COMMIT_ATTEMPTS)

    def _check_change(
        self,
        namespace: str,
        name: str,
        base: TableMetadata | None,
        base_location: str | None,
        new: TableMetadata,
    ) -> None:
        self.check_metadata(f"{namespace}.{name}", base, base_location, new)


def _new_namespace(parts: Any) -> str:
    """A namespace a client may create (`check_new_namespace`)."""
    return check_new_namespace(wire.namespace_name(parts))


def _with_partition_field_ids(fields: Any) -> Any:
    """Partition fields of a create request get ids 1000, 1001, ... where the client sent none."""
    if not isinstance(fields, list):
        return fields
    out = []
    next_id = 1000
    for f in fields:
        if isinstance(f, dict) and "field-id" not in f:
            f = {**f, "field-id": next_id}
        if isinstance(f, dict) and isinstance(f.get("field-id"), int):
            next_id = max(next_id, f["field-id"] + 1)
        out.append(f)
    return out


def table_reply(location: str, metadata: dict[str, Any]) -> Reply:
    etag = '"' + hashlib.sha256(location.encode()).hexdigest()[:32] + '"'
    return Reply(200, {"metadata-location": location, "metadata": metadata, "config": {}}, (("ETag", etag),))


def json_object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(f"{what} must be a JSON object, not {type(value).__name__}")
    return value


def string_map(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValidationError(f"'{what}' must be an object of string values")
    return dict(value)


def shown(value: object, limit: int = 60) -> str:
    """A client's value quoted for a message, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


METRICS_FILE_NAME = "serve-metrics.jsonl"


class MetricsLog:
    """The metrics reports clients send (`POST .../tables/{t}/metrics`, the spec's report-metrics),
    one JSON line each in `serve-metrics.jsonl` next to the warehouse's `catalog.db`:
    `{"time", "table", "client", "report"}`. Past `max_bytes` the file moves to `.1` (one kept)."""

    def __init__(self, path: str, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._lock = threading.Lock()

    def write(self, namespace: str, name: str, report: Mapping[str, Any], client: str) -> None:
        line = json.dumps(
            {
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "table": f"{namespace}.{name}",
                "client": client,
                "report": report,
            },
            separators=(",", ":"),
        )
        with self._lock:
            with contextlib.suppress(FileNotFoundError):
                if os.path.getsize(self.path) > self.max_bytes:
                    os.replace(self.path, self.path + ".1")
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        log.info("metrics report %s for %s.%s from %s", report.get("report-type"), namespace, name, client)
