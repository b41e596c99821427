"""A loopback HTTP proxy that lets through only requests signed with AWS Signature Version 4.

It checks what AWS checks before a service sees a request: an `Authorization: AWS4-HMAC-SHA256`
header, a known access key, a credential scope of the expected date, region and service, an
`X-Amz-Date` within 15 minutes, `host` among the signed headers, and the signature itself, which
botocore computes again from the secret key it knows and the request as received (method, path and
query as sent, the signed headers' values, the SHA-256 of the body actually received). Anything
else is answered 403 with AWS's JSON error shape (`{"message": ...}`) and never reaches the
upstream. Accepted requests go on to `upstream` without the signature headers; a path prefix
(`/aws.glue.us-east-1`, how DuckDB's extension names a service and region in an endpoint) is
taken off first.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

MAX_SKEW = datetime.timedelta(minutes=15)


def _parse_authorization(value: str) -> dict[str, str] | None:
    algorithm, _, rest = value.partition(" ")
    if algorithm != "AWS4-HMAC-SHA256":
        return None
    parts = {}
    for item in rest.split(","):
        key, _, val = item.strip().partition("=")
        parts[key] = val
    return parts if {"Credential", "SignedHeaders", "Signature"} <= set(parts) else None


class SigV4Proxy:
    """`SigV4Proxy(upstream, keys={"AKID": "secret"}, service="glue", region="us-east-1")`, a context
    manager; `url` is where it listens, `accepted`/`refused` count requests (refused with reasons),
    `bodies` are those of the accepted ones."""

    def __init__(
        self,
        upstream: str,
        keys: Mapping[str, str],
        *,
        service: str,
        region: str,
        strip_prefix: str = "",
    ) -> None:
        self.upstream = urlsplit(upstream)
        self.keys = dict(keys)
        self.service = service
        self.region = region
        self.strip_prefix = strip_prefix
        self.accepted: list[str] = []
        self.bodies: list[bytes] = []  # of the accepted requests, in order
        self.refused: list[str] = []
        self.payload_hashes = 0  # accepted requests with a body whose x-amz-content-sha256 was checked
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                why = proxy.check(self.command, self.path, self.headers, body)
                if why is not None:
                    with proxy._lock:
                        proxy.refused.append(f"{self.command} {self.path}: {why}")
                    self._answer(
                        403, {"Content-Type": "application/json"}, json.dumps({"message": why}).encode()
                    )
                    return
                with proxy._lock:
                    proxy.accepted.append(f"{self.command} {self.path}")
                    proxy.bodies.append(body)
                status, headers, data = proxy.forward(self.command, self.path, self.headers, body)
                self._answer(status, headers, data)

            def _answer(self, status: int, headers: Mapping[str, str], data: bytes) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> SigV4Proxy:
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def check(self, method: str, path: str, headers: Any, body: bytes) -> str | None:
        """None when the request is signed right, else why not (AWS's wording where it has one)."""
        authorization = headers.get("Authorization")
        if not authorization:
            return "Missing Authentication Token"
        parts = _parse_authorization(authorization)
        if parts is None:
            return "Authorization header requires AWS4-HMAC-SHA256 Credential, SignedHeaders and Signature"
        key_id, _, scope = parts["Credential"].partition("/")
        secret = self.keys.get(key_id)
        if secret is None:
            return "The security token included in the request is invalid."
        amz_date = headers.get("X-Amz-Date") or ""
        try:
            when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
        except ValueError:
            return "Missing or malformed X-Amz-Date"
        if abs(datetime.datetime.now(datetime.UTC) - when) > MAX_SKEW:
            return "Signature expired"
        expected_scope = f"{amz_date[:8]}/{self.region}/{self.service}/aws4_request"
        if scope != expected_scope:
            return f"Credential should be scoped to {expected_scope}, not {scope}"
        signed = parts["SignedHeaders"].split(";")
        if "host" not in signed:
            return "'Host' must be a signed header"
        actual_hash = hashlib.sha256(body).hexdigest()
        claimed_hash = headers.get("x-amz-content-sha256")
        if claimed_hash is not None and claimed_hash != actual_hash:
            return "The provided 'x-amz-content-sha256' header does not match what was computed."
        request_headers = {}
        for name in signed:
            value = headers.get(name)
            if value is None:
                return f"Signed header {name} is missing"
            request_headers[name] = value
        request = AWSRequest(
            method=method, url=f"http://{headers.get('Host')}{path}", headers=request_headers, data=body
        )
        request.context["timestamp"] = amz_date
        token = headers.get("X-Amz-Security-Token")
        auth = SigV4Auth(Credentials(key_id, secret, token), self.service, self.region)
        canonical = auth.canonical_request(request)
        expected = auth.signature(auth.string_to_sign(request, canonical), request)
        if not hmac.compare_digest(expected, parts["Signature"]):
            return (
                "The request signature we calculated does not match the signature you provided. "
                "Check your AWS Secret Access Key and signing method."
            )
        if body and claimed_hash is not None:
            with self._lock:
                self.payload_hashes += 1
        return None

    def forward(self, method: str, path: str, headers: Any, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if self.strip_prefix and path.startswith(self.strip_prefix):
            path = path[len(self.strip_prefix) :] or "/"
        dropped = {"authorization", "host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}
        out = {
            k: v for k, v in headers.items() if k.lower() not in dropped | {"content-length", "connection"}
        }
        connection = http.client.HTTPConnection(self.upstream.hostname or "", self.upstream.port, timeout=60)
        try:
            connection.request(method, path, body=body or None, headers=out)
            response = connection.getresponse()
            data = response.read()
            return response.status, dict(response.getheaders()), data
        finally:
            connection.close()
