"""Reader leases: a long query, an export or a recovery declares the snapshot it reads, and until
the lease ends expiry keeps that snapshot (and so every file it reaches).

    leases = ReaderLeases(store)                   # MaintenanceStore.for_table(table, catalog=...)
    lease = leases.declare(snapshot_id, who="nightly export", duration_ms=6 * 3600_000)
    ...                                            # read the snapshot
    leases.release(lease)                          # or let it run out

    with leases.reading(snapshot_id, who="report", duration_ms=3600_000): ...

A lease is one immutable record in the table's maintenance store (`readers/<lease id>.json`) with
the snapshot, its commit time, who holds it and until when; `release` removes it. A process that
dies leaves its lease to run out at `expires_ms`, so a crashed reader protects its snapshot only as
long as it said it might read. The loop (`maintenance.loop`) never expires a leased snapshot: its
cut-off stays at or before the oldest leased snapshot's commit time, and a plan that would still
expire one (its branch aged out, say) is blocked instead.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from iceduck.errors import ValidationError
from iceduck.maintenance.store import MaintenanceStore, now_ms
from iceduck.table import Table

_READERS = "readers"


@dataclass(frozen=True, slots=True)
class ReaderLease:
    """One reader's claim on a snapshot until `expires_ms`."""

    lease_id: str
    snapshot_id: int
    snapshot_ms: int  # the snapshot's commit time: the expiry cut-off stays at or before it
    who: str
    acquired_ms: int
    expires_ms: int

    def active(self, at_ms: int) -> bool:
        return self.acquired_ms <= at_ms < self.expires_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "lease_id": self.lease_id, "snapshot_id": self.snapshot_id, "snapshot_ms": self.snapshot_ms,
            "who": self.who, "acquired_ms": self.acquired_ms, "expires_ms": self.expires_ms,
        }  # fmt: skip

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ReaderLease:
        return cls(
            str(obj["lease_id"]), int(obj["snapshot_id"]), int(obj["snapshot_ms"]), str(obj.get("who", "")),
            int(obj["acquired_ms"]), int(obj["expires_ms"]),
        )  # fmt: skip


class ReaderLeases:
    """The reader leases of one table, kept in its maintenance store."""

    def __init__(self, store: MaintenanceStore) -> None:
        self.store = store

    @classmethod
    def of(cls, table: Table, *, catalog: Any = None, root: str | None = None) -> ReaderLeases:
        """The reader leases of `table`."""
        return cls(MaintenanceStore.for_table(table, catalog=catalog, root=root))

    def declare(
        self,
        table: Table,
        *,
        who: str,
        duration_ms: int,
        snapshot_id: int | None = None,
        at_ms: int | None = None,
    ) -> ReaderLease:
        """Declare that `who` reads `snapshot_id` (default: the current one) for up to `duration_ms`."""
        if duration_ms <= 0:
            raise ValidationError(f"a reader lease needs a positive duration, not {duration_ms} ms")
        md = table.metadata
        sid = snapshot_id if snapshot_id is not None else md.current_snapshot_id
        snap = md.snapshot_by_id(sid) if sid is not None else None
        if snap is None:
            what = "has no current snapshot" if sid is None else f"has no snapshot {sid}"
            raise ValidationError(
                f"{table.name or table.metadata_location}: cannot lease a reader: the table {what}"
            )
        now = now_ms() if at_ms is None else at_ms
        lease = ReaderLease(
            uuid.uuid4().hex[:16], snap.snapshot_id, snap.timestamp_ms, who, now, now + duration_ms
        )
        self.store.append(_READERS, lease.to_json(), name=f"{lease.lease_id}.json")
        return lease

    def release(self, lease: ReaderLease) -> None:
        """End a lease before it runs out."""
        self.store.remove(_READERS, f"{lease.lease_id}.json")

    def leases(self) -> list[ReaderLease]:
        """Every lease recorded, active or not, oldest first."""
        return sorted(
            (ReaderLease.from_json(r) for r in self.store.records(_READERS)), key=lambda x: x.acquired_ms
        )

    def active(self, at_ms: int) -> list[ReaderLease]:
        """The leases in force at `at_ms`."""
        return [lease for lease in self.leases() if lease.active(at_ms)]

    @contextlib.contextmanager
    def reading(
        self, table: Table, *, who: str, duration_ms: int, snapshot_id: int | None = None
    ) -> Iterator[ReaderLease]:
        """Hold a lease for the duration of a `with` block (released however the block ends)."""
        lease = self.declare(table, who=who, duration_ms=duration_ms, snapshot_id=snapshot_id)
        try:
            yield lease
        finally:
            self.release(lease)
