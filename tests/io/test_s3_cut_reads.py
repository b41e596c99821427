"""A GET whose answer is cut short (a dropped connection, a dying server) is asked again with a
fresh request, and nothing of the cut answer is kept: the file reads right then and later.

Truth: a loopback proxy in front of moto (`tests/support/cutting_proxy.py`) that cuts chosen
answers after a given number of body bytes and logs every request; the rows' count and sum known
from how they were made (0..n-1).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

import iceduck
from iceduck.duckdb.functions import clean_message
from iceduck.io import s3_reads
from tests.support.cutting_proxy import CuttingProxy
from tests.support.s3_fixture import BUCKET, S3Server

ROWS = 200_000
TRUTH = [(ROWS, ROWS * (ROWS - 1) // 2)]
QUERY = "SELECT count(*), sum(i) FROM lake.s.t"


@pytest.fixture
def proxy(moto_s3: S3Server) -> Iterator[CuttingProxy]:
    with CuttingProxy(moto_s3.port) as p:
        yield p


@pytest.fixture
def lake(
    proxy: CuttingProxy, moto_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[iceduck.Lake]:
    """A lake on a fresh S3 warehouse reached through the proxy, holding `s.t` (i in 0..ROWS-1)."""
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    via = S3Server("cutting", "127.0.0.1", proxy.port, moto_s3.key_id, moto_s3.secret)
    secret = via.secret_sql("through_proxy").replace(")", f", SCOPE 's3://{BUCKET}')")
    with iceduck.connect(f"s3://{BUCKET}/{uuid.uuid4().hex}/wh") as lk:
        lk.sql(secret)
        lk.sql("CREATE SCHEMA s")
        lk.sql(f"CREATE TABLE s.t AS SELECT range AS i, 'x' || range AS v FROM range({ROWS})")
        s3_reads.forget_seen()  # cold: nothing known of the objects
        yield lk


def _gets(proxy: CuttingProxy, part: str) -> list[tuple[str, str, str]]:
    return [r for r in proxy.requests if r[0] == "GET" and part in r[1]]


def test_a_cut_data_read_is_asked_again_and_the_query_is_right(
    lake: iceduck.Lake, proxy: CuttingProxy
) -> None:
    assert lake.sql(QUERY).fetchall() == TRUTH  # the footer is known now; the next GET is DuckDB's body read
    before = len(_gets(proxy, ".parquet"))
    proxy.cut("GET", ".parquet", 1000)
    assert lake.sql(QUERY).fetchall() == TRUTH
    assert len(proxy.cuts) == 1
    cut = proxy.cuts[0]
    later = _gets(proxy, ".parquet")[before:]
    assert later[0] == cut and cut in later[1:]  # the same range asked again, on a fresh request
    assert lake.sql(QUERY).fetchall() == TRUTH


def test_a_cut_footer_read_leaves_nothing_known_of_the_file(lake: iceduck.Lake, proxy: CuttingProxy) -> None:
    proxy.cut("GET", ".parquet", 0)  # the first GET of the data file: the tail planning opens
    assert lake.sql(QUERY).fetchall() == TRUTH
    assert len(proxy.cuts) == 1
    assert proxy.cuts[0][2].startswith("bytes=")
    for _ in range(2):  # later reads: the size and footer kept are the object's
        assert lake.sql(QUERY).fetchall() == TRUTH
    assert lake.sql("SELECT count(*) FROM lake.s.t WHERE i BETWEEN 10 AND 19").fetchall() == [(10,)]


def test_a_read_cut_every_time_fails_in_one_line_and_poisons_nothing(
    lake: iceduck.Lake, proxy: CuttingProxy
) -> None:
    assert lake.sql(QUERY).fetchall() == TRUTH  # the footer is known: the cuts hit DuckDB's body reads
    for _ in range(3):
        proxy.cut("GET", ".parquet", 100)
    with pytest.raises(duckdb.Error) as e:
        lake.sql(QUERY).fetchall()
    assert len(proxy.cuts) == 3
    # DuckDB carries the filesystem's traceback; the shell prints the error's own line
    message = clean_message(str(e.value))
    assert "\n" not in message
    assert message.startswith("s3://") and ".parquet: " in message and "cut short 3 times" in message
    assert lake.sql(QUERY).fetchall() == TRUTH  # the store answers again: so does the table
