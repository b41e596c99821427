"""A catalog in a SQLite file, in the layout PyIceberg's `SqlCatalog` uses, so both share one file.

Tables (as PyIceberg 0.12 creates them; a catalog file without `iceberg_type`, the older layout,
is used as it is and not migrated):

    iceberg_tables(catalog_name, table_namespace, table_name,       -- primary key
                   metadata_location, previous_metadata_location,
                   iceberg_type)            -- 'TABLE' for tables, NULL in old rows, else a view
    iceberg_namespace_properties(catalog_name, namespace, property_key,   -- primary key
                                 property_value)

Conventions shared with PyIceberg: rows are scoped by `catalog_name`; a namespace is a dotted
string (`a.b`) and exists while it has a property row, a table, or a sub-namespace that does; a
namespace created without properties gets `exists = true` so that it has a row; rows whose
`iceberg_type` is neither NULL nor 'TABLE' (views written by other tools) are not tables here.
The default table location is `<namespace property 'location'>/<table>`, else
`<warehouse>/<namespace>/<table>` (PyIceberg 0.12's SQL catalog convention; `.db` folders are
its Hive/Glue convention, not this one).

Concurrency: every change opens its own connection with a busy timeout and runs in a `BEGIN
IMMEDIATE` transaction. Reads share one connection per thread and process (opening one costs more
than the query): in autocommit mode each read statement sees what was committed when it started,
and every read is fetched whole, so no statement holds a lock once its call returns. `PRAGMA
data_version` on that connection moves when any other connection commits: `change_token` is the
cheap "did the catalog change?" for callers keeping copies of what they listed. `commit` is a
compare-and-swap on `metadata_location`; `commit_table` checks a change's requirements against the
metadata the pointer names, applies its updates, writes the new metadata file and swaps the
pointer to it (see `iceduck.catalog.commit`). The journal mode of the file is left as it is: switching
a shared file to WAL would change it for every other tool and breaks on network file systems.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import threading
from collections.abc import Hashable, Iterator, Mapping, Sequence

from iceduck.catalog.base import (
    NamedCatalog,
    check_namespace,
    check_new_name,
    check_new_namespace,
    check_table_name,
    namespace_contents,
)
from iceduck.catalog.commit import (
    PointerCommits,
    crash_point,
    next_metadata_path,
    remove_quietly,
    write_metadata,
)
from iceduck.catalog.views import SqlViews
from iceduck.errors import (
    AlreadyExistsError,
    CommitConflictError,
    CorruptFileError,
    NamespaceNotFoundError,
    TableNotFoundError,
    ValidationError,
)
from iceduck.io.fileio import FileIO, local_path
from iceduck.io.paths import normalize_path, split_scheme
from iceduck.io.storage import default_io, is_remote
from iceduck.spec.table_metadata import TableMetadata

CATALOG_FILE_NAME = "catalog.db"
DEFAULT_CATALOG_NAME = "iceduck"
CACHE_ENV = "ICEDUCK_CACHE_DIR"
TABLE_TYPE = "TABLE"
NAMESPACE_EXISTS_PROPERTY = "exists"
NAMESPACE_LOCATION_PROPERTY = "location"

_CREATE_TABLES = """
CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
);
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000) NOT NULL,
    PRIMARY KEY (catalog_name, namespace, property_key)
);
"""


# Read connections are numbered: a token from one connection never equals one from another.
_GENERATIONS = itertools.count()


def _database_path(database: str) -> str:
    """The file path for `database`: a path, a `file:` URI or an SQLAlchemy `sqlite:///` URL."""
    scheme, rest = split_scheme(database)
    if scheme == "sqlite":
        if not rest.startswith("///"):
            raise ValidationError(f"{database}: expected sqlite:///relative.db or sqlite:////absolute.db")
        return rest[3:]
    return local_path(database)


def catalog_cache_folder(location: str) -> str:
    """The local folder holding the SQLite catalog of an object-store warehouse `location`:
    `$ICEDUCK_CACHE_DIR` (else `$XDG_CACHE_HOME/iceduck`, else `~/.cache/iceduck`) +
    `/warehouses/<scheme>/<bucket>/<path>`."""
    root = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "iceduck"
    )
    scheme, rest = split_scheme(normalize_path(location))
    parts = [p for p in rest.split("/") if p not in ("", ".", "..")]
    return os.path.join(os.path.abspath(root), "warehouses", scheme or "local", *parts)


def _like_prefix(namespace: str) -> str:
    """A LIKE pattern (escape `!`) for the sub-namespaces of `namespace`."""
    return namespace.replace("!", "!!").replace("_", "!_").replace("%", "!%") + ".%"


class SqlCatalog(NamedCatalog, PointerCommits, SqlViews):
    """A catalog in a SQLite file, shareable with PyIceberg's `SqlCatalog` of the same name."""

    def __init__(
        self,
        database: str,
        *,
        name: str = DEFAULT_CATALOG_NAME,
        warehouse: str | None = None,
        io: FileIO | None = None,
        timeout: float = 30.0,
        public: bool = False,
    ) -> None:
        """Open (creating if needed) the catalog `name` in the SQLite file `database`.

        `warehouse` is where tables go by default; `timeout` is how long (seconds) an operation
        waits for another process's lock before failing. `public`: error messages name the catalog
        by its name only, never its file (`iceduck serve`: errors go to clients).
        """
        if not name:
            raise ValidationError("a catalog needs a non-empty name")
        self._name = name
        self._database = _database_path(database)
        self._shown = f"catalog '{name}'" if public else self._database
        self._warehouse = warehouse.rstrip("/") if warehouse else None
        self._io = io or default_io()
        self._timeout = timeout
        self._readers = threading.local()  # (pid, connection, generation) of this thread's reader
        with self._connect() as conn:
            present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"iceberg_tables", "iceberg_namespace_properties"} <= present:
            with self._write() as conn:  # IF NOT EXISTS: another process may have just made them
                # One statement at a time: executescript() would commit the open transaction.
                for statement in _CREATE_TABLES.split(";"):
                    if statement.strip():
                        conn.execute(statement)
        with self._connect() as conn:
            columns = {row[1] for row in conn.execute("PRAGMA table_info(iceberg_tables)")}
        self._typed = "iceberg_type" in columns

    @classmethod
    def open(
        cls,
        warehouse: str,
        name: str = DEFAULT_CATALOG_NAME,
        *,
        io: FileIO | None = None,
        public: bool = False,
    ) -> SqlCatalog:
        """The catalog in `<warehouse>/catalog.db` with tables under `<warehouse>/<ns>/<table>`;
        creates the folder and the file if needed.

        For a warehouse on an object store (`s3://bucket/path`) the SQLite file cannot live next
        to the tables: it goes to this machine's cache folder (`catalog_cache_folder`), and the
        tables' files go to the object store.
        """
        if is_remote(warehouse):
            location = normalize_path(warehouse)
            folder = catalog_cache_folder(location)
            os.makedirs(folder, exist_ok=True)
            return cls(
                os.path.join(folder, CATALOG_FILE_NAME), name=name, warehouse=location, io=io, public=public
            )
        folder = os.path.abspath(local_path(warehouse))
        os.makedirs(folder, exist_ok=True)
        return cls(os.path.join(folder, CATALOG_FILE_NAME), name=name, warehouse=folder, io=io, public=public)

    # -- plumbing ----------------------------------------------------------------------------

    @property
    def database(self) -> str:
        """Path of the SQLite file."""
        return self._database

    @property
    def warehouse(self) -> str | None:
        """Default root for new tables, if any."""
        return self._warehouse

    def __repr__(self) -> str:
        return f"SqlCatalog({self._database!r}, name={self._name!r})"

    def _open(self) -> sqlite3.Connection:
        try:
            # isolation_level=None: no implicit transactions; the writers below begin their own.
            return sqlite3.connect(self._database, timeout=self._timeout, isolation_level=None)
        except sqlite3.Error as e:
            raise ValidationError(f"{self._shown}: cannot open catalog database: {e}") from None

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """SQLite's errors as iceduck's: lock contention is a retryable conflict, the rest a corrupt file."""
        try:
            yield
        except sqlite3.IntegrityError:
            raise
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                # Lock contention that outlasted the timeout: transient, so retryable like a conflict.
                raise CommitConflictError(
                    f"{self._shown}: catalog '{self._name}' stayed locked by another process for "
                    f"more than {self._timeout:g}s ({e}); retry"
                ) from e
            raise CorruptFileError(self._shown, f"catalog database error: {e}") from e
        except sqlite3.DatabaseError as e:
            raise CorruptFileError(self._shown, f"not a usable catalog database: {e}") from e

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection of its own (for changes), closed afterwards."""
        conn = self._open()
        try:
            with self._errors():
                yield conn
        finally:
            conn.close()

    def _reader(self) -> tuple[sqlite3.Connection, int]:
        """This thread's read connection (a new one after a fork) and its generation number."""
        state = getattr(self._readers, "state", None)
        if state is None or state[0] != os.getpid():
            state = (os.getpid(), self._open(), next(_GENERATIONS))
            self._readers.state = state
        return state[1], state[2]

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """The shared read connection (read statements only, each fetched whole); after an error
        it is dropped, so the next read opens a fresh one."""
        conn, _ = self._reader()
        try:
            with self._errors():
                yield conn
        except BaseException:
            self._readers.state = None
            with contextlib.suppress(sqlite3.Error):
                conn.close()
            raise

    def change_token(self) -> Hashable:
        """A value that differs from an earlier one whenever anything was committed to the catalog
        file since (by any connection, thread or process); cheap (one pragma on the read connection)."""
        conn, generation = self._reader()
        with self._read():
            ((version,),) = conn.execute("PRAGMA data_version").fetchall()
        return (os.getpid(), generation, version)

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A connection inside `BEGIN IMMEDIATE`: the write lock is taken up front, so two
        writers queue on the busy timeout instead of deadlocking on a lock upgrade."""
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _type_filter(self) -> str:
        return " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)" if self._typed else ""

    def _table_ref(self, namespace: str, name: str) -> str:
        if self._shown != self._database:
            return f"table {namespace}.{name} in catalog '{self._name}'"
        return f"table {namespace}.{name} in catalog '{self._name}' ({self._database})"

    def _namespace_ref(self, namespace: str) -> str:
        if self._shown != self._database:
            return f"namespace '{namespace}' in catalog '{self._name}'"
        return f"namespace '{namespace}' in catalog '{self._name}' ({self._database})"

    # -- namespaces --------------------------------------------------------------------------

    def _namespace_exists(self, conn: sqlite3.Connection, namespace: str) -> bool:
        like = _like_prefix(namespace)
        for table, column in (
            ("iceberg_tables", "table_namespace"),
            ("iceberg_namespace_properties", "namespace"),
        ):
            rows = conn.execute(
                f"SELECT 1 FROM {table} WHERE catalog_name = ? AND ({column} = ? OR {column} LIKE ? ESCAPE '!') LIMIT 1",
                (self._name, namespace, like),
            ).fetchall()
            if rows:
                return True
        return False

    def _require_namespace(self, conn: sqlite3.Connection, namespace: str) -> None:
        if not self._namespace_exists(conn, namespace):
            raise NamespaceNotFoundError(f"{self._namespace_ref(namespace)} does not exist")

    def namespace_exists(self, namespace: str) -> bool:
        """True if the namespace exists (it has properties, tables or existing sub-namespaces)."""
        check_namespace(namespace)
        with self._read() as conn:
            return self._namespace_exists(conn, namespace)

    def list_namespaces(self, parent: str | None = None) -> tuple[str, ...]:
        """Namespaces one level below `parent` (top level when None), as dotted names, sorted."""
        prefix: tuple[str, ...] = ()
        with self._read() as conn:
            if parent is not None:
                check_namespace(parent)
                self._require_namespace(conn, parent)
                prefix = tuple(parent.split("."))
            rows = conn.execute(
                "SELECT table_namespace FROM iceberg_tables WHERE catalog_name = ? "
                "UNION SELECT namespace FROM iceberg_namespace_properties WHERE catalog_name = ?",
                (self._name, self._name),
            ).fetchall()
        found = set()
        for (namespace,) in rows:
            parts = tuple(namespace.split("."))
            if len(parts) > len(prefix) and parts[: len(prefix)] == prefix:
                found.add(".".join(parts[: len(prefix) + 1]))
        return tuple(sorted(found))

    def create_namespace(self, namespace: str, properties: Mapping[str, str] | None = None) -> None:
        """Create a namespace with `properties` (`exists = true` when there are none);
        `AlreadyExistsError` if it exists."""
        check_new_namespace(namespace)
        props = dict(properties or {}) or {NAMESPACE_EXISTS_PROPERTY: "true"}
        for key, value in props.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ValidationError(
                    f"namespace '{namespace}': property {key!r}={value!r} is not a string pair"
                )
        with self._write() as conn:
            if self._namespace_exists(conn, namespace):
                raise AlreadyExistsError(f"{self._namespace_ref(namespace)} exists already")
            conn.executemany(
                "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value) "
                "VALUES (?, ?, ?, ?)",
                [(self._name, namespace, k, v) for k, v in props.items()],
            )

    def drop_namespace(self, namespace: str) -> None:
        """Drop a namespace and its properties; `NamespaceNotFoundError` if absent,
        `ValidationError` if it still holds tables."""
        check_namespace(namespace)
        with self._write() as conn:
            self._require_namespace(conn, namespace)
            kind = "iceberg_type" if self._typed else "NULL"
            rows = conn.execute(
                f"SELECT table_name, {kind} FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ?"
                " ORDER BY table_name",  # views too: their rows keep the namespace
                (self._name, namespace),
            ).fetchall()
            if rows:
                tables = [str(name) for name, typ in rows if typ in (None, "TABLE")]
                views = [str(name) for name, typ in rows if typ not in (None, "TABLE")]
                raise ValidationError(
                    f"{self._namespace_ref(namespace)} is not empty: {namespace_contents(tables, views)}"
                )
            conn.execute(
                "DELETE FROM iceberg_namespace_properties WHERE catalog_name = ? AND namespace = ?",
                (self._name, namespace),
            )

    def namespace_properties(self, namespace: str) -> dict[str, str]:
        """The namespace's properties; `NamespaceNotFoundError` if absent."""
        check_namespace(namespace)
        with self._read() as conn:
            self._require_namespace(conn, namespace)
            rows = conn.execute(
                "SELECT property_key, property_value FROM iceberg_namespace_properties "
                "WHERE catalog_name = ? AND namespace = ? ORDER BY property_key",
                (self._name, namespace),
            ).fetchall()
        return dict(rows)

    def update_namespace_properties(
        self,
        namespace: str,
        updates: Mapping[str, str] | None = None,
        removals: frozenset[str] | set[str] | None = None,
    ) -> None:
        """Set `updates` and remove `removals` (absent keys are ignored). A namespace left with no
        property row gets `exists = true` back, so it does not vanish."""
        check_namespace(namespace)
        updates = dict(updates or {})
        removals = set(removals or ())
        if overlap := removals & updates.keys():
            raise ValidationError(
                f"namespace '{namespace}': keys both updated and removed: {sorted(overlap)}"
            )
        with self._write() as conn:
            self._require_namespace(conn, namespace)
            for key in removals | updates.keys():
                conn.execute(
                    "DELETE FROM iceberg_namespace_properties WHERE catalog_name = ? AND namespace = ? "
                    "AND property_key = ?",
                    (self._name, namespace, key),
                )
            conn.executemany(
                "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value) "
                "VALUES (?, ?, ?, ?)",
                [(self._name, namespace, k, v) for k, v in updates.items()],
            )
            left = conn.execute(
                "SELECT 1 FROM iceberg_namespace_properties WHERE catalog_name = ? AND namespace = ? LIMIT 1",
                (self._name, namespace),
            ).fetchone()
            if left is None:
                conn.execute(
                    "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value) "
                    "VALUES (?, ?, ?, 'true')",
                    (self._name, namespace, NAMESPACE_EXISTS_PROPERTY),
                )

    # -- tables ------------------------------------------------------------------------------

    def list_tables(self, namespace: str) -> tuple[str, ...]:
        """Names of the tables directly in `namespace`, sorted; `NamespaceNotFoundError` if absent."""
        check_namespace(namespace)
        with self._read() as conn:
            self._require_namespace(conn, namespace)
            rows = conn.execute(
                "SELECT table_name FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ?"
                + self._type_filter()
                + " ORDER BY table_name",
                (self._name, namespace),
            ).fetchall()
        return tuple(row[0] for row in rows)

    def table_exists(self, namespace: str, name: str) -> bool:
        """True if the catalog has the table (with a metadata location, as `load_table` needs)."""
        try:
            row = self._table_row(namespace, name, "metadata_location")
        except TableNotFoundError:
            return False
        return bool(row[0])

    def _table_row(self, namespace: str, name: str, column: str) -> tuple[object, ...]:
        """One column of the table's catalog row; `TableNotFoundError` if there is no such table."""
        check_namespace(namespace)
        check_table_name(name)
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {column} FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? "
                "AND table_name = ?" + self._type_filter(),
                (self._name, namespace, name),
            ).fetchall()
        if not rows:
            raise TableNotFoundError(f"{self._table_ref(namespace, name)} does not exist")
        return tuple(rows[0])

    def load_table(self, namespace: str, name: str) -> str:
        """The table's current metadata location, exactly as stored; `TableNotFoundError` if absent."""
        row = self._table_row(namespace, name, "metadata_location")
        if not row[0]:
            raise TableNotFoundError(f"{self._table_ref(namespace, name)} has no metadata location")
        return str(row[0])

    def previous_metadata_location(self, namespace: str, name: str) -> str | None:
        """The metadata location before the last commit (None after creation)."""
        row = self._table_row(namespace, name, "previous_metadata_location")
        return None if row[0] is None else str(row[0])

    def default_table_location(self, namespace: str, name: str) -> str:
        """`<namespace 'location' property>/<name>`, else `<warehouse>/<namespace>/<name>`: a new
        table's folder, so `name` must be one a folder can carry (`check_new_name`)."""
        check_table_name(name)
        check_new_name(name, "table name")
        props = self.namespace_properties(namespace)
        if base := props.get(NAMESPACE_LOCATION_PROPERTY):
            return f"{base.rstrip('/')}/{name}"
        if self._warehouse is None:
            raise ValidationError(
                f"{self._table_ref(namespace, name)}: no location given, and neither a warehouse nor a "
                f"'{NAMESPACE_LOCATION_PROPERTY}' property of the namespace to derive one from"
            )
        return f"{self._warehouse}/{namespace}/{name}"

    def create_table_entry(self, namespace: str, name: str, metadata_location: str) -> str:
        """Add a table pointing at `metadata_location` (written by the caller; nothing is written
        here); returns it. `NamespaceNotFoundError`; `AlreadyExistsError` if the name is taken."""
        check_namespace(namespace)
        check_table_name(name)
        check_new_name(name, "table name")
        if not metadata_location:
            raise ValidationError(f"{self._table_ref(namespace, name)}: empty metadata location")
        with self._write() as conn:
            self._require_namespace(conn, namespace)
            columns = (
                "catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location"
            )
            values: tuple[str | None, ...] = (self._name, namespace, name, metadata_location, None)
            if self._typed:
                columns += ", iceberg_type"
                values += (TABLE_TYPE,)
            marks = ", ".join("?" for _ in values)
            try:
                conn.execute(f"INSERT INTO iceberg_tables ({columns}) VALUES ({marks})", values)
            except sqlite3.IntegrityError:
                raise AlreadyExistsError(
                    f"{self._table_ref(namespace, name)}: a table or view of that name exists already"
                ) from None
        return metadata_location

    def register_table(self, namespace: str, name: str, metadata_location: str) -> str:
        """Add an existing table by its metadata file (which must exist); see `create_table_entry`."""
        if not self._io.exists(metadata_location):
            raise TableNotFoundError(
                f"{metadata_location}: metadata file not found; not registering {self._table_ref(namespace, name)}"
            )
        return self.create_table_entry(namespace, name, metadata_location)

    def drop_table(self, namespace: str, name: str) -> None:
        """Remove the table's entry (its files stay); `TableNotFoundError` if absent."""
        check_namespace(namespace)
        check_table_name(name)
        with self._write() as conn:
            cur = conn.execute(
                "DELETE FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?"
                + self._type_filter(),
                (self._name, namespace, name),
            )
            if cur.rowcount < 1:
                raise TableNotFoundError(f"{self._table_ref(namespace, name)} does not exist")

    def rename_table(self, namespace: str, name: str, new_namespace: str, new_name: str) -> None:
        """Rename the table's entry (files do not move). `TableNotFoundError`,
        `NamespaceNotFoundError` for the target namespace, `AlreadyExistsError` for the new name."""
        check_namespace(namespace)
        check_table_name(name)
        check_namespace(new_namespace)
        check_table_name(new_name)
        check_new_name(new_name, "table name")
        with self._write() as conn:
            self._require_namespace(conn, new_namespace)
            try:
                cur = conn.execute(
                    "UPDATE iceberg_tables SET table_namespace = ?, table_name = ? WHERE catalog_name = ? "
                    "AND table_namespace = ? AND table_name = ?" + self._type_filter(),
                    (new_namespace, new_name, self._name, namespace, name),
                )
            except sqlite3.IntegrityError:
                raise AlreadyExistsError(
                    f"cannot rename {self._table_ref(namespace, name)} to {new_namespace}.{new_name}: "
                    "a table or view of that name exists already"
                ) from None
            if cur.rowcount < 1:
                raise TableNotFoundError(f"{self._table_ref(namespace, name)} does not exist")

    def commit_all(self, swaps: Sequence[tuple[str, str, str | None, str]]) -> None:
        """Swap several tables' pointers in one transaction: all or none.

        Each swap is `(namespace, name, expected, new)`; `expected` None creates the table (its
        namespace must exist). `CommitConflictError` naming the first table whose pointer moved
        (or that exists already), `TableNotFoundError` for one that is gone; nothing changes then.
        """
        with self._write() as conn:
            for namespace, name, expected, new in swaps:
                check_namespace(namespace)
                check_table_name(name)
                if not new:
                    raise ValidationError(f"{self._table_ref(namespace, name)}: empty new metadata location")
                if expected is None:
                    self._require_namespace(conn, namespace)
                    exists = conn.execute(
                        "SELECT 1 FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? "
                        "AND table_name = ?",
                        (self._name, namespace, name),
                    ).fetchone()
                    if exists is not None:
                        raise CommitConflictError(
                            f"{self._table_ref(namespace, name)}: created by another writer meanwhile"
                        )
                    columns = "catalog_name, table_namespace, table_name, metadata_location"
                    values: tuple[str, ...] = (self._name, namespace, name, new)
                    if self._typed:
                        columns += ", iceberg_type"
                        values += (TABLE_TYPE,)
                    marks = ", ".join("?" for _ in values)
                    conn.execute(f"INSERT INTO iceberg_tables ({columns}) VALUES ({marks})", values)
                    continue
                self._swap(conn, namespace, name, expected, new)

    def _publish_all(self, swaps: Sequence[tuple[str, str, str | None, str]]) -> None:
        self.commit_all(swaps)

    def commit(
        self, namespace: str, name: str, expected_metadata_location: str, new_metadata_location: str
    ) -> str:
        """Compare-and-swap the table's pointer from `expected_...` to `new_...`; returns the new
        location. `CommitConflictError` naming the table if the pointer moved meanwhile."""
        check_namespace(namespace)
        check_table_name(name)
        if not new_metadata_location:
            raise ValidationError(f"{self._table_ref(namespace, name)}: empty new metadata location")
        with self._write() as conn:
            self._swap(conn, namespace, name, expected_metadata_location, new_metadata_location)
        return new_metadata_location

    def _swap(self, conn: sqlite3.Connection, namespace: str, name: str, expected: str, new: str) -> None:
        """Move the table's pointer from `expected` to `new` inside the caller's write transaction:
        the one compare-and-swap `commit` and `commit_all` share. `TableNotFoundError` if the table
        is gone, `CommitConflictError` naming both locations if the pointer moved."""
        cur = conn.execute(
            "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? "
            "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? AND metadata_location = ?"
            + self._type_filter(),
            (new, expected, self._name, namespace, name, expected),
        )
        if cur.rowcount == 1:
            return
        row = conn.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? "
            "AND table_name = ?" + self._type_filter(),
            (self._name, namespace, name),
        ).fetchone()
        if row is None:
            raise TableNotFoundError(
                f"{self._table_ref(namespace, name)} does not exist; nothing to commit to"
            )
        raise CommitConflictError(
            f"{self._table_ref(namespace, name)}: commit conflict: expected the current metadata to be "
            f"{expected}, but it is {row[0]} (another writer committed first; reload and retry)"
        )

    # -- commit_table's steps (`PointerCommits`) ----------------------------------------------

    def _current_location(self, namespace: str, name: str) -> str:
        return self.load_table(namespace, name)

    def _publish_first(self, namespace: str, name: str, metadata: TableMetadata) -> str:
        path = next_metadata_path(metadata, None, None)
        write_metadata(self._io, path, metadata)
        try:
            self.create_table_entry(namespace, name, path)
        except BaseException:
            remove_quietly(self._io, path)
            raise
        return path

    def _publish_next(
        self, namespace: str, name: str, location: str, base: TableMetadata, metadata: TableMetadata
    ) -> str:
        path = next_metadata_path(metadata, base, location)
        write_metadata(self._io, path, metadata)
        try:
            crash_point("metadata-written")
            self.commit(namespace, name, location, path)
        except BaseException:
            remove_quietly(self._io, path)
            raise
        crash_point("committed")
        return path
