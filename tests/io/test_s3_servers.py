"""The local S3 servers tests start never outlive the process that started them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import ROOT

CHILD = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {root!r})
    from tests.support.s3_fixture import moto_server
    with moto_server() as server:
        print(server.port, flush=True)
        import time
        time.sleep(600)  # killed here: no teardown runs
    """
)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_test_process_leaves_no_moto_server() -> None:
    pytest.importorskip("moto.server")
    proc = subprocess.Popen([sys.executable, "-c", CHILD.format(root=str(ROOT))], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    assert _listening(port)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    deadline = time.monotonic() + 30
    while _listening(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _listening(port), f"moto's server on port {port} outlived the killed test process"
