"""The dangers that put a table AT_RISK (debt never does: it is MAINTENANCE_DUE with the action that
pays it). Besides metadata that cannot be read (found while measuring, `metrics.measure`):

* `readers`: a reader lease that needs its snapshot longer than the table keeps snapshots
  (`history.expire.max-snapshot-age-ms`): any engine's expiry (which knows nothing of leases) may
  delete the files under the reader;
* `commit_failures`: maintenance runs that failed or conflicted are climbing: at least
  `iceduck.health.max-failed-runs-24h` in the last 24 hours, and more than in the 24 hours before;
* `unreferenced_files`: the last orphan scan stopped on an anomaly (a listing or metadata that
  makes deleting unsafe, `orphans`), or found unreferenced files making at least
  `iceduck.health.max-unreferenced-file-share` of the files under the table's location (writers
  failing, or files of another table written into this one).

The evidence comes from the table's maintenance store (`Evidence`, built by `Maintainer.health`);
`compute_health` without it judges the metadata alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from iceduck.maintenance.health.model import AT_RISK, Reason
from iceduck.maintenance.health.thresholds import DAY_MS, Thresholds


@dataclass(frozen=True, slots=True)
class ReaderNeed:
    """An active reader lease: `who` reads `snapshot_id` (committed at `snapshot_ms`) until `until_ms`."""

    lease_id: str
    who: str
    snapshot_id: int
    snapshot_ms: int
    until_ms: int


@dataclass(frozen=True, slots=True)
class RunFact:
    """One finished maintenance run: its action, when it finished, whether it failed or conflicted,
    and for an orphan scan the unreferenced files it found."""

    action: str
    finished_ms: int
    failed: bool
    unreferenced_files: int | None = None
    anomaly: str | None = None  # an orphan scan stopped by an anomaly: what it found


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the maintenance store knows of a table: its active readers and its finished runs."""

    readers: tuple[ReaderNeed, ...] = ()
    runs: tuple[RunFact, ...] = ()


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def dangers(m: Mapping[str, Any], th: Thresholds, evidence: Evidence, now: int) -> list[Reason]:
    """The AT_RISK reasons `evidence` shows for a table with metrics `m` at `now`."""
    out: list[Reason] = []
    retention = th.max_snapshot_age_ms
    for r in sorted(evidence.readers, key=lambda r: r.snapshot_ms - r.until_ms):
        needed = r.until_ms - r.snapshot_ms
        if needed > retention:
            out.append(
                Reason(
                    AT_RISK, "readers", "longest_reader_ms", needed, retention,
                    f"reader lease {r.lease_id} ({r.who or 'unnamed'}) reads snapshot {r.snapshot_id} "
                    f"(committed {_iso(r.snapshot_ms)}) until {_iso(r.until_ms)}: it needs the snapshot "
                    f"{needed / 3600_000:.1f} h after its commit, and snapshots are kept "
                    f"{retention / 3600_000:.1f} h (history.expire.max-snapshot-age-ms); an expiry that "
                    "does not see the lease deletes its files",
                )
            )  # fmt: skip
            break  # the longest reader is the evidence; the others say the same
    runs = [r for r in evidence.runs if r.action != "remove_orphan_files"]
    last = sum(1 for r in runs if r.failed and now - DAY_MS <= r.finished_ms <= now)
    before = sum(1 for r in runs if r.failed and now - 2 * DAY_MS <= r.finished_ms < now - DAY_MS)
    if last >= th.max_run_failures and last > before:
        out.append(
            Reason(
                AT_RISK, "commit_failures", "failed_runs_24h", last, th.max_run_failures,
                f"{last} maintenance runs failed or conflicted in the last 24 h ({before} in the 24 h before; "
                f"at risk at {th.max_run_failures}, iceduck.health.max-failed-runs-24h): commits on this "
                "table are contended or failing",
            )
        )  # fmt: skip
    scans = [r for r in evidence.runs if r.unreferenced_files is not None]
    if scans:
        scan = max(scans, key=lambda r: r.finished_ms)
        if scan.anomaly:
            out.append(
                Reason(
                    AT_RISK, "unreferenced_files", "orphan_anomalies", 1, 1,
                    f"the orphan scan of {_iso(scan.finished_ms)} stopped on an anomaly: {scan.anomaly}",
                )
            )  # fmt: skip
        found = scan.unreferenced_files or 0
        data = int(m.get("all_data_files") or m.get("data_files") or 0)
        share = found / (found + data) if found + data else 0.0
        if found and share >= th.max_unreferenced_share:
            out.append(
                Reason(
                    AT_RISK, "unreferenced_files", "unreferenced_file_share", share, th.max_unreferenced_share,
                    f"the orphan scan of {_iso(scan.finished_ms)} found {found} unreferenced file(s) beside "
                    f"{data} data file(s) the snapshots reach ({share:.0%}, at risk at "
                    f"{th.max_unreferenced_share:.0%}, iceduck.health.max-unreferenced-file-share): writers "
                    "failing or files written into this table's location by something else",
                )
            )  # fmt: skip
    return out
