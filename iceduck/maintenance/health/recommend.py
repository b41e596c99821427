"""What health recommends: maintenance actions with their parameters, and the SQL that runs them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from iceduck.maintenance.health.thresholds import Thresholds
from iceduck.vocabulary import quote_str


@dataclass(frozen=True, slots=True)
class RecommendedAction:
    """A maintenance action that addresses some reasons, with the parameters to run it with."""

    action: str  # rewrite_data_files, rewrite_manifests, expire_snapshots, analyze
    parameters: Mapping[str, Any]
    because: tuple[str, ...]

    def sql(self, table: str) -> str:
        """The SQL that runs it (a real run)."""
        args = "".join(f", {k} := {_sql_value(v)}" for k, v in self.parameters.items())
        return f"SELECT * FROM iceberg_{self.action}({_sql_value(table)}{args}, dry_run := false)"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "parameters": dict(self.parameters), "because": list(self.because)}


def _sql_value(v: Any) -> str:
    if isinstance(v, str):
        return quote_str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v)


def recommend(
    needed: Mapping[str, list[str]], blocked: Mapping[str, str], th: Thresholds, m: Mapping[str, Any]
) -> list[RecommendedAction]:
    """The actions that address the checks in `needed` (action -> check names), with their parameters;
    none for an action in `blocked`."""
    out: list[RecommendedAction] = []
    if "rewrite_data_files" in needed and "rewrite_data_files" not in blocked:
        because = needed["rewrite_data_files"]
        params: dict[str, Any] = {"strategy": "binpack"}
        if "deleted_rows" in because:
            params["delete_ratio_threshold"] = min(th.delete_ratio_threshold, th.max_deleted_row_share)
        if "delete_files" in because:
            params["delete_file_threshold"] = 1
        out.append(RecommendedAction("rewrite_data_files", params, tuple(because)))
    if "rewrite_manifests" in needed or out:
        # a data rewrite leaves every manifest it touched rewritten with removed entries
        out.append(
            RecommendedAction(
                "rewrite_manifests", {}, tuple(needed.get("rewrite_manifests", ["after rewrite"]))
            )
        )
    if "expire_snapshots" in needed:
        out.append(RecommendedAction("expire_snapshots", {}, tuple(needed["expire_snapshots"])))
    if "analyze" in needed:
        out.append(RecommendedAction("analyze", {}, tuple(needed["analyze"])))
    return out
