"""REST transport under load (issue 24): p50/p99 latency and requests/s of `iceduck serve` on loopback.

The server runs in its own process (`python -m iceduck.cli serve`, no authentication), so the load
generator does not share its interpreter; the client is CLIENTS threads in this process, each on one
keep-alive connection, sending requests over raw sockets (no HTTP library in the measurement), a
bounded number per run:

* `rest_load_config`: `GET /v1/config`, the transport and routing alone;
* `rest_load_table`: `GET .../tables/t`, loading a table of 10 snapshots (its metadata.json read,
  decoded and encoded again);
* `rest_load_commit`: `POST .../tables/t`, a `set-properties` commit with an `assert-table-uuid`
  requirement, each writing a new metadata file (commits of one server are serialised).

Extra columns: the median p50 and p99 milliseconds and requests/s over the timed runs. With
`ICEDUCK_SERVE_BASELINE=<another iceduck checkout>` (e.g. a main branch still on `http.server`) the
same load also runs against that tree's server, started the same way, and `req/s vs baseline` is the
ratio. There is no peer side: DuckDB's extension is a REST client, not a server, and no other REST
catalog server runs offline from PyPI (PyIceberg tests against the Java fixture in a container).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks import Case, Context, Result, benchmark

if TYPE_CHECKING:
    import duckdb

CLIENTS = 4
REQUESTS = {"small": {"read": 200, "commit": 40}, "full": {"read": 2000, "commit": 300}}
TABLE = "/v1/iceduck/namespaces/bench/tables/t"
ROOT = Path(__file__).resolve().parent.parent


class _Server:
    """`iceduck serve` from the checkout `tree` on a free port, in its own process."""

    def __init__(self, tree: Path) -> None:
        self.folder = tempfile.mkdtemp(prefix="iceduck-serve-load-")
        atexit.register(shutil.rmtree, self.folder, ignore_errors=True)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from iceduck.cli import main; sys.exit(main())",
                "serve",
                "--warehouse",
                f"{self.folder}/wh",
                "--port",
                str(self.port),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        atexit.register(self.proc.terminate)
        deadline = time.monotonic() + 60
        while True:
            try:
                status, _ = _one("GET", "/v1/config", port=self.port)
                if status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"iceduck serve from {tree} did not start")
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{self.port}"
        self._table()

    def _table(self) -> None:
        import iceduck

        lake = iceduck.connect(self.url, authorization_type="none")
        lake.sql("CREATE SCHEMA bench")
        lake.sql("CREATE TABLE bench.t (id BIGINT, k INTEGER, station VARCHAR)")
        for i in range(10):
            lake.sql(
                f"INSERT INTO bench.t SELECT i, i % 10, 'st' || i FROM range({i * 100}, {(i + 1) * 100}) t(i)"
            )
        status, body = _one("GET", TABLE, port=self.port)
        assert status == 200, body
        self.uuid = json.loads(body)["metadata"]["table-uuid"]


def _one(method: str, path: str, body: bytes = b"", *, port: int) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(_request(method, path, body, close=True))
        return _response(sock, b"")[:2]


def _request(method: str, path: str, body: bytes = b"", *, close: bool = False) -> bytes:
    connection = "Connection: close\r\n" if close else ""
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n{connection}Content-Length: {len(body)}\r\n"
    return (head + ("Content-Type: application/json\r\n" if body else "") + "\r\n").encode() + body


def _response(sock: socket.socket, buffered: bytes) -> tuple[int, bytes, bytes]:
    """(status, body, bytes after it) of the next response on `sock`, Content-Length framed."""
    while b"\r\n\r\n" not in buffered:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        buffered += chunk
    head, _, rest = buffered.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        rest += chunk
    return int(lines[0].split()[1]), rest[:length], rest[length:]


def _load(port: int, total: int, make: Callable[[int], bytes], expect: int) -> tuple[float, float, float]:
    """CLIENTS keep-alive connections sending `total` requests together: (p50 ms, p99 ms, req/s)."""
    latencies: list[float] = []
    lock = threading.Lock()
    failures: list[str] = []
    counter = iter(range(total))

    def client() -> None:
        mine = []
        buffered = b""
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for i in counter:
                started = time.perf_counter()
                sock.sendall(make(i))
                status, body, buffered = _response(sock, buffered)
                mine.append(time.perf_counter() - started)
                if status != expect:
                    failures.append(f"{status} {body[:200]!r}")
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    assert not failures, failures[:3]
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return statistics.median(latencies) * 1000, p99 * 1000, len(latencies) / elapsed


_servers: dict[str, _Server] = {}


def _server(which: str) -> _Server | None:
    if which not in _servers:
        tree = ROOT if which == "new" else os.environ.get("ICEDUCK_SERVE_BASELINE")
        if not tree:
            return None
        _servers[which] = _Server(Path(tree))
    return _servers[which]


def _case(kind: str, ctx: Context) -> Case:
    count = REQUESTS[ctx.scale]["commit" if kind == "commit" else "read"]
    sides = {w: s for w in ("new", "baseline") if (s := _server(w)) is not None}

    def maker(server: _Server) -> tuple[Callable[[int], bytes], int]:
        if kind == "config":
            return (lambda i: _request("GET", "/v1/config")), 200
        if kind == "table":
            return (lambda i: _request("GET", TABLE)), 200
        requirement = [{"type": "assert-table-uuid", "uuid": server.uuid}]

        def commit(i: int) -> bytes:
            update = {"action": "set-properties", "updates": {"bench.counter": f"{time.monotonic_ns()}-{i}"}}
            return _request(
                "POST", TABLE, json.dumps({"requirements": requirement, "updates": [update]}).encode()
            )

        return commit, 200

    seen: dict[str, list[tuple[float, float, float]]] = {w: [] for w in sides}

    def iceduck_side(_con: duckdb.DuckDBPyConnection) -> object:
        for which, server in sides.items():  # alternate: a change in machine load weighs on both
            make, expect = maker(server)
            seen[which].append(_load(server.port, count, make, expect))
        extra: dict[str, object] = {"requests": count, "clients": CLIENTS}
        for which, runs in seen.items():
            label = "" if which == "new" else "baseline "
            extra[f"{label}p50 ms"] = round(statistics.median(r[0] for r in runs), 2)
            extra[f"{label}p99 ms"] = round(statistics.median(r[1] for r in runs), 2)
            extra[f"{label}req/s"] = round(statistics.median(r[2] for r in runs))
        if "baseline" in seen:
            extra["req/s vs baseline"] = f"{float(extra['req/s']) / float(extra['baseline req/s']):.2f}x"  # type: ignore[arg-type]
        return Result([("ok",)], extra=extra)

    return Case(peer_sql=None, iceduck=iceduck_side)


@benchmark("rest_load_config", description="GET /v1/config under 4 keep-alive clients (transport alone)")
def rest_load_config(ctx: Context) -> Case:
    return _case("config", ctx)


@benchmark("rest_load_table", description="load a 10-snapshot table under 4 keep-alive clients")
def rest_load_table(ctx: Context) -> Case:
    return _case("table", ctx)


@benchmark("rest_load_commit", description="set-properties commits under 4 keep-alive clients")
def rest_load_commit(ctx: Context) -> Case:
    return _case("commit", ctx)
