"""Other engines through `iceduck serve`, each direction.

* The reference peer (DuckDB 1.5.5 + iceberg + httpfs) ATTACHes the server and writes v2 and v3
  tables with CREATE SCHEMA / CREATE TABLE / INSERT / DELETE / UPDATE; iceduck's REST client reads
  the same rows as the peer and as plain DuckDB running the same statements; on v3 the deletes are
  deletion vectors and `_row_id` / `_last_updated_sequence_number` equal both the peer's and the ones
  computed from the metadata independently (`tests.write.test_interop_write.expected_rows`).
* iceduck writes through its client; the peer and PyIceberg's RestCatalog read the same rows;
  PyIceberg appends (v2) and iceduck and the peer read that.
* iceduck's client and the peer write one table at once: no acknowledged commit is lost.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import iceduck
from iceduck.serve.server import RestServer
from tests.support.peer import Peer, PeerQueryError, PeerUnavailableError
from tests.support.rest_helpers import serving
from tests.support.s3_fixture import BUCKET, peer_reads_s3, pyiceberg_properties, s3_warehouse
from tests.write.test_interop_write import expected_rows

pytestmark = pytest.mark.peer


def s3_properties() -> dict[str, str]:
    """PyIceberg's S3 settings for the test bucket (none when no S3 server runs): the server vends none."""
    return pyiceberg_properties(f"s3://{BUCKET}/")


PEER_STATEMENTS = [
    "INSERT INTO {t} SELECT i, 'st' || (i % 5), (i % 7)::INTEGER FROM range(3000) r(i)",
    "DELETE FROM {t} WHERE delay = 4",
    "UPDATE {t} SET delay = delay + 100 WHERE id % 50 = 1",
    "INSERT INTO {t} VALUES (9000, 'late', 1), (9001, NULL, 2)",
    "DELETE FROM {t} WHERE id BETWEEN 100 AND 199",
]


@pytest.fixture(scope="module")
def rest_peer() -> Iterator[Peer]:
    """The reference peer with httpfs loaded (its REST client needs it)."""
    try:
        handle = Peer.ensure(quiet=True, extensions=("avro", "iceberg", "httpfs"))
    except PeerUnavailableError as exc:
        pytest.skip(f"reference peer not installed and pip cannot reach the package index: {exc}")
    with handle:
        yield handle


@pytest.fixture
def served(
    request: pytest.FixtureRequest, tmp_path: Path, rest_peer: Peer, lake_storage: str
) -> Iterator[tuple[RestServer, str]]:
    """A server, and the peer attached to it as `cat` (detached afterwards). For the S3 twin of an
    `s3_twin` test the warehouse is on S3 (moto) and the peer writes the objects with its httpfs."""
    where: str | Path = tmp_path / "wh"
    if lake_storage == "s3":
        where = s3_warehouse(request, tmp_path)
        peer_reads_s3(rest_peer, where)
    with serving(where) as server:  # type: ignore[arg-type]
        rest_peer.execute(
            f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        try:
            yield server, "cat"
        finally:
            rest_peer.execute("DETACH cat")


def _rows(relation: Any) -> list[tuple[Any, ...]]:
    assert relation is not None
    return sorted(relation.fetchall(), key=repr)


@pytest.mark.s3_twin(version=(3,))
@pytest.mark.parametrize("version", [2, 3])
def test_iceduck_reads_what_the_peer_wrote(
    served: tuple[RestServer, str], rest_peer: Peer, version: int
) -> None:
    server, cat = served
    rest_peer.execute(f"CREATE SCHEMA {cat}.demo")
    rest_peer.execute(
        f"CREATE TABLE {cat}.demo.t (id BIGINT, station VARCHAR, delay INTEGER) "
        f"WITH ('format-version' = '{version}')"
    )
    truth = duckdb.connect()
    truth.sql("CREATE TABLE t (id BIGINT, station VARCHAR, delay INTEGER)")
    for statement in PEER_STATEMENTS:
        counted = rest_peer.query(statement.format(t=f"{cat}.demo.t"))
        assert counted == truth.sql(statement.format(t="t")).fetchall()
    expected = sorted(truth.sql("SELECT * FROM t").fetchall(), key=repr)
    assert sorted(rest_peer.query(f"SELECT * FROM {cat}.demo.t"), key=repr) == expected

    lake = iceduck.connect(server.url, authorization_type="none")
    assert _rows(lake.sql("SELECT * FROM lake.demo.t")) == expected
    snapshots = lake.sql("SELECT operation FROM iceberg_snapshots('demo.t') ORDER BY sequence_number")
    assert snapshots is not None and len(snapshots.fetchall()) == len(PEER_STATEMENTS)
    deletes = lake.sql("SELECT file_format FROM iceberg_files('demo.t', content := 'delete')")
    assert deletes is not None
    formats = {r[0].upper() for r in deletes.fetchall()}
    if version == 3:
        assert formats == {"PUFFIN"}  # deletion vectors
        location = lake.table("demo.t").metadata_location
        computed = expected_rows(location, "id")
        scanned = lake.sql(
            "SELECT id, _row_id, _last_updated_sequence_number FROM iceberg_scan('demo.t', row_lineage := true)"
        )
        assert scanned is not None
        got = {r[0]: (r[1], r[2]) for r in scanned.fetchall()}
        assert got == {k: (v["_row_id"], v["_last_updated_sequence_number"]) for k, v in computed.items()}
        from_peer = rest_peer.query(f"SELECT id, _row_id, _last_updated_sequence_number FROM {cat}.demo.t")
        assert got == {r[0]: (r[1], r[2]) for r in from_peer}
    else:
        assert formats <= {"PARQUET"} and formats  # position delete files


@pytest.mark.s3_twin
def test_peer_and_pyiceberg_read_what_iceduck_wrote(served: tuple[RestServer, str], rest_peer: Peer) -> None:
    from pyiceberg.catalog.rest import RestCatalog as PyIcebergRestCatalog

    server, cat = served
    lake = iceduck.connect(server.url, authorization_type="none")
    lake.sql("CREATE SCHEMA w")
    for version in (2, 3):
        lake.sql(f"CREATE TABLE w.t{version} (id BIGINT, name VARCHAR) WITH ('format-version' = '{version}')")
        lake.sql(f"INSERT INTO w.t{version} SELECT i, 'n' || i FROM range(500) r(i)")
        lake.sql(f"DELETE FROM w.t{version} WHERE id % 9 = 0")
        lake.sql(f"UPDATE w.t{version} SET name = 'u' WHERE id % 20 = 1")
    expected = _rows(lake.sql("SELECT id, name FROM lake.w.t3"))
    assert expected == _rows(lake.sql("SELECT id, name FROM lake.w.t2"))
    assert len(expected) == 500 - 56
    for version in (2, 3):
        got = rest_peer.query(f"SELECT id, name FROM {cat}.w.t{version}")
        assert sorted(got, key=repr) == expected
        catalog = PyIcebergRestCatalog("iceduck", uri=server.url, **s3_properties())
        table = catalog.load_table(f"w.t{version}")
        rows = table.scan().to_arrow().to_pylist()
        assert sorted(((r["id"], r["name"]) for r in rows), key=repr) == expected
    # PyIceberg appends (it writes v2); iceduck and the peer read its commit
    table = PyIcebergRestCatalog("iceduck", uri=server.url, **s3_properties()).load_table("w.t2")
    table.append(pa.table({"id": pa.array([1000, 1001], pa.int64()), "name": ["py", "iceberg"]}))
    with_append = sorted([*expected, (1000, "py"), (1001, "iceberg")], key=repr)
    assert _rows(lake.sql("SELECT id, name FROM lake.w.t2")) == with_append
    assert sorted(rest_peer.query(f"SELECT id, name FROM {cat}.w.t2"), key=repr) == with_append


def test_concurrent_writers_lose_no_acknowledged_commit(
    served: tuple[RestServer, str], rest_peer: Peer
) -> None:
    server, cat = served
    lake = iceduck.connect(server.url, authorization_type="none")
    lake.sql("CREATE SCHEMA c")
    lake.sql("CREATE TABLE c.t (writer VARCHAR, i INTEGER)")
    acked: list[tuple[str, int]] = []
    refused: list[str] = []
    lock = threading.Lock()

    def iceduck_writer() -> None:
        writer = iceduck.connect(server.url, authorization_type="none")
        for i in range(8):
            writer.sql(f"INSERT INTO c.t VALUES ('iceduck', {i})")  # retries conflicts itself
            with lock:
                acked.append(("iceduck", i))

    def peer_writer() -> None:
        for i in range(8):
            try:
                rest_peer.execute(f"INSERT INTO {cat}.c.t VALUES ('peer', {i})")
            except PeerQueryError as e:  # the peer does not retry a 409: that commit was refused
                refused.append(str(e))
                continue
            with lock:
                acked.append(("peer", i))

    threads = [threading.Thread(target=iceduck_writer), threading.Thread(target=peer_writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all("409" in r or "onflict" in r or "ommit" in r for r in refused), refused
    assert len([a for a in acked if a[0] == "iceduck"]) == 8
    final = _rows(lake.sql("SELECT writer, i FROM lake.c.t"))
    assert final == sorted(acked, key=repr)
    assert sorted(rest_peer.query(f"SELECT writer, i FROM {cat}.c.t"), key=repr) == final
