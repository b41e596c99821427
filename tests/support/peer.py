"""The reference peer: DuckDB 1.5.5 with its iceberg extension, run in its own virtual environment.

DuckDB 1.5.5 cannot share a Python environment with the duckdb 2.x iceduck uses, so the peer lives in a
separate venv (default ``<repo>/.peer``, or ``$ICEDUCK_PEER_VENV``) and runs in one long-lived
subprocess per :class:`Peer`. The subprocess reads one JSON request per line on stdin and answers on
its stdout with a JSON header line followed by a binary payload (pickled rows, or an Arrow IPC stream).
Extensions are loaded from the files pip installed, with autoinstall off, so nothing is downloaded
at query time.

Typical use::

    peer = Peer.ensure()                      # creates/installs the venv once
    peer.query("SELECT count(*) FROM iceberg_scan('.../v2.metadata.json')")   # -> [(51793,)]
    peer.time(["SELECT ..."], repeat=5)       # timed inside the peer process
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import IO, Any, Literal

import pyarrow as pa

from iceduck.errors import IcebergError

PEER_DUCKDB_VERSION = "1.5.5"
"""The DuckDB release (and iceberg extension build) the peer runs."""

PEER_REQUIREMENTS: tuple[str, ...] = (
    f"duckdb=={PEER_DUCKDB_VERSION}",
    f"duckdb-extension-iceberg=={PEER_DUCKDB_VERSION}",
    f"duckdb-extension-avro=={PEER_DUCKDB_VERSION}",
    f"duckdb-extension-httpfs=={PEER_DUCKDB_VERSION}",
)
"""The pinned packages that make up the peer."""

HELPER_REQUIREMENTS: tuple[str, ...] = ("pytz", "pyarrow")
"""Unpinned helpers DuckDB's Python API needs inside the peer: pytz to fetch TIMESTAMPTZ values,
pyarrow for Arrow results. They do not change what the peer computes."""

VENV_ENV_VAR = "ICEDUCK_PEER_VENV"
DEFAULT_EXTENSIONS: tuple[str, ...] = ("avro", "iceberg")  # avro first: iceberg reads manifests with it

Fetch = Literal["arrow", "rows", "none"]

# pip prints these when it cannot reach the package index (as opposed to a package being broken).
# "(from versions: none)": the index listed no duckdb release at all, so it was not reachable (with
# retries exhausted pip may not print the connection error itself).
_NETWORK_MARKERS = (
    "(from versions: none)",
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "ProxyError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "Connection refused",
    "SSLError",
)


class PeerError(IcebergError):
    """The reference peer could not be installed, started or asked a question."""


class PeerInstallError(PeerError):
    """Creating the peer's venv or installing its packages failed."""


class PeerUnavailableError(PeerInstallError):
    """The peer is not installed and pip cannot reach the package index to install it."""


class PeerQueryError(PeerError):
    """A statement failed inside the peer; ``error_type`` is DuckDB's exception class name."""

    def __init__(self, sql: str, error_type: str, message: str) -> None:
        self.sql = sql
        self.error_type = error_type
        self.message = message
        super().__init__(f"reference peer (DuckDB {PEER_DUCKDB_VERSION}) {error_type}: {message}\nSQL: {sql}")


@dataclass(frozen=True, slots=True)
class Timing:
    """How long one statement took on the peer, measured inside the peer process.

    ``runs`` are the timed repetitions (after the warm-up) in seconds; ``seconds`` is their median.
    ``peak_rss_bytes`` is the highest process peak RSS seen during a timed run (the peak counter is
    reset before each run; None where the OS offers no such counter) and ``base_rss_bytes`` the RSS
    just before the first timed run. ``result`` holds the rows when the caller asked to keep them.
    """

    sql: str
    runs: tuple[float, ...]
    rows: int
    peak_rss_bytes: int | None
    base_rss_bytes: int | None
    result: tuple[tuple[Any, ...], ...] | None = None

    @property
    def seconds(self) -> float:
        """Median of the timed runs."""
        return statistics.median(self.runs)


def repo_root() -> Path | None:
    """The source checkout this module lives in, or None when installed elsewhere."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


def default_venv_path() -> Path:
    """``$ICEDUCK_PEER_VENV`` if set, else ``<repo>/.peer`` (``./.peer`` outside a checkout)."""
    env = os.environ.get(VENV_ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    root = repo_root()
    return (root if root is not None else Path.cwd()) / ".peer"


def sql_string(text: str) -> str:
    """``text`` as a SQL string literal (single quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _site_packages(venv: Path) -> Path | None:
    found = sorted(venv.glob("lib/python3*/site-packages")) or sorted(venv.glob("Lib/site-packages"))
    return found[0] if found else None


def _dist_name(requirement: str) -> tuple[str, str | None]:
    """(normalized distribution name, pinned version or None) of a ``name`` or ``name==version``."""
    name, _, version = requirement.partition("==")
    return name.strip().lower().replace("-", "_"), (version.strip() or None)


def _missing_requirements(venv: Path) -> list[str]:
    """Requirements whose distribution (at the pinned version) is not in the venv's site-packages."""
    site = _site_packages(venv)
    if not _venv_python(venv).exists() or site is None:
        return [*PEER_REQUIREMENTS, *HELPER_REQUIREMENTS]
    missing = []
    for requirement in (*PEER_REQUIREMENTS, *HELPER_REQUIREMENTS):
        name, version = _dist_name(requirement)
        # dist-info directories are named <normalized name>-<version>.dist-info
        pattern = f"{name}-{version}.dist-info" if version else f"{name}-*.dist-info"
        if not any(fnmatchcase(p.name.lower(), pattern) for p in site.glob("*.dist-info")):
            missing.append(requirement)
    return missing


def _extension_file(venv: Path, name: str) -> Path | None:
    site = _site_packages(venv)
    if site is None:
        return None
    package = site / f"duckdb_extension_{name}"
    exact = package / "extensions" / f"v{PEER_DUCKDB_VERSION}" / f"{name}.duckdb_extension"
    if exact.is_file():
        return exact
    found = sorted(package.glob(f"**/{name}.duckdb_extension"))
    return found[0] if found else None


@contextlib.contextmanager
def _install_lock(venv: Path) -> Iterator[None]:
    """Serialize installs into one venv across processes (pytest-xdist workers start together)."""
    venv.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no flock on this platform: installs are rare, go ahead unlocked
        yield
        return
    with open(venv / ".iceduck-install.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(cmd: Sequence[str | Path], what: str, venv: Path) -> None:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return
    output = (proc.stdout + proc.stderr).strip()
    tail = "\n".join(output.splitlines()[-25:])
    if any(marker in output for marker in _NETWORK_MARKERS):
        raise PeerUnavailableError(
            f"{venv}: cannot install the reference peer, pip cannot reach the package index ({what}):\n{tail}"
        )
    raise PeerInstallError(f"{venv}: {what} failed with exit code {proc.returncode}:\n{tail}")


def install(venv: Path | str | None = None, *, quiet: bool = False) -> Path:
    """Create the peer venv (``python -m venv``) and pip install its packages, unless already there.

    Idempotent and safe to call from several processes at once. Returns the venv path.
    Raises :class:`PeerUnavailableError` when pip cannot reach the index, :class:`PeerInstallError`
    for any other failure.
    """
    path = Path(venv).expanduser().resolve() if venv is not None else default_venv_path()
    if not _missing_requirements(path) and _all_extensions(path):
        return path
    with _install_lock(path):
        missing = _missing_requirements(path)
        if not missing and _all_extensions(path):
            return path  # another process installed it while we waited for the lock
        if not quiet:
            print(f"iceduck: installing the reference peer into {path}: {' '.join(missing)}", file=sys.stderr)
        if not _venv_python(path).exists():
            _run([sys.executable, "-m", "venv", path], "python -m venv", path)
        pip: list[str | Path] = [
            _venv_python(path),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-q",
        ]
        _run([*pip, *PEER_REQUIREMENTS, *HELPER_REQUIREMENTS], "pip install", path)
        still_missing = _missing_requirements(path)
        if still_missing or not _all_extensions(path):
            raise PeerInstallError(
                f"{path}: pip reported success but the peer is incomplete "
                f"(missing: {still_missing or 'extension files'})"
            )
    return path


def _all_extensions(venv: Path) -> bool:
    return all(_extension_file(venv, name) is not None for name in ("avro", "iceberg", "httpfs"))


class Peer:
    """A handle on the reference peer venv, with one lazily started DuckDB 1.5.5 subprocess.

    All statements run on the same DuckDB connection (in-memory database) until :meth:`reset`.
    Relative paths (in SQL, or table locations like ``./lineitem_iceberg`` inside metadata) resolve
    against ``cwd`` (default: the caller's working directory when the subprocess starts).
    ``extensions`` are loaded in order from the venv's files (add ``"httpfs"`` for REST catalogs).
    Thread-safe (requests are serialized); close it with :meth:`close` or a ``with`` block.
    """

    def __init__(
        self,
        venv: Path | str | None = None,
        *,
        extensions: Sequence[str] = DEFAULT_EXTENSIONS,
        cwd: Path | str | None = None,
    ) -> None:
        self.venv = Path(venv).expanduser().resolve() if venv is not None else default_venv_path()
        self.extensions = tuple(extensions)
        self.cwd = Path(cwd).resolve() if cwd is not None else None
        self.duckdb_version: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._lock = threading.Lock()

    @classmethod
    def ensure(
        cls,
        path: Path | str | None = None,
        *,
        quiet: bool = False,
        extensions: Sequence[str] = DEFAULT_EXTENSIONS,
        cwd: Path | str | None = None,
    ) -> Peer:
        """Install the peer venv at ``path`` if needed (see :func:`install`) and return a Peer on it."""
        return cls(install(path, quiet=quiet), extensions=extensions, cwd=cwd)

    def __repr__(self) -> str:
        state = "running" if self._proc is not None and self._proc.poll() is None else "idle"
        return f"Peer({str(self.venv)!r}, {state})"

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- locating things -------------------------------------------------------------------------

    @property
    def python(self) -> Path:
        """The peer venv's python executable."""
        return _venv_python(self.venv)

    @property
    def site_packages(self) -> Path:
        """The peer venv's site-packages directory."""
        site = _site_packages(self.venv)
        if site is None:
            raise PeerError(f"{self.venv}: no site-packages directory (is the peer venv installed?)")
        return site

    def extension_path(self, name: str) -> Path:
        """Path of the ``<name>.duckdb_extension`` file pip installed (avro, iceberg, httpfs)."""
        path = _extension_file(self.venv, name)
        if path is None:
            raise PeerError(f"{self.venv}: extension file {name}.duckdb_extension not found in site-packages")
        return path

    def available(self) -> bool:
        """True when the venv holds every peer package and extension file (installs nothing)."""
        return not _missing_requirements(self.venv) and _all_extensions(self.venv)

    # -- running SQL -----------------------------------------------------------------------------

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """Run ``sql`` (one or more statements) and return the last statement's rows.

        Values are DuckDB's Python values (Decimal, date, datetime, UUID, bytes, dict, list...);
        timezone-aware values carry a fixed-offset ``datetime.timezone``.
        """
        header, payload = self._request({"op": "query", "sql": sql, "fetch": "rows"}, sql)
        return list(pickle.loads(payload)) if header.get("kind") == "rows" else []

    def query_arrow(self, sql: str) -> pa.Table:
        """Run ``sql`` and return the last statement's result as an Arrow table (DuckDB's conversion)."""
        header, payload = self._request({"op": "query", "sql": sql, "fetch": "arrow"}, sql)
        if header.get("kind") != "arrow":
            raise PeerError(f"reference peer: statement returned no result set\nSQL: {sql}")
        with pa.ipc.open_stream(payload) as reader:
            return reader.read_all()

    def execute(self, sql: str) -> None:
        """Run ``sql`` for its effect (SET, CREATE, ...); results are discarded."""
        self._request({"op": "query", "sql": sql, "fetch": "none"}, sql)

    def time(
        self,
        sql: str | Sequence[str],
        repeat: int = 3,
        *,
        warmup: int = 1,
        fetch: Fetch = "arrow",
        keep_result: bool = False,
    ) -> list[Timing]:
        """Time each statement inside the peer process, on its connection, after ``warmup`` runs.

        A timed run is ``execute`` plus fetching the whole result (``fetch="arrow"``: to an Arrow
        table, the cheapest full materialization; ``"rows"``: Python tuples). With ``keep_result``
        the rows of an untimed run (which counts as one warm-up) come back in ``Timing.result``.
        """
        statements = [sql] if isinstance(sql, str) else list(sql)
        if repeat < 1 or warmup < 0:
            raise ValueError(f"repeat must be >= 1 and warmup >= 0, got repeat={repeat}, warmup={warmup}")
        request = {
            "op": "time",
            "sql": statements,
            "repeat": repeat,
            "warmup": warmup,
            "fetch": fetch,
            "keep_result": keep_result,
        }
        header, payload = self._request(request, "; ".join(statements))
        results: list[list[tuple[Any, ...]] | None] = pickle.loads(payload)
        timings = []
        for item, rows in zip(header["timings"], results, strict=True):
            timings.append(
                Timing(
                    sql=item["sql"],
                    runs=tuple(item["runs"]),
                    rows=item["rows"],
                    peak_rss_bytes=item["peak_rss"],
                    base_rss_bytes=item["base_rss"],
                    result=None if rows is None else tuple(tuple(r) for r in rows),
                )
            )
        return timings

    def reset(self) -> None:
        """Replace the peer's connection with a fresh one (new in-memory database, default settings)."""
        self._request({"op": "reset"}, "<reset>")

    def close(self) -> None:
        """Stop the subprocess (it restarts on the next request)."""
        with self._lock:
            self._stop()

    # -- subprocess plumbing ---------------------------------------------------------------------

    def _start(self) -> subprocess.Popen[bytes]:
        if not self.available():
            raise PeerError(
                f"{self.venv}: the reference peer is not installed "
                f"(missing: {_missing_requirements(self.venv) or 'extension files'}); use Peer.ensure()"
            )
        config = {"extensions": [str(self.extension_path(name)) for name in self.extensions]}
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the subprocess; closed in _stop)
        proc = subprocess.Popen(
            [str(self.python), "-c", _RUNNER, json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=self.cwd,
            # own session: a Ctrl-C aimed at the caller must not kill the peer mid-answer
            start_new_session=True,
        )
        self._proc, self._stderr = proc, stderr
        self._finalizer = weakref.finalize(self, _stop_process, proc, stderr)
        header, _ = self._read_reply(proc, "<startup>")
        if not header.get("ok"):
            self._stop()
            raise PeerError(
                f"{self.venv}: the reference peer failed to start: "
                f"{header.get('error_type')}: {header.get('message')}"
            )
        self.duckdb_version = header.get("duckdb")
        return proc

    def _request(self, request: dict[str, Any], sql: str) -> tuple[dict[str, Any], bytes]:
        with self._lock:
            proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
            assert proc.stdin is not None
            try:
                proc.stdin.write(json.dumps(request).encode() + b"\n")
                proc.stdin.flush()
                header, payload = self._read_reply(proc, sql)
            except BaseException:
                # the stream may be out of step (interrupted mid-answer): start afresh next time
                self._stop()
                raise
        if not header.get("ok"):
            raise PeerQueryError(sql, str(header.get("error_type")), str(header.get("message")))
        return header, payload

    def _read_reply(self, proc: subprocess.Popen[bytes], sql: str) -> tuple[dict[str, Any], bytes]:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            code = proc.wait(timeout=10)
            raise PeerError(
                f"{self.venv}: the reference peer exited (code {code}) while running: {sql}\n{self._stderr_tail()}"
            )
        header: dict[str, Any] = json.loads(line)
        size = int(header.get("size", 0))
        payload = proc.stdout.read(size) if size else b""
        if len(payload) != size:
            raise PeerError(f"{self.venv}: truncated answer from the reference peer for: {sql}")
        return header, payload

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-20:])

    def _stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # runs _stop_process once
        self._proc = self._stderr = self._finalizer = None


def _stop_process(proc: subprocess.Popen[bytes], stderr: IO[bytes]) -> None:
    """Ask the runner to exit (closing stdin ends its loop), then make sure it is gone."""
    try:
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
    finally:
        stderr.close()


# The runner executes with the peer venv's python (stdlib + duckdb 1.5.5 + pytz + pyarrow, no iceduck).
# Protocol: the first answer reports startup; then one JSON request per stdin line, each answered by a
# JSON header line {"ok": ..., "size": n, ...} followed by n payload bytes. EOF on stdin ends it.
_RUNNER = r"""
import datetime, json, os, pickle, shutil, sys, tempfile, time


def quote(text):
    return "'" + text.replace("'", "''") + "'"


def connect(config, home):
    import duckdb

    con = duckdb.connect()
    con.execute("SET home_directory = " + quote(home))
    con.execute("SET autoinstall_known_extensions = false")
    for path in config["extensions"]:
        con.execute("LOAD " + quote(path))
    return con


def plain(value):
    # pytz zones (what DuckDB attaches) are replaced by fixed offsets so the caller needs no pytz
    if isinstance(value, (datetime.datetime, datetime.time)) and value.tzinfo is not None:
        if type(value.tzinfo) is not datetime.timezone:
            return value.replace(tzinfo=datetime.timezone(value.utcoffset()))
        return value
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    return value


def rows_of(cursor):
    if cursor.description is None:
        return []
    rows = cursor.fetchall()
    if any("WITH TIME ZONE" in str(d[1]).upper() for d in cursor.description):
        rows = [plain(r) for r in rows]
    return rows


def materialize(cursor, fetch):
    if cursor.description is None or fetch == "none":
        return 0
    if fetch == "arrow":
        return cursor.to_arrow_table().num_rows
    return len(cursor.fetchall())


def status_bytes(key):
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def reset_peak():
    # writing 5 to clear_refs resets VmHWM (Linux >= 4.0), so the peak covers one run only
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def time_statements(con, request):
    timings, results = [], []
    for sql in request["sql"]:
        result = None
        warmups = request["warmup"]
        if request["keep_result"]:
            result = rows_of(con.execute(sql))
            warmups -= 1
        for _ in range(max(warmups, 0)):
            materialize(con.execute(sql), request["fetch"])
        runs, peak, base, count = [], None, None, 0
        for _ in range(request["repeat"]):
            can_reset = reset_peak()
            before = status_bytes("VmRSS")
            start = time.perf_counter()
            count = materialize(con.execute(sql), request["fetch"])
            runs.append(time.perf_counter() - start)
            high = status_bytes("VmHWM") if can_reset else None
            if high is not None:
                peak = high if peak is None else max(peak, high)
            if base is None:
                base = before
        timings.append({"sql": sql, "runs": runs, "rows": count, "peak_rss": peak, "base_rss": base})
        results.append(result)
    return timings, results


def arrow_bytes(cursor):
    import pyarrow as pa

    table = cursor.to_arrow_table()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def serve(config, proto, home):
    def reply(header, payload=b""):
        header["size"] = len(payload)
        proto.write(json.dumps(header).encode() + b"\n")
        proto.write(payload)
        proto.flush()

    def failure(exc):
        return {"ok": False, "error_type": type(exc).__name__, "message": str(exc)}

    try:
        import duckdb

        con = connect(config, home)
    except Exception as exc:
        reply(failure(exc))
        return
    reply({"ok": True, "duckdb": duckdb.__version__})
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        request = json.loads(line)
        op = request["op"]
        try:
            if op == "reset":
                con.close()
                con = connect(config, home)
                reply({"ok": True})
            elif op == "query":
                cursor = con.execute(request["sql"])
                fetch = request["fetch"]
                if cursor.description is None or fetch == "none":
                    reply({"ok": True, "kind": "none"})
                elif fetch == "arrow":
                    reply({"ok": True, "kind": "arrow"}, arrow_bytes(cursor))
                else:
                    reply({"ok": True, "kind": "rows"}, pickle.dumps(rows_of(cursor), protocol=4))
            elif op == "time":
                timings, results = time_statements(con, request)
                reply({"ok": True, "timings": timings}, pickle.dumps(results, protocol=4))
            else:
                raise ValueError("unknown request " + repr(op))
        except Exception as exc:
            reply(failure(exc))


def main():
    config = json.loads(sys.argv[1])
    proto = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a library prints goes to stderr, never into the answer stream
    sys.stdout = sys.stderr
    home = tempfile.mkdtemp(prefix="iceduck-peer-home-")
    try:
        serve(config, proto, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


main()
"""
