"""The health log: immutable health snapshots of a table, for history and trends.

`HealthLog.record(health)` appends one record (the `Health.to_json()` form: state, reasons,
recommended actions, metrics, the metadata location it was computed on) to the table's
maintenance store under the table's UUID; records are never changed or removed. `records()` reads
them back oldest first. Because records are filed by UUID and carry the metadata location, a table
dropped and re-created under the same name starts a new history, and every record says exactly
which table state it describes.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

from iceduck.maintenance.health import Health
from iceduck.maintenance.store import MaintenanceStore

HEALTH = "health"


class HealthLog:
    """The health snapshots of one table."""

    def __init__(self, store: MaintenanceStore) -> None:
        self.store = store

    def record(self, health: Health) -> str:
        """Append `health`; returns the record's path."""
        record = health.to_json()
        record["record_id"] = uuid.uuid4().hex
        where = hashlib.sha256(health.metadata_location.encode()).hexdigest()[:12]
        name = f"{health.computed_ms:013d}-{where}-{record['record_id']}.json"
        return self.store.append(HEALTH, record, name=name)

    def records(self) -> list[Mapping[str, Any]]:
        """Every health snapshot of the table, oldest first."""
        return [r for r in self.store.records(HEALTH) if r.get("table_uuid") == self.store.key]
