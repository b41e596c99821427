"""Helpers for REST catalog tests: a server on a free loopback port, and raw HTTP calls."""

from __future__ import annotations

import base64
import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from iceduck.serve.server import RestServer


@contextlib.contextmanager
def serving(warehouse: Path, **kwargs: Any) -> Iterator[RestServer]:
    """`iceduck serve` on 127.0.0.1 and a free port, stopped (in-flight requests finished) after."""
    server = RestServer(str(warehouse), port=0, **kwargs).start()
    try:
        yield server
    finally:
        server.stop()


def call(
    url: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    headers: Mapping[str, str] | None = None,
    form: Mapping[str, str] | None = None,
) -> tuple[int, Any, Mapping[str, str]]:
    """One raw request: (status, JSON body or None, headers). Error statuses are returned, not raised."""
    data = None
    all_headers = dict(headers or {})
    if form is not None:
        data = urlencode(form).encode()
        all_headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        all_headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url + path, data=data, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            # the headers stay a Message: HTTP header names are case-insensitive (RFC 9110)
            return response.status, json.loads(raw) if raw else None, response.headers
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, json.loads(raw) if raw else None, e.headers


def basic(client_id: str, secret: str) -> dict[str, str]:
    """An HTTP Basic Authorization header."""
    return {"Authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


def assert_error(status: int, body: Any, code: int, error_type: str, *words: str) -> None:
    """The response is the spec's IcebergErrorResponse with this code and type, its message naming `words`."""
    assert status == code, (status, body)
    assert set(body) == {"error"}, body
    err = body["error"]
    assert err["code"] == code and err["type"] == error_type, err
    assert isinstance(err["message"], str) and err["message"]
    for word in words:
        assert word in err["message"], (word, err["message"])
