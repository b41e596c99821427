"""Benchmark registry and runner: each case is timed on iceduck (in-process) and on the reference peer.

A case is a setup function decorated with :func:`benchmark`; it receives a :class:`Context` (scale,
data sets) and returns a :class:`Case`: the SQL the peer runs, the callable iceduck runs, and
whether their results must be equal. Setup (including building data sets) is never timed.
"""

from __future__ import annotations

import fnmatch
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from benchmarks.datasets import Dataset, dataset

if TYPE_CHECKING:
    import duckdb

    from tests.support.peer import Peer

Status = Literal["ok", "n/a", "error"]
IceduckFn = Callable[["duckdb.DuckDBPyConnection"], object]


@dataclass(frozen=True, slots=True)
class Result:
    """What an iceduck callable may return instead of bare rows: rows plus extra table columns."""

    rows: object
    extra: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Case:
    """One benchmark, as its setup function describes it.

    ``peer_sql`` is timed on the reference peer (execute + fetch to Arrow, same connection, median of
    N after a warm-up). ``iceduck`` is called with a fresh DuckDB connection on which
    ``iceduck.register(con)`` ran; everything it does is timed, so it should fetch its result
    (``fetchall()`` for small results). With ``compare``, both results (rows; the iceduck callable
    returns them) must be equal, as multisets unless ``ordered``. ``extra`` adds table columns.
    """

    peer_sql: str | None
    iceduck: IceduckFn | None
    compare: bool = False
    ordered: bool = False
    extra: Mapping[str, object] = field(default_factory=dict)
    peer_setup: tuple[str, ...] = ()
    # When set, the MB columns are the peak RSS of a fresh process per side running this query
    # once (see `FreshMemory`), not of the measuring processes.
    fresh_memory: FreshMemory | None = None


@dataclass(frozen=True, slots=True)
class FreshMemory:
    """Peak memory of one query, measured apples to apples: for each side a new Python process
    imports DuckDB, connects, makes the Iceberg functions available (iceduck: `import iceduck` +
    `iceduck.register(con)`; the peer: `LOAD` avro and iceberg), runs `SELECT 1`, then the query once
    with `fetchall()`, and reports its peak RSS (VmHWM: the most the process ever held, the
    interpreter and imports included) before and after the query. The median of `runs`."""

    iceduck_sql: str
    peer_sql: str
    runs: int = 3


@dataclass(frozen=True, slots=True)
class Registered:
    """A registered case: its name and setup function."""

    name: str
    setup: Callable[[Context], Case]
    description: str


REGISTRY: dict[str, Registered] = {}


def benchmark(
    name: str, *, description: str = ""
) -> Callable[[Callable[[Context], Case]], Callable[[Context], Case]]:
    """Register a case under ``name``; the decorated function builds the :class:`Case` from a Context."""

    def register(setup: Callable[[Context], Case]) -> Callable[[Context], Case]:
        if name in REGISTRY:
            raise ValueError(f"benchmark case {name!r} registered twice ({setup.__module__})")
        REGISTRY[name] = Registered(name, setup, description or (setup.__doc__ or "").strip().split("\n")[0])
        return setup

    return register


def pending(what: str) -> NoReturn:
    """Placeholder body for an iceduck side that is not wired yet: the table shows it as n/a."""
    raise NotImplementedError(f"iceduck side not wired yet: {what}")


class Context:
    """What a setup function gets: the scale and data sets (built once per run, then cached on disk)."""

    def __init__(self, scale: str, repeat: int) -> None:
        self.scale = scale
        self.repeat = repeat
        self.datasets: dict[str, Dataset] = {}

    def dataset(self, kind: str) -> Dataset:
        """The data set ``kind`` (see ``benchmarks/datasets.py``) at this run's scale."""
        if kind not in self.datasets:
            self.datasets[kind] = dataset(kind, self.scale)
        return self.datasets[kind]


# -- measurements ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class Side:
    """One system's outcome for one case."""

    status: Status
    reason: str = ""
    runs: tuple[float, ...] = ()
    peak_rss_bytes: int | None = None
    base_rss_bytes: int | None = None
    rows: object = None
    extra: Mapping[str, object] = field(default_factory=dict)

    @property
    def seconds(self) -> float | None:
        """Median of the timed runs."""
        return statistics.median(self.runs) if self.status == "ok" and self.runs else None

    def as_json(self) -> dict[str, Any]:
        """The JSON form (without the result rows)."""
        return {
            "status": self.status,
            "reason": self.reason,
            "seconds": self.seconds,
            "runs": list(self.runs),
            "peak_rss_bytes": self.peak_rss_bytes,
            "base_rss_bytes": self.base_rss_bytes,
            "extra": {k: _jsonable(v) for k, v in self.extra.items()},
        }


@dataclass(slots=True)
class Outcome:
    """A case's row in the table."""

    name: str
    iceduck: Side
    peer: Side
    check: str  # "ok", "MISMATCH", "-" (not compared), "ERROR"
    extra: dict[str, object]
    detail: str = ""

    @property
    def ratio(self) -> float | None:
        """iceduck time / peer time."""
        a, b = self.iceduck.seconds, self.peer.seconds
        return a / b if a is not None and b else None


def _status_bytes(key: str) -> int | None:
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset this process's VmHWM (Linux >= 4.0) so the next reading covers one run only."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


class _IceduckSide:
    """iceduck's side of a case, run one timed round at a time so rounds can alternate with the peer's."""

    def __init__(self, fn: IceduckFn) -> None:
        self.fn = fn
        self.con: duckdb.DuckDBPyConnection | None = None
        self.first: object = None
        self.last: object = None
        self.runs: list[float] = []
        self.peak: int | None = None
        self.base: int | None = None
        self.failed: Side | None = None

    def start(self) -> None:
        """Connect, register, and run the warm-up (its result is the one compared)."""
        import duckdb

        try:
            import iceduck
        except Exception as exc:  # a broken package is "not available" for benchmarking purposes
            self.failed = Side("n/a", f"iceduck does not import: {exc}")
            return
        register = getattr(iceduck, "register", None)
        if register is None:
            self.failed = Side("n/a", "iceduck.register() does not exist yet")
            return
        self.con = duckdb.connect()

        def warm(con: duckdb.DuckDBPyConnection) -> None:
            register(con)
            self.first = self.last = self.fn(con)

        self._guard(warm)

    def round(self) -> None:
        """One timed run (a no-op once the side has failed)."""
        self._guard(self._timed)

    def _timed(self, con: duckdb.DuckDBPyConnection) -> None:
        can_reset = _reset_peak_rss()
        before = _status_bytes("VmRSS")
        started = time.perf_counter()
        self.last = self.fn(con)
        self.runs.append(time.perf_counter() - started)
        high = _status_bytes("VmHWM") if can_reset else None
        if high is not None:
            self.peak = high if self.peak is None else max(self.peak, high)
        self.base = before if self.base is None else self.base

    def _guard(self, step: Callable[[duckdb.DuckDBPyConnection], object]) -> None:
        if self.failed is not None or self.con is None:
            return
        try:
            step(self.con)
        except NotImplementedError as exc:
            self.failed = Side("n/a", str(exc) or "not implemented")
        except Exception as exc:
            self.failed = Side("error", f"{type(exc).__name__}: {exc}")
        if self.failed is not None:
            self.con.close()

    def finish(self) -> Side:
        """Close the connection; the side's outcome."""
        if self.failed is not None:
            return self.failed
        assert self.con is not None
        self.con.close()
        first, last = self.first, self.last
        rows, extra = (first.rows, first.extra) if isinstance(first, Result) else (first, {})
        if isinstance(last, Result):  # a case may report figures over all its runs (medians, say)
            extra = {**extra, **last.extra}
        return Side(
            "ok", runs=tuple(self.runs), peak_rss_bytes=self.peak, base_rss_bytes=self.base, rows=rows, extra=extra
        )


class _PeerSide:
    """The peer's side of a case, one timed round at a time (each timed inside the peer process)."""

    def __init__(self, peer: Peer, case: Case) -> None:
        self.peer, self.case = peer, case
        self.runs: list[float] = []
        self.peak: int | None = None
        self.base: int | None = None
        self.rows: object = None
        self.failed: Side | None = None

    def start(self) -> None:
        """Fresh connection, the case's setup statements, and the warm-up (kept for comparing)."""
        from tests.support.peer import PeerError

        assert self.case.peer_sql is not None
        try:
            self.peer.reset()
            for statement in self.case.peer_setup:
                self.peer.execute(statement)
            (warm,) = self.peer.time(self.case.peer_sql, repeat=1, warmup=1, keep_result=self.case.compare)
            self.rows = warm.result
        except PeerError as exc:
            self.failed = Side("error", str(exc))

    def round(self) -> None:
        """One timed run, measured by the peer process itself."""
        from tests.support.peer import PeerError

        if self.failed is not None:
            return
        assert self.case.peer_sql is not None
        try:
            (timing,) = self.peer.time(self.case.peer_sql, repeat=1, warmup=0)
        except PeerError as exc:
            self.failed = Side("error", str(exc))
            return
        self.runs += timing.runs
        if timing.peak_rss_bytes is not None:
            self.peak = max(self.peak or 0, timing.peak_rss_bytes)
        self.base = timing.base_rss_bytes if self.base is None else self.base

    def finish(self) -> Side:
        """The side's outcome."""
        if self.failed is not None:
            return self.failed
        return Side("ok", runs=tuple(self.runs), peak_rss_bytes=self.peak, base_rss_bytes=self.base, rows=self.rows)


def measure_interleaved(case: Case, repeat: int, peer: Peer | None) -> tuple[Side | None, Side | None]:
    """Both sides' timings, taken in alternating rounds (iceduck, peer, iceduck, ...) after each side's
    warm-up, so that a change in machine load during the case affects both alike. A side that is
    absent (no iceduck callable, no peer SQL, or no peer) comes back as None."""
    ours = _IceduckSide(case.iceduck) if case.iceduck is not None else None
    theirs = _PeerSide(peer, case) if peer is not None and case.peer_sql is not None else None
    for side in (ours, theirs):
        if side is not None:
            side.start()
    for _ in range(repeat):
        for side in (ours, theirs):
            if side is not None:
                side.round()
    return (
        None if ours is None else ours.finish(),
        None if theirs is None else theirs.finish(),
    )


# VmHWM (the peak RSS of this process image), not ru_maxrss: Linux carries ru_maxrss over exec
# from the forked parent, so a child of a 200 MB harness would report at least 200 MB.
_FRESH = r"""
import sys, tempfile
def hwm():
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmHWM:"))
import duckdb
side, sql, extensions = sys.argv[1], sys.argv[2], sys.argv[3:]
con = duckdb.connect()
if side == "iceduck":
    import iceduck
    iceduck.register(con)
else:
    con.execute("SET home_directory = '" + tempfile.mkdtemp() + "'")
    con.execute("SET autoinstall_known_extensions = false")
    for path in extensions:
        con.execute("LOAD '" + path + "'")
con.execute("SELECT 1").fetchall()
base = hwm()
con.execute(sql).fetchall()
print(base * 1024, hwm() * 1024)
"""


def fresh_peak(side: Literal["iceduck", "peer"], sql: str, peer: Peer | None = None) -> tuple[int, int]:
    """(RSS before the query, peak RSS) in bytes of one fresh process running `sql` (see
    `FreshMemory`); `peer` gives the peer's interpreter and extension files."""
    if side == "iceduck":
        cmd = [sys.executable, "-c", _FRESH, "iceduck", sql]
    else:
        assert peer is not None
        exts = [str(peer.extension_path("avro")), str(peer.extension_path("iceberg"))]
        cmd = [str(peer.python), "-c", _FRESH, "peer", sql, *exts]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["failed"]
        raise RuntimeError(f"fresh {side} process: {lines[-1]}")
    base, peak = (int(x) for x in proc.stdout.split()[-2:])  # after any progress bar DuckDB drew
    return base, peak


def _fresh_memory(fresh: FreshMemory, iceduck: Side, peer_side: Side, peer: Peer | None) -> dict[str, object]:
    """Replace both sides' MB figures by fresh-process peaks; extra columns say what was measured."""
    extra: dict[str, object] = {}
    peaks: dict[str, int] = {}
    for name, side, sql in (("iceduck", iceduck, fresh.iceduck_sql), ("peer", peer_side, fresh.peer_sql)):
        side.peak_rss_bytes = side.base_rss_bytes = None
        if name == "peer" and peer is None:
            continue
        try:
            found = [
                fresh_peak("iceduck" if name == "iceduck" else "peer", sql, peer) for _ in range(fresh.runs)
            ]
        except RuntimeError as e:
            extra[f"fresh {name}"] = f"error ({str(e)[:60]})"
            continue
        base = int(statistics.median(b for b, _ in found))
        peak = int(statistics.median(p for _, p in found))
        side.peak_rss_bytes, side.base_rss_bytes = peak, base
        peaks[name] = peak
        extra[f"{name} MB before query"] = round(base / 2**20)
    extra["MB measured"] = "fresh process each"
    if len(peaks) == 2:
        extra["MB ratio"] = f"{peaks['iceduck'] / peaks['peer']:.2f}x"
    return extra


def _rows(value: object) -> list[tuple[Any, ...]]:
    """Rows of a result: a sequence of sequences, or anything with ``to_pylist()`` (Arrow)."""
    to_pylist = getattr(value, "to_pylist", None)
    if callable(to_pylist):
        return [tuple(row.values()) for row in to_pylist()]
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        return [
            tuple(row) if isinstance(row, Sequence) and not isinstance(row, str) else (row,) for row in value
        ]
    return [(value,)]


def _compare(case: Case, iceduck_rows: object, peer_rows: object) -> tuple[bool, str]:
    left, right = _rows(iceduck_rows), _rows(peer_rows)
    if not case.ordered:
        left, right = sorted(left, key=repr), sorted(right, key=repr)
    if left == right:
        return True, ""
    shown = 5
    return False, (
        f"iceduck {len(left)} rows, peer {len(right)} rows\n"
        f"      iceduck: {left[:shown]}{' ...' if len(left) > shown else ''}\n"
        f"      peer:    {right[:shown]}{' ...' if len(right) > shown else ''}"
    )


def run_case(registered: Registered, ctx: Context, peer: Peer | None, peer_reason: str) -> Outcome:
    """Set up one case, measure both sides, compare results."""
    try:
        case = registered.setup(ctx)
    except Exception as exc:
        failed = Side("error", f"setup failed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        return Outcome(registered.name, failed, Side("n/a", "setup failed"), "ERROR", {})
    ours, theirs = measure_interleaved(case, ctx.repeat, peer)
    iceduck = Side("n/a", "no iceduck side") if ours is None else ours
    if theirs is not None:
        peer_side = theirs
    elif case.peer_sql is None:
        peer_side = Side("n/a", "no peer side")
    else:
        peer_side = Side("n/a", peer_reason)
    check, detail = "-", ""
    if "error" in (iceduck.status, peer_side.status):
        check = "ERROR"
    elif case.compare and iceduck.status == "ok" and peer_side.status == "ok":
        equal, detail = _compare(case, iceduck.rows, peer_side.rows)
        check = "ok" if equal else "MISMATCH"
    extra = {**case.extra, **iceduck.extra}
    if case.fresh_memory is not None:
        extra.update(_fresh_memory(case.fresh_memory, iceduck, peer_side, peer))
    return Outcome(registered.name, iceduck, peer_side, check, extra, detail)


def select(patterns: Sequence[str]) -> list[Registered]:
    """Registered cases matching any pattern (substring, or glob when it has * ? [), in name order."""

    def matches(name: str, pattern: str) -> bool:
        if any(ch in pattern for ch in "*?["):
            return fnmatch.fnmatchcase(name, pattern)
        return pattern in name

    names = sorted(REGISTRY)
    if patterns:
        names = [n for n in names if any(matches(n, p) for p in patterns)]
    return [REGISTRY[n] for n in names]


# -- the table -------------------------------------------------------------------------------------------


def _seconds(value: float | None, side: Side) -> str:
    if value is None:
        return "ERROR" if side.status == "error" else "n/a"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.3f} s"


def _megabytes(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:.0f}"


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _jsonable(value: object) -> object:
    return value if isinstance(value, (int, float, str, bool, type(None))) else str(value)


def render(outcomes: Sequence[Outcome]) -> str:
    """The results table, then notes: n/a reasons, errors, and loud mismatch details."""
    extra_columns: list[str] = []
    for outcome in outcomes:
        extra_columns += [k for k in outcome.extra if k not in extra_columns]
    header = ["case", "iceduck", "peer", "ratio", "check", "iceduck MB", "peer MB", *extra_columns]
    body = []
    for o in outcomes:
        ratio = o.ratio
        body.append(
            [
                o.name,
                _seconds(o.iceduck.seconds, o.iceduck),
                _seconds(o.peer.seconds, o.peer),
                "n/a" if ratio is None else f"{ratio:.2f}x",
                o.check,
                _megabytes(o.iceduck.peak_rss_bytes),
                _megabytes(o.peer.peak_rss_bytes),
                *[_cell(o.extra[k]) if k in o.extra else "" for k in extra_columns],
            ]
        )
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))]).rstrip()

    out = [line(header), line(["-" * w for w in widths]), *(line(row) for row in body)]
    notes = []
    for o in outcomes:
        for label, side in (("iceduck", o.iceduck), ("peer", o.peer)):
            if side.status != "ok" and side.reason:
                notes.append(f"  {o.name}: {label} {side.status}: {side.reason.splitlines()[0]}")
    if notes:
        out += ["", "notes:", *notes]
    for o in outcomes:
        if o.check == "MISMATCH":
            out += ["", f"!!! MISMATCH in {o.name}: iceduck and the peer disagree", f"    {o.detail}"]
        elif o.check == "ERROR":
            for label, side in (("iceduck", o.iceduck), ("peer", o.peer)):
                if side.status == "error":
                    out += [
                        "",
                        f"!!! ERROR in {o.name} ({label}):",
                        *("    " + s for s in side.reason.splitlines()),
                    ]
    return "\n".join(out)
