"""A lake whose table has a missing data file: the other tables' lake.ns.t views still work, and
reading the broken one says why in one line (it used to read "Table ... does not exist", and every
view after it in the catalog was never created)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import iceduck
from tests.support import maintenance_helpers as mh
from tests.support.write_helpers import new_lake, table_files


def test_one_unreadable_table_neither_hides_the_others_nor_reads_as_missing(warehouse: str) -> None:
    lake = new_lake(warehouse)
    for name in ("a", "b", "c"):
        t = lake.create_table(f"ns.{name}", [("id", "BIGINT")])
        t.append(pa.table({"id": pa.array(range(3), pa.int64())}))
    (data,) = [p for p in table_files(lake.table("ns.a").location) if p.endswith(".parquet")]
    lake.close()
    mh.remove(data)

    lake = iceduck.connect(warehouse)
    try:
        for name in ("b", "c"):
            assert lake.sql(f"SELECT sum(id) FROM lake.ns.{name}").fetchall() == [(3,)]
        with pytest.raises(Exception) as err:
            lake.sql("SELECT count(*) FROM lake.ns.a").fetchall()
        message = str(err.value)
        assert "\n" not in message.strip() and data.rsplit("/", 1)[1] in message and "not found" in message, message
        assert "does not exist" not in message
    finally:
        lake.close()
