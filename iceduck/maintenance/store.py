"""Where maintenance keeps its records: health snapshots, the audit log and leases.

Records are small JSON files, each written once and never changed (`FileIO.write_new`: an
exclusive create), so the logs are append-only and safe for several processes at once:

    <root>/<table key>/health/<recorded ms>-<id>.json     health snapshots (`health_log`)
    <root>/<table key>/log/<ms>-<run id>-<phase>.json     audit records (`audit`)
    <root>/<table key>/lease/...                         the maintenance lease (`lease`)

The table key is the table's UUID, so a table dropped and re-created under the same name gets a new
history. The root lies outside every table location (orphan removal must never see these files as
table files): `<warehouse>/.iceduck-maintenance` for a catalog with a warehouse,
`$ICEDUCK_MAINTENANCE_DIR` when set, else `.iceduck-maintenance` next to the table folder (in the
nearest ancestor folder holding a `catalog.db` or an existing `.iceduck-maintenance`, within three
levels, so a table reached by path and by name shares one history).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from iceduck.errors import AlreadyExistsError, CorruptFileError, FileNotFoundInTableError
from iceduck.io.fileio import FileIO
from iceduck.io.paths import base_name, join_path, normalize_path, parent_path
from iceduck.io.storage import default_io, is_remote
from iceduck.table import Table

STORE_FOLDER = ".iceduck-maintenance"
STORE_ENV = "ICEDUCK_MAINTENANCE_DIR"
_MARKERS = ("catalog.db", STORE_FOLDER)


def table_key(table: Table) -> str:
    """The key a table's records are filed under: its UUID (a location hash for v1 tables without one)."""
    if table.metadata.table_uuid is not None:
        return str(table.metadata.table_uuid)
    digest = hashlib.sha256(normalize_path(table.metadata.location).encode()).hexdigest()[:32]
    return f"location-{digest}"


def default_root(table: Table, catalog: Any = None) -> str:
    """The store root for `table` (see the module docstring)."""
    warehouse = getattr(catalog, "warehouse", None) if catalog is not None else None
    database = getattr(catalog, "database", None) if catalog is not None else None
    if warehouse and is_remote(str(warehouse)) and database:
        # Leases need a local file lock: an object-store warehouse keeps its records next to its
        # (local) SQLite catalog, the one place every writer of this catalog already shares.
        return join_path(normalize_path(os.path.dirname(os.path.abspath(str(database)))), STORE_FOLDER)
    if warehouse:
        return join_path(normalize_path(str(warehouse)), STORE_FOLDER)
    env = os.environ.get(STORE_ENV)
    if env:
        return normalize_path(os.path.abspath(env))
    folder = normalize_path(table.resolver.actual_location)
    parent = parent_path(folder)
    candidate = parent
    for _ in range(3):
        if any(os.path.exists(os.path.join(candidate, m)) for m in _MARKERS):
            return join_path(candidate, STORE_FOLDER)
        up = parent_path(candidate)
        if up == candidate:
            break
        candidate = up
    return join_path(parent, STORE_FOLDER)


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class MaintenanceStore:
    """The records of one table: append-only JSON files under `<root>/<key>/`."""

    root: str
    key: str
    io: FileIO

    @classmethod
    def for_table(cls, table: Table, *, catalog: Any = None, root: str | None = None) -> MaintenanceStore:
        """The store of `table`: under `root` when given, else the default root."""
        return cls(root or default_root(table, catalog), table_key(table), table.io or default_io())

    @property
    def folder(self) -> str:
        return join_path(self.root, self.key)

    def path(self, kind: str, name: str) -> str:
        return join_path(join_path(self.folder, kind), name)

    def append(self, kind: str, record: dict[str, Any], *, name: str | None = None) -> str:
        """Write `record` as a new file of `kind`; returns its path. Never overwrites a record."""
        data = json.dumps(record, sort_keys=True, default=_json_default).encode()
        fname = name or f"{now_ms():013d}-{uuid.uuid4().hex}.json"
        path = self.path(kind, fname)
        self.io.write_new(path, data)
        return path

    def try_append(self, kind: str, name: str, record: dict[str, Any]) -> bool:
        """Write `record` under exactly `name`; False (nothing written) if that record exists."""
        try:
            self.append(kind, record, name=name)
        except AlreadyExistsError:
            return False
        return True

    def names(self, kind: str) -> list[str]:
        """File names of `kind`, oldest first (names start with the time they were written)."""
        prefix = join_path(self.folder, kind)
        return sorted(
            base_name(info.path) for info in self.io.list_prefix(prefix) if info.path.endswith(".json")
        )

    def read(self, kind: str, name: str) -> dict[str, Any] | None:
        """One record, or None if it is gone (leases are removed)."""
        path = self.path(kind, name)
        try:
            data = self.io.read(path)
        except FileNotFoundInTableError:
            return None
        try:
            value = json.loads(data)
        except ValueError as e:
            raise CorruptFileError(path, f"maintenance record is not JSON: {e}") from None
        if not isinstance(value, dict):
            raise CorruptFileError(path, "maintenance record is not a JSON object")
        return value

    def records(self, kind: str) -> Iterator[dict[str, Any]]:
        """Every record of `kind`, oldest first."""
        for name in self.names(kind):
            record = self.read(kind, name)
            if record is not None:
                yield record

    def remove(self, kind: str, name: str) -> None:
        """Delete a record (only leases are ever removed)."""
        with contextlib.suppress(FileNotFoundInTableError):
            self.io.delete(self.path(kind, name))


def _json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset | tuple):
        return sorted(value) if isinstance(value, set | frozenset) else list(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"cannot record {type(value).__name__} in a maintenance record")
