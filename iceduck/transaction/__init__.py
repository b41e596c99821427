"""Changes to a table committed with optimistic concurrency over a catalog.

The public API a change is built from (the writer's operations and table maintenance both use it):

* `Change` / `Attempt`: a change plans one attempt on the table as it is then (updates,
  requirements, the files it wrote); `TableCommitter.commit` runs the retry loop and returns a
  `CommitResult` (its `CommitRecord` can be replayed);
* snapshot producers: `FileChanges` (files added and removed) -> `produce_snapshot`, with
  `AddedManifests` / `write_added_manifests` / `write_table_manifest` for the manifests,
  `new_snapshot_id`, `remove_quietly` for cleanup and `ENGINE_NAME` for summaries;
* metadata updates: `snapshot_updates` (a snapshot moving `main`), `expire_updates`, `now_ms`;
* summaries: `Totals`, `content_size`; terms: `sort_order` (a sort order from text).

The names load on first use (PEP 562), as in the other package roots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from iceduck._lazy import lazy_attribute

if TYPE_CHECKING:
    from iceduck.transaction.commit import Attempt, Change, CommitRecord, CommitResult, TableCommitter
    from iceduck.transaction.metadata import expire_updates, now_ms, snapshot_updates
    from iceduck.transaction.snapshot import (
        ENGINE_NAME,
        AddedManifests,
        FileChanges,
        new_snapshot_id,
        produce_snapshot,
        remove_quietly,
        write_added_manifests,
        write_table_manifest,
    )
    from iceduck.transaction.summary import Totals, content_size
    from iceduck.transaction.terms import sort_order

# name -> module that defines it
_LAZY = {
    **dict.fromkeys(("Attempt", "Change", "CommitRecord", "CommitResult", "TableCommitter"), ".commit"),
    **dict.fromkeys(("expire_updates", "now_ms", "snapshot_updates"), ".metadata"),
    **dict.fromkeys(
        (
            "ENGINE_NAME",
            "AddedManifests",
            "FileChanges",
            "new_snapshot_id",
            "produce_snapshot",
            "remove_quietly",
            "write_added_manifests",
            "write_table_manifest",
        ),
        ".snapshot",
    ),
    **dict.fromkeys(("Totals", "content_size"), ".summary"),
    "sort_order": ".terms",
}

__all__ = [
    "ENGINE_NAME",
    "AddedManifests",
    "Attempt",
    "Change",
    "CommitRecord",
    "CommitResult",
    "FileChanges",
    "TableCommitter",
    "Totals",
    "content_size",
    "expire_updates",
    "new_snapshot_id",
    "now_ms",
    "produce_snapshot",
    "remove_quietly",
    "snapshot_updates",
    "sort_order",
    "write_added_manifests",
    "write_table_manifest",
]


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, globals(), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
