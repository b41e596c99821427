"""A catalog that is only folders (the Hadoop layout): no database, the file system is the catalog.

    <warehouse>/<ns part>/.../<table>/metadata/v1.metadata.json, v2.metadata.json, ...
                                     /metadata/version-hint.text      ("2": the current version)

A namespace is a folder that is not a table; a table is a folder whose `metadata/` holds a version
hint or metadata files. A commit publishes the staged metadata file as `v{N+1}.metadata.json` with
an exclusive create (`FileIO.write_new`): of two writers racing for N+1 exactly one wins, the other
gets `CommitConflictError`. The hint is rewritten afterwards, so it can lag behind (a crash between
the two steps, or two hint writes in the wrong order): readers here start from the hint and move
forward while `v{N+1}` exists. `commit_table` applies a change given as requirements and updates to
the current version and writes the result as `v{N+1}` the same way (see `iceduck.catalog.commit`).
Local folders only; namespaces have no properties.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable, Mapping

from iceduck.catalog.base import NamedCatalog, check_namespace, check_table_name
from iceduck.catalog.commit import PointerCommits, crash_point, metadata_bytes
from iceduck.catalog.locate import METADATA_FOLDER, VERSION_HINT_FILE, find_metadata_file
from iceduck.errors import (
    AlreadyExistsError,
    CommitConflictError,
    FileNotFoundInTableError,
    NamespaceNotFoundError,
    TableNotFoundError,
    ValidationError,
)
from iceduck.io.fileio import FileIO, LocalFileIO, local_path
from iceduck.io.paths import join_path, normalize_path, parent_path
from iceduck.spec.table_metadata import TableMetadata

DEFAULT_FOLDER_CATALOG_NAME = "folder"
_VERSION_FILE = re.compile(r"v(\d+)\.metadata\.json")
_PUBLISHED = re.compile(r"v\d+(\.gz)?\.metadata\.json(\.gz)?")


def version_file_name(version: int) -> str:
    """`v{version}.metadata.json`, the file name of metadata version `version`."""
    return f"v{version}.metadata.json"


def _version_number(path: str) -> int | None:
    """N of a `vN.metadata.json` path, None for other names."""
    m = _VERSION_FILE.fullmatch(path.rpartition("/")[2])
    return int(m.group(1)) if m else None


def _check_part(part: str, what: str) -> None:
    # Names become folder names: keep them inside the warehouse.
    if "/" in part or "\\" in part or part.startswith(".") or "\x00" in part:
        raise ValidationError(f"invalid {what} {part!r} for a folder catalog: no '/', '\\' or leading '.'")


class FolderCatalog(NamedCatalog, PointerCommits):
    """A Hadoop-style catalog over the folders under `warehouse`.

    It has no `change_token` (see docs/architecture.md "The front door"): a commit only adds a file
    to its own table's `metadata/` folder, so telling that nothing changed means a stat of every
    table's folder (about what listing them costs), with folder mtimes too coarse to tell two quick
    commits apart."""

    def __init__(
        self, warehouse: str, *, name: str = DEFAULT_FOLDER_CATALOG_NAME, io: FileIO | None = None
    ) -> None:
        """The catalog rooted at the local folder `warehouse` (created if missing)."""
        self._warehouse = normalize_path(os.path.abspath(local_path(warehouse)))
        self._name = name
        self._io = io or LocalFileIO()
        os.makedirs(self._warehouse, exist_ok=True)

    @property
    def warehouse(self) -> str:
        """The root folder."""
        return self._warehouse

    def __repr__(self) -> str:
        return f"FolderCatalog({self._warehouse!r}, name={self._name!r})"

    # -- layout ------------------------------------------------------------------------------

    def _namespace_dir(self, namespace: str) -> str:
        check_namespace(namespace)
        parts = namespace.split(".")
        for part in parts:
            _check_part(part, "namespace part")
        return join_path(self._warehouse, "/".join(parts))

    def _table_dir(self, namespace: str, name: str) -> str:
        check_table_name(name)
        _check_part(name, "table name")
        return join_path(self._namespace_dir(namespace), name)

    @staticmethod
    def _is_table_dir(folder: str) -> bool:
        """A table has a version hint or published `vN` metadata; other metadata files alone
        (a first metadata file staged before `create_table_entry`) do not make one."""
        metadata = os.path.join(folder, METADATA_FOLDER)
        try:
            names = os.listdir(metadata)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return any(n == VERSION_HINT_FILE or _PUBLISHED.fullmatch(n) for n in names)

    @staticmethod
    def _has_metadata_folder(folder: str) -> bool:
        return os.path.isdir(os.path.join(folder, METADATA_FOLDER))

    def _subfolders(self, folder: str) -> list[str]:
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return []
        # Dotted folder names cannot be told from nested namespaces; hidden ones are not ours.
        return sorted(e.name for e in entries if e.is_dir() and "." not in e.name)

    def _absolute(self, path: str) -> str:
        """`path` as this catalog spells its own paths (local: absolute; on a bucket: normalised)."""
        return normalize_path(os.path.abspath(local_path(path)))

    def _from_hint(self, metadata_dir: str) -> tuple[int, str] | None:
        """(version, path) of the current metadata from the version hint, rolled forward over the
        versions published after it was written; None without a usable hint."""
        hint = ""
        with contextlib.suppress(FileNotFoundInTableError):
            hint = self._io.read(join_path(metadata_dir, VERSION_HINT_FILE)).decode("utf-8", errors="replace")
        if not hint.strip().isdigit():
            return None
        named = version = int(hint.strip())
        while self._io.exists(join_path(metadata_dir, version_file_name(version + 1))):
            version += 1
        path = join_path(metadata_dir, version_file_name(version))
        if version > named or self._io.exists(path):
            return version, path
        return None

    def _ref(self, namespace: str, name: str | None = None) -> str:
        what = f"table {namespace}.{name}" if name is not None else f"namespace '{namespace}'"
        return f"{what} in folder catalog '{self._name}' ({self._warehouse})"

    # -- namespaces --------------------------------------------------------------------------

    def namespace_exists(self, namespace: str) -> bool:
        """True if the namespace's folder exists and is not a table."""
        folder = self._namespace_dir(namespace)
        return os.path.isdir(folder) and not self._has_metadata_folder(folder)

    def _require_namespace(self, namespace: str) -> str:
        folder = self._namespace_dir(namespace)
        if not self.namespace_exists(namespace):
            raise NamespaceNotFoundError(f"{self._ref(namespace)} does not exist (no folder {folder})")
        return folder

    def list_namespaces(self, parent: str | None = None) -> tuple[str, ...]:
        """Namespaces one level below `parent` (top level when None), sorted."""
        folder = self._warehouse if parent is None else self._require_namespace(parent)
        prefix = "" if parent is None else parent + "."
        return tuple(
            prefix + child
            for child in self._subfolders(folder)
            if not self._has_metadata_folder(os.path.join(folder, child))
        )

    def create_namespace(self, namespace: str, properties: Mapping[str, str] | None = None) -> None:
        """Create the namespace's folder; `AlreadyExistsError` if it (or a table there) exists."""
        folder = self._namespace_dir(namespace)
        if properties:
            raise ValidationError(f"{self._ref(namespace)}: a folder catalog stores no namespace properties")
        try:
            os.makedirs(folder)
        except FileExistsError:
            raise AlreadyExistsError(f"{self._ref(namespace)}: folder {folder} exists already") from None

    def drop_namespace(self, namespace: str) -> None:
        """Remove the namespace's empty folder; `ValidationError` if anything is inside."""
        folder = self._require_namespace(namespace)
        inside = sorted(os.listdir(folder))
        if inside:
            raise ValidationError(f"{self._ref(namespace)} is not empty: {', '.join(inside[:10])}")
        os.rmdir(folder)

    # -- tables ------------------------------------------------------------------------------

    def list_tables(self, namespace: str) -> tuple[str, ...]:
        """Names of the tables directly in `namespace`, sorted."""
        folder = self._require_namespace(namespace)
        return tuple(
            child for child in self._subfolders(folder) if self._is_table_dir(os.path.join(folder, child))
        )

    def table_exists(self, namespace: str, name: str) -> bool:
        """True if the table's folder holds published metadata."""
        return self._is_table_dir(self._table_dir(namespace, name))

    def default_table_location(self, namespace: str, name: str) -> str:
        """`<warehouse>/<ns parts>/<name>`: in a folder catalog the only possible location."""
        return self._table_dir(namespace, name)

    def _current(self, namespace: str, name: str) -> tuple[int | None, str]:
        """(version number if `vN` naming, path) of the current metadata file."""
        folder = self._table_dir(namespace, name)
        if not self._is_table_dir(folder):
            raise TableNotFoundError(f"{self._ref(namespace, name)} does not exist (no metadata in {folder})")
        metadata_dir = join_path(folder, METADATA_FOLDER)
        hinted = self._from_hint(metadata_dir)
        if hinted is not None:
            return hinted
        path = find_metadata_file(folder, io=self._io)
        found = _version_number(path)
        if found is not None:
            version = found
            while self._io.exists(join_path(metadata_dir, version_file_name(version + 1))):
                version += 1
            return version, join_path(metadata_dir, version_file_name(version))
        return None, path

    def load_table(self, namespace: str, name: str) -> str:
        """The table's current metadata file; `TableNotFoundError` if there is no table."""
        return self._current(namespace, name)[1]

    def _publish(self, staged: str, target: str) -> None:
        """Copy the staged metadata to `target` with an exclusive create, then drop the staged file."""
        if self._absolute(staged) == target:
            raise ValidationError(
                f"{staged}: stage new metadata under another name; the folder catalog publishes it as {target}"
            )
        data = self._io.read(staged)
        if data[:2] == b"\x1f\x8b":
            raise ValidationError(
                f"{staged}: a folder catalog publishes plain (not gzip) metadata files only"
            )
        self._io.write_new(target, data)
        with contextlib.suppress(FileNotFoundInTableError):
            self._io.delete(staged)

    def create_table_entry(self, namespace: str, name: str, metadata_location: str) -> str:
        """Publish the staged first metadata file as `v1.metadata.json` and write the hint;
        returns the published path. `AlreadyExistsError` if the table exists."""
        target = self._publish_version(
            namespace, name, 1, lambda t: self._publish(metadata_location, t), create=True
        )
        self._write_hint(parent_path(target), 1)
        return target

    def commit(
        self, namespace: str, name: str, expected_metadata_location: str, new_metadata_location: str
    ) -> str:
        """Publish the staged `new_metadata_location` as the next `vN.metadata.json` if the current
        metadata is `expected_metadata_location`; returns the published path.
        `CommitConflictError` naming the table if another commit got there first."""
        version, current = self._current(namespace, name)
        if self._absolute(expected_metadata_location) != current:
            raise CommitConflictError(
                f"{self._ref(namespace, name)}: commit conflict: expected the current metadata to be "
                f"{expected_metadata_location}, but it is {current} (reload and retry)"
            )
        if version is None:
            raise self._unnumbered(namespace, name, current)
        target = self._publish_version(
            namespace, name, version + 1, lambda t: self._publish(new_metadata_location, t)
        )
        self._write_hint(parent_path(target), version + 1)
        return target

    def _publish_version(
        self, namespace: str, name: str, version: int, write: Callable[[str], None], *, create: bool = False
    ) -> str:
        """Publish `v{version}.metadata.json` of the table by `write(path)`, an exclusive create (of two
        writers racing for a version exactly one wins); returns the path. `create` makes a new table:
        `AlreadyExistsError` if there is one; otherwise a version lost to another writer is a
        `CommitConflictError`. The caller moves the hint."""
        ref = self._ref(namespace, name)
        folder = self._table_dir(namespace, name)
        if create:
            self._require_namespace(namespace)
            if self._is_table_dir(folder):
                raise AlreadyExistsError(f"{ref} exists already")
        target = join_path(join_path(folder, METADATA_FOLDER), version_file_name(version))
        try:
            write(target)
        except AlreadyExistsError:
            if create:
                raise AlreadyExistsError(f"{ref} exists already ({target})") from None
            raise CommitConflictError(
                f"{ref}: commit conflict: {target} was created by a concurrent commit (reload and retry)"
            ) from None
        return target

    # -- commit_table's steps (`PointerCommits`): the result becomes `v{N+1}` ------------------

    def _table_ref(self, namespace: str, name: str) -> str:
        return self._ref(namespace, name)

    def _unnumbered(self, namespace: str, name: str, current: str) -> ValidationError:
        return ValidationError(
            f"{self._ref(namespace, name)}: current metadata {current} is not named v<N>.metadata.json; "
            "a folder catalog cannot number the next version"
        )

    def _current_location(self, namespace: str, name: str) -> str:
        version, current = self._current(namespace, name)
        if version is None:
            raise self._unnumbered(namespace, name, current)
        return current

    def _publish_first(self, namespace: str, name: str, metadata: TableMetadata) -> str:
        data = metadata_bytes(metadata)
        target = self._publish_version(namespace, name, 1, lambda t: self._io.write_new(t, data), create=True)
        self._write_hint(parent_path(target), 1)
        return target

    def _publish_next(
        self, namespace: str, name: str, location: str, base: TableMetadata, metadata: TableMetadata
    ) -> str:
        version = _version_number(location)
        assert version is not None  # `_current_location` refuses other names
        data = metadata_bytes(metadata)
        # Writing v{N+1} publishes it: nothing is staged apart from it, so this is the last moment
        # before the swap.
        crash_point("metadata-written")
        target = self._publish_version(namespace, name, version + 1, lambda t: self._io.write_new(t, data))
        crash_point("committed")
        self._write_hint(parent_path(target), version + 1)
        return target

    def _write_hint(self, metadata_dir: str, version: int) -> None:
        """Point the hint at `version` unless a later commit already moved it further (the check
        narrows, but cannot close, the window for a late writer to move it back; readers here roll
        forward anyway)."""
        hint_path = join_path(metadata_dir, VERSION_HINT_FILE)
        with contextlib.suppress(FileNotFoundInTableError):
            current = self._io.read(hint_path).decode("utf-8", errors="replace").strip()
            if current.isdigit() and int(current) >= version:
                return
        self._io.write_atomic(hint_path, str(version).encode())

    def drop_table(self, namespace: str, name: str) -> None:
        """Delete the table's folder, data included: a folder catalog has no entry apart from the
        files. `TableNotFoundError` if there is no table."""
        folder = self._table_dir(namespace, name)
        if not self._is_table_dir(folder):
            raise TableNotFoundError(f"{self._ref(namespace, name)} does not exist (no metadata in {folder})")
        shutil.rmtree(folder)
