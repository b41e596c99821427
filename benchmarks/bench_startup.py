"""Startup: `iceduck -c "select 1"` against `python -c "import duckdb"`, both in fresh processes.

The issue's target is the shell's answer to `select 1` within 0.5 s of what importing DuckDB alone
takes. Each timed run starts both processes one after the other (the time column is the two
together); the extra columns are medians over the timed runs: wall seconds of each, the difference
(`above import duckdb`), and the same difference in CPU seconds (user + system of the child
processes), which a loaded machine inflates less than wall time. There is no peer side: the peer
has no shell of its own to start.

Both run with Python's bytecode caches, as an installed package has them: the children's
environment drops PYTHONDONTWRITEBYTECODE and an untimed first run writes the caches (without them
every start compiles iceduck's ~130 modules again, ~0.3 s more, which is not what users see).
"""

from __future__ import annotations

import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks import Case, Context, Result, benchmark

if TYPE_CHECKING:
    import duckdb


def _iceduck_command() -> list[str]:
    """The installed `iceduck` script beside this interpreter, else `python -m iceduck.cli`."""
    script = Path(sys.executable).with_name("iceduck")
    return [str(script)] if script.exists() else [sys.executable, "-m", "iceduck.cli"]


# the children's environment: bytecode caches written and read (see the module docstring)
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _timed(cmd: list[str], cwd: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child, its stdout) of one run of `cmd`."""
    before = os.times()
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=cwd, env=_ENV)
    wall = time.perf_counter() - started
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu, proc.stdout


@benchmark("startup_select_1")
def startup_select_1(ctx: Context) -> Case:
    """`iceduck -c "select 1"` minus `python -c "import duckdb"`, fresh processes (target < 0.5 s)."""
    folder = tempfile.mkdtemp(prefix="iceduck-startup-")
    warehouse = os.path.join(folder, "warehouse")
    shell = [*_iceduck_command(), "--warehouse", warehouse, "--create", "--mode", "csv", "-c", "select 1"]
    plain = [sys.executable, "-c", "import duckdb"]
    # untimed: creates the warehouse and writes the bytecode caches
    subprocess.run(shell, capture_output=True, check=True, cwd=folder, env=_ENV)
    seen: dict[str, list[float]] = {"duckdb": [], "iceduck": [], "duckdb cpu": [], "iceduck cpu": []}

    def iceduck_side(_con: duckdb.DuckDBPyConnection) -> object:
        wall, cpu, _ = _timed(plain, folder)
        seen["duckdb"].append(wall)
        seen["duckdb cpu"].append(cpu)
        wall, cpu, out = _timed(shell, folder)
        seen["iceduck"].append(wall)
        seen["iceduck cpu"].append(cpu)
        m = {k: statistics.median(v) for k, v in seen.items()}
        return Result(
            [tuple(out.split())],
            extra={
                "import duckdb s": round(m["duckdb"], 3),
                "select 1 s": round(m["iceduck"], 3),
                "above import duckdb s": round(m["iceduck"] - m["duckdb"], 3),
                "above, CPU s": round(m["iceduck cpu"] - m["duckdb cpu"], 3),
            },
        )

    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return Case(peer_sql=None, iceduck=iceduck_side)
