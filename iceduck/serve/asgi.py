"""HTTP for `iceduck serve`: an ASGI application around a synchronous handler, run by uvicorn.

The HTTP/1.1 parsing, framing and keep-alive are uvicorn's with the httptools (llhttp) parser, chosen
in benchmarks/README.md ("REST transport") for refusing ambiguous framing (Content-Length together
with Transfer-Encoding, bare LF line ends, obs-fold, malformed chunks: 400 and the connection closed).
This module adds what uvicorn leaves to the application:

- every answer is JSON, in the spec's `IcebergErrorResponse` for every error status, uvicorn's own
  refusals (malformed request, header limits) included;
- bounds: the request head (`Limits.max_head_bytes`, `max_headers`), the body (413), the JSON
  nesting depth and integer sizes (400, never a `RecursionError` or a 4,300-digit `ValueError`);
- timeouts: a request head must arrive within `head_timeout_s` (a slow trickle of header lines is
  cut), a body within `body_timeout_s` of its head (408), an idle keep-alive connection is closed
  after `keep_alive_s`;
- every response sent before its request body was read whole carries `Connection: close`, so no
  unread body can be read as the next request (the parser frames bodies; this is belt and braces);
- the handler runs on a thread pool (the catalog and file I/O block), so a slow request holds one
  thread, and a slow client none;
- errors never name the server's paths: the paths in `hide` (the warehouse root, the catalog file)
  are replaced by `<warehouse>` in every message, and an unexpected exception answers 500 with a
  request id only (the traceback goes to the log under that id).

uvicorn is imported when a server starts, so the `iceduck` command and `iceduck serve --help` do not
pay for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import logging
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote

import msgspec

from iceduck.errors import IcebergError
from iceduck.rest import protocol as wire

log = logging.getLogger("iceduck.serve")


@dataclass(frozen=True, slots=True)
class Limits:
    """What one request may be and take. The defaults are `iceduck serve`'s."""

    max_body: int = 64 * 1024 * 1024  # bytes; a larger body is refused (413) before it is read
    max_headers: int = 100  # header lines in one request (431)
    max_head_bytes: int = 64 * 1024  # request line and headers together (431)
    max_json_depth: int = 64  # nested arrays/objects in a JSON body (400); a deep schema needs ~25
    max_int_bits: int = 64  # integers in a JSON body beyond +-2^64 are refused (400): no Iceberg
    # field holds more (decimals travel as strings)
    max_name_bytes: int = 255  # one namespace level or table name in UTF-8 (a folder name on disk)
    head_timeout_s: float = 30.0  # from a connection's first byte (or its last response) to a whole head
    body_timeout_s: float = 60.0  # from a request's head to the end of its body (408)
    keep_alive_s: int = 30  # an idle keep-alive connection is closed after this long
    backlog: int = 1024  # the listen queue
    threads: int = 16  # requests handled at once (the rest wait for a thread, not for the socket)


class HttpError(Exception):
    """An error answered as the spec's `IcebergErrorResponse`."""

    def __init__(
        self, code: int, error_type: str, message: str, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.error_type = error_type
        self.message = message
        self.headers = headers  # e.g. a 405's Allow


@dataclass(frozen=True, slots=True)
class Reply:
    """A response: status, JSON body (None: no body) and extra headers."""

    status: int
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()


NO_CONTENT = Reply(204)


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request as the handler sees it; `body` is read whole before the handler runs."""

    method: str
    path: str  # as sent, still percent-encoded
    parts: tuple[str, ...]  # the path's segments, each decoded after splitting (a name may hold '/')
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]  # lower-case names; a repeated header's values joined by ", "
    client: str
    body: bytes = b""
    limits: Limits = field(default_factory=Limits)

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")

    def json(self) -> Any:
        """The body as JSON (None when empty); 400 for malformed JSON, nesting deeper than
        `max_json_depth` or an integer beyond `max_int_bits`."""
        if not self.body:
            return None
        limits = self.limits
        try:
            value = msgspec.json.decode(self.body)
        except RecursionError:
            raise _too_deep(limits) from None
        except msgspec.ValidationError as e:  # numbers out of range (msgspec's own bound)
            raise HttpError(400, wire.BAD_REQUEST, f"request body holds a number out of range: {e}") from None
        except msgspec.DecodeError as e:
            # the stdlib reads what msgspec refuses but JSON allows (a lone surrogate escape, which
            # the name checks then refuse by name); not a deep value: msgspec raised RecursionError
            try:
                value = json.loads(self.body)
            except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, 4,300+ digits
                raise HttpError(400, wire.BAD_REQUEST, f"request body is not valid JSON: {e}") from None
        _check_json(value, limits)
        return value


def _too_deep(limits: Limits) -> HttpError:
    return HttpError(
        400, wire.BAD_REQUEST, f"request body nests JSON deeper than {limits.max_json_depth} levels"
    )


def _check_json(value: Any, limits: Limits) -> None:
    """`HttpError` 400 when `value` nests deeper than the limit or holds an integer out of range
    (iterative: a deep value must not exhaust the stack here either)."""
    bound = 1 << limits.max_int_bits
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if type(item) is int:
            if not -bound <= item < bound:
                raise HttpError(
                    400, wire.BAD_REQUEST, f"request body holds an integer beyond {limits.max_int_bits} bits"
                )
            continue
        if depth > limits.max_json_depth:
            raise _too_deep(limits)
        if not isinstance(item, dict | list):
            continue
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, dict | list) or type(child) is int:
                stack.append((child, depth + 1))


class Handler(Protocol):
    """What the application calls: `authorize` before the body is read (cheap, no I/O), `handle`
    on a worker thread with the body, `is_commit` to type a 500 (a commit's outcome is unknown)."""

    def authorize(self, request: Request) -> None: ...

    def handle(self, request: Request) -> Reply: ...

    def is_commit(self, request: Request) -> bool: ...


class _Disconnected(Exception):
    """The client went away before its request was read."""


class RestApp:
    """The ASGI application: a request in, limits checked, the handler on a thread, JSON out."""

    def __init__(
        self, handler: Handler, limits: Limits, executor: ThreadPoolExecutor, hide: Sequence[str] = ()
    ) -> None:
        self.handler = handler
        self.limits = limits
        self.executor = executor
        # longest first, so a path inside another is replaced whole
        self.hide = sorted({h for h in hide if h and len(h) > 1}, key=len, reverse=True)

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]
    ) -> None:
        if scope["type"] != "http":  # lifespan is off and websockets are not offered
            return
        started = time.monotonic()
        body_read = False
        request: Request | None = None
        try:
            request = self._request(scope)
            self.handler.authorize(request)
            request = replace(request, body=await self._read_body(request, receive))
            body_read = True
            loop = asyncio.get_running_loop()
            reply = await loop.run_in_executor(self.executor, self._handle, request)
        except HttpError as e:
            reply = self.error_reply(e.code, e.error_type, e.message, e.headers)
        except _Disconnected:
            return
        await self._send(send, scope["method"], reply, close=not body_read)
        log.info(
            "%s %s %s %d %.1fms",
            (scope.get("client") or ("-",))[0],
            scope["method"],
            request.path if request is not None else scope.get("path", ""),
            reply.status,
            (time.monotonic() - started) * 1000,
        )

    def _request(self, scope: Mapping[str, Any]) -> Request:
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        if "transfer-encoding" in headers and "content-length" in headers:
            # the parser refuses this already; framing two ways must never reach a handler
            raise HttpError(
                400, wire.BAD_REQUEST, "a request cannot carry both Content-Length and Transfer-Encoding"
            )
        raw_path = scope.get("raw_path") or scope["path"].encode()
        path = raw_path.decode("latin-1")
        # split before decoding: a namespace may contain an encoded '/'
        parts = tuple(unquote(p) for p in path.split("/") if p)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        client = (scope.get("client") or ("-",))[0]
        return Request(scope["method"], path, parts, query, headers, str(client), limits=self.limits)

    async def _read_body(self, request: Request, receive: Callable[..., Any]) -> bytes:
        limits = self.limits
        declared = request.header("content-length")
        if declared:
            if not declared.isdigit():  # the parser refuses this already
                raise HttpError(400, wire.BAD_REQUEST, f"invalid Content-Length {declared[:40]!r}")
            if int(declared) > limits.max_body:
                raise _too_large(int(declared), limits)
        elif "transfer-encoding" not in request.headers:
            return b""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.body_timeout_s
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
            except TimeoutError:
                raise HttpError(
                    408,
                    wire.BAD_REQUEST,
                    f"the request body did not arrive within {limits.body_timeout_s:g} s",
                ) from None
            if message["type"] == "http.disconnect":
                raise _Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limits.max_body:
                raise _too_large(size, limits)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _handle(self, request: Request) -> Reply:
        """The handler's reply, or its error as the spec's error response (on a worker thread)."""
        # a path the client itself sent may come back in a message; the others are hidden
        sent = request.path + request.body.decode("utf-8", "replace")
        try:
            return self.handler.handle(request)
        except HttpError as e:
            return self.error_reply(e.code, e.error_type, e.message, e.headers, sent=sent)
        except IcebergError as e:
            code, error_type = wire.error_status(e)
            return self.error_reply(code, error_type, str(e), sent=sent)
        except RecursionError:
            return self.error_reply(400, wire.BAD_REQUEST, "the request nests too deep to be read")
        except Exception:  # the spec's 500; for a commit, the outcome is unknown
            incident = secrets.token_hex(6)
            log.exception("%s %s failed (incident %s)", request.method, request.path, incident)
            commit = self._is_commit(request)
            error_type = wire.COMMIT_STATE_UNKNOWN if commit else wire.SERVER_ERROR
            outcome = "; the commit may or may not have been applied" if commit else ""
            return self.error_reply(
                500, error_type, f"internal server error (incident {incident} in the server's log){outcome}"
            )

    def _is_commit(self, request: Request) -> bool:
        with contextlib.suppress(Exception):
            return self.handler.is_commit(request)
        return False

    def error_reply(
        self,
        code: int,
        error_type: str,
        message: str,
        headers: tuple[tuple[str, str], ...] = (),
        *,
        sent: str = "",
    ) -> Reply:
        """The spec's error response; the server's paths in `message` become `<warehouse>`, unless
        the client sent that path itself (`sent`: its request's path and body)."""
        for path in self.hide:
            if path not in sent:
                message = message.replace(path, "<warehouse>")
        return Reply(code, wire.error_body(code, error_type, message), headers)

    async def _send(self, send: Callable[..., Any], method: str, reply: Reply, *, close: bool) -> None:
        data = b"" if reply.body is None else msgspec.json.encode(reply.body)
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers]
        if reply.body is not None:
            headers.append((b"content-type", b"application/json"))
        if reply.status not in (204, 304):
            headers.append((b"content-length", str(len(data)).encode()))
        if close:
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else data})


def _too_large(size: int, limits: Limits) -> HttpError:
    return HttpError(
        413, wire.BAD_REQUEST, f"request body of {size} bytes refused: at most {limits.max_body} bytes"
    )


# -- uvicorn -----------------------------------------------------------------------------------------


def _error_bytes(status: int, message: str, default_headers: Sequence[tuple[bytes, bytes]]) -> bytes:
    """A whole `Connection: close` response in the spec's error format, for refusals made before
    any application sees the request."""
    body = msgspec.json.encode(wire.error_body(status, wire.BAD_REQUEST, message))
    lines = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n".encode()]
    lines += [name + b": " + value + b"\r\n" for name, value in default_headers]
    lines += [
        b"content-type: application/json\r\n",
        b"content-length: " + str(len(body)).encode() + b"\r\n",
        b"connection: close\r\n\r\n",
        body,
    ]
    return b"".join(lines)


class _HeadRefused(Exception):
    """Raised from a parser callback: the request head is over a limit."""


def _protocol_class(limits: Limits) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with head limits, a head timeout and JSON refusals."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class BoundedProtocol(HttpToolsProtocol):
        _head_timer: asyncio.TimerHandle | None = None
        _in_head = False  # between a request's first byte and the end of its headers
        _head_bytes = 0
        _header_count = 0
        _refusal: tuple[int, str] | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_head = True
            self._head_bytes = self._header_count = 0
            if self._head_timer is None:
                self._arm_head_timer()

        def on_url(self, url: bytes) -> None:
            self._count(len(url), 0)
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value) + 4, 1)
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._cancel_head_timer()
            super().on_headers_complete()

        def _count(self, size: int, headers: int) -> None:
            self._head_bytes += size
            self._header_count += headers
            if self._header_count > limits.max_headers:
                self._refusal = (431, f"a request may carry at most {limits.max_headers} header lines")
                raise _HeadRefused
            if self._head_bytes > limits.max_head_bytes:
                self._refusal = (431, f"a request head may hold at most {limits.max_head_bytes} bytes")
                raise _HeadRefused

        def _arm_head_timer(self) -> None:
            self._cancel_head_timer()
            self._head_timer = self.loop.call_later(limits.head_timeout_s, self._head_timed_out)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.transport.is_closing():
                return
            if self._in_head:
                message = f"the request head did not arrive within {limits.head_timeout_s:g} s"
                self.transport.write(_error_bytes(408, message, self.server_state.default_headers))
                self.transport.close()
            elif self.cycle is None:  # connected and silent
                self.transport.close()

        def send_400_response(self, msg: str) -> None:
            status, message = self._refusal or (400, "malformed HTTP request")
            self._refusal = None
            self._cancel_head_timer()
            self.transport.write(_error_bytes(status, message, self.server_state.default_headers))
            self.transport.close()

    return BoundedProtocol


def bind(host: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket (IPv6 when `host` is an IPv6 address); port 0 picks a free one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose proto says TCP,
    # and with Nagle on, a response's head and body meet the client's delayed ACK (~40 ms a request)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class HttpServer:
    """`RestApp` served by uvicorn on a socket bound at construction (so `address` is known at
    once), in a background thread; `stop()` stops accepting, lets requests in flight finish, and
    closes the socket."""

    def __init__(
        self,
        handler: Handler,
        host: str,
        port: int,
        *,
        limits: Limits | None = None,
        hide: Sequence[str] = (),
    ) -> None:
        self.limits = limits or Limits()
        self.socket = bind(host, port, self.limits.backlog)
        self.address: tuple[str, int] = self.socket.getsockname()[:2]
        self.executor = ThreadPoolExecutor(self.limits.threads, thread_name_prefix="iceduck-serve")
        self.app = RestApp(handler, self.limits, self.executor, hide)
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        import uvicorn

        config = uvicorn.Config(
            self.app,
            http=_protocol_class(self.limits),
            loop="asyncio",
            lifespan="off",
            ws="none",
            interface="asgi3",
            access_log=False,
            log_config=None,
            log_level=logging.WARNING,
            server_header=False,
            timeout_keep_alive=self.limits.keep_alive_s,
            backlog=self.limits.backlog,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="iceduck-serve", daemon=True)
        self._thread.start()
        while not self._server.started and self._thread.is_alive():
            time.sleep(0.005)

    def _run(self) -> None:
        self._server.run(sockets=[self.socket])

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the server has stopped; True once it has."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def stop(self) -> None:
        with self._lock:
            if self._server is not None:
                self._server.should_exit = True
            self.wait()
            self._thread = None
            self.executor.shutdown(wait=True)
            self.socket.close()
