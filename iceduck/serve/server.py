"""`iceduck serve`: a warehouse's SQLite catalog as an Iceberg REST catalog.

    iceduck serve --warehouse ./warehouse --port 8181                  # loopback, no auth
    iceduck serve --warehouse ./wh --host 0.0.0.0 --credentials id:secret

The server reads and writes the same `<warehouse>/catalog.db` the embedded lake uses, so the shell,
notebooks and REST clients (DuckDB's iceberg extension, PyIceberg, iceduck's own client) share one
warehouse. Table metadata files are written by the server for every table it creates or commits to
(`<version>-<uuid>.metadata.json`, a new file per commit, as the embedded catalog does), and the
catalog pointer moves by compare-and-swap.

Commits (`POST .../tables/{t}` and `POST .../transactions/commit`): every requirement is checked
against the table's current metadata, the updates are applied to it (`iceduck.spec.updates`), the
new metadata file is written, and the pointer swaps only if nobody moved it meanwhile; when another
process did, the requirements are checked again on the new state (409 naming the requirement when
one fails). A transaction's tables swap together in one SQLite transaction, or none does.

Authentication is OAuth2 client credentials (`POST /v1/oauth/tokens`, id and secret in HTTP Basic or
in the form), then `Authorization: Bearer <token>` on every request. It is off unless
`--credentials` is given; a server on a non-loopback address without it refuses to start unless
`--no-auth` says so. Requests from web browsers (an `Origin` or `Sec-Fetch-*` header) are refused
with 403: a page the operator opens could otherwise drive a loopback server without credentials
(cross-site POSTs, DNS rebinding). Every request is logged (method, path, status, milliseconds).
SIGINT/SIGTERM stop accepting requests, let the ones in flight finish, and exit. The HTTP (framing, bounds,
timeouts, JSON errors for every status) is `iceduck.serve.asgi`, run by uvicorn; `routes.Router`
maps requests to `warehouse.Warehouse`, the operations. Metrics reports go to `serve-metrics.jsonl` beside `catalog.db`.

Vended credentials (off unless `--vend-credentials`, which needs `--credentials`): for a table on
S3, a load/create/commit result asked for with `X-Iceberg-Access-Delegation: vended-credentials`
carries the server's own S3 settings for the table's location (`config` and `storage-credentials`,
PyIceberg's names); no STS, so only authenticated callers get them.

The location guard (`iceduck.io.paths.is_under`): every path a request names or implies (a table
location, `write.*.path` properties, register's metadata file, a commit's manifest lists, manifests,
statistics and partition statistics files, the folder of the next metadata file) is normalised
(`..`, `.`, `//`, percent-encoding, symlinks, scheme aliases and buckets) and must lie inside the
warehouse, and a table's files inside its location, before anything is read or written: else 400.
Purge deletes only files the table's metadata reaches inside its location, none of another table.

The server keeps a single warehouse: the `prefix` in paths is the one `/v1/config` hands out
(the catalog name), and other prefixes are accepted as the same warehouse.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import sys
import threading

from iceduck.commands import Command, register_command, sql_catalog_only
from iceduck.errors import IcebergError, ValidationError
from iceduck.io.storage import is_remote
from iceduck.serve.asgi import HttpServer, Limits
from iceduck.serve.routes import TOKEN_LIFETIME_S, Router, Tokens
from iceduck.serve.warehouse import MetricsLog, Warehouse

log = logging.getLogger("iceduck.serve")

DEFAULT_PORT = 8181


class RestServer:
    """`iceduck serve` as an object: `start()` serves in a background thread (tests), `stop()`
    finishes in-flight requests and closes the socket. Port 0 picks a free port. The transport is
    `iceduck.serve.asgi` (uvicorn); `limits` bounds what a request may be and take."""

    def __init__(
        self,
        warehouse: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        credentials: tuple[str, str] | None = None,
        token_lifetime_s: int = TOKEN_LIFETIME_S,
        vend_credentials: bool = False,
        limits: Limits | None = None,
    ) -> None:
        # vending hands out this server's own S3 keys: never to a caller nobody authenticated
        self.warehouse = Warehouse(warehouse, vend_credentials=vend_credentials and credentials is not None)
        catalog = self.warehouse.catalog
        folder = os.path.dirname(catalog.database)
        self.metrics = MetricsLog(self.warehouse.metrics_path)
        self.router = Router(self.warehouse, credentials, Tokens(token_lifetime_s), self.metrics)
        local_root = catalog.warehouse if catalog.warehouse and not is_remote(catalog.warehouse) else None
        hide = [p for p in (folder, local_root, catalog.database) if p]
        self.http = HttpServer(self.router, host, port, limits=limits, hide=hide)
        self._started = False

    @property
    def url(self) -> str:
        host, port = self.http.address
        host_text = f"[{host}]" if ":" in host else host
        return f"http://{host_text}:{port}"

    @property
    def port(self) -> int:
        return int(self.http.address[1])

    def start(self) -> RestServer:
        if not self._started:
            self._started = True
            self.http.start()
        return self

    def serve_forever(self) -> None:
        """Serve until `stop()` (from another thread or a signal handler)."""
        self.start()
        while not self.http.wait(0.5):
            pass

    def stop(self) -> None:
        self.http.stop()

    def __enter__(self) -> RestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- the command -----------------------------------------------------------------------------------


def _is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_credentials(text: str) -> tuple[str, str]:
    """`id:secret` -> (id, secret); `ValidationError` if either is empty."""
    client_id, colon, secret = text.partition(":")
    if not colon or not client_id or not secret:
        raise ValidationError("--credentials must be CLIENT_ID:CLIENT_SECRET")
    return client_id, secret


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free)"
    )
    parser.add_argument(
        "--credentials",
        metavar="ID:SECRET",
        help="require OAuth2 client credentials (then a bearer token on every request)",
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="serve a non-loopback address without authentication (anyone who reaches it can write)",
    )
    parser.add_argument(
        "--vend-credentials",
        action="store_true",
        help="hand this server's own S3 settings to authenticated clients asking for vended-credentials "
        "(needs --credentials; off by default)",
    )
    parser.add_argument(
        "--no-vended-credentials", action="store_true", help=argparse.SUPPRESS
    )  # the default now


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    refused = sql_catalog_only(args, "iceduck serve")
    if refused is not None:
        print(f"Error: {refused}", file=sys.stderr)
        return 2
    try:
        credentials = parse_credentials(args.credentials) if args.credentials else None
        if credentials is None and not args.no_auth and not _is_loopback(args.host):
            print(
                f"Error: refusing to serve {args.host} without authentication: give --credentials ID:SECRET "
                "(or --no-auth)",
                file=sys.stderr,
            )
            return 2
        if args.vend_credentials and credentials is None:
            print(
                "Error: --vend-credentials hands out this server's S3 keys: give --credentials ID:SECRET too",
                file=sys.stderr,
            )
            return 2
        server = RestServer(
            args.warehouse, host=args.host, port=args.port, credentials=credentials,
            vend_credentials=args.vend_credentials,
        )  # fmt: skip
    except (IcebergError, OSError) as e:
        print(f"Error: cannot serve {args.warehouse}: {e}", file=sys.stderr)
        return 1

    stopping = threading.Event()

    def stop(signum: int, frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.start()
    auth = "OAuth2 client credentials" if credentials else "no authentication"
    print(
        f"iceduck serve: warehouse {server.warehouse.catalog.warehouse} at {server.url} "
        f"(prefix {server.warehouse.prefix}, {auth}; metrics reports in {server.metrics.path}); Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    while not stopping.wait(0.5):
        pass
    server.stop()  # stops accepting, lets the requests in flight finish
    print("iceduck serve: stopped", file=sys.stderr)
    return 0


register_command(Command("serve", "Serve the warehouse as an Iceberg REST catalog", _configure, _run))

__all__ = ["RestServer", "parse_credentials"]
