"""Table maintenance: health, snapshot expiry, orphan removal, data and manifest rewrites, with evidence.

One module per concept:

* `health`: metrics from metadata alone, a state (HEALTHY, DEBT_GROWING, MAINTENANCE_DUE,
  MAINTENANCE_BLOCKED, AT_RISK) with reasons, and recommended actions; `health_log` keeps
  immutable health snapshots for history and trends;
* `expire`, `orphans`, `rewrite_data`, `rewrite_manifests`: each action as a plan (pure reads) and
  an execution (its commit a `Change` in `commits`, on the public `iceduck.transaction` API);
* `lease`: the per-table maintenance lease, so two planners never pick the same files;
* `audit`: the maintenance log (what every run did, with evidence) and the run-once marker;
* `reachability`: which files metadata reaches; `store`: where the records live;
* `actions`: the Python API (`Maintainer`) that ties plan, lease, execution and audit together.

The names below load on first use (PEP 562), so importing one module of the package (the health
schemas the SQL functions declare at startup, say) does not load every action and the commit stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from iceduck._lazy import lazy_attribute

if TYPE_CHECKING:
    from iceduck.maintenance.actions import ActionResult, Maintainer
    from iceduck.maintenance.health import Health, compute_health
    from iceduck.maintenance.rewrite_data import RewriteOptions

__all__ = ["ActionResult", "Health", "Maintainer", "RewriteOptions", "compute_health"]

_LAZY = {
    "ActionResult": "iceduck.maintenance.actions",
    "Maintainer": "iceduck.maintenance.actions",
    "Health": "iceduck.maintenance.health",
    "compute_health": "iceduck.maintenance.health",
    "RewriteOptions": "iceduck.maintenance.rewrite_data",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, globals(), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
