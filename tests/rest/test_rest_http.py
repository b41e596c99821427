"""`iceduck serve` probed as an attacker would, over raw sockets (issue 24, items 4 and 6).

Request smuggling on every error path (401, 404, /sign, /plan), with Content-Length and chunked
bodies; answers that are always the spec's JSON error (405 for TRACE, 413, 431, a malformed request);
a body or head that never arrives whole; JSON nested 100k deep and integers of 5,000 digits; names
too long or with NUL; no internal exception type and no server path in any answer; and the spec's
report-metrics endpoint, whose reports land in `serve-metrics.jsonl` beside `catalog.db`.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iceduck.serve.asgi import Limits
from iceduck.serve.server import RestServer
from tests.support.rest_helpers import assert_error, call, serving

P = "/v1/iceduck"
SMUGGLED_NS = "smuggled"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestServer]:
    with serving(
        tmp_path / "wh", limits=Limits(max_body=256 * 1024, body_timeout_s=1, head_timeout_s=1)
    ) as s:
        assert call(s.url, "POST", f"{P}/namespaces", {"namespace": ["ns"]})[0] == 200
        yield s


# -- raw HTTP -------------------------------------------------------------------------------------


def _exchange(
    server: RestServer, data: bytes, expect: int = 0, wait: float = 3.0
) -> tuple[list[tuple[int, dict[str, str], bytes]], bytes]:
    """Send `data` on one connection and read until the server closes it, `expect` whole responses
    have come (0: no count), or `wait` s pass; the responses parsed in order, and the bytes after
    the last whole response."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=wait) as sock:
        sock.sendall(data)
        raw = b""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            raw += chunk
            if expect and len(_parse(raw)[0]) >= expect:
                break
    return _parse(raw)


def _parse(raw: bytes) -> tuple[list[tuple[int, dict[str, str], bytes]], bytes]:
    responses = []
    while b"\r\n\r\n" in raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        assert lines[0].startswith("HTTP/1.1 "), f"not a status line: {lines[0]!r}"
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        if len(rest) < length:
            break
        responses.append((status, headers, rest[:length]))
        raw = rest[length:]
    return responses, raw


def _request(method: str, path: str, body: bytes = b"", headers: str = "", *, chunked: bool = False) -> bytes:
    if chunked:
        framing = "Transfer-Encoding: chunked\r\n"
        payload = (b"%x\r\n" % len(body) + body + b"\r\n" if body else b"") + b"0\r\n\r\n"
    else:
        framing, payload = f"Content-Length: {len(body)}\r\n", body
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n{headers}{framing}\r\n"
    return head.encode() + payload


def _create_namespace_request(name: str = SMUGGLED_NS, headers: str = "") -> bytes:
    return _request("POST", f"{P}/namespaces", json.dumps({"namespace": [name]}).encode(), headers)


def _assert_json_error(response: tuple[int, dict[str, str], bytes], code: int) -> dict[str, Any]:
    status, headers, body = response
    assert headers.get("content-type") == "application/json", headers
    parsed = json.loads(body)
    assert_error(status, parsed, code, parsed["error"]["type"])
    return parsed["error"]


def _namespace_exists(
    server: RestServer, name: str = SMUGGLED_NS, headers: dict[str, str] | None = None
) -> bool:
    status = call(server.url, "HEAD", f"{P}/namespaces/{name}", headers=headers)[0]
    assert status in (204, 404), status
    return status == 204


# -- smuggling --------------------------------------------------------------------------------------

ERROR_ROUTES = [
    ("sign", "POST", f"{P}/namespaces/ns/tables/t/sign", 400),
    ("plan", "POST", f"{P}/namespaces/ns/tables/t/plan", 400),
    ("no route", "POST", "/v2/nothing", 404),
    ("no table", "DELETE", f"{P}/namespaces/ns/tables/missing", 404),
    ("no method", "PUT", f"{P}/namespaces", 405),
]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize(("route", "method", "path", "code"), ERROR_ROUTES, ids=[r[0] for r in ERROR_ROUTES])
def test_a_body_on_an_error_path_is_never_read_as_a_request(
    server: RestServer, route: str, method: str, path: str, code: int, chunked: bool
) -> None:
    # the body is a whole request: answered as part of the first, never run as a second one
    data = _request(method, path, _create_namespace_request(), chunked=chunked)
    responses, rest = _exchange(server, data + _request("GET", "/v1/config"), expect=2)
    assert [r[0] for r in responses] == [code, 200], responses
    _assert_json_error(responses[0], code)
    assert rest == b""
    assert not _namespace_exists(server)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_refused_token_does_not_run_the_request_in_its_body(tmp_path: Path, chunked: bool) -> None:
    with serving(tmp_path / "wh", credentials=("id", "secret")) as server:
        status, token, _ = call(
            server.url,
            "POST",
            "/v1/oauth/tokens",
            form={"grant_type": "client_credentials", "client_id": "id", "client_secret": "secret"},
        )
        assert status == 200
        bearer = f"Authorization: Bearer {token['access_token']}\r\n"
        inner = _create_namespace_request(headers=bearer)
        responses, _ = _exchange(server, _request("POST", f"{P}/namespaces", inner, chunked=chunked))
        assert [r[0] for r in responses] == [401]
        assert responses[0][1].get("connection") == "close"  # the unread body goes with the connection
        _assert_json_error(responses[0], 401)
        assert not _namespace_exists(server, headers={"Authorization": f"Bearer {token['access_token']}"})


def test_content_length_with_transfer_encoding_is_refused_and_the_connection_closed(
    server: RestServer,
) -> None:
    smuggled = _create_namespace_request()
    data = (
        f"POST {P}/namespaces/ns/tables/t/sign HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ).encode() + smuggled
    responses, _ = _exchange(server, data)
    assert [r[0] for r in responses] == [400]
    _assert_json_error(responses[0], 400)
    assert not _namespace_exists(server)


def test_keep_alive_serves_requests_one_after_another(server: RestServer) -> None:
    data = _request("GET", "/v1/config") + _request("GET", f"{P}/namespaces") + _request("GET", "/v1/config")
    responses, _ = _exchange(server, data, expect=3)
    assert [r[0] for r in responses] == [200, 200, 200]
    assert json.loads(responses[1][2]) == {"namespaces": [["ns"]]}


# -- every answer is the spec's JSON ------------------------------------------------------------------


@pytest.mark.parametrize("method", ["TRACE", "OPTIONS", "PATCH", "CONNECT"])
def test_other_methods_are_405_in_json(server: RestServer, method: str) -> None:
    target = "localhost:1" if method == "CONNECT" else f"{P}/namespaces"
    responses, _ = _exchange(server, f"{method} {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode(), expect=1)
    assert responses and responses[0][0] in (405, 400), responses
    _assert_json_error(responses[0], responses[0][0])
    if method == "TRACE":
        assert responses[0][0] == 405


@pytest.mark.parametrize(
    "data",
    [
        b"GARBAGE\r\n\r\n",
        b"FOO /v1/config HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /v1/config HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello",
        b"GET /v1/config HTTP/1.1\r\nHost: x\r\nBad Header: x\r\n\r\n",
        b"POST /v1/config HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nxx\r\n0\r\n\r\n",
    ],
    ids=["garbage", "unknown method", "signed length", "space in a name", "bad chunk"],
)
def test_a_malformed_request_gets_a_json_400_and_a_closed_connection(server: RestServer, data: bytes) -> None:
    responses, rest = _exchange(server, data + _request("GET", "/v1/config"), expect=2)
    assert [r[0] for r in responses] == [400], responses
    assert responses[0][1].get("connection") == "close"
    _assert_json_error(responses[0], 400)
    assert rest == b""


def test_no_route_is_a_json_404(server: RestServer) -> None:
    status, body, headers = call(server.url, "GET", "/nothing/here")
    assert_error(status, body, 404, "BadRequestException", "no such route")
    assert headers["Content-Type"] == "application/json"


def test_a_body_over_the_limit_is_413_before_it_is_read(server: RestServer) -> None:
    head = f"POST {P}/namespaces HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n".encode()
    responses, _ = _exchange(server, head + b"x" * 1000)
    assert [r[0] for r in responses] == [413]
    _assert_json_error(responses[0], 413)
    big = json.dumps({"namespace": ["x"], "properties": {"k": "v" * 300_000}}).encode()
    responses, _ = _exchange(server, _request("POST", f"{P}/namespaces", big, chunked=True))
    assert [r[0] for r in responses] == [413]
    assert not _namespace_exists(server, "x")


def test_too_many_or_too_large_headers_are_431_in_json(server: RestServer) -> None:
    many = "".join(f"X-H{i}: v\r\n" for i in range(200))
    responses, _ = _exchange(server, f"GET /v1/config HTTP/1.1\r\nHost: x\r\n{many}\r\n".encode())
    assert [r[0] for r in responses] == [431]
    _assert_json_error(responses[0], 431)
    large = "X-Big: " + "v" * 100_000 + "\r\n"
    responses, _ = _exchange(server, f"GET /v1/config HTTP/1.1\r\nHost: x\r\n{large}\r\n".encode())
    assert [r[0] for r in responses] == [431]


# -- timeouts -------------------------------------------------------------------------------------------


def test_a_body_shorter_than_its_length_is_408_after_the_body_timeout(server: RestServer) -> None:
    started = time.monotonic()
    head = f"POST {P}/namespaces HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n".encode()
    # meanwhile the server answers others
    other: list[int] = []
    t = threading.Thread(target=lambda: other.append(call(server.url, "GET", "/v1/config")[0]))
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head + b'{"namespace"')
        t.start()
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    t.join()
    responses, _ = _parse(raw)
    assert [r[0] for r in responses] == [408]
    _assert_json_error(responses[0], 408)
    assert time.monotonic() - started < 5  # body_timeout_s=1 in this fixture
    assert other == [200]


def test_a_head_that_never_ends_is_408_after_the_head_timeout(server: RestServer) -> None:
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /v1/config HTTP/1.1\r\nHost: x\r\n")
        raw = b""
        for _ in range(3):  # a header line now and then must not keep the connection
            time.sleep(0.3)
            with __import__("contextlib").suppress(OSError):
                sock.sendall(b"X-Slow: 1\r\n")
        while chunk := sock.recv(65536):
            raw += chunk
    responses, _ = _parse(raw)
    assert [r[0] for r in responses] == [408]
    _assert_json_error(responses[0], 408)
    assert time.monotonic() - started < 5


# -- bodies that used to answer 500 -------------------------------------------------------------------


def test_json_nested_100k_deep_is_a_400_not_a_500(server: RestServer) -> None:
    deep = b'{"namespace": ["d"], "properties": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    for path in (f"{P}/namespaces", f"{P}/namespaces/ns/tables/t", f"{P}/transactions/commit"):
        status, body, _ = call(server.url, "POST", path, deep)
        assert_error(status, body, 400, "BadRequestException", "deeper than")
    modest = json.dumps({"namespace": ["m"], "properties": {"k": "v"}, "x": [[[[[[1]]]]]]}).encode()
    assert call(server.url, "POST", f"{P}/namespaces", modest)[0] == 200


def test_integers_of_thousands_of_digits_are_a_400(server: RestServer) -> None:
    for digits in (30, 4301, 5000):
        body = b'{"namespace": ["i"], "properties": {"k": ' + b"9" * digits + b"}}"
        status, parsed, _ = call(server.url, "POST", f"{P}/namespaces", body)
        assert_error(status, parsed, 400, "BadRequestException")
    commit = (
        b'{"requirements": [], "updates": [{"action": "set-current-schema", "schema-id": '
        + b"7" * 5000
        + b"}]}"
    )
    status, parsed, _ = call(server.url, "POST", f"{P}/namespaces/ns/tables/t", commit)
    assert_error(status, parsed, 400, "BadRequestException")


def _create_table(server: RestServer, name: str) -> tuple[int, Any]:
    body = {"name": name, "schema": {"type": "struct", "schema-id": 0, "fields": []}}
    status, parsed, _ = call(server.url, "POST", f"{P}/namespaces/ns/tables", body)
    return status, parsed


def test_names_too_long_or_with_control_characters_are_400_without_paths(
    server: RestServer, tmp_path: Path
) -> None:
    for name in ("t" * 300, "a\x00b", "line\nfeed", "del\x7f"):
        status, body = _create_table(server, name)
        assert_error(status, body, 400, "BadRequestException", "table name")
        assert str(tmp_path) not in json.dumps(body)
    for ns in ("n" * 300, "a\x00b", "esc\x1b"):
        status, body, _ = call(server.url, "POST", f"{P}/namespaces", {"namespace": [ns]})
        assert_error(status, body, 400, "BadRequestException", "namespace level")
    status, body, _ = call(server.url, "GET", f"{P}/namespaces/ns/tables/{'t' * 300}")
    assert_error(status, body, 400, "BadRequestException", "at most 255 bytes")
    status, body, _ = call(server.url, "GET", f"{P}/namespaces/a%00b")
    assert_error(status, body, 400, "BadRequestException", "control character")
    assert _create_table(server, "t" * 255)[0] == 200  # the longest name a folder can have


def test_an_unexpected_failure_is_a_500_with_an_incident_not_an_exception(
    server: RestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(body: Any) -> Any:
        raise RuntimeError(f"disk trouble in {tmp_path}/wh/catalog.db")

    monkeypatch.setattr(server.warehouse, "create_namespace", broken)
    status, body, _ = call(server.url, "POST", f"{P}/namespaces", {"namespace": ["n"]})
    assert_error(status, body, 500, "InternalServerError", "incident")
    text = json.dumps(body)
    assert "RuntimeError" not in text and str(tmp_path) not in text and "CommitStateUnknown" not in text
    incident = body["error"]["message"].split("incident ")[1].split()[0]
    assert any(incident in r.getMessage() and r.exc_info for r in caplog.records)  # the log has the trace

    def broken_commit(*args: Any) -> Any:
        raise RuntimeError("lost")

    monkeypatch.setattr(server.warehouse, "commit_table", broken_commit)
    status, body, _ = call(
        server.url, "POST", f"{P}/namespaces/ns/tables/t", {"requirements": [], "updates": []}
    )
    assert_error(status, body, 500, "CommitStateUnknownException", "may or may not")


def test_errors_never_name_the_server_paths(server: RestServer, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    (wh / "ns" / "bad").mkdir(parents=True)
    (wh / "ns" / "bad" / "x.metadata.json").write_text("{not json")
    answers = [
        call(
            server.url,
            "POST",
            f"{P}/namespaces/ns/register",
            {"name": "r", "metadata-location": str(wh / "ns" / "bad" / "x.metadata.json")},
        ),
        call(
            server.url,
            "POST",
            f"{P}/namespaces/ns/register",
            {"name": "r", "metadata-location": str(wh / "nothing.metadata.json")},
        ),
        call(
            server.url,
            "POST",
            f"{P}/namespaces/ns/tables",
            {"name": "t", "location": "/elsewhere/t", "schema": {"type": "struct", "fields": []}},
        ),
    ]
    sent = [str(wh / "ns" / "bad" / "x.metadata.json"), str(wh / "nothing.metadata.json"), "/elsewhere/t"]
    for (status, body, _), path in zip(answers, sent, strict=True):
        assert 400 <= status < 500, (status, body)
        text = body["error"]["message"].replace(path, "<sent>")  # the client's own path may come back
        assert str(wh) not in text and "catalog.db" not in text, body


# -- report metrics -------------------------------------------------------------------------------------

SCAN_REPORT = {
    "report-type": "scan-report",
    "table-name": "iceduck.ns.t",
    "snapshot-id": 1,
    "filter": True,
    "schema-id": 0,
    "projected-field-ids": [1],
    "projected-field-names": ["a"],
    "metrics": {"total-planning-duration": {"count": 1, "time-unit": "nanoseconds", "total-duration": 2000}},
}


def test_report_metrics_is_204_and_the_report_is_kept(server: RestServer, tmp_path: Path) -> None:
    assert _create_table(server, "t")[0] == 200
    status, body, _ = call(server.url, "POST", f"{P}/namespaces/ns/tables/t/metrics", SCAN_REPORT)
    assert (status, body) == (204, None)
    log = tmp_path / "wh" / "serve-metrics.jsonl"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(x["table"], x["client"], x["report"]) for x in lines] == [("ns.t", "127.0.0.1", SCAN_REPORT)]
    status, body, _ = call(server.url, "POST", f"{P}/namespaces/ns/tables/missing/metrics", SCAN_REPORT)
    assert_error(status, body, 404, "NoSuchTableException")
    status, body, _ = call(server.url, "POST", f"{P}/namespaces/ns/tables/t/metrics", {"no": "type"})
    assert_error(status, body, 400, "BadRequestException", "report-type")
    assert len(log.read_text().splitlines()) == 1


def test_bodies_schemathesis_found_are_400s(server: RestServer) -> None:
    # a JSON null where an object belongs (a 500 once the transport checked JSON depth), and the
    # spec's types for namespace properties ({} was read as "no removals")
    status, body, _ = call(server.url, "POST", f"{P}/namespaces", b"null")
    assert_error(status, body, 400, "BadRequestException")
    for bad in ({"removals": {}}, {"updates": None}, {"removals": ["k", "k"]}):
        status, body, _ = call(server.url, "POST", f"{P}/namespaces/ns/properties", bad)
        assert_error(status, body, 400, "BadRequestException")
    status, body, _ = call(server.url, "GET", f"{P}/namespaces?pageSize=0")
    assert_error(status, body, 400, "BadRequestException", "pageSize")
    status, body, _ = call(server.url, "GET", f"{P}/namespaces", headers={"Idempotency-Key": "x" * 40})
    assert_error(status, body, 400, "BadRequestException", "Idempotency-Key")
    status, body, headers = call(server.url, "DELETE", f"{P}/namespaces/ns/properties")
    assert_error(status, body, 405, "BadRequestException")
    assert headers["Allow"] == "POST"


@pytest.mark.skipif(
    shutil.which("ss") is None, reason="needs ss (iproute2) to read a listening socket's backlog"
)
def test_the_listen_backlog_is_not_five(server: RestServer) -> None:
    # for a listening socket, ss's Send-Q column is its backlog (http.server's was 5)
    out = subprocess.run(
        ["ss", "-ltnH", f"sport = :{server.port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "LISTEN" and int(out[2]) == Limits().backlog == 1024, out
