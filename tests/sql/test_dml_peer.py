"""What upserts, CREATE OR REPLACE TABLE, write-defaults and procedures commit, read by the reference
peer (DuckDB 1.5.5 + its iceberg extension) through `iceduck serve`, where iceduck ran them through
`ATTACH ... (TYPE iceberg)`. Truth: DuckDB running the same statements on plain tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from tests.rest.test_rest_interop import rest_peer  # noqa: F401  (the peer with httpfs, a fixture)
from tests.support.peer import Peer
from tests.support.rest_helpers import serving

STATEMENTS = {
    "up": (
        "id BIGINT PRIMARY KEY, v VARCHAR",
        [
            "INSERT INTO {t} SELECT i, 'v' || i FROM range(6) r(i)",
            "INSERT OR REPLACE INTO {t} VALUES (1, 'one'), (7, 'seven')",
            "INSERT INTO {t} AS t VALUES (2, 'two'), (8, 'eight') ON CONFLICT DO UPDATE SET v = t.v || excluded.v",
            "INSERT INTO {t} VALUES (3, 'x'), (9, 'nine') ON CONFLICT (id) DO NOTHING",
        ],
    ),
    "rep": (
        "id BIGINT, v VARCHAR",
        [
            "INSERT INTO {t} VALUES (1, 'a'), (2, 'b')",
            "CREATE OR REPLACE TABLE {t} AS SELECT id + 10 AS id, v || '!' AS v FROM {t}",
        ],
    ),
    "def": (
        "id BIGINT, v VARCHAR",
        [
            "INSERT INTO {t} VALUES (1, 'a')",
            "ALTER TABLE {t} ALTER COLUMN v SET DEFAULT 'dflt'",
            "INSERT INTO {t} (id) VALUES (2)",
        ],
    ),
}


def _truth(columns: str, statements: list[str]) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t ({columns})")
    for s in statements:
        con.execute(s.format(t="t"))
    return sorted(con.execute("SELECT * FROM t").fetchall())


@pytest.mark.peer
def test_the_peer_reads_what_the_write_statements_commit(tmp_path: Path, rest_peer: Peer) -> None:  # noqa: F811
    with serving(tmp_path / "served") as server, iceduck.connect(tmp_path / "local") as lake:
        lake.sql(
            f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        lake.sql("CREATE SCHEMA cat.ns")
        for name, (columns, statements) in STATEMENTS.items():
            lake.sql(f"CREATE TABLE cat.ns.{name} ({columns})")
            for s in statements:
                lake.sql(s.format(t=f"cat.ns.{name}"))
        rest_peer.execute(
            f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        try:
            for name, (columns, statements) in STATEMENTS.items():
                expected = _truth(columns, statements)
                assert sorted(rest_peer.query(f"SELECT * FROM cat.ns.{name}")) == expected, name
                assert sorted(lake.sql(f"SELECT * FROM cat.ns.{name}").fetchall()) == expected, name
        finally:
            rest_peer.execute("DETACH cat")
