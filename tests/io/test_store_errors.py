"""Every object store reports a failed request the same way (`iceduck.io.fileio.StoreErrors`).

The S3 store and the GCS/Azure store keep only what differs (which exceptions are their client
libraries', which refuse access, who refused); the one-line errors they raise come from one place.
"""

from __future__ import annotations

import pytest

from iceduck.errors import FileNotFoundInTableError, StorageAccessDeniedError, StorageError
from iceduck.io import fsspec_store, s3_clients
from iceduck.io.fileio import StoreErrors


class ResourceNotFoundError(Exception):
    """Named as azure-storage-blob's missing-blob error (matched by name)."""


ResourceNotFoundError.__module__ = "azure.core.exceptions"


@pytest.mark.parametrize(
    ("store", "path", "denied_by"),
    [
        (s3_clients.ERRORS, "s3://b/t/data/f.parquet", "the object store (check the S3 credentials)"),
        (fsspec_store._ERRORS, "gs://b/t/data/f.parquet", "GCS (check its credentials)"),
        (fsspec_store._ERRORS, "abfss://c@a.dfs.core.windows.net/t/f.parquet", "Azure (check its credentials)"),
    ],
)
def test_each_store_says_a_failure_in_one_line_naming_the_file(
    store: StoreErrors, path: str, denied_by: str
) -> None:
    missing = store.error(path, FileNotFoundError("no such key"))
    assert type(missing) is FileNotFoundInTableError and str(missing) == f"{path}: file not found"
    denied = store.error(path, PermissionError("403"))
    assert type(denied) is StorageAccessDeniedError and str(denied) == f"{path}: access denied by {denied_by}"
    other = store.error(path, OSError("\n  SlowDown: reduce your request rate\n  (request id 1)"))
    assert type(other) is StorageError
    assert str(other) == f"{path}: object store error: SlowDown: reduce your request rate"
    assert str(store.error(path, OSError())) == f"{path}: object store error: OSError"

    with pytest.raises(StorageAccessDeniedError) as caught, store.translated(path):
        raise PermissionError("403")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    with pytest.raises(KeyError), store.translated(path):  # not the store's: a bug stays a bug
        raise KeyError("x")
    with pytest.raises(StorageError, match="already an iceduck error"), store.translated(path):
        raise StorageError("already an iceduck error")


def test_a_missing_azure_blob_is_file_not_found() -> None:
    path = "az://c/t/f.parquet"
    with pytest.raises(FileNotFoundInTableError, match="file not found"), fsspec_store._ERRORS.translated(path):
        raise ResourceNotFoundError("The specified blob does not exist.")
