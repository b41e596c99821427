"""Errors iceduck raises. Every message names the file (or table) and the problem."""

from __future__ import annotations


class IcebergError(Exception):
    """Base class of every error iceduck raises on purpose."""


class InvalidMetadataError(IcebergError):
    """Table metadata, a manifest list or a manifest breaks the Iceberg spec."""


class UnsupportedFormatError(IcebergError):
    """A format version or feature iceduck does not read (e.g. format-version 4)."""


class CorruptFileError(IcebergError):
    """A file's bytes are damaged: bad magic, CRC mismatch, truncation, wrong length."""

    def __init__(self, path: str | None, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}" if path else problem)


class FileNotFoundInTableError(IcebergError, FileNotFoundError):
    """A file the metadata references does not exist."""


class StorageAccessDeniedError(IcebergError, PermissionError):
    """The object store refused access to a file (credentials or policy)."""


class StorageError(IcebergError, OSError):
    """The object store failed a request for a file (not a missing file, not a refusal)."""


class TableNotFoundError(IcebergError):
    """No table at the given path or name."""


class NamespaceNotFoundError(IcebergError):
    """No such namespace in the catalog."""


class AlreadyExistsError(IcebergError):
    """A table or namespace of that name exists already."""


class CommitConflictError(IcebergError):
    """Another writer changed the table in a way this commit cannot rebase over."""


class ValidationError(IcebergError):
    """User input (a schema, a value, a parameter) is not valid for the operation."""


class ForbiddenError(IcebergError):
    """A catalog refused the request: missing, wrong or insufficient credentials."""


class CommitStateUnknownError(IcebergError):
    """A commit was sent but its outcome is unknown (server error, timeout, lost connection).

    It may or may not have been applied: never retry it as a new commit; reload the table and look.
    """
