"""Benchmark registry and runner: each case is timed on iceduck (in-process) and on the reference peer.

A case is a setup function decorated with :func:`benchmark`; it receives a :class:`Context` (scale,
data sets) and returns a :class:`Case`: the SQL the peer runs, the callable iceduck runs, and
whether their results must be equal. Setup (including building data sets) is never timed.
"""

from __future__ import annotations

import fnmatch
import statistics
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


def _measure_iceduck(fn: IceduckFn, repeat: int) -> Side:
    import duckdb

    try:
        import iceduck
    except Exception as exc:  # a broken package is "not available" for benchmarking purposes
        return Side("n/a", f"iceduck does not import: {exc}")
    register = getattr(iceduck, "register", None)
    if register is None:
        return Side("n/a", "iceduck.register() does not exist yet")
    con = duckdb.connect()
    try:
        register(con)
        first = fn(con)  # warm-up; its result is the one compared
        runs: list[float] = []
        peak: int | None = None
        base: int | None = None
        for _ in range(repeat):
            can_reset = _reset_peak_rss()
            before = _status_bytes("VmRSS")
            started = time.perf_counter()
            fn(con)
            runs.append(time.perf_counter() - started)
            high = _status_bytes("VmHWM") if can_reset else None
            if high is not None:
                peak = high if peak is None else max(peak, high)
            base = before if base is None else base
    except NotImplementedError as exc:
        return Side("n/a", str(exc) or "not implemented")
    except Exception as exc:
        return Side("error", f"{type(exc).__name__}: {exc}")
    finally:
        con.close()
    rows, extra = (first.rows, first.extra) if isinstance(first, Result) else (first, {})
    return Side("ok", runs=tuple(runs), peak_rss_bytes=peak, base_rss_bytes=base, rows=rows, extra=extra)


def _measure_peer(peer: Peer, case: Case, repeat: int) -> Side:
    from tests.support.peer import PeerError

    assert case.peer_sql is not None
    try:
        peer.reset()
        for statement in case.peer_setup:
            peer.execute(statement)
        (timing,) = peer.time(case.peer_sql, repeat=repeat, keep_result=case.compare)
    except PeerError as exc:
        return Side("error", str(exc))
    return Side(
        "ok",
        runs=timing.runs,
        peak_rss_bytes=timing.peak_rss_bytes,
        base_rss_bytes=timing.base_rss_bytes,
        rows=timing.result,
    )


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
    iceduck = (
        Side("n/a", "no iceduck side") if case.iceduck is None else _measure_iceduck(case.iceduck, ctx.repeat)
    )
    if case.peer_sql is None:
        peer_side = Side("n/a", "no peer side")
    elif peer is None:
        peer_side = Side("n/a", peer_reason)
    else:
        peer_side = _measure_peer(peer, case, ctx.repeat)
    check, detail = "-", ""
    if "error" in (iceduck.status, peer_side.status):
        check = "ERROR"
    elif case.compare and iceduck.status == "ok" and peer_side.status == "ok":
        equal, detail = _compare(case, iceduck.rows, peer_side.rows)
        check = "ok" if equal else "MISMATCH"
    extra = {**case.extra, **iceduck.extra}
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
