"""The folder catalog on an object store: `s3://bucket/wh` is the catalog, no database, no server.

The layout is the folder catalog's (the Hadoop layout, which DuckDB's extension and other engines
read from a table folder with `version-hint.text`):

    s3://bucket/wh/<ns part>/.../.namespace                          (a namespace: this marker)
    s3://bucket/wh/<ns part>/.../<table>/metadata/v<N>.metadata.json (versions of a table)
    s3://bucket/wh/<ns part>/.../<table>/metadata/version-hint.text  (a hint: "N")

A commit creates `v{N+1}.metadata.json` with a conditional PUT (`If-None-Match: *`, which S3
has honoured since 2024 and moto does; `FileIO.write_new`): of any number of writers on any
number of machines racing for N+1, the store lets exactly one create it, and the others get
`PreconditionFailed`, a `CommitConflictError` that the committer answers by planning again on
the new version. The current version is the highest `vN` reached from the hint by rolling forward
(S3 reads after writes and lists are strongly consistent), so a hint that lags (a crash between
the two PUTs) costs a HEAD, never a lost commit. GCS and Azure the same way, with
`ifGenerationMatch=0` and `If-None-Match: *`.

A store that ignores the condition (s3rver 3.7) would let two writers both "create" N+1, and one
commit would be lost without a word. So before its first commit in a process, a catalog checks
its store once: it creates an object under `<warehouse>/.iceduck-check/` with the condition
alone, then again; a store that accepts the second create is refused (`UnsafeStoreError`) before
anything is written.

Everything else is the local folder catalog's (`FolderCatalog`): only the file-system calls
differ. Namespaces have no properties; dropping a table deletes its objects.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from iceduck.catalog.base import check_namespace
from iceduck.catalog.folder import DEFAULT_FOLDER_CATALOG_NAME, FolderCatalog, _check_part
from iceduck.catalog.locate import METADATA_FOLDER, VERSION_HINT_FILE
from iceduck.errors import (
    AlreadyExistsError,
    IcebergError,
    NamespaceNotFoundError,
    StorageError,
    TableNotFoundError,
    ValidationError,
)
from iceduck.io.fileio import FileIO
from iceduck.io.paths import join_path, normalize_path

NAMESPACE_MARKER = ".namespace"
CHECK_FOLDER = ".iceduck-check"

_CHECK_LOCK = threading.Lock()
_CHECKED: dict[str, str | None] = {}  # warehouse -> None (the store refuses a second create) or why not


class UnsafeStoreError(StorageError):
    """The store accepted a second create-only write of one object: a catalog on it would lose commits."""


def check_exclusive_creates(io: FileIO, warehouse: str) -> None:
    """Make sure the store under `warehouse` refuses a second create-only write of one object
    (once per warehouse and process); `UnsafeStoreError` naming the warehouse when it does not."""
    with _CHECK_LOCK:
        if warehouse in _CHECKED:
            verdict = _CHECKED[warehouse]
            if verdict is not None:
                raise UnsafeStoreError(verdict)
            return
    create: Callable[[str, bytes], None] = io.create_exclusive  # type: ignore[attr-defined]
    probe = join_path(join_path(warehouse, CHECK_FOLDER), uuid.uuid4().hex)
    try:
        create(probe, b"first")
        try:
            create(probe, b"second")
        except AlreadyExistsError:
            verdict = None
        else:
            verdict = (
                f"{warehouse}: the object store does not honour create-only writes (it accepted a second "
                f"create of {probe}), so writers sharing a catalog on it would lose commits; use "
                "catalog='sql' or a REST catalog (iceduck serve) there"
            )
    finally:
        with contextlib.suppress(IcebergError):
            io.delete(probe)
    with _CHECK_LOCK:
        _CHECKED[warehouse] = verdict
    if verdict is not None:
        raise UnsafeStoreError(verdict)


class BucketCatalog(FolderCatalog):
    """A folder catalog rooted at an object-store prefix (see the module docstring)."""

    def __init__(self, warehouse: str, *, name: str = DEFAULT_FOLDER_CATALOG_NAME, io: FileIO) -> None:
        """The catalog at `warehouse` (`s3://bucket/prefix`); `io` reaches it (a lake's FileIO)."""
        if not callable(getattr(io, "list_children", None)):
            raise ValidationError(f"{warehouse}: a catalog on an object store needs iceduck's storage FileIO")
        self._warehouse = normalize_path(warehouse).rstrip("/")
        self._name = name
        self._io = io

    def __repr__(self) -> str:
        return f"BucketCatalog({self._warehouse!r}, name={self._name!r})"

    def _children(self, folder: str) -> tuple[list[str], list[str]]:
        children: Any = self._io.list_children  # type: ignore[attr-defined]
        folders, files = children(folder)
        return list(folders), list(files)

    # -- the file-system calls of FolderCatalog, on objects ------------------------------------

    def _is_table_dir(self, folder: str) -> bool:  # type: ignore[override]
        _, names = self._children(join_path(folder, METADATA_FOLDER))
        return any(
            n == VERSION_HINT_FILE or (n.startswith("v") and n.endswith(".metadata.json")) for n in names
        )

    def _has_metadata_folder(self, folder: str) -> bool:  # type: ignore[override]
        folders, _ = self._children(folder)
        return METADATA_FOLDER in folders

    def _subfolders(self, folder: str) -> list[str]:
        folders, _ = self._children(folder)
        return [f for f in folders if "." not in f]

    def _marker(self, namespace: str) -> str:
        return join_path(self._namespace_dir(namespace), NAMESPACE_MARKER)

    def namespace_exists(self, namespace: str) -> bool:
        """True if the namespace's marker object exists."""
        return self._io.exists(self._marker(namespace))

    def list_namespaces(self, parent: str | None = None) -> tuple[str, ...]:
        """Namespaces one level below `parent` (top level when None), sorted."""
        folder = self._warehouse if parent is None else self._require_namespace(parent)
        prefix = "" if parent is None else parent + "."
        return tuple(
            prefix + child
            for child in self._subfolders(folder)
            if self._io.exists(join_path(join_path(folder, child), NAMESPACE_MARKER))
        )

    def create_namespace(self, namespace: str, properties: Mapping[str, str] | None = None) -> None:
        """Create the namespace's marker; `AlreadyExistsError` if it (or a table there) exists."""
        check_namespace(namespace)
        if properties:
            raise ValidationError(f"{self._ref(namespace)}: a folder catalog stores no namespace properties")
        for part in namespace.split("."):
            _check_part(part, "namespace part")
        if "." in namespace:
            self._require_namespace(namespace.rpartition(".")[0])
        if self._is_table_dir(self._namespace_dir(namespace)):
            raise AlreadyExistsError(f"{self._ref(namespace)}: a table has that name")
        try:
            self._io.write_new(self._marker(namespace), b"")
        except AlreadyExistsError:
            raise AlreadyExistsError(f"{self._ref(namespace)} exists already") from None

    def drop_namespace(self, namespace: str) -> None:
        """Remove the namespace's marker; `ValidationError` if anything else is inside."""
        folder = self._require_namespace(namespace)
        folders, files = self._children(folder)
        inside = sorted(folders + [f for f in files if f != NAMESPACE_MARKER])
        if inside:
            raise ValidationError(f"{self._ref(namespace)} is not empty: {', '.join(inside[:10])}")
        self._io.delete(self._marker(namespace))

    def drop_table(self, namespace: str, name: str) -> None:
        """Delete the table's objects, data included. `TableNotFoundError` if there is no table."""
        folder = self._table_dir(namespace, name)
        if not self._is_table_dir(folder):
            raise TableNotFoundError(f"{self._ref(namespace, name)} does not exist (no metadata in {folder})")
        paths = [f.path for f in self._io.list_prefix(folder)]
        # the metadata last: a drop cut short leaves a table that still reads, or nothing
        paths.sort(key=lambda p: f"/{METADATA_FOLDER}/" in p)
        self._io.delete_many(paths)

    def _current(self, namespace: str, name: str) -> tuple[int | None, str]:
        """(version, path) of the current metadata: from the hint, rolled forward over the versions
        published after it (one GET and one HEAD when the hint is current); without a hint, as the
        folder catalog finds it (a listing)."""
        hinted = self._from_hint(join_path(self._table_dir(namespace, name), METADATA_FOLDER))
        return hinted if hinted is not None else super()._current(namespace, name)

    def _require_namespace(self, namespace: str) -> str:
        folder = self._namespace_dir(namespace)
        if not self.namespace_exists(namespace):
            raise NamespaceNotFoundError(
                f"{self._ref(namespace)} does not exist (no {NAMESPACE_MARKER} in {folder})"
            )
        return folder

    def _absolute(self, path: str) -> str:
        return normalize_path(path)

    def _publish_version(
        self, namespace: str, name: str, version: int, write: Callable[[str], None], *, create: bool = False
    ) -> str:
        check_exclusive_creates(self._io, self._warehouse)  # once per process: before any commit
        return super()._publish_version(namespace, name, version, write, create=create)


__all__ = ["CHECK_FOLDER", "NAMESPACE_MARKER", "BucketCatalog", "UnsafeStoreError", "check_exclusive_creates"]
