"""A loopback TCP proxy in front of a local S3 server that can cut one response short.

`CuttingProxy(port)` forwards 127.0.0.1:<its port> to 127.0.0.1:port. `cut(method, path_part,
body_bytes)` arms it: the next request with that method whose path contains `path_part` gets its
response head and only `body_bytes` bytes of its body, then the connection is closed (as a network
drop or a dying server does). `requests` lists (method, path, Range) of every request seen, and
`cuts` the requests that were cut.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from typing import Any

_METHODS = (b"GET ", b"HEAD ", b"PUT ", b"POST ", b"DELETE ")


class CuttingProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.requests: list[tuple[str, str, str]] = []
        self.cuts: list[tuple[str, str, str]] = []
        self._armed: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        proxy = self

        class Forward(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Forward)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def __enter__(self) -> CuttingProxy:
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def cut(self, method: str, path_part: str, body_bytes: int) -> None:
        """Cut the next response to `method` on a path containing `path_part` after `body_bytes`."""
        with self._lock:
            self._armed.append((method, path_part, body_bytes))

    def _take(self, method: str, path: str) -> int | None:
        with self._lock:
            for i, (m, part, n) in enumerate(self._armed):
                if m == method and part in path:
                    del self._armed[i]
                    return n
        return None

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.target_port))
        # state shared by the two directions: the body budget of the response in flight, if cut
        state: dict[str, Any] = {"cut": None, "head_done": False, "sent": 0}
        done = threading.Event()

        def close_both() -> None:
            done.set()
            for s in (client, upstream):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

        def up() -> None:
            try:
                while not done.is_set():
                    chunk = client.recv(1 << 16)
                    if not chunk:
                        break
                    if chunk.startswith(_METHODS):
                        head = chunk.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
                        method, _, rest = head[0].partition(" ")
                        path = rest.rsplit(" ", 1)[0]
                        ranges = [
                            h.split(":", 1)[1].strip() for h in head[1:] if h.lower().startswith("range:")
                        ]
                        entry = (method, path, ranges[0] if ranges else "")
                        with self._lock:
                            self.requests.append(entry)
                        budget = self._take(method, path)
                        state.update(cut=budget, head_done=False, sent=0, entry=entry)
                    upstream.sendall(chunk)
            except OSError:
                pass
            finally:
                close_both()

        def down() -> None:
            try:
                while not done.is_set():
                    chunk = upstream.recv(1 << 16)
                    if not chunk:
                        break
                    budget = state["cut"]
                    if budget is None:
                        client.sendall(chunk)
                        continue
                    if budget < 0:  # cut inside the response head, after -budget bytes
                        client.sendall(chunk[:-budget])
                        with self._lock:
                            self.cuts.append(state["entry"])
                        break
                    if not state["head_done"]:
                        head, sep, body = chunk.partition(b"\r\n\r\n")
                        if not sep:
                            client.sendall(chunk)
                            continue
                        state["head_done"] = True
                        client.sendall(head + sep)
                        chunk = body
                    allowed = max(0, budget - state["sent"])
                    client.sendall(chunk[:allowed])
                    state["sent"] += min(allowed, len(chunk))
                    if len(chunk) > allowed or state["sent"] >= budget:
                        with self._lock:
                            self.cuts.append(state["entry"])
                        break
            except OSError:
                pass
            finally:
                close_both()

        reader = threading.Thread(target=up, daemon=True)
        reader.start()
        down()
        reader.join(5)
        for s in (client, upstream):
            with contextlib.suppress(OSError):
                s.close()
