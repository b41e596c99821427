"""Health rules: the checks and their thresholds, trends from the health history, blocked actions,
and the state each check (and each partition) puts a table in."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from iceduck.errors import IcebergError
from iceduck.maintenance.health.metrics import Part, compactable, partition_text, percentile
from iceduck.maintenance.health.model import (
    DEBT_GROWING,
    HEALTHY,
    MAINTENANCE_BLOCKED,
    MAINTENANCE_DUE,
    PartitionHealth,
    Reason,
)
from iceduck.maintenance.health.recommend import RecommendedAction, recommend
from iceduck.maintenance.health.thresholds import DAY_MS, Thresholds
from iceduck.table import Table


@dataclass(frozen=True, slots=True)
class _Check:
    """A debt check: past `due`, the table needs `action` (MAINTENANCE_DUE, or BLOCKED when the
    action cannot run). Debt never puts a table AT_RISK however high it grows (`danger` does that)."""

    name: str
    metric: str
    due: float
    action: str | None
    describe: str


def _checks(th: Thresholds) -> list[_Check]:
    return [
        _Check("small_files", "compactable_files", th.max_compactable_files, "rewrite_data_files",
               "small data files a bin-pack would merge"),
        _Check("deleted_rows", "deleted_row_share", th.max_deleted_row_share, "rewrite_data_files",
               "share of rows deleted but still stored; a rewrite drops them"),
        _Check("delete_files", "delete_file_ratio", th.max_delete_file_ratio, "rewrite_data_files",
               "position and equality delete files per data file"),
        _Check("manifests", "excess_manifests", th.max_excess_manifests, "rewrite_manifests",
               "manifests above what packing by partition would need"),
        _Check("snapshots", "expirable_snapshots", 1, "expire_snapshots", "snapshots past their retention"),
        _Check("statistics", "statistics_stale_share", th.max_stale_statistics_share, "analyze",
               "rows changed since the snapshot the newest statistics describe"),
        _Check("metadata_size", "metadata_json_bytes", th.max_metadata_bytes, "expire_snapshots",
               "bytes of the current metadata.json"),
    ]  # fmt: skip


def _fmt(metric: str, value: float) -> str:
    if metric.endswith(("share", "ratio")):
        return f"{value:.3f}"
    return f"{value:,.0f}"


def _blocked(table: Table, m: Mapping[str, Any]) -> dict[str, str]:
    """Actions that cannot run on this table, with why."""
    out: dict[str, str] = {}
    if m.get("files_with_equality_deletes"):
        out["rewrite_data_files"] = (
            f"equality deletes apply to {m['files_with_equality_deletes']} data file(s), and rewriting their rows "
            "would undo those deletes"
        )
    from iceduck.write.partition import partition_columns

    try:
        partition_columns(table.metadata.default_spec, table.metadata.schema)
    except IcebergError as e:
        out.setdefault("rewrite_data_files", f"the partition spec cannot be written by iceduck: {e}")
    return out


def judge(
    table: Table,
    m: Mapping[str, Any],
    th: Thresholds,
    risks: list[Reason],
    history: Sequence[Mapping[str, Any]],
    now: int,
) -> tuple[list[Reason], list[RecommendedAction]]:
    """The reasons for the state of a table with metrics `m` (after `risks`, met while measuring),
    and the actions that address them."""
    reasons = list(risks)
    blocked = _blocked(table, m)
    needed: dict[str, list[str]] = {}
    for c in _checks(th):
        value = m.get(c.metric)
        if value is None:
            continue
        v = float(value)
        due = v >= c.due
        if c.name == "small_files" and not due and m["data_files"]:
            share = v / m["data_files"]
            if share >= th.max_compactable_share and v >= th.min_input_files:
                reasons.append(
                    Reason(
                        MAINTENANCE_DUE if c.action not in blocked else MAINTENANCE_BLOCKED,
                        c.name,
                        "compactable_file_share",
                        share,
                        th.max_compactable_share,
                        f"{share:.0%} of the data files ({v:.0f} of {m['data_files']}) are small files a bin-pack "
                        f"would merge (due at {th.max_compactable_share:.0%})"
                        + (f"; blocked: {blocked[c.action]}" if c.action in blocked else ""),
                    )
                )
                if c.action is not None:
                    needed.setdefault(c.action, []).append(c.name)
                continue
        if due:
            state = MAINTENANCE_BLOCKED if c.action in blocked else MAINTENANCE_DUE
            msg = f"{c.metric} = {_fmt(c.metric, v)} reached {_fmt(c.metric, c.due)} ({c.describe})"
            if c.action in blocked:
                msg += f"; {c.action} is blocked: {blocked[c.action]}"
            reasons.append(Reason(state, c.name, c.metric, v, c.due, msg))
        else:
            trend = _trend(c, v, history, now, th)
            if trend is not None:
                reasons.append(trend)
            continue
        if c.action is not None:
            needed.setdefault(c.action, []).append(c.name)
    return reasons, recommend(needed, blocked, th, m)


def _trend(
    c: _Check, value: float, history: Sequence[Mapping[str, Any]], now: int, th: Thresholds
) -> Reason | None:
    """A DEBT_GROWING reason when the recorded history puts `c` at its due threshold within the horizon."""
    window = [
        h for h in history
        if isinstance(h.get("metrics"), Mapping) and h["metrics"].get(c.metric) is not None
        and now - th.trend_window_ms <= int(h.get("computed_ms", 0)) < now
    ]  # fmt: skip
    if not window:
        return None
    first = min(window, key=lambda h: int(h["computed_ms"]))
    v0, t0 = float(first["metrics"][c.metric]), int(first["computed_ms"])
    if value <= v0 or now <= t0:
        return None
    rate = (value - v0) / (now - t0)  # per ms
    eta = (c.due - value) / rate
    if eta > th.trend_horizon_ms:
        return None
    when = dt.datetime.fromtimestamp(t0 / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return Reason(
        DEBT_GROWING, c.name, c.metric, value, c.due,
        f"{c.metric} grew from {_fmt(c.metric, v0)} to {_fmt(c.metric, value)} since {when}; at this rate it "
        f"reaches {_fmt(c.metric, c.due)} in {eta / DAY_MS:.1f} days ({c.describe})",
    )  # fmt: skip


def partition_health(table: Table, parts: Mapping[Any, Part], th: Thresholds) -> tuple[PartitionHealth, ...]:
    """Each partition's health, the worst (most files a rewrite would touch) first."""
    out = []
    for p in parts.values():
        n = len(p.sizes)
        comp = compactable(p.sizes, th)
        over = sum(1 for s in p.shares if s >= th.delete_ratio_threshold and s > 0)
        share = p.deleted / p.records if p.records else 0.0
        reasons = []
        if comp:
            reasons.append(f"{comp} of {n} files are small files a bin-pack would merge")
        if over:
            reasons.append(
                f"{over} file(s) have at least {th.delete_ratio_threshold:.0%} of their rows deleted"
            )
        if share >= th.max_deleted_row_share:
            reasons.append(f"{share:.1%} of the rows are deleted (due at {th.max_deleted_row_share:.0%})")
        assert p.sample is not None
        out.append(
            PartitionHealth(
                p.spec_id,
                partition_text(table, p.sample),
                n,
                sum(p.sizes),
                p.records,
                percentile(p.sizes, 10),
                percentile(p.sizes, 50),
                percentile(p.sizes, 90),
                sum(1 for s in p.sizes if s < th.min_file_size),
                comp,
                p.delete_files,
                p.dvs,
                p.deleted,
                share,
                max(p.shares) if p.shares else 0.0,
                over,
                p.last_ms,
                MAINTENANCE_DUE if reasons else HEALTHY,
                tuple(reasons),
            )
        )
    out.sort(key=lambda h: (-h.debt, -h.deleted_row_share, -h.data_files, h.spec_id, str(h.partition)))
    return tuple(out)
