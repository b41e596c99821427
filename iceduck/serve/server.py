"""`iceduck serve`: a warehouse's SQLite catalog as an Iceberg REST catalog.

    iceduck serve --warehouse ./warehouse --port 8181                  # loopback, no auth
    iceduck serve --warehouse ./wh --host 0.0.0.0 --credentials id:secret

The server reads and writes the same `<warehouse>/catalog.db` the embedded lake uses, so the shell,
notebooks and REST clients (DuckDB's iceberg extension, PyIceberg, iceduck's own client) share one
warehouse. Table metadata files are written by the server for every table it creates or commits to
(`<version>-<uuid>.metadata.json`, a new file per commit, as the embedded catalog does), and the
catalog pointer moves by compare-and-swap.

Commits (`POST .../tables/{t}` and `POST .../transactions/commit`): every requirement is checked
against the table's current metadata, the updates are applied to it (`iceduck.spec.updates`), the
new metadata file is written, and the pointer swaps only if nobody moved it meanwhile; when another
process did, the requirements are checked again on the new state (409 naming the requirement when
one fails). A transaction's tables swap together in one SQLite transaction, or none does.

Authentication is OAuth2 client credentials (`POST /v1/oauth/tokens`, id and secret in HTTP Basic or
in the form), then `Authorization: Bearer <token>` on every request. It is off unless
`--credentials` is given; a server on a non-loopback address without it refuses to start unless
`--no-auth` says so. Requests from web browsers (an `Origin` or `Sec-Fetch-*` header) are refused
with 403: a page the operator opens could otherwise drive a loopback server without credentials
(cross-site POSTs, DNS rebinding). Every request is logged (method, path, status, milliseconds).
SIGINT/SIGTERM stop accepting requests, let the ones in flight finish, and exit. The HTTP (framing, bounds,
timeouts, JSON errors for every status) is `iceduck.serve.asgi`, run by uvicorn; `Router` below maps
requests to `Warehouse`. Metrics reports go to `serve-metrics.jsonl` beside `catalog.db`.

Vended credentials (off unless `--vend-credentials`, which needs `--credentials`): for a table on
S3, a load/create/commit result asked for with `X-Iceberg-Access-Delegation: vended-credentials`
carries the server's own S3 settings for the table's location (`config` and `storage-credentials`,
PyIceberg's names); no STS, so only authenticated callers get them.

The location guard (`iceduck.io.paths.is_under`): every path a request names or implies (a table
location, `write.*.path` properties, register's metadata file, a commit's manifest lists, manifests,
statistics and partition statistics files, the folder of the next metadata file) is normalised
(`..`, `.`, `//`, percent-encoding, symlinks, scheme aliases and buckets) and must lie inside the
warehouse, and a table's files inside its location, before anything is read or written: else 400.
Purge deletes only files the table's metadata reaches inside its location, none of another table.

The server keeps a single warehouse: the `prefix` in paths is the one `/v1/config` hands out
(the catalog name), and other prefixes are accepted as the same warehouse.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import hashlib
import ipaddress
import json
import logging
import os
import secrets
import signal
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from iceduck.catalog.base import check_new_name, check_new_namespace
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
from iceduck.commands import Command, register_command
from iceduck.errors import (
    AlreadyExistsError,
    CommitConflictError,
    IcebergError,
    NamespaceNotFoundError,
    TableNotFoundError,
    ValidationError,
)
from iceduck.io import fsspec_store, s3
from iceduck.io.fileio import FileIO, local_path
from iceduck.io.paths import check_inside, is_under, normalize_path
from iceduck.io.storage import default_io, is_remote
from iceduck.maintenance.neighbours import Neighbours
from iceduck.rest import protocol as wire
from iceduck.serve.asgi import NO_CONTENT, HttpError, HttpServer, Limits, Reply, Request
from iceduck.serve.views import VIEW_ENDPOINTS, ViewOperations
from iceduck.serve.views import route as view_route
from iceduck.spec import updates as upd
from iceduck.spec.partitioning import PartitionSpec, parse_partition_fields
from iceduck.spec.sorting import UNSORTED, SortOrder, parse_sort_order
from iceduck.spec.table_metadata import TableMetadata, read_table_metadata, table_metadata_to_json
from iceduck.spec.types import parse_schema
from iceduck.table import Table
from iceduck.tables import purge_files
from iceduck.transaction.metadata import create_table_updates

log = logging.getLogger("iceduck.serve")

DEFAULT_PORT = 8181
DEFAULT_FORMAT_VERSION = 2  # what other REST catalogs create when the client names none
TOKEN_LIFETIME_S = 3600
COMMIT_ATTEMPTS = 10  # pointer swaps lost to other processes before a commit is reported as a conflict
# table properties naming where files go: each must stay inside the table's location
WRITE_PATH_PROPERTIES = (
    METADATA_PATH,
    "write.data.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)

# headers only browsers send (on every cross-origin request, every POST, and every fetch of a
# current browser); no catalog client (PyIceberg, Java, DuckDB) sends them
BROWSER_HEADERS = ("Origin", "Sec-Fetch-Site", "Sec-Fetch-Mode")

ENDPOINTS = (
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/transactions/commit",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister",
    *VIEW_ENDPOINTS,  # iceduck/serve/views.py
)


@dataclass(slots=True)
class Tokens:
    """Bearer tokens this server issued, with their expiry (monotonic seconds), oldest first.

    Every token lives equally long, so the dict's order (issue order) is expiry order: an issue
    drops the expired ones from the front, and the oldest live ones beyond `max_live`, in time
    proportional to what it drops (rebuilding the dict on each issue made the 50,000th issue take
    ~5 ms under the lock every request's check takes: a stall anyone allowed to ask for tokens
    could cause)."""

    lifetime_s: int = TOKEN_LIFETIME_S
    max_live: int = 100_000
    issued: dict[str, float] = dataclasses.field(default_factory=dict)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def issue(self, *, keep: bool = True) -> str:
        """A new token; `keep=False` (a server without credentials checks no token) stores nothing."""
        token = secrets.token_urlsafe(32)
        if not keep:
            return token
        now = time.monotonic()
        with self.lock:
            while self.issued:
                oldest = next(iter(self.issued))
                if self.issued[oldest] > now and len(self.issued) < self.max_live:
                    break
                del self.issued[oldest]
            self.issued[token] = now + self.lifetime_s
        return token

    def valid(self, token: str) -> bool:
        with self.lock:
            expiry = self.issued.get(token)
        return expiry is not None and expiry > time.monotonic()


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
        if not self.vend_credentials or not s3.is_s3(location):
            return {}
        return s3.properties_from_settings(s3.effective_settings(location))

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
            raise ValidationError(f"{what} {_shown(location, 300)} is a file of the catalog server itself")

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
        obj = _object(body, "CreateNamespaceRequest")
        namespace = _new_namespace(obj.get("namespace"))
        props = _string_map(obj.get("properties"), "properties")
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
            tables = self.catalog.list_tables(namespace) + self.catalog.list_views(namespace)
            children = self.catalog.list_namespaces(namespace)
            if tables or children:
                what = [f"table {t}" for t in tables] + [f"namespace {c}" for c in children]
                raise HttpError(
                    409, wire.NAMESPACE_NOT_EMPTY, f"namespace '{namespace}' is not empty: " + ", ".join(what)
                )
            self.catalog.drop_namespace(namespace)

    def update_namespace_properties(self, namespace: str, body: Any) -> dict[str, Any]:
        obj = _object(body, "UpdateNamespacePropertiesRequest")
        updates = _string_map(obj.get("updates"), "updates")
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
        return _table_reply(location, body)

    def table_exists(self, namespace: str, name: str) -> bool:
        return self.catalog.table_exists(namespace, name)

    def create_table(self, namespace: str, body: Any) -> Reply:
        obj = _object(body, "CreateTableRequest")
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
        return _table_reply(committed.metadata_location, table_metadata_to_json(committed.metadata))

    def _create_updates(self, namespace: str, name: str, obj: Mapping[str, Any]) -> list[upd.TableUpdate]:
        """The updates that build the table a `CreateTableRequest` asks for."""
        props = _string_map(obj.get("properties"), "properties")
        version_text = props.pop("format-version", str(DEFAULT_FORMAT_VERSION))
        try:
            format_version = int(version_text)
        except ValueError:
            raise ValidationError(
                f"property format-version must be 1, 2 or 3, not {version_text!r}"
            ) from None
        schema = parse_schema(_object(obj.get("schema"), "schema"))
        spec = PartitionSpec(0, ())
        if obj.get("partition-spec") is not None:
            raw = _object(obj["partition-spec"], "partition-spec")
            spec = parse_partition_fields(
                _with_partition_field_ids(raw.get("fields", [])), format_version=format_version
            )
        order: SortOrder = UNSORTED
        if obj.get("write-order") is not None:
            raw = dict(_object(obj["write-order"], "write-order"))
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
        obj = _object(body, "RegisterTableRequest")
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
        return _table_reply(location, table_metadata_to_json(metadata))

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
        obj = _object(body, "RenameTableRequest")
        ns, name = wire.parse_table_identifier(obj.get("source"))
        new_ns, new_name = wire.parse_table_identifier(obj.get("destination"))
        check_new_name(new_name, "table name")
        with self._write_lock:
            self.catalog.rename_table(ns, name, new_ns, new_name)

    # -- commits ------------------------------------------------------------------------------

    def commit_table(self, namespace: str | None, name: str | None, body: Any) -> Reply:
        obj = _object(body, "CommitTableRequest")
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
        return _table_reply(committed.metadata_location, table_metadata_to_json(committed.metadata))

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
        obj = _object(body, "CommitTransactionRequest")
        changes = obj.get("table-changes")
        if not isinstance(changes, list) or not changes:
            raise ValidationError("CommitTransactionRequest needs a non-empty 'table-changes' list")
        parsed = []
        seen: set[tuple[str, str]] = set()
        for change in changes:
            change_obj = _object(change, "table change")
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
                        f"transaction puts tables {other} and {who} in overlapping folders ({_shown(where)})"
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


def _table_reply(location: str, metadata: dict[str, Any]) -> Reply:
    etag = '"' + hashlib.sha256(location.encode()).hexdigest()[:32] + '"'
    return Reply(200, {"metadata-location": location, "metadata": metadata, "config": {}}, (("ETag", etag),))


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(f"{what} must be a JSON object, not {type(value).__name__}")
    return value


def _string_map(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValidationError(f"'{what}' must be an object of string values")
    return dict(value)


# -- HTTP: routes over `Warehouse` (the transport is iceduck.serve.asgi) -------------------------------

_COMMIT_ROUTES = (("transactions", "commit"),)


class Router:
    """Routes a request to `Warehouse`: authentication, the token endpoint, config, every REST route,
    and the names in paths and bodies checked (length, control characters) before they reach it."""

    def __init__(
        self,
        warehouse: Warehouse,
        credentials: tuple[str, str] | None,
        tokens: Tokens,
        metrics: MetricsLog,
    ) -> None:
        self.warehouse = warehouse
        self.views = ViewOperations(warehouse)
        self.credentials = credentials
        self.tokens = tokens
        self.metrics = metrics

    # -- the asgi.Handler interface ---------------------------------------------------------------

    def authorize(self, request: Request) -> None:
        if any(request.header(h) for h in BROWSER_HEADERS):
            # A loopback server without credentials is otherwise any web page's: a cross-site
            # text/plain POST needs no preflight, and DNS rebinding makes the page same-origin.
            raise HttpError(
                403, wire.FORBIDDEN, "requests from a web browser are refused (Origin or Sec-Fetch-* header)"
            )
        if list(request.parts) == ["v1", "oauth", "tokens"]:
            return
        self._authenticate(request)

    def handle(self, request: Request) -> Reply:
        return self._vend(request, self._dispatch(request))

    def is_commit(self, request: Request) -> bool:
        """A table or view commit or a transaction: a 500 leaves its outcome unknown."""
        rest = request.parts[2:]
        if request.method != "POST":
            return False
        return tuple(rest) in _COMMIT_ROUTES or (
            len(rest) == 4 and rest[0] == "namespaces" and rest[2] in ("tables", "views")
        )

    # -- routes -----------------------------------------------------------------------------------

    def _json(self, request: Request) -> Any:
        """The body as JSON, its table and namespace names checked."""
        body = request.json()
        _check_body_names(body, request.limits.max_name_bytes)
        return body

    def _dispatch(self, request: Request) -> Reply:
        method, parts, query = request.method, list(request.parts), request.query
        _check_common_parameters(request)
        if parts[:3] == ["v1", "oauth", "tokens"] and len(parts) == 3:
            if method != "POST":
                raise _no_method(method, "POST")
            return self._token(request)
        if parts[:1] != ["v1"] or len(parts) < 2:
            raise HttpError(404, wire.BAD_REQUEST, f"no such route: {method} {request.path}")
        if parts[1] == "config" and len(parts) == 2:
            if method != "GET":
                raise _no_method(method, "GET")
            return Reply(200, self._config())
        rest = parts[2:]  # after the prefix
        warehouse = self.warehouse
        # /v1/{prefix}/namespaces...
        if rest[:1] == ["namespaces"]:
            return self._namespaces(request, method, rest[1:], query)
        if rest == ["tables", "rename"]:
            _only(method, "POST")
            warehouse.rename_table(self._json(request))
            return NO_CONTENT
        if rest == ["transactions", "commit"]:
            _only(method, "POST")
            warehouse.commit_transaction(self._json(request))
            return NO_CONTENT
        if rest == ["views", "rename"]:
            _only(method, "POST")
            return self.views.rename_view(self._json(request), request.limits.max_name_bytes)
        raise HttpError(404, wire.BAD_REQUEST, f"no such route: {method} {request.path}")

    def _namespaces(
        self, request: Request, method: str, rest: list[str], query: Mapping[str, list[str]]
    ) -> Reply:
        warehouse = self.warehouse
        limit = request.limits.max_name_bytes
        if not rest:
            if method == "GET":
                parent = (query.get("parent") or [""])[0]
                parent_name = _checked_namespace(parent, limit) if parent else None
                return Reply(200, warehouse.list_namespaces(parent_name))
            if method == "POST":
                return Reply(200, warehouse.create_namespace(self._json(request)))
            raise _no_method(method, "GET, POST")
        namespace = _checked_namespace(rest[0], limit)
        tail = rest[1:]
        if not tail:
            if method == "GET":
                return Reply(200, warehouse.load_namespace(namespace))
            if method == "HEAD":
                if not warehouse.catalog.namespace_exists(namespace):
                    raise NamespaceNotFoundError(f"namespace '{namespace}' does not exist")
                return NO_CONTENT
            if method == "DELETE":
                warehouse.drop_namespace(namespace)
                return NO_CONTENT
            raise _no_method(method, "GET, HEAD, DELETE")
        if tail == ["properties"]:
            _only(method, "POST")
            body = self._json(request)
            if isinstance(body, dict):
                # checked here too: the operation reads a falsy value ({} or null) as "none"
                if ("updates" in body and not isinstance(body["updates"], dict)) or (
                    "removals" in body and not isinstance(body["removals"], list)
                ):
                    raise ValidationError("'updates' must be an object and 'removals' a list")
                removals = body.get("removals")
                if isinstance(removals, list) and len(set(map(repr, removals))) < len(removals):
                    raise ValidationError("'removals' names a key twice")
            return Reply(200, warehouse.update_namespace_properties(namespace, body))
        if tail == ["register"]:
            _only(method, "POST")
            return warehouse.register_table(namespace, self._json(request))
        viewed = view_route(self.views, method, namespace, tail, lambda: self._json(request), limit)
        if viewed is not None:  # the view routes: iceduck/serve/views.py
            return viewed
        # Functions: this catalog has none; each answer is one the spec documents for its route.
        if tail == ["functions"] and method == "GET":
            warehouse.catalog.list_tables(namespace)  # 404 for a missing namespace
            return Reply(200, {"identifiers": []})
        if tail[:1] == ["functions"] and len(tail) == 2 and method == "GET":
            raise HttpError(
                404, wire.NO_SUCH_FUNCTION, f"no function {_shown(tail[1])}: this catalog has no functions"
            )
        if tail[:1] != ["tables"]:
            raise HttpError(404, wire.BAD_REQUEST, f"no such route: {method} {request.path}")
        if len(tail) == 1:
            if method == "GET":
                return Reply(200, warehouse.list_tables(namespace))
            if method == "POST":
                return warehouse.create_table(namespace, self._json(request))
            raise _no_method(method, "GET, POST")
        name = _check_name(tail[1], "table name", limit)
        if len(tail) == 2:
            if method == "GET":
                snapshots = (query.get("snapshots") or ["all"])[0]
                if snapshots not in ("all", "refs"):
                    raise ValidationError(f"'snapshots' must be 'all' or 'refs', not {_shown(snapshots)}")
                return warehouse.load_table(namespace, name, snapshots)
            if method == "HEAD":
                if not warehouse.table_exists(namespace, name):
                    raise TableNotFoundError(f"table {namespace}.{name} does not exist")
                return NO_CONTENT
            if method == "POST":
                return warehouse.commit_table(namespace, name, self._json(request))
            if method == "DELETE":
                purge = (query.get("purgeRequested") or ["false"])[0].lower()
                if purge not in ("true", "false"):
                    raise ValidationError(f"'purgeRequested' must be true or false, not {_shown(purge)}")
                warehouse.drop_table(namespace, name, purge == "true")
                return NO_CONTENT
            raise _no_method(method, "GET, HEAD, POST, DELETE")
        if tail[2:] == ["metrics"]:
            _only(method, "POST")
            report = self._json(request)
            if not isinstance(report, dict) or not isinstance(report.get("report-type"), str):
                raise ValidationError("a metrics report is a JSON object with a 'report-type'")
            if not warehouse.table_exists(namespace, name):
                raise TableNotFoundError(f"table {namespace}.{name} does not exist")
            self.metrics.write(namespace, name, report, request.client)
            return NO_CONTENT
        if tail[2:] == ["credentials"]:
            _only(method, "GET")
            if not warehouse.table_exists(namespace, name):
                raise TableNotFoundError(f"table {namespace}.{name} does not exist")
            location = warehouse.catalog.load_table(namespace, name)
            table_location = read_table_metadata(warehouse.io.read(location), path=location).location
            return Reply(200, {"storage-credentials": warehouse.storage_credentials(table_location)})
        if tail[2:] == ["unregister"]:
            _only(method, "POST")
            return Reply(200, warehouse.unregister_table(namespace, name))
        # server-side scan planning and remote signing are not offered: clients plan and sign
        if tail[2:] == ["plan"] and method == "POST":
            raise HttpError(
                400, wire.UNSUPPORTED, "server-side scan planning is not offered: plan on the client"
            )
        if tail[2:3] == ["plan"] and len(tail) == 4:
            raise HttpError(
                404, wire.NO_SUCH_PLAN_ID, f"no scan plan {_shown(tail[3])}: this catalog does not plan scans"
            )
        if tail[2:] == ["tasks"] and method == "POST":
            raise HttpError(404, wire.NO_SUCH_PLAN_TASK, "no plan task: this catalog does not plan scans")
        if tail[2:] == ["sign"] and method == "POST":
            raise HttpError(400, wire.UNSUPPORTED, "remote signing is not offered: tables are read directly")
        raise HttpError(404, wire.BAD_REQUEST, f"no such route: {method} {request.path}")

    def _config(self) -> dict[str, Any]:
        return {
            "defaults": {},
            "overrides": {"prefix": self.warehouse.prefix},
            "endpoints": list(ENDPOINTS),
        }

    def _vend(self, request: Request, reply: Reply) -> Reply:
        """A table result (load, create, register, commit) with the table's S3 settings in `config`
        and `storage-credentials`, when the client asked for vended credentials."""
        delegation = request.header(wire.ACCESS_DELEGATION_HEADER)
        body = reply.body
        if "vended-credentials" not in delegation or not isinstance(body, dict) or "config" not in body:
            return reply
        location = (body.get("metadata") or {}).get("location")
        if not isinstance(location, str):
            return reply
        credentials = self.warehouse.storage_credentials(location)
        if not credentials:
            return reply
        vended = {
            **body,
            "config": {**body["config"], **credentials[0]["config"]},
            "storage-credentials": credentials,
        }
        return dataclasses.replace(reply, body=vended)

    def _authenticate(self, request: Request) -> None:
        if self.credentials is None:
            return
        scheme, _, token = request.header("Authorization").partition(" ")
        if scheme.lower() != "bearer" or not self.tokens.valid(token.strip()):
            raise HttpError(401, wire.NOT_AUTHORIZED, "missing, invalid or expired bearer token")

    def _token(self, request: Request) -> Reply:
        try:
            form = {k: v[0] for k, v in parse_qs(request.body.decode(), keep_blank_values=True).items()}
        except UnicodeDecodeError:
            form = {}
        grant = form.get("grant_type")
        if grant != "client_credentials":
            return _oauth_error(
                400, "unsupported_grant_type", f"grant_type {_shown(grant)}: only client_credentials"
            )
        client_id, client_secret = form.get("client_id"), form.get("client_secret")
        header = request.header("Authorization")
        if header.lower().startswith("basic "):
            try:
                decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
            except (ValueError, UnicodeDecodeError):
                return _oauth_error(400, "invalid_request", "malformed Basic authorization header")
            client_id, _, client_secret = decoded.partition(":")
        expected = self.credentials
        if expected is not None and not (
            client_id is not None
            and client_secret is not None
            and secrets.compare_digest(client_id.encode(), expected[0].encode())
            and secrets.compare_digest(client_secret.encode(), expected[1].encode())
        ):
            return _oauth_error(401, "invalid_client", "unknown client id or wrong secret")
        body = {
            "access_token": self.tokens.issue(keep=expected is not None),
            "token_type": "bearer",
            "expires_in": self.tokens.lifetime_s,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        }
        if form.get("scope"):
            body["scope"] = form["scope"]
        return Reply(200, body)


def _no_method(method: str, allowed: str) -> HttpError:
    return HttpError(
        405,
        wire.BAD_REQUEST,
        f"method {_shown(method)} is not allowed here: use {allowed}",
        (("Allow", allowed),),
    )


def _check_common_parameters(request: Request) -> None:
    """The spec's parameters this server accepts and does not use, checked as the spec types them:
    `pageSize` (an integer >= 1; every list fits one page here) and `Idempotency-Key` (a UUID)."""
    for size in request.query.get("pageSize", []):
        if not (size.isascii() and size.isdigit() and int(size[:12]) > 0 and len(size) <= 12):
            raise ValidationError(f"'pageSize' must be a positive integer, not {_shown(size)}")
    key = request.headers.get("idempotency-key")
    if key is not None:
        try:
            if len(key) != 36:
                raise ValueError(key)
            uuid.UUID(key)
        except ValueError:
            raise ValidationError(f"Idempotency-Key must be a UUID, not {_shown(key)}") from None


def _only(method: str, allowed: str) -> None:
    if method != allowed:
        raise _no_method(method, allowed)


def _oauth_error(code: int, error: str, description: str) -> Reply:
    return Reply(code, {"error": error, "error_description": description})


def _shown(value: object, limit: int = 60) -> str:
    """A client's value quoted for a message, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_name(name: str, what: str, limit: int) -> str:
    """`name` when it is a usable namespace level or table name: at most `limit` bytes in UTF-8
    (it becomes a folder name) and no control characters; `ValidationError` naming the problem."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValidationError(f"{what} {_shown(name)} is {size} bytes long: at most {limit} bytes")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise ValidationError(f"{what} {_shown(name)} contains a control character")
    return name


def _checked_namespace(segment: str, limit: int) -> str:
    """A namespace path segment (or `parent`) decoded, each level checked."""
    for level in segment.split(wire.NAMESPACE_SEPARATOR):
        _check_name(level, "namespace level", limit)
    return wire.decode_namespace(segment)


def _check_body_names(body: Any, limit: int) -> None:
    """The table and namespace names a request body gives (create, register, rename, commit,
    transaction), checked as `_check_name` does; other shapes are the operation's to refuse."""
    if not isinstance(body, dict):
        return
    identifiers = [body.get("identifier"), body.get("source"), body.get("destination")]
    changes = body.get("table-changes")
    if isinstance(changes, list):
        identifiers += [c.get("identifier") for c in changes if isinstance(c, dict)]
    named = [body, *(i for i in identifiers if isinstance(i, dict))]
    for obj in named:
        name, namespace = obj.get("name"), obj.get("namespace")
        if isinstance(name, str):
            _check_name(name, "table name", limit)
        if isinstance(namespace, list):
            for level in namespace:
                if isinstance(level, str):
                    _check_name(level, "namespace level", limit)


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


METRICS_FILE_NAME = "serve-metrics.jsonl"


class RestServer:
    """`iceduck serve` as an object: `start()` serves in a background thread (tests), `stop()`
    finishes in-flight requests and closes the socket. Port 0 picks a free port. The transport is
    `iceduck.serve.asgi` (uvicorn); `limits` bounds what a request may be and take."""

    def __init__(
        self,
        warehouse: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        credentials: tuple[str, str] | None = None,
        token_lifetime_s: int = TOKEN_LIFETIME_S,
        vend_credentials: bool = False,
        limits: Limits | None = None,
    ) -> None:
        # vending hands out this server's own S3 keys: never to a caller nobody authenticated
        self.warehouse = Warehouse(warehouse, vend_credentials=vend_credentials and credentials is not None)
        catalog = self.warehouse.catalog
        folder = os.path.dirname(catalog.database)
        self.metrics = MetricsLog(self.warehouse.metrics_path)
        self.router = Router(self.warehouse, credentials, Tokens(token_lifetime_s), self.metrics)
        local_root = catalog.warehouse if catalog.warehouse and not is_remote(catalog.warehouse) else None
        hide = [p for p in (folder, local_root, catalog.database) if p]
        self.http = HttpServer(self.router, host, port, limits=limits, hide=hide)
        self._started = False

    @property
    def url(self) -> str:
        host, port = self.http.address
        host_text = f"[{host}]" if ":" in host else host
        return f"http://{host_text}:{port}"

    @property
    def port(self) -> int:
        return int(self.http.address[1])

    def start(self) -> RestServer:
        if not self._started:
            self._started = True
            self.http.start()
        return self

    def serve_forever(self) -> None:
        """Serve until `stop()` (from another thread or a signal handler)."""
        self.start()
        while not self.http.wait(0.5):
            pass

    def stop(self) -> None:
        self.http.stop()

    def __enter__(self) -> RestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- the command -----------------------------------------------------------------------------------


def _is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_credentials(text: str) -> tuple[str, str]:
    """`id:secret` -> (id, secret); `ValidationError` if either is empty."""
    client_id, colon, secret = text.partition(":")
    if not colon or not client_id or not secret:
        raise ValidationError("--credentials must be CLIENT_ID:CLIENT_SECRET")
    return client_id, secret


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free)"
    )
    parser.add_argument(
        "--credentials",
        metavar="ID:SECRET",
        help="require OAuth2 client credentials (then a bearer token on every request)",
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="serve a non-loopback address without authentication (anyone who reaches it can write)",
    )
    parser.add_argument(
        "--vend-credentials",
        action="store_true",
        help="hand this server's own S3 settings to authenticated clients asking for vended-credentials "
        "(needs --credentials; off by default)",
    )
    parser.add_argument(
        "--no-vended-credentials", action="store_true", help=argparse.SUPPRESS
    )  # the default now


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    try:
        credentials = parse_credentials(args.credentials) if args.credentials else None
        if credentials is None and not args.no_auth and not _is_loopback(args.host):
            print(
                f"Error: refusing to serve {args.host} without authentication: give --credentials ID:SECRET "
                "(or --no-auth)",
                file=sys.stderr,
            )
            return 2
        if args.vend_credentials and credentials is None:
            print(
                "Error: --vend-credentials hands out this server's S3 keys: give --credentials ID:SECRET too",
                file=sys.stderr,
            )
            return 2
        server = RestServer(
            args.warehouse, host=args.host, port=args.port, credentials=credentials,
            vend_credentials=args.vend_credentials,
        )  # fmt: skip
    except (IcebergError, OSError) as e:
        print(f"Error: cannot serve {args.warehouse}: {e}", file=sys.stderr)
        return 1

    stopping = threading.Event()

    def stop(signum: int, frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.start()
    auth = "OAuth2 client credentials" if credentials else "no authentication"
    print(
        f"iceduck serve: warehouse {server.warehouse.catalog.warehouse} at {server.url} "
        f"(prefix {server.warehouse.prefix}, {auth}; metrics reports in {server.metrics.path}); Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    while not stopping.wait(0.5):
        pass
    server.stop()  # stops accepting, lets the requests in flight finish
    print("iceduck serve: stopped", file=sys.stderr)
    return 0


register_command(Command("serve", "Serve the warehouse as an Iceberg REST catalog", _configure, _run))

__all__ = ["RestServer", "Warehouse", "parse_credentials"]
