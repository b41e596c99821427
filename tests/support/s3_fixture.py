"""Local S3-compatible servers for tests, started on a free loopback port and stopped afterwards.

- ``moto_s3``: moto's server (`moto[server]`), for S3 semantics (errors, conditional writes,
  batch deletes). One per test session (per xdist worker).
- ``s3rver``: the npm package `s3rver` (fast ranged reads), for throughput; installed by `.ci/run`
  into `.cache/s3rver` (or `$ICEDUCK_S3RVER`). Tests using it skip, saying how to install it,
  only when the binary is not there.
- ``s3_warehouse``: a fresh warehouse prefix on moto, for the S3 twin of a test (conftest's
  ``warehouse`` fixture: tests that take it run on local storage and again on S3).

Credentials are registered the way a user's `CREATE SECRET (TYPE s3, ...)` registers them, scoped
to the test bucket, and forgotten at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from iceduck.io import s3_settings

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "lake"


@dataclass(frozen=True)
class S3Server:
    """A running local S3 server: its endpoint and keys, and the secret options DuckDB would take."""

    name: str
    host: str
    port: int
    key_id: str
    secret: str
    region: str = "us-east-1"

    @property
    def endpoint(self) -> str:
        """`http://host:port`."""
        return f"http://{self.host}:{self.port}"

    def secret_options(self) -> dict[str, object]:
        """The options of `CREATE SECRET (TYPE s3, ...)` reaching this server."""
        return {
            "KEY_ID": self.key_id,
            "SECRET": self.secret,
            "REGION": self.region,
            "ENDPOINT": f"{self.host}:{self.port}",
            "URL_STYLE": "path",
            "USE_SSL": False,
        }

    def secret_sql(self, name: str = "s3_test") -> str:
        """The DuckDB statement creating a secret for this server (for the peer, or Lake.sql)."""
        return (
            f"CREATE OR REPLACE SECRET {name} (TYPE s3, KEY_ID '{self.key_id}', SECRET '{self.secret}', "
            f"REGION '{self.region}', ENDPOINT '{self.host}:{self.port}', URL_STYLE 'path', USE_SSL false)"
        )

    def client(self) -> object:
        """A boto3 client on this server (for checks that go around iceduck)."""
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.key_id,
            aws_secret_access_key=self.secret,
            region_name=self.region,
        )


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on (the server binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(proc: subprocess.Popen[bytes], port: int, what: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within 60 s")


# Runs `argv[1:]` after asking Linux to send it SIGTERM when the process that started it dies
# (prctl PR_SET_PDEATHSIG = 1; kept across exec): a test run that is killed (a timeout, kill -9 of
# a worker) leaves no server behind. A launcher rather than `preexec_fn`, which is unsafe in a
# process with threads (s3fs's event loop, DuckDB's).
_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "if sys.platform.startswith('linux'):\n"
    "    ctypes.CDLL(None).prctl(1, signal.SIGTERM)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n"
)


def die_with_parent(cmd: list[str]) -> list[str]:
    """`cmd` wrapped so that it is stopped when the process starting it dies (see _LAUNCHER)."""
    return [sys.executable, "-c", _LAUNCHER, *cmd]


@contextlib.contextmanager
def _process(cmd: list[str], port: int, what: str) -> Iterator[None]:
    folder = Path(tempfile.mkdtemp(prefix="iceduck-s3-"))
    log = folder / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            die_with_parent(cmd), stdout=out, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True
        )
    try:
        _wait_listening(proc, port, what, log)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def moto_server() -> Iterator[S3Server]:
    """moto's S3 server on a free loopback port, with the bucket `lake`."""
    pytest.importorskip("moto.server", reason="moto[server] is not installed (pip install -e '.[dev]')")
    port = free_port()
    with _process(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], port, "moto_server"
    ):
        server = S3Server("moto", "127.0.0.1", port, "testing", "testing")
        server.client().create_bucket(Bucket=BUCKET)  # type: ignore[attr-defined]
        yield server


def s3rver_binary() -> Path | None:
    """The installed `s3rver` command (`$ICEDUCK_S3RVER`, else `.cache/s3rver/node_modules/.bin`)."""
    env = os.environ.get("ICEDUCK_S3RVER")
    path = Path(env) if env else ROOT / ".cache" / "s3rver" / "node_modules" / ".bin" / "s3rver"
    return path if path.exists() else None


@contextlib.contextmanager
def s3rver_server() -> Iterator[S3Server]:
    """s3rver on a free loopback port, with the bucket `lake` (keys S3RVER/S3RVER)."""
    binary = s3rver_binary()
    if binary is None or shutil.which("node") is None:
        pytest.skip("s3rver not installed: npm install --prefix .cache/s3rver s3rver@3.7.1 (.ci/run does)")
    port = free_port()
    data = tempfile.mkdtemp(prefix="iceduck-s3rver-")
    try:
        cmd = [str(binary), "-a", "127.0.0.1", "-p", str(port), "-d", data, "--configure-bucket", BUCKET]
        with _process(cmd, port, "s3rver"):
            yield S3Server("s3rver", "127.0.0.1", port, "S3RVER", "S3RVER")
    finally:
        shutil.rmtree(data, ignore_errors=True)


# The servers registered now, innermost last: child processes of a test get the innermost.
_REGISTERED: list[S3Server] = []
CHILD_ENV = "ICEDUCK_TEST_S3_SECRET"


@contextlib.contextmanager
def registered(server: S3Server) -> Iterator[None]:
    """The server's settings registered as a `CREATE SECRET` scoped to the test bucket."""
    settings, _ = s3_settings.settings_from_secret(server.secret_options())
    scope = f"s3://{BUCKET}"
    previous = s3_settings.REGISTRY.registered(scope=scope, source=s3_settings.Source.SECRET)  # another server's
    s3_settings.REGISTRY.register(settings, scope=scope, source=s3_settings.Source.SECRET)
    _REGISTERED.append(server)
    try:
        yield
    finally:
        _REGISTERED.remove(server)
        if previous is None:
            s3_settings.REGISTRY.unregister(scope=scope, source=s3_settings.Source.SECRET)
        else:
            s3_settings.REGISTRY.register(previous, scope=scope, source=s3_settings.Source.SECRET)


def child_env() -> dict[str, str]:
    """Environment for a child process of a test to reach the S3 server registered now (settings
    are per process); empty when none is. The child calls `settings_from_env()`."""
    if not _REGISTERED:
        return {}
    return {CHILD_ENV: json.dumps(_REGISTERED[-1].secret_options())}


def aws_env() -> dict[str, str]:
    """The AWS environment variables reaching the S3 server registered now (empty when none is):
    for a child process that is iceduck's own command line, which reads them as a user's shell
    would give them (botocore's `AWS_ENDPOINT_URL`, keys, region)."""
    if not _REGISTERED:
        return {}
    server = _REGISTERED[-1]
    return {
        "AWS_ACCESS_KEY_ID": server.key_id,
        "AWS_SECRET_ACCESS_KEY": server.secret,
        "AWS_REGION": server.region,
        "AWS_ENDPOINT_URL": server.endpoint,
    }


def settings_from_env() -> None:
    """In a child process: register the S3 server `child_env()` named, as the parent had it."""
    text = os.environ.get(CHILD_ENV)
    if text:
        settings, _ = s3_settings.settings_from_secret(json.loads(text))
        s3_settings.REGISTRY.register(settings, scope=f"s3://{BUCKET}", source=s3_settings.Source.SECRET)


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[S3Server]:
    """moto's S3 server for the session (per xdist worker), its settings registered."""
    with moto_server() as server, registered(server):
        yield server


@pytest.fixture(scope="session")
def s3rver() -> Iterator[S3Server]:
    """s3rver for the session (skips when it is not installed)."""
    with s3rver_server() as server:
        yield server


@pytest.fixture
def s3_prefix(moto_s3: S3Server) -> str:
    """A fresh `s3://lake/<random>` prefix on moto for one test."""
    return f"s3://{BUCKET}/{uuid.uuid4().hex}"


def s3_warehouse(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh warehouse prefix on moto for one test, its SQLite catalog in a per-test cache folder."""
    request.getfixturevalue("moto_s3")
    request.getfixturevalue("monkeypatch").setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    return f"s3://{BUCKET}/{uuid.uuid4().hex}/wh"


def pyiceberg_properties(path: str) -> dict[str, str]:
    """PyIceberg FileIO properties reaching the S3 server iceduck's settings name for `path`
    (empty for local paths), so PyIceberg can read S3 tables as an independent reader."""
    if not s3_settings.is_s3(path):
        return {}
    settings = s3_settings.REGISTRY.settings_for(path)
    props = {
        "s3.endpoint": settings.endpoint,
        "s3.access-key-id": settings.access_key_id,
        "s3.secret-access-key": settings.secret_access_key,
        "s3.region": settings.region,
        "s3.path-style-access": None if settings.path_style is None else str(settings.path_style).lower(),
    }
    return {k: v for k, v in props.items() if v is not None}


def peer_reads_s3(peer: Any, path: str) -> None:
    """Give the reference peer httpfs and a secret for the S3 server of `path` (no-op when local)."""
    secret = peer_secret_sql(path)
    if secret is not None:
        peer.execute(f"LOAD '{peer.extension_path('httpfs')}'")
        peer.execute(secret)


def peer_secret_sql(path: str, name: str = "iceduck_s3") -> str | None:
    """The `CREATE SECRET (TYPE s3, ...)` giving the reference peer (DuckDB with httpfs) the S3
    server iceduck's settings name for `path`; None for local paths."""
    if not s3_settings.is_s3(path):
        return None
    settings = s3_settings.REGISTRY.settings_for(path)
    endpoint = settings.endpoint or ""
    use_ssl = not endpoint.startswith("http://")
    host = endpoint.split("://", 1)[-1]
    style = "path" if settings.path_style else "vhost"
    return (
        f"CREATE OR REPLACE SECRET {name} (TYPE s3, KEY_ID '{settings.access_key_id}', "
        f"SECRET '{settings.secret_access_key}', REGION '{settings.region or 'us-east-1'}', "
        f"ENDPOINT '{host}', URL_STYLE '{style}', USE_SSL {str(use_ssl).lower()})"
    )
