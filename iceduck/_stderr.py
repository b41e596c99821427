"""stderr_held: file descriptor 2 pointed at a temporary file for a block (process-level I/O).

Native code (polars' Rust panic hook) writes to the process's stderr itself, past Python's
`sys.stderr`; a user must see only iceduck's one-line error. Holding fd 2 is a process-wide act,
so it lives here, beside `_gc`, and the codecs that need it (`spec/_avro_schemas`) stay pure. This
module imports nothing of iceduck.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

_LOCK = threading.Lock()
_HELD: list[Any] = []  # the temporary file stderr is held in, made at the first hold


@contextlib.contextmanager
def stderr_held(*, drop_if: bytes) -> Iterator[None]:
    """File descriptor 2 points at a temporary file for the block; what was written there goes
    back to stderr after it, unless it contains `drop_if` (then all of it is dropped). One hold at
    a time in the process."""
    with _LOCK:
        try:
            sys.stderr.flush()  # Python's buffered text goes out first, in order
            saved = os.dup(2)
        except (OSError, ValueError, AttributeError):
            yield  # no stderr to hold: nothing would be printed either
            return
        try:
            if not _HELD:
                _HELD.append(tempfile.TemporaryFile())  # noqa: SIM115 (kept open for the process)
            held = _HELD[0].fileno()
            os.dup2(held, 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
                written = os.pread(held, os.fstat(held).st_size, 0)
                os.ftruncate(held, 0)
                os.lseek(held, 0, os.SEEK_SET)  # fd 2 shared the offset: the next hold writes from 0
                while written and drop_if not in written:
                    written = written[os.write(2, written) :]
        finally:
            os.close(saved)
