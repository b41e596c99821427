"""``python -m benchmarks [--only PATTERN] [--repeat N] [--scale small|full] [--json out.json] [--list]``."""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import platform
import sys
import time
from pathlib import Path

import benchmarks
from benchmarks.datasets import SCALES
from benchmarks.harness import REGISTRY, Context, Outcome, render, run_case, select


def load_cases() -> None:
    """Import every ``benchmarks/bench_*.py`` module; their decorators fill the registry."""
    for module in pkgutil.iter_modules(benchmarks.__path__):
        if module.name.startswith("bench_"):
            importlib.import_module(f"benchmarks.{module.name}")


def main(argv: list[str] | None = None) -> int:
    """Run the selected cases and print one table; exit 1 on any ERROR or MISMATCH."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PATTERN",
        help="run cases whose name contains PATTERN (glob if it has * ? [); repeatable, comma-separated",
    )
    parser.add_argument(
        "--repeat", type=int, default=5, metavar="N", help="timed runs per side after one warm-up"
    )
    parser.add_argument(
        "--scale", choices=SCALES, default="full", help="small: tiny data sets for smoke runs"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    load_cases()
    patterns = [p for item in args.only for p in item.split(",") if p]
    cases = select(patterns)
    if args.list:
        for registered in cases:
            print(f"{registered.name:30}  {registered.description}")
        return 0
    if not cases:
        print(f"no benchmark case matches {patterns} (have: {', '.join(sorted(REGISTRY))})", file=sys.stderr)
        return 2

    from tests.support.peer import Peer, PeerUnavailableError

    peer: Peer | None = None
    peer_reason = ""
    try:
        peer = Peer.ensure()
    except PeerUnavailableError as exc:
        peer_reason = str(exc).splitlines()[0]

    ctx = Context(args.scale, args.repeat)
    started = time.time()
    outcomes: list[Outcome] = []
    try:
        for registered in cases:
            print(f"running {registered.name} ...", file=sys.stderr, flush=True)
            outcomes.append(run_case(registered, ctx, peer, peer_reason))
    finally:
        if peer is not None:
            peer.close()

    print(
        f"\nscale={args.scale} repeat={args.repeat} (median of N after 1 warm-up, runs alternating iceduck/peer; "
        f'MB = peak RSS of the measuring process during a run; "MB measured: fresh process each": see benchmarks/README.md)'
    )
    for data in ctx.datasets.values():
        how = "reused" if data.reused else f"built in {data.build_seconds:.1f} s"
        if data.waited_seconds >= 1:
            how += f" after waiting {data.waited_seconds:.0f} s for a concurrent build"
        print(
            f"data set {data.name}: {data.info.get('data_files')} data files in {data.info.get('manifests')} "
            f"manifests, {data.info.get('snapshots')} snapshots ({how}; {data.root})"
        )
    print()
    print(render(outcomes))

    if args.json is not None:
        report = {
            "started": started,
            "scale": args.scale,
            "repeat": args.repeat,
            "python": platform.python_version(),
            "peer": None if peer is None else {"venv": str(peer.venv), "duckdb": peer.duckdb_version},
            "datasets": {
                d.name: {**d.info, "reused": d.reused, "build_seconds_now": d.build_seconds}
                for d in ctx.datasets.values()
            },
            "cases": [
                {
                    "name": o.name,
                    "check": o.check,
                    "ratio": o.ratio,
                    "detail": o.detail,
                    "iceduck": o.iceduck.as_json(),
                    "peer": o.peer.as_json(),
                    "extra": {
                        k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in o.extra.items()
                    },
                }
                for o in outcomes
            ],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if any(o.check in ("ERROR", "MISMATCH") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
