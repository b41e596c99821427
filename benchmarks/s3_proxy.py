"""A counting TCP proxy in front of a local S3 server: requests by HTTP method, bytes each way.

``python -m benchmarks.s3_proxy LISTEN_PORT TARGET_PORT CONTROL_PORT`` forwards 127.0.0.1:LISTEN_PORT
to 127.0.0.1:TARGET_PORT and answers on CONTROL_PORT: any line ``reset`` zeroes the counters,
``get`` returns them as one JSON line, ``log`` the requests since the reset (method, path, Range
header, bytes sent back on that connection until its next request). It runs in its own process so counting costs neither
system under test any of its own CPU time or GIL. Request lines are recognised at the start of
each chunk the client sends (S3 clients send one request's head in one write), which is exact for
GET/HEAD and may miss nothing but a request whose head is split across writes.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import sys
import threading
from typing import Any

_METHODS = (b"GET ", b"HEAD ", b"PUT ", b"POST ", b"DELETE ")
_LOCK = threading.Lock()
_COUNTS: dict[str, int] = {}
_LOG: list[list[Any]] = []  # [method, path, range, bytes down] per request since the reset


def _add(key: str, n: int) -> None:
    with _LOCK:
        _COUNTS[key] = _COUNTS.get(key, 0) + n


def _entry(chunk: bytes) -> list[Any]:
    head = chunk.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    method, _, rest = head[0].partition(" ")
    path = rest.rsplit(" ", 1)[0]
    ranges = [h.split(":", 1)[1].strip() for h in head[1:] if h.lower().startswith("range:")]
    return [method, path, ranges[0] if ranges else "", 0]


def _pipe(src: socket.socket, dst: socket.socket, upstream: bool, current: list[list[Any]]) -> None:
    try:
        while True:
            chunk = src.recv(1 << 16)
            if not chunk:
                break
            if upstream:
                _add("bytes_up", len(chunk))
                for method in _METHODS:
                    if chunk.startswith(method):
                        _add(method.decode().strip(), 1)
                        entry = _entry(chunk)
                        with _LOCK:
                            _LOG.append(entry)
                        current[0] = entry
            else:
                _add("bytes_down", len(chunk))
                with _LOCK:
                    current[0][3] += len(chunk)
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


class _Forward(socketserver.BaseRequestHandler):
    target = 0

    def handle(self) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.target))
        current: list[list[Any]] = [["", "", "", 0]]  # the request this connection serves now
        back = threading.Thread(target=_pipe, args=(upstream, self.request, False, current), daemon=True)
        back.start()
        _pipe(self.request, upstream, True, current)
        back.join()
        upstream.close()


class _Control(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        for line in self.rfile:
            word = line.strip().decode()
            if word == "reset":
                with _LOCK:
                    _COUNTS.clear()
                    _LOG.clear()
                self.wfile.write(b"{}\n")
            elif word == "get":
                with _LOCK:
                    self.wfile.write((json.dumps(_COUNTS) + "\n").encode())
            elif word == "log":
                with _LOCK:
                    self.wfile.write((json.dumps(_LOG) + "\n").encode())
            self.wfile.flush()


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main(argv: list[str]) -> int:
    listen, target, control = (int(a) for a in argv)
    _Forward.target = target
    forward = _Server(("127.0.0.1", listen), _Forward)
    threading.Thread(target=forward.serve_forever, daemon=True).start()
    with _Server(("127.0.0.1", control), _Control) as ctl:
        ctl.serve_forever()
    return 0


class Counters:
    """A client of the proxy's control port."""

    def __init__(self, port: int) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port))
        self._file = self._sock.makefile("rwb")

    def _ask(self, word: str) -> Any:
        self._file.write(word.encode() + b"\n")
        self._file.flush()
        return json.loads(self._file.readline())

    def reset(self) -> None:
        """Zero the counters."""
        self._ask("reset")

    def get(self) -> dict[str, int]:
        """Requests by method and bytes each way since the last reset."""
        return dict(self._ask("get"))

    def log(self) -> list[tuple[str, str, str, int]]:
        """(method, path, Range header, bytes sent back) of each request since the last reset."""
        return [tuple(e) for e in self._ask("log")]

    def close(self) -> None:
        """Close the control connection."""
        self._file.close()
        self._sock.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
