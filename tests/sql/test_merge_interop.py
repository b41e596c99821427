"""What a MERGE writes, read by the other engines: the reference peer (DuckDB 1.5.5 + iceberg) through
`iceduck serve`, where the MERGE ran through `ATTACH ... (TYPE iceberg)`, and Java Iceberg (Spark),
which reads rows and row lineage from the metadata file. Truth: DuckDB's MERGE on a plain table.
"""

from __future__ import annotations

import pathlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from iceduck.serve.server import RestServer
from tests.rest.test_rest_interop import rest_peer  # noqa: F401  (the peer with httpfs, a fixture)
from tests.support.peer import Peer
from tests.support.rest_helpers import serving
from tests.support.twin_tables import lineage as row_lineage
from tests.write.test_interop_write import expected_rows

_REFERENCE = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "java-iceberg"

COLUMNS = "id BIGINT, p INTEGER, v VARCHAR"
SETUP = [
    "INSERT INTO {t} SELECT i, (i % 4)::INTEGER, 'v' || i FROM range(200) r(i)",
    "DELETE FROM {t} WHERE id % 17 = 3",
]
MERGE = (
    "MERGE INTO {t} AS t USING (SELECT i * 7 AS id, (i * 7 % 4)::INTEGER AS p, 'm' || i AS v FROM range(40) r(i)) AS s "
    "ON t.id = s.id AND t.p = s.p "
    "WHEN MATCHED AND s.id % 3 = 0 THEN DELETE "
    "WHEN MATCHED THEN UPDATE SET v = s.v "
    "WHEN NOT MATCHED THEN INSERT *"
)


def _truth() -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t ({COLUMNS})")
    for statement in [*SETUP, MERGE]:
        con.execute(statement.format(t="t"))
    return sorted(con.execute("SELECT id, p, v FROM t").fetchall())


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestServer]:
    with serving(tmp_path / "served") as s:
        yield s


@pytest.mark.peer
def test_a_merge_through_attach_is_read_by_the_peer(
    tmp_path: Path,
    server: RestServer,
    rest_peer: Peer,  # noqa: F811
) -> None:
    expected = _truth()
    with iceduck.connect(tmp_path / "local") as lake:
        lake.sql(
            f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        lake.sql("CREATE SCHEMA cat.ns")
        for version in (2, 3):
            t = f"cat.ns.t{version}"
            lake.sql(f"CREATE TABLE {t} ({COLUMNS}) PARTITIONED BY (p) WITH ('format-version' = '{version}')")
            for statement in SETUP:
                lake.sql(statement.format(t=t))
            lake.sql(MERGE.format(t=t))
            assert sorted(lake.sql(f"SELECT id, p, v FROM {t}").fetchall()) == expected
        remote = iceduck.connect(server.url, authorization_type="none")
        rest_peer.execute(
            f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        try:
            for version in (2, 3):
                assert sorted(rest_peer.query(f"SELECT id, p, v FROM cat.ns.t{version}")) == expected
            got = row_lineage(remote, "ns.t3")
            computed = expected_rows(remote.table("ns.t3").metadata_location, "id")
            assert got == {k: (v["_row_id"], v["_last_updated_sequence_number"]) for k, v in computed.items()}
            peer_lineage = rest_peer.query("SELECT id, _row_id, _last_updated_sequence_number FROM cat.ns.t3")
            assert got == {r[0]: (r[1], r[2]) for r in peer_lineage}
        finally:
            rest_peer.execute("DETACH cat")
            remote.close()


def test_java_iceberg_reads_a_merge_with_its_lineage(tmp_path: Path) -> None:
    if not _REFERENCE.exists():
        pytest.skip("the Java Iceberg reference (../shared/reference/java-iceberg) is not here")
    sys.path.insert(0, str(_REFERENCE))
    import spark_ref  # type: ignore[import-not-found]

    if not spark_ref.available():
        pytest.skip("Java Iceberg reference not installed: bash ../shared/reference/java-iceberg/setup.sh")
    expected = _truth()
    with iceduck.connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA ns")
        for version in (2, 3):
            t = f"ns.t{version}"
            lake.sql(f"CREATE TABLE {t} ({COLUMNS}) PARTITIONED BY (p) WITH ('format-version' = '{version}')")
            for statement in SETUP:
                lake.sql(statement.format(t=t))
            before = row_lineage(lake, t) if version == 3 else {}
            lake.sql(MERGE.format(t=f"lake.{t}"))
            if version == 3:
                after = row_lineage(lake, t)
                updated = {r[0] for r in expected if r[2].startswith("m") and r[0] in before}
                assert updated and all(after[k][0] == before[k][0] for k in updated)
                assert all(after[k] == before[k] for k in after if k in before and k not in updated)
        v2 = lake.table("ns.t2").metadata_location
        v3 = lake.table("ns.t3").metadata_location
        lineage = row_lineage(lake, "ns.t3")
    assert sorted(tuple(r) for r in spark_ref.spark_read(v2, columns=["id", "p", "v"])) == expected
    java = spark_ref.spark_read(v3, columns=["id", "p", "v", "_row_id", "_last_updated_sequence_number"])
    assert sorted(tuple(r[:3]) for r in java) == expected
    assert {r[0]: (r[3], r[4]) for r in java} == lineage
