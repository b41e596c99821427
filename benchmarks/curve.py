"""``python -m benchmarks.curve RESULTS.json [--png benchmarks/curve.png]``: the scale curve.

Reads the JSON of a ``python -m benchmarks --only curve_ --json RESULTS.json`` run and plots the
cold metadata read (``curve_files_*``) and cold planning (``curve_plan_*``) times of iceduck and the
peer against the number of data files (1k, 10k, 100k), log-log; prints the same as a Markdown table
for benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

SERIES = (
    ("curve_files", "metadata read (iceberg_files / iceberg_metadata)"),
    ("curve_plan", "planning one partition"),
)
SIZES = ("1k", "10k", "100k")


def points(results: dict[str, Any]) -> dict[str, list[tuple[int, float, float, float, float]]]:
    """Series name -> (data files, iceduck s, peer s, iceduck MB, peer MB) per size present."""
    by_name = {c["name"]: c for c in results["cases"]}
    out: dict[str, list[tuple[int, float, float, float, float]]] = {}
    for prefix, _ in SERIES:
        rows = []
        for size in SIZES:
            case = by_name.get(f"{prefix}_{size}_cold")
            if case is None or case["iceduck"]["status"] != "ok" or case["peer"]["status"] != "ok":
                continue
            rows.append(
                (
                    int(case["extra"]["data files"]),
                    float(case["iceduck"]["seconds"]),
                    float(case["peer"]["seconds"]),
                    case["iceduck"]["peak_rss_bytes"] / 2**20,
                    case["peer"]["peak_rss_bytes"] / 2**20,
                )
            )
        out[prefix] = rows
    return out


def table(series: dict[str, list[tuple[int, float, float, float, float]]]) -> str:
    """The points as a Markdown table."""
    lines = [
        "| case | data files | iceduck s | peer s | ratio | iceduck MB | peer MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for prefix, rows in series.items():
        for files, ice, peer, ice_mb, peer_mb in rows:
            lines.append(
                f"| {prefix} | {files:,} | {ice:.3f} | {peer:.3f} | {ice / peer:.2f}x | {ice_mb:.0f} | {peer_mb:.0f} |"
            )
    return "\n".join(lines)


def plot(series: dict[str, list[tuple[int, float, float, float, float]]], png: Path) -> None:
    """Write the log-log plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(SERIES), figsize=(10, 4))
    for ax, (prefix, title) in zip(axes, SERIES, strict=True):
        rows = series.get(prefix, [])
        files = [r[0] for r in rows]
        ax.loglog(files, [r[1] for r in rows], "o-", label="iceduck")
        ax.loglog(files, [r[2] for r in rows], "s--", label="peer (DuckDB 1.5.5 + iceberg)")
        ax.set_title(f"cold {title}", fontsize=9)
        ax.set_xlabel("data files")
        ax.set_ylabel("seconds (median)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.curve", description=__doc__)
    parser.add_argument("results", type=Path)
    parser.add_argument("--png", type=Path, default=Path(__file__).with_name("curve.png"))
    args = parser.parse_args(argv)
    series = points(json.loads(args.results.read_text()))
    plot(series, args.png)
    print(table(series))
    return 0


if __name__ == "__main__":
    sys.exit(main())
