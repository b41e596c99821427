"""iceduck.io.fileio.RangeReader, the file object DuckDB reads S3 / GCS / Azure objects through:
a handle shared by several threads, each reading a range as `seek(at)` then `read(n)`."""

from __future__ import annotations

import io
import threading

from iceduck.io.fileio import RangeReader

DATA = bytes(range(256)) * 4


class _Bytes(RangeReader):
    def __init__(self, data: bytes) -> None:
        super().__init__(len(data))
        self.data = data
        self.fetched: list[tuple[int, int]] = []

    def _fetch(self, start: int, end: int) -> bytes:
        self.fetched.append((start, end))
        return self.data[start:end]


def test_a_read_starts_where_its_own_thread_sought_when_another_thread_sought_in_between() -> None:
    """DuckDB 2.0 shares one handle per file between its threads and reads a range as two
    Python calls; the GIL can pass to another thread between them. Thread A seeks to 10, thread
    B seeks to 700 and reads, then A reads: A gets the bytes at 10 (a shared position gave
    A the bytes after B's read, silently)."""
    reader = _Bytes(DATA)
    a_sought, b_done = threading.Event(), threading.Event()
    got: dict[str, bytes] = {}

    def a() -> None:
        reader.seek(10)
        a_sought.set()
        b_done.wait(5)
        got["a"] = reader.read(5)

    def b() -> None:
        a_sought.wait(5)
        reader.seek(700)
        got["b"] = reader.read(5)
        b_done.set()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert got == {"a": DATA[10:15], "b": DATA[700:705]}
    assert sorted(reader.fetched) == [(10, 15), (700, 705)]


def test_sequential_reads_seek_and_tell_on_one_thread() -> None:
    reader = _Bytes(DATA)
    assert reader.read(3) == DATA[0:3]
    assert reader.read(2) == DATA[3:5]
    assert reader.tell() == 5
    assert reader.seek(-4, io.SEEK_END) == len(DATA) - 4
    assert reader.tell() == len(DATA) - 4
    assert reader.read() == DATA[-4:]
    assert reader.read(10) == b""
    reader.seek(100)
    assert reader.seek(6, io.SEEK_CUR) == 106
    assert reader.read(4) == DATA[106:110]
    assert reader.readall() == DATA[110:]


def test_a_thread_that_did_not_seek_continues_from_the_shared_position() -> None:
    """A handle passed from thread to thread and read sequentially (no seek) keeps one position."""
    reader = _Bytes(DATA)
    reader.seek(40)
    assert reader.read(10) == DATA[40:50]
    got: list[bytes] = []
    t = threading.Thread(target=lambda: got.append(reader.read(10)))
    t.start()
    t.join(5)
    assert got == [DATA[50:60]]
    assert reader.read(5) == DATA[60:65]


def test_readinto_reads_from_the_thread_s_own_seek() -> None:
    reader = _Bytes(DATA)
    reader.seek(200)
    buffer = bytearray(8)
    assert reader.readinto(buffer) == 8
    assert bytes(buffer) == DATA[200:208]
