"""REST catalog cases (issue 9): a scan and a commit through `iceduck serve` against the embedded catalog.

Both cases serve one warehouse with `iceduck serve` (in this process, on a loopback port) and run the
same work three ways: iceduck through its REST client (the timed iceduck side), iceduck on the
embedded SQLite catalog of the same warehouse (`embedded s`, median of the same number of runs), and
the reference peer, DuckDB 1.5.5's iceberg extension ATTACHed to the same server (the peer side).
`rest / embedded` is what going through the server costs iceduck.

* `rest_scan`: a filtered aggregate over a v3 table (ROWS rows in 10 commits, with deletion vectors
  from one DELETE), through the catalog view `lake.bench.t` / `cat.bench.t`; results compared.
* `rest_commit`: one INSERT of 1,000 rows per run into a v3 table, through the server (load,
  commit with requirements) or the embedded catalog (compare-and-swap in SQLite).
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import Case, Context, Result, benchmark

if TYPE_CHECKING:
    import duckdb

DATA = Path(__file__).resolve().parent / ".data" / "rest"
ROWS = {"small": 200_000, "full": 5_000_000}
SOURCE = (
    "SELECT i::BIGINT AS id, (i % 1000)::INTEGER AS k, 'st' || (i % 50) AS station, (i * 0.5)::DOUBLE AS x "
    "FROM range({a}, {b}) t(i)"
)
QUERY = "SELECT count(*), sum(x), count(DISTINCT station) FROM {t} WHERE k < 100"
INSERT = "INSERT INTO {t} SELECT i, i % 1000, 'new', i * 0.5 FROM range(1000) t(i)"

_servers: list[Any] = []  # servers stay up for the whole run (the peer attaches in its own process)


def _median_seconds(fn: Callable[[], object], repeat: int) -> float:
    fn()
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def _serve(name: str, scale: str) -> tuple[Any, Path]:
    from iceduck.serve.server import RestServer

    folder = DATA / f"{name}-{scale}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    server = RestServer(str(folder / "warehouse"), port=0).start()
    _servers.append(server)
    return server, folder / "warehouse"


def _peer_attach(url: str) -> tuple[str, ...]:
    from tests.support.peer import Peer

    httpfs = Peer.ensure(quiet=True).extension_path("httpfs")
    return (
        f"LOAD '{httpfs}'",
        "DETACH DATABASE IF EXISTS cat",
        f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{url}', AUTHORIZATION_TYPE 'none')",
    )


@benchmark("rest_scan", description="filtered aggregate through iceduck serve vs the embedded catalog")
def rest_scan(ctx: Context) -> Case:
    import iceduck

    n = ROWS[ctx.scale]
    server, warehouse = _serve("scan", ctx.scale)
    remote = iceduck.connect(server.url, authorization_type="none")
    remote.sql("CREATE SCHEMA bench")
    remote.sql("CREATE TABLE bench.t (id BIGINT, k INTEGER, station VARCHAR, x DOUBLE)")
    step = n // 10
    for i in range(10):
        remote.sql(f"INSERT INTO bench.t {SOURCE.format(a=i * step, b=(i + 1) * step)}")
    remote.sql("DELETE FROM bench.t WHERE id % 10 = 3")
    embedded = iceduck.connect(warehouse)
    def scan(lake: Any) -> list[Any]:
        rows = lake.sql(QUERY.format(t="lake.bench.t"))
        assert rows is not None
        return list(rows.fetchall())

    embedded_s = _median_seconds(lambda: scan(embedded), ctx.repeat)
    rest_s = _median_seconds(lambda: scan(remote), ctx.repeat)

    def iceduck_side(con: duckdb.DuckDBPyConnection) -> object:
        return scan(remote)

    return Case(
        peer_sql=QUERY.format(t="cat.bench.t"),
        peer_setup=_peer_attach(server.url),
        iceduck=iceduck_side,
        compare=True,
        extra={
            "rows": n,
            "embedded s": round(embedded_s, 4),
            "rest s": round(rest_s, 4),
            "rest / embedded": f"{rest_s / embedded_s:.2f}x",
        },
    )


@benchmark("rest_commit", description="one 1,000-row INSERT commit through iceduck serve vs the embedded catalog")
def rest_commit(ctx: Context) -> Case:
    import iceduck

    server, warehouse = _serve("commit", ctx.scale)
    remote = iceduck.connect(server.url, authorization_type="none")
    remote.sql("CREATE SCHEMA bench")
    remote.sql("CREATE TABLE bench.c (id BIGINT, k INTEGER, station VARCHAR, x DOUBLE)")
    remote.sql("CREATE TABLE bench.p (id BIGINT, k INTEGER, station VARCHAR, x DOUBLE)")  # the peer's
    embedded = iceduck.connect(warehouse)
    embedded_s = _median_seconds(lambda: embedded.sql(INSERT.format(t="bench.c")), ctx.repeat)
    rest_s = _median_seconds(lambda: remote.sql(INSERT.format(t="bench.c")), ctx.repeat)

    def iceduck_side(con: duckdb.DuckDBPyConnection) -> object:
        counted = remote.sql(INSERT.format(t="bench.c"))
        assert counted is not None
        return Result(counted.fetchall())

    return Case(
        peer_sql=INSERT.format(t="cat.bench.p"),
        peer_setup=_peer_attach(server.url),
        iceduck=iceduck_side,
        compare=True,
        extra={
            "embedded s": round(embedded_s, 4),
            "rest s": round(rest_s, 4),
            "rest / embedded": f"{rest_s / embedded_s:.2f}x",
        },
    )
