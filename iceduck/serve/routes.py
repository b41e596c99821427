"""`iceduck serve`'s routes: `Router` maps each HTTP request to a `Warehouse` operation.

It checks the bearer token (`Tokens`, issued at `POST /v1/oauth/tokens`), refuses requests from web
browsers, parses the path, query and body of each endpoint of the REST spec this server implements
(`ENDPOINTS`), and answers the rest with the spec's errors.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from iceduck.errors import (
    NamespaceNotFoundError,
    TableNotFoundError,
    ValidationError,
)
from iceduck.rest import protocol as wire
from iceduck.serve.asgi import NO_CONTENT, HttpError, Reply, Request
from iceduck.serve.views import VIEW_ENDPOINTS, ViewOperations
from iceduck.serve.views import route as view_route
from iceduck.serve.warehouse import MetricsLog, Warehouse, shown
from iceduck.spec.table_metadata import read_table_metadata

log = logging.getLogger("iceduck.serve")

TOKEN_LIFETIME_S = 3600


# headers only browsers send (on every cross-origin request, every POST, and every fetch of a
# current browser); no catalog client (PyIceberg, Java, DuckDB) sends them
BROWSER_HEADERS = ("Origin", "Sec-Fetch-Site", "Sec-Fetch-Mode")


ENDPOINTS = (
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/transactions/commit",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister",
    *VIEW_ENDPOINTS,  # iceduck/serve/views.py
)


@dataclass(slots=True)
class Tokens:
    """Bearer tokens this server issued, with their expiry (monotonic seconds), oldest first.

    Every token lives equally long, so the dict's order (issue order) is expiry order: an issue
    drops the expired ones from the front, and the oldest live ones beyond `max_live`, in time
    proportional to what it drops (rebuilding the dict on each issue made the 50,000th issue take
    ~5 ms under the lock every request's check takes: a stall anyone allowed to ask for tokens
    could cause)."""

    lifetime_s: int = TOKEN_LIFETIME_S
    max_live: int = 100_000
    issued: dict[str, float] = dataclasses.field(default_factory=dict)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def issue(self, *, keep: bool = True) -> str:
        """A new token; `keep=False` (a server without credentials checks no token) stores nothing."""
        token = secrets.token_urlsafe(32)
        if not keep:
            return token
        now = time.monotonic()
        with self.lock:
            while self.issued:
                oldest = next(iter(self.issued))
                if self.issued[oldest] > now and len(self.issued) < self.max_live:
                    break
                del self.issued[oldest]
            self.issued[token] = now + self.lifetime_s
        return token

    def valid(self, token: str) -> bool:
        with self.lock:
            expiry = self.issued.get(token)
        return expiry is not None and expiry > time.monotonic()


_COMMIT_ROUTES = (("transactions", "commit"),)


class Router:
    """Routes a request to `Warehouse`: authentication, the token endpoint, config, every REST route,
    and the names in paths and bodies checked (length, control characters) before they reach it."""

    def __init__(
        self,
        warehouse: Warehouse,
        credentials: tuple[str, str] | None,
        tokens: Tokens,
        metrics: MetricsLog,
    ) -> None:
        self.warehouse = warehouse
        self.views = ViewOperations(warehouse)
        self.credentials = credentials
        self.tokens = tokens
        self.metrics = metrics

    # -- the asgi.Handler interface ---------------------------------------------------------------

    def authorize(self, request: Request) -> None:
        if any(request.header(h) for h in BROWSER_HEADERS):
            # A loopback server without credentials is otherwise any web page's: a cross-site
            # text/plain POST needs no preflight, and DNS rebinding makes the page same-origin.
            raise HttpError(
                403, wire.FORBIDDEN, "requests from a web browser are refused (Origin or Sec-Fetch-* header)"
            )
        if list(request.parts) == ["v1", "oauth", "tokens"]:
            return
        self._authenticate(request)

    def handle(self, request: Request) -> Reply:
        return self._vend(request, self._dispatch(request))

    def is_commit(self, request: Request) -> bool:
        """A table or view commit or a transaction: a 500 leaves its outcome unknown."""
        rest = request.parts[2:]
        if request.method != "POST":
            return False
        return tuple(rest) in _COMMIT_ROUTES or (
            len(rest) == 4 and rest[0] == "namespaces" and rest[2] in ("tables", "views")
        )

    # -- routes -----------------------------------------------------------------------------------

    def _json(self, request: Request) -> Any:
        """The body as JSON, its table and namespace names checked."""
        body = request.json()
        _check_body_names(body, request.limits.max_name_bytes)
        return body

    def _dispatch(self, request: Request) -> Reply:
        method, parts, query = request.method, list(request.parts), request.query
        _check_common_parameters(request)
        if parts[:3] == ["v1", "oauth", "tokens"] and len(parts) == 3:
            if method != "POST":
                raise _no_method(method, "POST")
            return self._token(request)
        if parts[:1] != ["v1"] or len(parts) < 2:
            raise HttpError(404, wire.BAD_REQUEST, f"no such route: {method} {request.path}")
        if parts[1] == "config" and len(parts) == 2:
            if method != "GET":
                raise _no_method(method, "GET")
            return Reply(200, self._config())
        rest = parts[2:]  # after the prefix
        warehouse = self.warehouse
        # /v1/{prefix}/namespaces...
        if rest[:1] == ["namespaces"]:
            return self._namespaces(request, method, rest[1:], query)
        if rest == ["tables", "rename"]:
            _only(method, "POST")
            warehouse.rename_table(self._json(request))
            return NO_CONTENT
        if rest == ["transactions", "commit"]:
            _only(method, "POST")
            warehouse.commit_transaction(self._json(request))
            return NO_CONTENT
        if rest == ["views", "rename"]:
            _only(method, "POST")
            return self.views.rename_view(self._json(request), request.limits.max_name_bytes)
        raise HttpError(404, wire.BAD_REQUEST, f"no such route: {method} {request.path}")

    def _namespaces(
        self, request: Request, method: str, rest: list[str], query: Mapping[str, list[str]]
    ) -> Reply:
        warehouse = self.warehouse
        limit = request.limits.max_name_bytes
        if not rest:
            if method == "GET":
                parent = (query.get("parent") or [""])[0]
                parent_name = _checked_namespace(parent, limit) if parent else None
                return Reply(200, warehouse.list_namespaces(parent_name))
            if method == "POST":
                return Reply(200, warehouse.create_namespace(self._json(request)))
            raise _no_method(method, "GET, POST")
        namespace = _checked_namespace(rest[0], limit)
        tail = rest[1:]
        if not tail:
            if method == "GET":
                return Reply(200, warehouse.load_namespace(namespace))
            if method == "HEAD":
                if not warehouse.catalog.namespace_exists(namespace):
                    raise NamespaceNotFoundError(f"namespace '{namespace}' does not exist")
                return NO_CONTENT
            if method == "DELETE":
                warehouse.drop_namespace(namespace)
                return NO_CONTENT
            raise _no_method(method, "GET, HEAD, DELETE")
        if tail == ["properties"]:
            _only(method, "POST")
            body = self._json(request)
            if isinstance(body, dict):
                # checked here too: the operation reads a falsy value ({} or null) as "none"
                if ("updates" in body and not isinstance(body["updates"], dict)) or (
                    "removals" in body and not isinstance(body["removals"], list)
                ):
                    raise ValidationError("'updates' must be an object and 'removals' a list")
                removals = body.get("removals")
                if isinstance(removals, list) and len(set(map(repr, removals))) < len(removals):
                    raise ValidationError("'removals' names a key twice")
            return Reply(200, warehouse.update_namespace_properties(namespace, body))
        if tail == ["register"]:
            _only(method, "POST")
            return warehouse.register_table(namespace, self._json(request))
        viewed = view_route(self.views, method, namespace, tail, lambda: self._json(request), limit)
        if viewed is not None:  # the view routes: iceduck/serve/views.py
            return viewed
        # Functions: this catalog has none; each answer is one the spec documents for its route.
        if tail == ["functions"] and method == "GET":
            warehouse.catalog.list_tables(namespace)  # 404 for a missing namespace
            return Reply(200, {"identifiers": []})
        if tail[:1] == ["functions"] and len(tail) == 2 and method == "GET":
            raise HttpError(
                404, wire.NO_SUCH_FUNCTION, f"no function {shown(tail[1])}: this catalog has no functions"
            )
        if tail[:1] != ["tables"]:
            raise HttpError(404, wire.BAD_REQUEST, f"no such route: {method} {request.path}")
        if len(tail) == 1:
            if method == "GET":
                return Reply(200, warehouse.list_tables(namespace))
            if method == "POST":
                return warehouse.create_table(namespace, self._json(request))
            raise _no_method(method, "GET, POST")
        name = _check_name(tail[1], "table name", limit)
        if len(tail) == 2:
            if method == "GET":
                snapshots = (query.get("snapshots") or ["all"])[0]
                if snapshots not in ("all", "refs"):
                    raise ValidationError(f"'snapshots' must be 'all' or 'refs', not {shown(snapshots)}")
                return warehouse.load_table(namespace, name, snapshots)
            if method == "HEAD":
                if not warehouse.table_exists(namespace, name):
                    raise TableNotFoundError(f"table {namespace}.{name} does not exist")
                return NO_CONTENT
            if method == "POST":
                return warehouse.commit_table(namespace, name, self._json(request))
            if method == "DELETE":
                purge = (query.get("purgeRequested") or ["false"])[0].lower()
                if purge not in ("true", "false"):
                    raise ValidationError(f"'purgeRequested' must be true or false, not {shown(purge)}")
                warehouse.drop_table(namespace, name, purge == "true")
                return NO_CONTENT
            raise _no_method(method, "GET, HEAD, POST, DELETE")
        if tail[2:] == ["metrics"]:
            _only(method, "POST")
            report = self._json(request)
            if not isinstance(report, dict) or not isinstance(report.get("report-type"), str):
                raise ValidationError("a metrics report is a JSON object with a 'report-type'")
            if not warehouse.table_exists(namespace, name):
                raise TableNotFoundError(f"table {namespace}.{name} does not exist")
            self.metrics.write(namespace, name, report, request.client)
            return NO_CONTENT
        if tail[2:] == ["credentials"]:
            _only(method, "GET")
            if not warehouse.table_exists(namespace, name):
                raise TableNotFoundError(f"table {namespace}.{name} does not exist")
            location = warehouse.catalog.load_table(namespace, name)
            table_location = read_table_metadata(warehouse.io.read(location), path=location).location
            return Reply(200, {"storage-credentials": warehouse.storage_credentials(table_location)})
        if tail[2:] == ["unregister"]:
            _only(method, "POST")
            return Reply(200, warehouse.unregister_table(namespace, name))
        # server-side scan planning and remote signing are not offered: clients plan and sign
        if tail[2:] == ["plan"] and method == "POST":
            raise HttpError(
                400, wire.UNSUPPORTED, "server-side scan planning is not offered: plan on the client"
            )
        if tail[2:3] == ["plan"] and len(tail) == 4:
            raise HttpError(
                404, wire.NO_SUCH_PLAN_ID, f"no scan plan {shown(tail[3])}: this catalog does not plan scans"
            )
        if tail[2:] == ["tasks"] and method == "POST":
            raise HttpError(404, wire.NO_SUCH_PLAN_TASK, "no plan task: this catalog does not plan scans")
        if tail[2:] == ["sign"] and method == "POST":
            raise HttpError(400, wire.UNSUPPORTED, "remote signing is not offered: tables are read directly")
        raise HttpError(404, wire.BAD_REQUEST, f"no such route: {method} {request.path}")

    def _config(self) -> dict[str, Any]:
        return {
            "defaults": {},
            "overrides": {"prefix": self.warehouse.prefix},
            "endpoints": list(ENDPOINTS),
        }

    def _vend(self, request: Request, reply: Reply) -> Reply:
        """A table result (load, create, register, commit) with the table's S3 settings in `config`
        and `storage-credentials`, when the client asked for vended credentials."""
        delegation = request.header(wire.ACCESS_DELEGATION_HEADER)
        body = reply.body
        if "vended-credentials" not in delegation or not isinstance(body, dict) or "config" not in body:
            return reply
        location = (body.get("metadata") or {}).get("location")
        if not isinstance(location, str):
            return reply
        credentials = self.warehouse.storage_credentials(location)
        if not credentials:
            return reply
        vended = {
            **body,
            "config": {**body["config"], **credentials[0]["config"]},
            "storage-credentials": credentials,
        }
        return dataclasses.replace(reply, body=vended)

    def _authenticate(self, request: Request) -> None:
        if self.credentials is None:
            return
        scheme, _, token = request.header("Authorization").partition(" ")
        if scheme.lower() != "bearer" or not self.tokens.valid(token.strip()):
            raise HttpError(401, wire.NOT_AUTHORIZED, "missing, invalid or expired bearer token")

    def _token(self, request: Request) -> Reply:
        try:
            form = {k: v[0] for k, v in parse_qs(request.body.decode(), keep_blank_values=True).items()}
        except UnicodeDecodeError:
            form = {}
        grant = form.get("grant_type")
        if grant != "client_credentials":
            return _oauth_error(
                400, "unsupported_grant_type", f"grant_type {shown(grant)}: only client_credentials"
            )
        client_id, client_secret = form.get("client_id"), form.get("client_secret")
        header = request.header("Authorization")
        if header.lower().startswith("basic "):
            try:
                decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
            except (ValueError, UnicodeDecodeError):
                return _oauth_error(400, "invalid_request", "malformed Basic authorization header")
            client_id, _, client_secret = decoded.partition(":")
        expected = self.credentials
        if expected is not None and not (
            client_id is not None
            and client_secret is not None
            and secrets.compare_digest(client_id.encode(), expected[0].encode())
            and secrets.compare_digest(client_secret.encode(), expected[1].encode())
        ):
            return _oauth_error(401, "invalid_client", "unknown client id or wrong secret")
        body = {
            "access_token": self.tokens.issue(keep=expected is not None),
            "token_type": "bearer",
            "expires_in": self.tokens.lifetime_s,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        }
        if form.get("scope"):
            body["scope"] = form["scope"]
        return Reply(200, body)


def _no_method(method: str, allowed: str) -> HttpError:
    return HttpError(
        405,
        wire.BAD_REQUEST,
        f"method {shown(method)} is not allowed here: use {allowed}",
        (("Allow", allowed),),
    )


def _check_common_parameters(request: Request) -> None:
    """The spec's parameters this server accepts and does not use, checked as the spec types them:
    `pageSize` (an integer >= 1; every list fits one page here) and `Idempotency-Key` (a UUID)."""
    for size in request.query.get("pageSize", []):
        if not (size.isascii() and size.isdigit() and int(size[:12]) > 0 and len(size) <= 12):
            raise ValidationError(f"'pageSize' must be a positive integer, not {shown(size)}")
    key = request.headers.get("idempotency-key")
    if key is not None:
        try:
            if len(key) != 36:
                raise ValueError(key)
            uuid.UUID(key)
        except ValueError:
            raise ValidationError(f"Idempotency-Key must be a UUID, not {shown(key)}") from None


def _only(method: str, allowed: str) -> None:
    if method != allowed:
        raise _no_method(method, allowed)


def _oauth_error(code: int, error: str, description: str) -> Reply:
    return Reply(code, {"error": error, "error_description": description})


def _check_name(name: str, what: str, limit: int) -> str:
    """`name` when it is a usable namespace level or table name: at most `limit` bytes in UTF-8
    (it becomes a folder name) and no control characters; `ValidationError` naming the problem."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValidationError(f"{what} {shown(name)} is {size} bytes long: at most {limit} bytes")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise ValidationError(f"{what} {shown(name)} contains a control character")
    return name


def _checked_namespace(segment: str, limit: int) -> str:
    """A namespace path segment (or `parent`) decoded, each level checked."""
    for level in segment.split(wire.NAMESPACE_SEPARATOR):
        _check_name(level, "namespace level", limit)
    return wire.decode_namespace(segment)


def _check_body_names(body: Any, limit: int) -> None:
    """The table and namespace names a request body gives (create, register, rename, commit,
    transaction), checked as `_check_name` does; other shapes are the operation's to refuse."""
    if not isinstance(body, dict):
        return
    identifiers = [body.get("identifier"), body.get("source"), body.get("destination")]
    changes = body.get("table-changes")
    if isinstance(changes, list):
        identifiers += [c.get("identifier") for c in changes if isinstance(c, dict)]
    named = [body, *(i for i in identifiers if isinstance(i, dict))]
    for obj in named:
        name, namespace = obj.get("name"), obj.get("namespace")
        if isinstance(name, str):
            _check_name(name, "table name", limit)
        if isinstance(namespace, list):
            for level in namespace:
                if isinstance(level, str):
                    _check_name(level, "namespace level", limit)
