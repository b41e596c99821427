"""A lake whose table has a missing data file: the other tables' lake.ns.t views still work, and
reading the broken one says why in one line (it used to read "Table ... does not exist", and every
view after it in the catalog was never created)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import iceduck
from tests.support.write_helpers import new_lake


def test_one_unreadable_table_neither_hides_the_others_nor_reads_as_missing(tmp_path: Path, warehouse: str) -> None:
    lake = new_lake(warehouse)
    for name in ("a", "b", "c"):
        t = lake.create_table(f"ns.{name}", [("id", "BIGINT")])
        t.append(pa.table({"id": pa.array(range(3), pa.int64())}))
    (data,) = Path(lake.table("ns.a").location).rglob("*.parquet")
    lake.close()
    data.unlink()

    lake = iceduck.connect(str(tmp_path / "wh"))
    try:
        for name in ("b", "c"):
            assert lake.sql(f"SELECT sum(id) FROM lake.ns.{name}").fetchall() == [(3,)]
        with pytest.raises(Exception) as err:
            lake.sql("SELECT count(*) FROM lake.ns.a").fetchall()
        message = str(err.value)
        assert "\n" not in message.strip() and data.name in message and "not found" in message, message
        assert "does not exist" not in message
    finally:
        lake.close()
