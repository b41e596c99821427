"""locate_table: metadata files, table folders (version hint, explicit versions, guessing), names."""

from __future__ import annotations

import gzip
import json
import shutil
import uuid
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import iceduck
from iceduck.catalog.locate import (
    TableLocation,
    find_metadata_file,
    locate_table,
    metadata_version,
    table_folder_of,
)
from iceduck.catalog.sql import SqlCatalog
from iceduck.errors import TableNotFoundError, UnsupportedFormatError, ValidationError

PERSISTENT = "duckdb-iceberg/data/persistent"


def inventory(conformance: Path) -> list[dict[str, object]]:
    tables: list[dict[str, object]] = json.loads((conformance / "TABLE_INVENTORY.json").read_text())
    return tables


def table(conformance: Path, rel: str) -> Path:
    return conformance / PERSISTENT / rel


# -- the corpus ------------------------------------------------------------------------------------


def test_every_corpus_table_folder_resolves_to_the_inventory_metadata(conformance: Path) -> None:
    tables = inventory(conformance)
    assert len(tables) == 40
    for entry in tables:
        folder = conformance / str(entry["path"])
        loc = locate_table(str(folder))
        assert loc == TableLocation(f"{folder}/{entry['current_metadata']}", str(folder), None), entry["path"]


def test_tables_without_a_hint_are_guessed(conformance: Path) -> None:
    cases = {
        "iceberg/lineitem_iceberg_no_hint": "v2.metadata.json",
        "iceberg/lineitem_iceberg_gz_no_hint": "v2.gz.metadata.json",
        # `vfinal` carries no number: it beats 00001-... by last-updated-ms.
        "equality_delete_extra_column/warehouse/ns/t": "vfinal.metadata.json",
        "iceberg_v1_repro/repro/merch_v1": "00004-v3-upgraded-v1-null-counts.metadata.json",
    }
    for rel, name in cases.items():
        folder = table(conformance, rel)
        assert not (folder / "metadata/version-hint.text").exists()
        assert locate_table(str(folder)).metadata_location == f"{folder}/metadata/{name}"


def test_metadata_file_paths_and_uri_forms(conformance: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = table(conformance, "partition_time/default.db/partition_time")
    name = "00001-44546aa6-1ee5-48c5-9e3b-bc6c0bc0a60c.metadata.json"
    expected = TableLocation(f"{folder}/metadata/{name}", str(folder))
    assert locate_table(f"{folder}/metadata/{name}") == expected
    assert locate_table(f"file://{folder}/metadata/{name}") == expected
    assert locate_table(f"file:{folder}//metadata/{name}") == expected
    gz = table(conformance, "iceberg/lineitem_iceberg_gz")
    assert (
        locate_table(f"{gz}/metadata/v1.gz.metadata.json").metadata_location
        == f"{gz}/metadata/v1.gz.metadata.json"
    )
    # The `metadata/` folder itself, a trailing slash, and relative paths as DuckDB's tests use them.
    assert locate_table(f"{folder}/metadata/") == TableLocation(
        f"{folder}/metadata/00001-44546aa6-1ee5-48c5-9e3b-bc6c0bc0a60c.metadata.json", str(folder)
    )
    monkeypatch.chdir(conformance / "duckdb-iceberg")
    loc = locate_table("data/persistent/big_query_error")
    # relative paths resolve against the working directory as the OS reports it (symlinks resolved)
    assert (
        loc.metadata_location
        == f"{Path.cwd()}/data/persistent/big_query_error/metadata/v1749025517.metadata.json"
    )


def test_metadata_json_gz_trailer_is_read(conformance: Path, tmp_path: Path) -> None:
    src = table(conformance, "iceberg/lineitem_iceberg_no_hint")
    folder = tmp_path / "t"
    shutil.copytree(src, folder)
    for v in (1, 2):
        plain = folder / f"metadata/v{v}.metadata.json"
        (folder / f"metadata/v{v}.metadata.json.gz").write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    assert locate_table(str(folder)).metadata_location == f"{folder}/metadata/v2.metadata.json.gz"
    assert locate_table(str(folder), version=1).metadata_location == f"{folder}/metadata/v1.metadata.json.gz"
    assert locate_table(f"{folder}/metadata/v1.metadata.json.gz").table_folder == str(folder)


# -- versions, as DuckDB's iceberg extension accepts them ------------------------------------------


def test_explicit_versions_from_duckdbs_tests(conformance: Path) -> None:
    def meta(rel: str, **kw: object) -> str:
        return locate_table(str(table(conformance, rel)), **kw).metadata_location.rpartition("/")[2]  # type: ignore[arg-type]

    assert meta("iceberg/lineitem_iceberg_no_hint", version="1") == "v1.metadata.json"
    assert meta("iceberg/lineitem_iceberg", version=1) == "v1.metadata.json"
    assert meta("name_mapping/warehouse_1/mydb/t1", version=3) == "v3.metadata.json"
    assert meta("name_mapping/warehouse_1/mydb/t1", version="3.1") == "v3.1.metadata.json"
    assert meta("name_mapping/warehouse_1/mydb/t1", version="4.1") == "v4.1.metadata.json"
    assert meta("name_mapping/warehouse_1/mydb/t1", version=7) == "v7.metadata.json"
    assert (
        meta("map_stats/default.db/map_stats", version="00002-0e059d4b-e5e8-41af-a763-76cbf3a3d0bc")
        == "00002-0e059d4b-e5e8-41af-a763-76cbf3a3d0bc.metadata.json"
    )
    assert (
        meta("null_stats/default/test_nulls", version="00003-9d6a621e-8a72-4190-a880-f6ca02e32b86")
        == "00003-9d6a621e-8a72-4190-a880-f6ca02e32b86.metadata.json"
    )
    assert meta("iceberg/lineitem_iceberg_gz_no_hint", version="?", metadata_compression_codec="gzip") == (
        "v2.gz.metadata.json"
    )
    assert meta(
        "iceberg/lineitem_iceberg_no_hint", version="?", version_name_format="v%s%s.metadata.json"
    ) == ("v2.metadata.json")
    assert meta("iceberg/lineitem_iceberg", version="2", version_name_format="v%s%s.metadata.json") == (
        "v2.metadata.json"
    )
    # A file name works as a version too; a number also finds the 0000N-<uuid> file (beyond DuckDB).
    assert meta("uuid", version="00000-e8729e86-fe06-4ffc-835b-283f0d3e9921.metadata.json").startswith(
        "00000-"
    )
    assert meta("add_columns_with_defaults/default.db/add_columns_with_defaults", version=2) == (
        "00002-2d907d9d-0f96-4bf3-9548-edfd9194704c.metadata.json"
    )


def test_version_errors_match_duckdbs(conformance: Path) -> None:
    lineitem = str(table(conformance, "iceberg/lineitem_iceberg"))
    with pytest.raises(ValidationError, match=r"'%s' exactly twice.*found 1"):
        locate_table(lineitem, version_name_format="%s")
    gz = str(table(conformance, "iceberg/lineitem_iceberg_gz"))
    # DuckDB: "Iceberg metadata file not found for table version '2' using 'none' compression".
    with pytest.raises(TableNotFoundError, match=r"version '2'.*v2\.metadata\.json, 2\.metadata\.json"):
        locate_table(gz, metadata_compression_codec="none")
    with pytest.raises(TableNotFoundError, match=r"blat2\.gz"):
        locate_table(gz, metadata_compression_codec="gzip", version_name_format="blat%s%s")
    with pytest.raises(ValidationError, match="blarg"):
        locate_table(gz, metadata_compression_codec="blarg")
    with pytest.raises(TableNotFoundError, match=r"version '9'.*tried v9\.metadata\.json"):
        locate_table(lineitem, version=9)
    with pytest.raises(ValidationError, match="only applies to a table folder"):
        locate_table(f"{lineitem}/metadata/v1.metadata.json", version=2)


def _copy(conformance: Path, tmp_path: Path, rel: str = "iceberg/lineitem_iceberg_no_hint") -> Path:
    folder = tmp_path / "t"
    shutil.copytree(table(conformance, rel), folder)
    return folder


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        ("2", "v2.metadata.json"),
        ("2\n", "v2.metadata.json"),
        (" 2 ", "v2.metadata.json"),
        ("v2.metadata.json", "v2.metadata.json"),
        # A stale hint is read forward to the newest consecutive version (Java's HadoopTableOperations)
        ("1", "v2.metadata.json"),
        ("v1.metadata.json", "v2.metadata.json"),
    ],
)
def test_version_hint_forms(conformance: Path, tmp_path: Path, hint: str, expected: str) -> None:
    folder = _copy(conformance, tmp_path)
    (folder / "metadata/version-hint.text").write_text(hint)
    assert locate_table(str(folder)).metadata_location == f"{folder}/metadata/{expected}"


def test_version_hint_number_finds_uuid_named_files(conformance: Path, tmp_path: Path) -> None:
    folder = _copy(conformance, tmp_path)
    (folder / "metadata/v1.metadata.json").rename(folder / "metadata/00001-aaaa.metadata.json")
    (folder / "metadata/v2.metadata.json").rename(folder / "metadata/00002-bbbb.metadata.json")
    (folder / "metadata/version-hint.text").write_text("2")
    assert locate_table(str(folder)).metadata_location == f"{folder}/metadata/00002-bbbb.metadata.json"
    (folder / "metadata/00002-cccc.metadata.json").write_bytes(b"{}")
    with pytest.raises(TableNotFoundError, match=r"ambiguous.*00002-bbbb.*00002-cccc"):
        locate_table(str(folder))


def test_a_stale_hint_is_read_forward_as_hadoop_tables_do(conformance: Path, tmp_path: Path) -> None:
    # A Hadoop-catalog table whose writer committed v2 and v3 but left the hint at 1 (Java updates
    # the hint after the metadata file, best effort; some engines never update it).
    folder = _copy(conformance, tmp_path)
    meta = folder / "metadata"
    v2 = json.loads((meta / "v2.metadata.json").read_text())
    v3 = {**v2, "last-updated-ms": v2["last-updated-ms"] + 1000, "properties": {"marker": "v3"}}
    (meta / "v3.metadata.json").write_text(json.dumps(v3))
    (meta / "version-hint.text").write_text("1\n")
    assert locate_table(str(folder)).metadata_location == f"{meta}/v3.metadata.json"
    # Java stops at the first missing version: v5 after a gap is not reached.
    shutil.copy(meta / "v3.metadata.json", meta / "v5.metadata.json")
    assert locate_table(str(folder)).metadata_location == f"{meta}/v3.metadata.json"
    # An explicit version is taken as asked.
    assert locate_table(str(folder), version=1).metadata_location == f"{meta}/v1.metadata.json"
    # The same with the `0000N-<uuid>` names most writers use, and through SQL.
    for n, name in ((1, "v1"), (2, "v2"), (3, "v3")):
        (meta / f"{name}.metadata.json").rename(meta / f"0000{n}-{uuid.uuid4()}.metadata.json")
    (meta / "v5.metadata.json").unlink()
    (meta / "version-hint.text").write_text("1")
    found = locate_table(str(folder)).metadata_location
    assert Path(found).name.startswith("00003-")
    con = duckdb.connect()
    iceduck.register(con)
    rows = con.execute(f"SELECT value FROM iceberg_properties('{folder}') WHERE key = 'marker'").fetchall()
    assert rows == [("v3",)]


def test_a_hint_naming_a_missing_version_says_so(conformance: Path, tmp_path: Path) -> None:
    folder = _copy(conformance, tmp_path)
    (folder / "metadata/version-hint.text").write_text("5")
    with pytest.raises(TableNotFoundError, match=r"version-hint.text names version '5'.*v5\.metadata\.json"):
        locate_table(str(folder))
    (folder / "metadata/version-hint.text").write_text("")  # an empty hint: fall back to guessing
    assert locate_table(str(folder)).metadata_location.endswith("/v2.metadata.json")


def test_guessing_orders_numbers_numerically(conformance: Path, tmp_path: Path) -> None:
    folder = _copy(conformance, tmp_path)
    for v in range(3, 11):
        shutil.copy(folder / "metadata/v1.metadata.json", folder / f"metadata/v{v}.metadata.json")
    assert metadata_version("v10.metadata.json") == (10,) > metadata_version("v9.metadata.json")  # type: ignore[operator]
    assert find_metadata_file(str(folder)) == f"{folder}/metadata/v10.metadata.json"


# -- errors ----------------------------------------------------------------------------------------


def test_missing_and_non_table_paths(conformance: Path, tmp_path: Path) -> None:
    missing = str(table(conformance, "iceberg/lineitem_iceberg_nonexistent"))
    with pytest.raises(TableNotFoundError, match="no such file or folder") as e:
        locate_table(missing)
    assert missing in str(e.value)
    with pytest.raises(TableNotFoundError, match=r"not an Iceberg table folder: .*equality_deletes/metadata"):
        locate_table(str(table(conformance, "equality_deletes")))
    with pytest.raises(TableNotFoundError, match="no such file or folder"):
        locate_table(str(table(conformance, "uuid/metadata/v99.metadata.json")))
    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata/snap-1.avro").write_bytes(b"x")
    with pytest.raises(TableNotFoundError, match=r"no metadata/version-hint.text and no metadata files"):
        locate_table(str(tmp_path))
    with pytest.raises(UnsupportedFormatError, match=r"hdfs://nn/t: hdfs:// storage is not supported yet"):
        locate_table("hdfs://nn/t")  # gs:// and az:// are stores now (tests/io/test_object_stores.py)
    with pytest.raises(TableNotFoundError, match="no catalog given"):
        locate_table("ns.some_table")


def test_table_folder_of() -> None:
    assert table_folder_of("file:///wh/ns/t/metadata/v1.metadata.json") == "/wh/ns/t"
    assert table_folder_of("s3://b/wh/t/metadata/00001-x.metadata.json") == "s3://b/wh/t"
    assert table_folder_of("/x/custom/v1.metadata.json") == "/x/custom"


# -- names in a catalog ----------------------------------------------------------------------------


def test_names_are_looked_up_in_the_catalog(tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog

    py = PySqlCatalog("lake", uri=f"sqlite:///{tmp_path}/cat.db", warehouse=f"file://{tmp_path}/wh")
    py.create_namespace("sales")
    t = py.create_table("sales.orders", schema=pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1, 2]}))
    t = py.load_table("sales.orders")
    catalog = SqlCatalog(f"{tmp_path}/cat.db", name="lake")
    want = TableLocation(t.metadata_location, f"{tmp_path}/wh/sales/orders", "sales.orders")
    assert locate_table("sales.orders", catalog=catalog) == want
    assert locate_table("lake.sales.orders", catalog=catalog) == want
    first = locate_table("sales.orders", catalog=catalog, version=0)  # PyIceberg names files 0000N-<uuid>
    assert first.metadata_location.rpartition("/")[2].startswith("00000-")
    # Paths still work with a catalog at hand.
    assert locate_table(f"{tmp_path}/wh/sales/orders", catalog=catalog).metadata_location == (
        t.metadata_location.removeprefix("file://")
    )
    with pytest.raises(TableNotFoundError) as e:
        locate_table("sales.nope", catalog=catalog)
    assert (
        "catalog 'lake'" in str(e.value)
        and "sales.nope" in str(e.value)
        and "no such file or folder" in str(e.value)
    )
