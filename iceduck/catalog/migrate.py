"""Moving an object-store warehouse's tables from this machine's SQLite catalog to the catalog on the
bucket (`iceduck.catalog.bucket`), so every machine opening the warehouse shares them.

Before the bucket catalog, `iceduck.connect("s3://b/wh")` kept its catalog in a SQLite file in the
local cache folder (`catalog_cache_folder`): the tables' files are on the store, their entries only
on the machine that made them. `migrate_to_bucket` registers each table's current metadata in the
bucket catalog, in place: it publishes a copy of the current metadata file as the table's
`metadata/v1.metadata.json` (an exclusive create, as every bucket-catalog commit) and writes the
version hint, and creates each namespace's `.namespace` marker. Data, manifests and the metadata
history stay where they are; nothing is copied but the one metadata file.

It is idempotent: a table whose bucket entry already holds the same metadata, or a later version
whose metadata log names the SQLite catalog's current file (another machine migrated it and
committed since), is reported `already`. It never overwrites: a table the bucket catalog has with
other contents is a `conflict`; a table whose folder is not where the bucket catalog keeps it
(`<warehouse>/<ns parts>/<table>`: a nested namespace's SQLite default `<wh>/a.b/t`, a LOCATION
of its own) is `skipped`, with the reason. Namespace properties have nowhere to go in a folder
catalog: they are reported, not carried.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
from dataclasses import dataclass

from iceduck.catalog.bucket import BucketCatalog
from iceduck.catalog.folder import version_file_name
from iceduck.catalog.locate import METADATA_FOLDER
from iceduck.catalog.sql import CATALOG_FILE_NAME, SqlCatalog, catalog_cache_folder
from iceduck.errors import AlreadyExistsError, IcebergError
from iceduck.io.fileio import FileIO
from iceduck.io.paths import join_path, normalize_path

MIGRATED_SUFFIX = ".migrated"

REGISTERED = "registered"
ALREADY = "already"
SKIPPED = "skipped"
CONFLICT = "conflict"


@dataclass(frozen=True, slots=True)
class Migrated:
    """What migrating one namespace or table did: `what` is `namespace` or `table`; `outcome` one of
    registered, already, skipped, conflict; `detail` says why or where."""

    what: str
    name: str
    outcome: str
    detail: str = ""

    def line(self) -> str:
        text = f"{self.what} {self.name}: {self.outcome}"
        return f"{text} ({self.detail})" if self.detail else text


def local_catalog_file(warehouse: str) -> str:
    """This machine's SQLite catalog file of the object-store warehouse `warehouse` (it may not exist)."""
    return os.path.join(catalog_cache_folder(normalize_path(warehouse)), CATALOG_FILE_NAME)


def _plain(data: bytes) -> bytes:
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _namespaces(source: SqlCatalog, parent: str | None = None) -> list[str]:
    found: list[str] = []
    for ns in source.list_namespaces(parent):
        found.append(ns)
        found.extend(_namespaces(source, ns))
    return found


def _migrate_namespace(source: SqlCatalog, target: BucketCatalog, namespace: str) -> Migrated:
    props = {k: v for k, v in source.namespace_properties(namespace).items() if k != "exists"}
    note = f"properties not carried: {', '.join(sorted(props))}" if props else ""
    if target.namespace_exists(namespace):
        return Migrated("namespace", namespace, ALREADY, note)
    try:
        target.create_namespace(namespace)
    except AlreadyExistsError:  # made by another migration meanwhile
        return Migrated("namespace", namespace, ALREADY, note)
    except IcebergError as e:
        return Migrated("namespace", namespace, SKIPPED, str(e))
    return Migrated("namespace", namespace, REGISTERED, note)


def _migrate_table(
    source: SqlCatalog, target: BucketCatalog, io: FileIO, namespace: str, name: str
) -> Migrated:
    ident = f"{namespace}.{name}"
    current = source.load_table(namespace, name)
    try:
        data = _plain(io.read(current))
        location = str(json.loads(data).get("location", "")).rstrip("/")
    except (IcebergError, ValueError, OSError) as e:
        return Migrated("table", ident, SKIPPED, f"cannot read its metadata {current}: {e}")
    try:
        folder = target.default_table_location(namespace, name)
    except IcebergError as e:
        return Migrated("table", ident, SKIPPED, str(e))
    if normalize_path(location) != folder:
        return Migrated(
            "table",
            ident,
            SKIPPED,
            f"its folder {location} is not where the bucket catalog keeps {ident} ({folder})",
        )
    if target.table_exists(namespace, name):
        published = target.load_table(namespace, name)
        theirs = _plain(io.read(published))
        if theirs == data:
            return Migrated("table", ident, ALREADY, published)
        log = {
            normalize_path(str(e.get("metadata-file", "")))
            for e in json.loads(theirs).get("metadata-log", [])
        }
        first = join_path(join_path(folder, METADATA_FOLDER), version_file_name(1))
        # moved before and committed to since: its history has our file, or the v1 a move made of it
        if normalize_path(current) in log or (first in log and _plain(io.read(first)) == data):
            return Migrated("table", ident, ALREADY, f"{published}, with commits made after it")
        return Migrated(
            "table",
            ident,
            CONFLICT,
            f"the bucket catalog has other metadata for it ({published}); left as it is",
        )
    target_path = join_path(join_path(folder, METADATA_FOLDER), version_file_name(1))
    try:
        published = target._publish_version(namespace, name, 1, lambda t: io.write_new(t, data), create=True)
    except AlreadyExistsError:
        return Migrated("table", ident, CONFLICT, f"{target_path} exists already; left as it is")
    target._write_hint(join_path(folder, METADATA_FOLDER), 1)
    return Migrated("table", ident, REGISTERED, f"{current} -> {published}")


def migrate_to_bucket(source: SqlCatalog, target: BucketCatalog, io: FileIO) -> list[Migrated]:
    """Register every namespace and table of `source` (this machine's SQLite catalog of the
    warehouse) in `target` (the bucket catalog of the same warehouse); one outcome per namespace
    and table, in catalog order."""
    out: list[Migrated] = []
    for namespace in _namespaces(source):
        out.append(_migrate_namespace(source, target, namespace))
        for name in source.list_tables(namespace):
            out.append(_migrate_table(source, target, io, namespace, name))
    return out


def retire_local_catalog(database: str) -> str:
    """Rename the SQLite file to `<file>.migrated` (kept, no longer found by `connect`); returns
    the new name. A journal SQLite left is renamed with it."""
    retired = database + MIGRATED_SUFFIX
    os.replace(database, retired)
    for suffix in ("-journal", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.replace(database + suffix, retired + suffix)
    return retired


__all__ = [
    "ALREADY",
    "CONFLICT",
    "MIGRATED_SUFFIX",
    "REGISTERED",
    "SKIPPED",
    "Migrated",
    "local_catalog_file",
    "migrate_to_bucket",
    "retire_local_catalog",
]
