"""Table maintenance: health, snapshot expiry, orphan removal, data and manifest rewrites, with evidence.

One module per concept:

* `health`: metrics from metadata alone, a state (HEALTHY, DEBT_GROWING, MAINTENANCE_DUE,
  MAINTENANCE_BLOCKED, AT_RISK) with reasons, and recommended actions; `health_log` keeps
  immutable health snapshots for history and trends;
* `expire`, `orphans`, `rewrite_data`, `rewrite_manifests`: each action as a plan (pure reads) and
  an execution (commits through `iceduck.transaction.maintenance_ops`);
* `lease`: the per-table maintenance lease, so two planners never pick the same files;
* `audit`: the maintenance log (what every run did, with evidence) and the run-once marker;
* `reachability`: which files metadata reaches; `store`: where the records live;
* `actions`: the Python API (`Maintainer`) that ties plan, lease, execution and audit together.
"""

from __future__ import annotations

from iceduck.maintenance.actions import ActionResult, Maintainer
from iceduck.maintenance.health import Health, compute_health
from iceduck.maintenance.rewrite_data import RewriteOptions

__all__ = ["ActionResult", "Health", "Maintainer", "RewriteOptions", "compute_health"]
