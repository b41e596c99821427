"""gc_paused: CPython's cyclic garbage collector held off while iceduck builds a large structure
that holds no reference cycles (decoded metadata JSON, manifests' columns of values, scan plans).

Reference counting frees such objects anyway; the cyclic collector only costs time there. It
starts a collection every 700 new containers and, every few of those, walks the whole heap:
decoding a 5 MB metadata.json (10,000 snapshots, ~100,000 dicts and lists) started ~100 of them,
which cost more CPU than the decoding itself. This module imports nothing of iceduck.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_LOCK = threading.Lock()
_STATE = {"depth": 0, "resume": False}


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold off the cyclic collector for the block, for code that makes no reference cycles (any it
    did make would still be collected after). Nested and concurrent blocks share one pause, which
    ends with the last of them; a collector the process had disabled stays disabled."""
    with _LOCK:
        if _STATE["depth"] == 0:
            _STATE["resume"] = gc.isenabled()
            gc.disable()
        _STATE["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0 and _STATE["resume"]:
                gc.enable()
