"""`BEGIN ... COMMIT` / `ROLLBACK` across lake tables (`iceduck.sql.transactions`) on the embedded
SQLite catalog, and `iceduck -c` in the shell.

Truth: plain DuckDB running the same statements on ordinary tables of the same rows (each
statement's result, the rows after); the catalog's own pointers and the files on disk (a failed
or rolled-back transaction changes no pointer and leaves no file); a second lake on the same
warehouse (what other processes see).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from iceduck import register
from iceduck.errors import CommitConflictError, IcebergError
from iceduck.lake import Lake, connect
from iceduck.spec.table_metadata import read_table_metadata
from iceduck.sql import SqlError

SETUP = [
    "CREATE TABLE {a} (id INTEGER, v VARCHAR)",
    "CREATE TABLE {b} (id INTEGER, n INTEGER)",
    "INSERT INTO {a} VALUES (1, 'one')",
    "INSERT INTO {b} VALUES (1, 10), (2, 20), (3, 30)",
]
BODY = [
    "INSERT INTO {a} VALUES (2, 'two'), (3, 'three')",
    "UPDATE {b} SET n = n + 1 WHERE id >= 2",
    "DELETE FROM {b} WHERE id = 1",
    "SELECT * FROM {a} ORDER BY id",  # the transaction's own writes
    "SELECT * FROM {b} ORDER BY id",
    "DELETE FROM {a} WHERE id = 3",
    "INSERT INTO {b} SELECT id + 10, length(v) FROM {a}",
    "SELECT count(*), sum(n) FROM {b}",
]
LAKE = {"a": "ns.a", "b": "ns.b"}
LAKE_READ = {"a": "lake.ns.a", "b": "lake.ns.b"}
PLAIN = {"a": "ns.a", "b": "ns.b"}
ALL_ROWS = {t: "SELECT * FROM {" + t + "} ORDER BY ALL" for t in "ab"}


@pytest.fixture
def wh(tmp_path: Path) -> Path:
    return tmp_path / "wh"


@pytest.fixture
def lake(wh: Path) -> Iterator[Lake]:
    with connect(wh) as lk:
        lk.create_namespace("ns")
        yield lk


def rows(rel: Any) -> list[tuple[Any, ...]]:
    return [] if rel is None else rel.fetchall()


def on_lake(lake: Lake, statement: str) -> list[tuple[Any, ...]]:
    names = LAKE_READ if statement.startswith("SELECT") else LAKE
    text = statement.format(**names)
    if "FROM {a}" in statement and not statement.startswith("SELECT"):
        text = statement.format(a="lake.ns.a", b=names["b"])  # the query of INSERT ... SELECT
    return rows(lake.sql(text))


def on_plain(con: duckdb.DuckDBPyConnection, statement: str) -> list[tuple[Any, ...]]:
    return con.execute(statement.format(**PLAIN)).fetchall()


def plain_db() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE SCHEMA ns")
    for s in SETUP:
        con.execute(s.format(**PLAIN))
    return con


def setup_lake(lake: Lake) -> None:
    for s in SETUP:
        on_lake(lake, s)


def state(lake: Lake) -> dict[str, Any]:
    """Each table's metadata file and rows, as another process sees them."""
    with connect(lake.warehouse) as other:
        return {
            t: (other.table(t).metadata_location, rows(other.sql(f"SELECT * FROM lake.{t} ORDER BY ALL")))
            for t in ("ns.a", "ns.b")
        }


def files(wh: Path) -> set[Path]:
    return {
        p
        for p in wh.rglob("*")
        if p.is_file() and p.name != "catalog.db" and not p.name.startswith("catalog.db")
    }


@pytest.mark.parametrize(
    ("begin", "end"),
    [
        ("BEGIN", "COMMIT"),
        ("BEGIN TRANSACTION", "END"),
        ("START TRANSACTION", "COMMIT TRANSACTION"),
        ("BEGIN", "ROLLBACK"),
        ("START TRANSACTION", "ABORT"),
        ("BEGIN TRANSACTION", "ROLLBACK TRANSACTION"),
    ],
)
def test_a_transaction_does_what_duckdb_does_on_plain_tables(
    lake: Lake, wh: Path, begin: str, end: str
) -> None:
    plain = plain_db()
    setup_lake(lake)
    before = state(lake)
    before_files = files(wh)
    plain.execute(begin)
    lake.sql(begin)
    for statement in BODY:
        assert on_lake(lake, statement) == on_plain(plain, statement), statement
        if statement.startswith("INSERT"):
            assert state(lake) == before  # nobody else sees the transaction's writes
    plain.execute(end)
    lake.sql(end)
    for t in ("a", "b"):
        query = ALL_ROWS[t]
        assert on_lake(lake, query) == on_plain(plain, query)
    after = state(lake)
    if "COMMIT" in end or end == "END":
        assert after != before
        assert [after[t][1] for t in after] == [on_plain(plain, ALL_ROWS[t]) for t in "ab"]
    else:  # nothing changed, and every file the transaction wrote is gone
        assert after == before
        assert files(wh) == before_files


def test_several_writes_to_one_table_are_snapshots_of_one_commit(lake: Lake) -> None:
    setup_lake(lake)
    handle = lake.table("ns.b")
    base = read_table_metadata(Path(handle.metadata_location).read_bytes())
    lake.sql(
        "BEGIN; UPDATE ns.b SET n = 0 WHERE id = 1; DELETE FROM ns.b WHERE id = 2; INSERT INTO ns.b VALUES (4, 40); COMMIT"
    )
    location = handle.metadata_location
    md = read_table_metadata(Path(location).read_bytes())
    # one commit: the new metadata file follows the one before BEGIN directly
    assert [e.metadata_file for e in md.metadata_log][-1] == lake.catalog.previous_metadata_location(
        "ns", "b"
    )
    assert len(md.metadata_log) == len(base.metadata_log) + 1
    assert Path(location).name.startswith("00002-")  # create (0), insert (1), then this one commit
    # three snapshots, each the parent of the next, in the order of the statements
    new = [s for s in md.snapshots if s.snapshot_id not in {x.snapshot_id for x in base.snapshots}]
    assert [s.summary.get("operation") for s in new] == ["overwrite", "delete", "append"]
    assert [s.parent_snapshot_id for s in new] == [
        base.current_snapshot_id,
        new[0].snapshot_id,
        new[1].snapshot_id,
    ]
    assert md.current_snapshot_id == new[-1].snapshot_id
    assert [s.sequence_number for s in new] == [base.last_sequence_number + i for i in (1, 2, 3)]
    assert rows(lake.sql("SELECT * FROM lake.ns.b ORDER BY id")) == [(1, 0), (3, 30), (4, 40)]
    # no staged metadata file is left behind
    assert not [p for p in Path(location).parent.iterdir() if p.name.startswith("staged-")]


def test_a_conflict_on_any_table_fails_the_whole_commit(lake: Lake, wh: Path) -> None:
    setup_lake(lake)
    lake.sql("BEGIN; INSERT INTO ns.a VALUES (2, 'two'); UPDATE ns.b SET n = -1")
    with connect(wh) as other:  # another process appends to b meanwhile
        other.sql("INSERT INTO ns.b VALUES (9, 90)")
        before = state(lake)
    before_files = files(wh)
    with pytest.raises(
        CommitConflictError, match=r"nothing was committed.*table ns\.b.*assert-ref-snapshot-id"
    ) as e:
        lake.sql("COMMIT")
    assert "\n" not in str(e.value)
    assert state(lake) == before  # a stayed as it was too
    staged = {p for p in before_files if p.name.startswith("staged-")}
    assert staged and files(wh) < before_files  # the transaction's files are gone ...
    assert not files(wh) & staged
    # ... all of them: what is left is what the tables reach
    assert rows(lake.sql("SELECT * FROM lake.ns.b ORDER BY id")) == [(1, 10), (2, 20), (3, 30), (9, 90)]
    # the lake works on: a new transaction commits
    lake.sql("BEGIN; INSERT INTO ns.a VALUES (2, 'two'); UPDATE ns.b SET n = -1; COMMIT")
    assert rows(lake.sql("SELECT count(*) FROM lake.ns.a")) == [(2,)]
    assert rows(lake.sql("SELECT DISTINCT n FROM lake.ns.b")) == [(-1,)]


def test_rollback_leaves_every_table_and_file_as_before(lake: Lake, wh: Path) -> None:
    setup_lake(lake)
    before, before_files = state(lake), files(wh)
    lake.sql("BEGIN")
    lake.sql("INSERT INTO ns.a SELECT i, 'x' FROM range(100) r(i)")
    lake.sql("MERGE INTO ns.b AS t USING (SELECT 2 AS id, 0 AS n UNION ALL SELECT 7, 70) s ON t.id = s.id "
             "WHEN MATCHED THEN UPDATE SET n = s.n WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.n)")  # fmt: skip
    lake.sql("ALTER TABLE ns.b ADD COLUMN z VARCHAR")
    lake.sql("INSERT INTO ns.b VALUES (8, 80, 'z')")
    assert rows(lake.sql("SELECT * FROM lake.ns.b ORDER BY id")) == [
        (1, 10, None), (2, 0, None), (3, 30, None), (7, 70, None), (8, 80, "z"),
    ]  # fmt: skip
    assert files(wh) != before_files
    lake.sql("ROLLBACK")
    assert state(lake) == before
    assert files(wh) == before_files
    assert rows(lake.sql("SELECT * FROM lake.ns.b ORDER BY id")) == [(1, 10), (2, 20), (3, 30)]


def test_a_failed_statement_rolls_the_transaction_back_at_commit(lake: Lake, wh: Path) -> None:
    plain = plain_db()
    setup_lake(lake)
    before, before_files = state(lake), files(wh)
    script = ["BEGIN", "INSERT INTO {a} VALUES (5, 'five')", "INSERT INTO {b} VALUES ('not a number', 1)"]
    plain_errors, lake_errors = [], []
    for s in script:
        try:
            on_plain(plain, s)
        except duckdb.Error as e:
            plain_errors.append(type(e).__name__)
        try:
            on_lake(lake, s)
        except duckdb.Error as e:
            lake_errors.append(type(e).__name__)
    assert lake_errors == plain_errors == ["ConversionException"]
    plain.execute("COMMIT")  # DuckDB rolls back without a word
    with pytest.raises(
        IcebergError, match=r"rolled back because a statement inside it failed.*nothing was committed"
    ):
        lake.sql("COMMIT")
    for t in ("a", "b"):
        query = ALL_ROWS[t]
        assert on_lake(lake, query) == on_plain(plain, query)
    assert state(lake) == before and files(wh) == before_files


def test_duckdb_tables_inside_commit_and_roll_back_with_the_lake(lake: Lake, wh: Path) -> None:
    setup_lake(lake)
    lake.sql("CREATE TABLE staging (id INTEGER, v VARCHAR)")
    lake.sql(
        "BEGIN; INSERT INTO staging VALUES (7, 'seven'); INSERT INTO ns.a SELECT * FROM staging; ROLLBACK"
    )
    assert rows(lake.sql("SELECT count(*) FROM staging")) == [(0,)]
    assert rows(lake.sql("SELECT * FROM lake.ns.a")) == [(1, "one")]
    lake.sql("BEGIN; INSERT INTO staging VALUES (7, 'seven'); INSERT INTO ns.a SELECT * FROM staging; COMMIT")
    assert rows(lake.sql("SELECT * FROM staging")) == [(7, "seven")]
    assert rows(lake.sql("SELECT * FROM lake.ns.a ORDER BY id")) == [(1, "one"), (7, "seven")]
    # the Iceberg commit fails: DuckDB's part is rolled back too
    lake.sql("BEGIN; INSERT INTO staging VALUES (8, 'eight'); UPDATE ns.b SET n = 0")
    with connect(wh) as other:
        other.sql("DELETE FROM ns.b WHERE id = 3")
    with pytest.raises(CommitConflictError, match="nothing was committed"):
        lake.sql("COMMIT")
    assert rows(lake.sql("SELECT * FROM staging")) == [(7, "seven")]
    assert rows(lake.sql("SELECT * FROM lake.ns.b ORDER BY id")) == [(1, 10), (2, 20)]


JOINED = [
    "INSERT INTO staging VALUES (2, 'TWO'), (4, 'four')",
    "MERGE INTO {a} t USING staging s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v "
    "WHEN NOT MATCHED THEN INSERT *",
    "SELECT * FROM {a} ORDER BY id",
    "UPDATE {a} SET v = s.v || '!' FROM staging s WHERE a.id = s.id",
    "DELETE FROM {b} USING staging s WHERE b.id = s.id",
    "INSERT INTO staging VALUES (1, 'ONE')",
    "INSERT OR REPLACE INTO {k} SELECT * FROM staging",
    "INSERT INTO {k} SELECT id + 10, v FROM staging ON CONFLICT DO UPDATE SET v = excluded.v",
    "INSERT INTO {k} VALUES (1, 'no') ON CONFLICT DO NOTHING",
    "MERGE INTO {k} USING staging USING (id) WHEN MATCHED THEN DELETE",
    "SELECT current_setting('TimeZone')",
]


@pytest.mark.parametrize("end", ["COMMIT", "ROLLBACK"])
def test_joined_writes_and_upserts_read_duckdb_tables_the_transaction_wrote(
    lake: Lake, wh: Path, end: str
) -> None:
    """MERGE, UPDATE ... FROM, DELETE ... USING and upserts copy the rows they touch; inside a
    transaction that wrote a DuckDB table they read its uncommitted rows, as DuckDB does."""
    setup_lake(lake)
    plain = plain_db()
    for create in (lake.sql, plain.execute):
        create("CREATE TABLE staging (id INTEGER, v VARCHAR)")
        create("SET TimeZone = 'Asia/Tokyo'")
    lake.sql("CREATE TABLE ns.k (id INTEGER NOT NULL, v VARCHAR, PRIMARY KEY (id))")
    plain.execute("CREATE TABLE ns.k (id INTEGER NOT NULL, v VARCHAR, PRIMARY KEY (id))")
    names = {"a": "ns.a", "b": "ns.b", "k": "ns.k"}
    lake.sql("BEGIN")
    plain.execute("BEGIN")
    for statement in JOINED:
        on = statement.format(**{t: f"lake.{n}" if statement.startswith("SELECT") else n for t, n in names.items()})
        assert rows(lake.sql(on)) == plain.execute(statement.format(**names)).fetchall(), statement
    lake.sql(end)
    plain.execute(end)
    for t in names:
        query = f"SELECT * FROM {{}}{names[t]} ORDER BY ALL"
        assert rows(lake.sql(query.format("lake."))) == plain.execute(query.format("")).fetchall(), t
    query = "SELECT * FROM staging ORDER BY ALL"
    assert rows(lake.sql(query)) == plain.execute(query).fetchall()
    if end == "ROLLBACK":
        assert not rows(lake.sql(query))
    assert rows(lake.sql("SELECT current_setting('TimeZone')")) == [("Asia/Tokyo",)]
    # a failing statement inside still aborts the transaction, as DuckDB's
    lake.sql("BEGIN; INSERT INTO staging VALUES (9, 'nine')")
    with pytest.raises(duckdb.Error, match="nope"):
        lake.sql("UPDATE ns.a SET v = s.nope FROM staging s WHERE a.id = s.id")
    with pytest.raises(IcebergError, match="rolled back because a statement inside it failed"):
        lake.sql("COMMIT")
    assert rows(lake.sql("SELECT count(*) FROM staging WHERE id = 9")) == [(0,)]


def test_statements_a_transaction_cannot_hold_are_refused(lake: Lake, wh: Path) -> None:
    setup_lake(lake)
    before = state(lake)
    lake.sql("BEGIN; INSERT INTO ns.a VALUES (2, 'two')")
    for statement, what in [
        ("CREATE TABLE ns.c (x INTEGER)", "CREATE TABLE"),
        ("DROP TABLE ns.a", "DROP TABLE"),
        ("CREATE SCHEMA other", "CREATE SCHEMA"),
        ("BEGIN", "open already"),
        (
            "SELECT * FROM iceberg_expire_snapshots('lake.ns.a', older_than := now() + INTERVAL 1 DAY, "
            "retain_last := 1, dry_run := false)",
            "expiring snapshots cannot run inside",
        ),
    ]:
        with pytest.raises((IcebergError, duckdb.Error), match=what):
            rows(lake.sql(statement))
    lake.sql("ROLLBACK")
    assert state(lake) == before
    assert lake.list_tables("ns") == ("a", "b")
    assert rows(lake.sql("SELECT count(*) FROM iceberg_snapshots('lake.ns.a')")) == [(1,)]
    with pytest.raises(duckdb.TransactionException, match="no transaction is active"):
        lake.sql("COMMIT")  # as DuckDB says it
    # a DuckDB transaction opened behind Lake.sql's back still refuses lake writes
    lake.con.execute("BEGIN TRANSACTION")
    with pytest.raises(SqlError, match="outside BEGIN"):
        lake.sql("INSERT INTO ns.a VALUES (3, 'three')")
    lake.con.execute("ROLLBACK")


def test_iceduck_dash_c_commits_a_transaction(tmp_path: Path) -> None:
    def shell(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "iceduck.cli", "--warehouse", str(tmp_path / "wh"), "--create", "--mode", "csv", "-c", script],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
        )  # fmt: skip

    made = shell("CREATE SCHEMA ns; CREATE TABLE ns.a (id INTEGER); CREATE TABLE ns.b (id INTEGER);")
    assert made.returncode == 0, made.stderr
    done = shell(
        "BEGIN; INSERT INTO ns.a VALUES (1), (2); INSERT INTO ns.b VALUES (3); "
        "SELECT count(*) AS n FROM lake.ns.a; COMMIT; "
        "BEGIN; DELETE FROM ns.a; ROLLBACK; SELECT * FROM lake.ns.a UNION ALL SELECT * FROM lake.ns.b ORDER BY 1;"
    )
    assert (done.returncode, done.stderr, done.stdout) == (
        0,
        "",
        "Count\n2\nCount\n1\nn\n2\nCount\n2\nid\n1\n2\n3\n",
    )
    # -c stops at the first error; the transaction it leaves open is rolled back as the shell closes
    failed = shell("BEGIN; INSERT INTO ns.a VALUES (4); INSERT INTO ns.b VALUES ('x'); COMMIT;")
    assert failed.returncode == 1 and "Could not convert string 'x'" in failed.stderr
    after = shell("SELECT * FROM lake.ns.a UNION ALL SELECT * FROM lake.ns.b ORDER BY 1;")
    assert (after.returncode, after.stdout) == (0, "id\n1\n2\n3\n")
    assert not [p for p in (tmp_path / "wh").rglob("*") if p.name.startswith("staged-")]


@pytest.fixture(scope="module")
def reference() -> Any:
    from tests.interop.conftest import INSTALL, load_reference

    module = load_reference()
    if module is None:
        pytest.skip(f"Java Iceberg reference not installed: run {INSTALL}")
    return module


def test_java_reads_every_snapshot_of_a_transaction(lake: Lake, reference: Any) -> None:
    setup_lake(lake)
    lake.sql(
        "BEGIN; UPDATE ns.b SET n = 0 WHERE id = 1; DELETE FROM ns.b WHERE id = 2; INSERT INTO ns.b VALUES (4, 40); COMMIT"
    )
    location = lake.table("ns.b").metadata_location
    md = read_table_metadata(Path(location).read_bytes())
    middle = md.snapshots[-2].snapshot_id  # after the UPDATE and the DELETE, before the INSERT
    assert sorted(tuple(r) for r in reference.spark_read(location)) == [(1, 0), (3, 30), (4, 40)]
    expected = rows(lake.sql(f"SELECT * FROM lake.ns.b AT (VERSION => {middle}) ORDER BY ALL"))
    assert expected == [(1, 0), (3, 30)]
    assert sorted(tuple(r) for r in reference.spark_read(location, snapshot_id=middle)) == expected


def test_a_reader_of_the_table_folder_sees_no_staged_commit(lake: Lake, wh: Path) -> None:
    setup_lake(lake)
    lake.sql("BEGIN; INSERT INTO ns.a VALUES (2, 'two')")
    plain = duckdb.connect()
    register(plain)
    by_folder = f"SELECT * FROM iceberg_scan('{wh / 'ns' / 'a'}') ORDER BY ALL"
    assert plain.sql(by_folder).fetchall() == [(1, "one")]  # no version hint: the newest file by listing
    assert rows(lake.sql("SELECT * FROM iceberg_scan('lake.ns.a') ORDER BY ALL")) == [(1, "one"), (2, "two")]
    lake.sql("COMMIT")
    assert plain.sql(by_folder).fetchall() == [(1, "one"), (2, "two")]


def test_closing_the_lake_rolls_back_an_open_transaction(wh: Path) -> None:
    with connect(wh) as lake:
        lake.create_namespace("ns")
        setup_lake(lake)
        before, before_files = state(lake), files(wh)
        lake.sql("BEGIN; INSERT INTO ns.a VALUES (5, 'five'); DELETE FROM ns.b")
        assert files(wh) != before_files
    assert files(wh) == before_files
    with connect(wh) as again:
        assert state(again) == before
