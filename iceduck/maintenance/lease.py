"""The maintenance lease of a table: two planners never pick the same files.

A planner takes the table's lease lock (a short critical section), reads the active claims, plans
around them, records its own claim and lets the lock go; the claim lives until the action ends
(`release`) or, if the process died, until it expires (`iceduck.maintenance.lease-ttl-ms`, default
one hour; long actions `renew` it as they progress).

Claims are of two sorts:

* file claims (data compaction): the data files a rewrite will replace. Another planner leaves
  claimed files out of its own plan.
* exclusive claims (`orphans`, `expire`, `manifests`): at most one of each kind at a time. Orphan
  removal excludes everything else, because a rewrite's written but uncommitted files look exactly
  like orphans.

The lock is an OS file lock (`fcntl.flock`) on a file in the maintenance store: the OS releases it
when a process dies, so a crashed planner never blocks the table. Claims are store records.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from iceduck.errors import IcebergError
from iceduck.io.fileio import local_path
from iceduck.maintenance.store import MaintenanceStore, now_ms

DEFAULT_TTL_MS = 60 * 60 * 1000
TTL_PROPERTY = "iceduck.maintenance.lease-ttl-ms"
EXCLUSIVE_KINDS = ("orphans", "expire", "manifests")
_CLAIMS = "claims"


class MaintenanceBusyError(IcebergError):
    """Another maintenance action holds the lease in a way that conflicts with this one."""


def owner_name() -> str:
    """Who holds a claim: host and process id, for people reading the store."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class Claim:
    """A claim on part of a table for the duration of one maintenance action."""

    claim_id: str
    owner: str
    action: str
    exclusive: str | None
    files: frozenset[str] = field(default_factory=frozenset)
    acquired_ms: int = 0
    expires_ms: int = 0
    plan_id: str | None = None
    run_id: str | None = None

    def active(self, at_ms: int | None = None) -> bool:
        return self.expires_ms > (now_ms() if at_ms is None else at_ms)

    def conflicts_with(self, other: Claim) -> str | None:
        """Why `other` (already active) blocks this claim, or None."""
        if "orphans" in (self.exclusive, other.exclusive):
            return (
                f"{other.action} (run {other.run_id or other.claim_id}) holds the table's maintenance lease"
            )
        if self.exclusive is not None and self.exclusive == other.exclusive:
            return f"another {other.action} (run {other.run_id or other.claim_id}) is running"
        overlap = self.files & other.files
        if overlap:
            return (
                f"{len(overlap)} file(s) are claimed by {other.action} (run {other.run_id or other.claim_id})"
            )
        return None

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)} | {"files": sorted(self.files)}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Claim:
        return cls(
            str(obj["claim_id"]),
            str(obj.get("owner", "")),
            str(obj.get("action", "")),
            obj.get("exclusive"),
            frozenset(obj.get("files") or ()),
            int(obj.get("acquired_ms", 0)),
            int(obj.get("expires_ms", 0)),
            obj.get("plan_id"),
            obj.get("run_id"),
        )


class MaintenanceLease:
    """The lease of one table, kept in its maintenance store."""

    def __init__(
        self, store: MaintenanceStore, *, ttl_ms: int = DEFAULT_TTL_MS, wait_s: float = 30.0
    ) -> None:
        self.store = store
        self.ttl_ms = ttl_ms
        self.wait_s = wait_s

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the table's lease lock (planning happens inside); waits up to `wait_s` seconds."""
        folder = local_path(self.store.path("lease", ""))
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + self.wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise MaintenanceBusyError(
                            f"{path}: another maintenance planner held the lease lock for over {self.wait_s:g} s"
                        ) from None
                    time.sleep(0.05)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def active_claims(self, at_ms: int | None = None) -> list[Claim]:
        """Claims that have not expired (expired ones are left for `prune`)."""
        out = []
        for record in self.store.records(_CLAIMS):
            claim = Claim.from_json(record)
            if claim.active(at_ms):
                out.append(claim)
        return out

    def claimed_files(self) -> frozenset[str]:
        """Every data file an active claim holds."""
        files: set[str] = set()
        for c in self.active_claims():
            files |= c.files
        return frozenset(files)

    def claim(
        self,
        action: str,
        *,
        files: Iterable[str] = (),
        exclusive: str | None = None,
        plan_id: str | None = None,
        run_id: str | None = None,
    ) -> Claim:
        """Record a claim; call inside `locked()` after planning. `MaintenanceBusyError` on a conflict."""
        if exclusive is not None and exclusive not in EXCLUSIVE_KINDS:
            raise ValueError(f"unknown exclusive claim kind {exclusive!r}")
        now = now_ms()
        claim = Claim(
            uuid.uuid4().hex, owner_name(), action, exclusive, frozenset(files), now, now + self.ttl_ms,
            plan_id, run_id,
        )  # fmt: skip
        for other in self.active_claims(now):
            why = claim.conflicts_with(other)
            if why is not None:
                raise MaintenanceBusyError(f"table {self.store.key}: cannot start {action}: {why}")
        self.prune(now)
        self.store.append(_CLAIMS, claim.to_json(), name=f"{claim.claim_id}.json")
        return claim

    def renew(self, claim: Claim) -> Claim:
        """Push the claim's expiry `ttl_ms` into the future (long actions call this as they progress)."""
        renewed = Claim(
            claim.claim_id, claim.owner, claim.action, claim.exclusive, claim.files, claim.acquired_ms,
            now_ms() + self.ttl_ms, claim.plan_id, claim.run_id,
        )  # fmt: skip
        path = self.store.path(_CLAIMS, f"{claim.claim_id}.json")
        self.store.io.write_atomic(path, json.dumps(renewed.to_json(), sort_keys=True).encode())
        return renewed

    def release(self, claim: Claim) -> None:
        """End the claim."""
        self.store.remove(_CLAIMS, f"{claim.claim_id}.json")

    def prune(self, at_ms: int | None = None) -> None:
        """Remove expired claims (left by processes that died)."""
        for name in self.store.names(_CLAIMS):
            record = self.store.read(_CLAIMS, name)
            if record is not None and not Claim.from_json(record).active(at_ms):
                self.store.remove(_CLAIMS, name)
