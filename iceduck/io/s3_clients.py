"""The clients that reach S3: one s3fs filesystem and one object reader per distinct settings, and
what their errors mean (`ERRORS`: a store's failures, refusals of the credentials).

Reads go through obstore when it can take the settings, else s3fs (`iceduck.io.s3_readers`);
listing, writes and deletes use s3fs with `default_cache_type='none'`. Both are optional
dependencies (`pip install iceduck[s3]`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import threading
from typing import Any

from iceduck.errors import IcebergError, UnsupportedFormatError
from iceduck.io.fileio import StoreErrors
from iceduck.io.s3_readers import ObjectReader, ObstoreReader, S3fsReader, obstore_config, obstore_error_code
from iceduck.io.s3_settings import REGISTRY, S3Registry, S3Settings

# Process-wide on purpose: one client per distinct settings (values, not a lake's registry), shared
# by every lake with those settings so its pooled connections are reused.
_FS_LOCK = threading.Lock()
_FILESYSTEMS: dict[S3Settings, Any] = {}


@functools.cache
def _has_s3fs() -> bool:
    return importlib.util.find_spec("s3fs") is not None


def _s3fs() -> Any:
    """s3fs, imported on first use: it pulls in aiobotocore and aiohttp (about a second), which a
    process that never touches S3 should not pay at start-up."""
    if not _has_s3fs():
        raise UnsupportedFormatError(
            "s3:// paths need the optional dependency s3fs: pip install 'iceduck[s3]'"
        )
    return importlib.import_module("s3fs")


def is_store_error(e: BaseException) -> bool:
    """OSError/ValueError (what s3fs raises) or an error of botocore itself (credentials, endpoint)."""
    return isinstance(e, OSError | ValueError) or type(e).__module__.split(".")[0] in (
        "botocore",
        "aiobotocore",
        "obstore",
    )


def filesystem(settings: S3Settings) -> Any:
    """The s3fs filesystem for `settings` (one per distinct settings, reused: keeps connections)."""
    s3fs = _s3fs()
    with _FS_LOCK:
        fs = _FILESYSTEMS.get(settings)
        if fs is None:
            client_kwargs: dict[str, Any] = {}
            if settings.region:
                client_kwargs["region_name"] = settings.region
            config_kwargs: dict[str, Any] = {}
            if settings.path_style is not None:
                config_kwargs["s3"] = {"addressing_style": "path" if settings.path_style else "virtual"}
            kwargs: dict[str, Any] = {}
            if settings.profile:
                kwargs["profile"] = settings.profile
            fs = s3fs.S3FileSystem(
                key=settings.access_key_id,
                secret=settings.secret_access_key,
                token=settings.session_token,
                endpoint_url=settings.endpoint,
                client_kwargs=client_kwargs,
                config_kwargs=config_kwargs,
                default_cache_type="none",
                use_listings_cache=False,  # a stale listing would hide files from orphan removal
                skip_instance_cache=True,
                **kwargs,
            )
            _FILESYSTEMS[settings] = fs
        return fs


# Process-wide on purpose, as the filesystems above: one reader per distinct settings.
_READERS: dict[tuple[S3Settings, bool], ObjectReader] = {}
# `ICEDUCK_S3_READER=s3fs` makes every S3 read go through s3fs (a way around a store obstore
# misreads, and the benchmarks' comparison); unset or `auto`: obstore where it can.
READER_ENV = "ICEDUCK_S3_READER"


def reader(settings: S3Settings) -> ObjectReader:
    """What reads objects for `settings` (HEAD, GETs): obstore when it can take the settings, else
    s3fs (see `iceduck.io.s3_readers`). s3fs is not imported for reads obstore answers."""
    choice = os.environ.get(READER_ENV, "auto").strip().lower()
    if choice not in ("auto", "s3fs", ""):
        raise IcebergError(f"{READER_ENV}={choice!r}: expected auto or s3fs")
    fast = choice != "s3fs"
    found = _READERS.get((settings, fast))
    if found is None:
        config = obstore_config(settings) if fast else None
        found = ObstoreReader(settings, config) if config is not None else S3fsReader(filesystem(settings))
        with _FS_LOCK:
            found = _READERS.setdefault((settings, fast), found)
    return found


def filesystem_for(path: str, registry: S3Registry | None = None) -> Any:
    """The s3fs filesystem the settings of `registry` (the process's when None) choose for `path`."""
    return filesystem((registry or REGISTRY).settings_for(path))


def error_code(e: BaseException) -> str | None:
    code = obstore_error_code(e)
    if code is not None:
        return code
    response = getattr(e, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", "")) or None
    cause = e.__cause__ or e.__context__
    return error_code(cause) if cause is not None else None


def _is_denied(e: BaseException) -> bool:
    return isinstance(e, PermissionError) or error_code(e) in (
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
    )


def _denied_by(path: str) -> str:
    return "the object store (check the S3 credentials)"


ERRORS = StoreErrors(is_store_error, _is_denied, _denied_by)


def has_s3fs() -> bool:
    """Whether s3fs is installed (without importing it): DuckDB reads S3 through it."""
    return _has_s3fs()


__all__ = [
    "ERRORS",
    "READER_ENV",
    "error_code",
    "filesystem",
    "filesystem_for",
    "has_s3fs",
    "is_store_error",
    "reader",
]
