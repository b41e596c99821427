"""Rewriting manifests: regroup the current snapshot's entries by partition into target-size manifests.

Streaming writes leave one small manifest per commit, and rewrites leave manifests whose entries
are all DELETED. Planning looks at the manifests of the current snapshot per content (data or
deletes) and partition spec; a group is rewritten when it holds manifests without live entries, or
more manifests than packing its bytes at `commit.manifest.target-size-bytes` (default 8 MB) would
need. The rewrite (`RewriteManifestsChange`) writes the live entries, sorted by partition, into new
manifests (a `replace` snapshot: no data changes, every entry keeps its snapshot id, sequence
numbers and first row id).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from iceduck.errors import ValidationError
from iceduck.maintenance.audit import Outcome
from iceduck.maintenance.commits import RewriteManifestsChange
from iceduck.spec.manifest import STATUS_DELETED
from iceduck.spec.manifest_list import ManifestFile
from iceduck.table import Table

TARGET_PROPERTY = "commit.manifest.target-size-bytes"
DEFAULT_TARGET = 8 * 1024 * 1024


def live_count(table: Table, mf: ManifestFile) -> int:
    """Live (ADDED/EXISTING) entries of a manifest, from the manifest list when it says."""
    if mf.added_files_count is not None and mf.existing_files_count is not None:
        return mf.added_files_count + mf.existing_files_count
    return sum(1 for e in table.manifest(mf).entries if e.status != STATUS_DELETED)


@dataclass(frozen=True, slots=True)
class ManifestsPlan:
    """What a manifest rewrite would do."""

    plan_id: str
    target_size_bytes: int
    manifests: tuple[tuple[str, int, int, int, int], ...]  # (path, content, spec id, bytes, live entries)
    expected_manifests: int
    kept: int
    parameters: Mapping[str, Any] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.manifests

    def candidates(self) -> list[str]:
        return [f"manifest:{m[0]}" for m in self.manifests]


def plan_rewrite_manifests(
    table: Table, *, target_size_bytes: int | None = None, spec_id: int | None = None
) -> ManifestsPlan:
    """Plan a manifest rewrite of the current snapshot (nothing is changed)."""
    md = table.metadata
    target = target_size_bytes
    if target is None:
        try:
            target = int(md.properties.get(TARGET_PROPERTY, DEFAULT_TARGET))
        except ValueError:
            raise ValidationError(f"{TARGET_PROPERTY} must be an integer") from None
    if target <= 0:
        raise ValidationError(f"target_size_bytes must be positive, not {target}")
    manifests = table.manifests(md.current_snapshot())
    groups: dict[tuple[int, int], list[tuple[ManifestFile, int]]] = {}
    for mf in manifests:
        if spec_id is not None and mf.partition_spec_id != spec_id:
            continue
        groups.setdefault((mf.content, mf.partition_spec_id), []).append((mf, live_count(table, mf)))
    chosen: list[tuple[str, int, int, int, int]] = []
    expected = 0
    for (content, sid), members in sorted(groups.items()):
        live_bytes = sum(mf.manifest_length for mf, n in members if n)
        needed = math.ceil(live_bytes / target) if live_bytes else 0
        if any(n == 0 for _, n in members) or len(members) > max(needed, 1):
            chosen.extend((mf.manifest_path, content, sid, mf.manifest_length, n) for mf, n in members)
            expected += needed
    kept = len(manifests) - len(chosen)
    parameters = {"target_size_bytes": target, "spec_id": spec_id}
    content_id = {
        "action": "rewrite_manifests",
        "table_uuid": str(md.table_uuid),
        "metadata": table.metadata_location,
        "parameters": parameters,
        "manifests": [c[0] for c in chosen],
    }
    plan_id = hashlib.sha256(json.dumps(content_id, sort_keys=True).encode()).hexdigest()[:16]
    return ManifestsPlan(plan_id, target, tuple(chosen), expected, kept, parameters)


@dataclass(slots=True)
class ManifestsResult:
    """What a manifest rewrite did."""

    snapshot_id: int | None = None
    metadata_location: str | None = None
    outcomes: list[Outcome] = field(default_factory=list)


def execute_rewrite_manifests(
    load: Callable[[], Table],
    commit: Callable[[Any, Table], Any],
    plan: ManifestsPlan,
    *,
    progress: Callable[[int, int, str], None] | None = None,
) -> ManifestsResult:
    """Commit the rewrite of `plan`'s manifests (those a concurrent commit replaced are left alone)."""
    result = ManifestsResult()
    if plan.empty:
        return result
    chosen = {m[0] for m in plan.manifests}
    change = RewriteManifestsChange(lambda mf: mf.manifest_path in chosen, plan.target_size_bytes)
    committed = commit(change, load())
    result.snapshot_id = committed.snapshot_id
    result.metadata_location = committed.metadata_location
    outcome = change.outcome
    assert outcome is not None
    replaced = set(outcome.replaced)
    for path in sorted(chosen):
        result.outcomes.append(
            Outcome(path, "manifest", "replaced" if path in replaced else "skipped",
                    None if path in replaced else "no longer in the current snapshot")
        )  # fmt: skip
    for path in outcome.created:
        result.outcomes.append(Outcome(path, "manifest", "added"))
    if progress is not None:
        progress(1, 1, "manifests rewritten")
    return result
