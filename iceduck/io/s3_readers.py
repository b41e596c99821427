"""How iceduck's S3 reads reach the store: HEAD, ranged GET and whole-object GET of one object.

Two byte sources answer the same small interface (`ObjectReader`):
- `ObstoreReader`, on obstore (Rust's object_store): each request runs on the calling thread with
  the GIL released, so DuckDB's I/O threads fetch ranges concurrently, and a request costs about a
  fifth of the CPU of the other (measured: HEAD 0.5 vs 2.5 ms CPU on s3rver). Used when obstore is
  installed and the settings say everything it needs (`obstore_config`).
- `S3fsReader`, on s3fs: every request is a coroutine on s3fs's one event loop thread (two thread
  hand-offs per request). Used for settings obstore cannot take as they are (no explicit keys: the
  AWS credential chain of botocore; a profile; a virtual-hosted custom endpoint; no region for AWS).

Both return the answer of a GET as (s3fs-style response fields, body): `ContentRange`,
`ContentLength`, `ETag`, `LastModified`; `iceduck.io.s3` checks ranges and lengths itself.
Listing, writes and deletes stay on s3fs.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib
import importlib.util
import threading
import time
import urllib.parse
from typing import Any, Protocol, cast


class S3Settings(Protocol):
    """What a reader needs of `iceduck.io.s3.S3Settings` (hashable: stores are kept per settings)."""

    @property
    def endpoint(self) -> str | None: ...
    @property
    def access_key_id(self) -> str | None: ...
    @property
    def secret_access_key(self) -> str | None: ...
    @property
    def session_token(self) -> str | None: ...
    @property
    def region(self) -> str | None: ...
    @property
    def path_style(self) -> bool | None: ...
    @property
    def profile(self) -> str | None: ...

    def __hash__(self) -> int: ...


class ObjectReader(Protocol):
    """HEAD and GET of objects named `bucket/key`."""

    def get(self, key: str, wanted: str, etag: str | None) -> tuple[dict[str, Any], bytes]:
        """One GET of `wanted` (`bytes=a-b` or `bytes=-n`), `If-Match: etag` when given."""
        ...

    def info(self, key: str) -> dict[str, Any]:
        """A HEAD: `name`, `size`, `type` ('file'), `LastModified`, `ETag`; FileNotFoundError if absent."""
        ...

    def exists(self, key: str) -> bool:
        """Whether the object exists (one HEAD)."""
        ...

    def read_all(self, key: str) -> bytes:
        """The whole object (one GET)."""
        ...

    def read_plain(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) without a condition (one GET)."""
        ...


class CutShort(OSError):
    """An answer whose body ended before its Content-Length (a dropped connection, a dying server)."""


class UnexpectedRange(OSError):
    """The store answered a suffix range with other bytes (s3rver sends the first ones)."""


# -- obstore -------------------------------------------------------------------------------------


@functools.cache
def has_obstore() -> bool:
    """Whether obstore is installed (without importing it)."""
    return importlib.util.find_spec("obstore") is not None


def _host_is_local(endpoint: str) -> bool:
    import ipaddress

    host = urllib.parse.urlsplit(endpoint).hostname or ""
    if host == "localhost":
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def obstore_config(settings: S3Settings) -> dict[str, Any] | None:
    """obstore's S3 configuration for `settings`, or None when obstore cannot take them as they
    are (s3fs then reads, with botocore's resolution: the credential chain, profiles, region
    redirects, addressing style "auto")."""
    if not has_obstore() or settings.profile is not None:
        return None
    if settings.access_key_id is None or settings.secret_access_key is None:
        return None  # the AWS credential chain (environment, profiles, instance roles): botocore's
    config: dict[str, Any] = {}
    if settings.endpoint is not None:
        path_style = settings.path_style
        if path_style is None:
            path_style = True if _host_is_local(settings.endpoint) else None
        if path_style is not True:
            return None  # a virtual-hosted custom endpoint: botocore composes its host names
        config["endpoint"] = settings.endpoint.rstrip("/")
        config["virtual_hosted_style_request"] = False
        config["region"] = settings.region or "us-east-1"  # what botocore signs with there
    else:
        if settings.region is None:
            return None  # AWS without a region: botocore follows the bucket's region redirect
        config["region"] = settings.region
        config["virtual_hosted_style_request"] = settings.path_style is not True
    return config


# One store per (settings, bucket), reused: keeps its connection pool.
_STORES_LOCK = threading.Lock()
_STORES: dict[tuple[Any, str], Any] = {}


def _obstore_store(settings: S3Settings, bucket: str, config: dict[str, Any]) -> Any:
    with _STORES_LOCK:
        found = _STORES.get((settings, bucket))
        if found is not None:
            return found
        store_module = importlib.import_module("obstore.store")
        credentials = {
            "access_key_id": settings.access_key_id,
            "secret_access_key": settings.secret_access_key,
            "token": settings.session_token,
            "expires_at": None,
        }
        if credentials["token"] is None:
            del credentials["token"]
        endpoint = config.get("endpoint")
        store = store_module.S3Store(
            bucket,
            config=config,
            # keys given here win over AWS_* variables obstore would read from the environment
            # (a session token there would be sent with other keys)
            credential_provider=lambda: credentials,
            client_options={
                "allow_http": bool(endpoint and endpoint.startswith("http://")),
                "pool_idle_timeout": _POOL_IDLE,
            },
            # iceduck asks a cut-short GET again itself (io.s3_reads._fetch): no retries below it
            retry_config={
                "max_retries": 0,
                "backoff": {
                    "init_backoff": dt.timedelta(milliseconds=50),
                    "max_backoff": dt.timedelta(seconds=1),
                    "base": 2,
                },
                "retry_timeout": dt.timedelta(seconds=60),
            },
        )
        _STORES[(settings, bucket)] = store
        return store


def _range(wanted: str) -> Any:
    first, _, last = wanted.removeprefix("bytes=").partition("-")
    if not first:
        return {"suffix": int(last)}
    return (int(first), int(last) + 1)


_HEAD_ATTEMPTS = 3
# Idle pooled connections are dropped before servers drop them (Node's, s3rver's, close after
# 5 s): a request on a connection the server just closed fails before it is sent.
_POOL_IDLE = dt.timedelta(seconds=4)


class ObstoreReader:
    """Reads through obstore (see the module docstring)."""

    def __init__(self, settings: S3Settings, config: dict[str, Any]) -> None:
        self._settings = settings
        self._config = config
        self._obstore = importlib.import_module("obstore")

    def _store(self, key: str) -> tuple[Any, str]:
        bucket, _, name = key.partition("/")
        return _obstore_store(self._settings, bucket, self._config), name

    @staticmethod
    def _response(meta: dict[str, Any], first: int, end: int) -> dict[str, Any]:
        return {
            "ContentRange": f"bytes {first}-{end - 1}/{meta['size']}",
            "ContentLength": end - first,
            "ETag": meta.get("e_tag"),
            "LastModified": meta.get("last_modified"),
        }

    def get(self, key: str, wanted: str, etag: str | None) -> tuple[dict[str, Any], bytes]:
        store, name = self._store(key)
        options: dict[str, Any] = {"range": _range(wanted)}
        if etag:
            options["if_match"] = etag
        try:
            result = self._obstore.get(store, name, options=options)
            data = bytes(result.bytes())
        except Exception as e:
            if "UnexpectedRange" in str(e) or "non-partial response" in str(e):
                raise UnexpectedRange(f"s3://{key}: {wanted} answered with other bytes") from None
            raise
        first, end = result.range
        meta = cast("dict[str, Any]", result.meta)
        if len(data) != end - first:
            raise CutShort(f"{len(data)} of {end - first} bytes")
        return self._response(meta, first, end), data

    def info(self, key: str) -> dict[str, Any]:
        store, name = self._store(key)
        # a HEAD whose connection failed (a pooled connection the server had closed) is asked
        # again, as botocore does; GETs are asked again by io.s3_reads._fetch
        for attempt in range(_HEAD_ATTEMPTS):
            try:
                meta = self._obstore.head(store, name)
                break
            except Exception as e:
                if not obstore_is_cut(e) or attempt == _HEAD_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * 2**attempt)
        return {
            "name": key,
            "size": int(meta["size"]),
            "type": "file",
            "LastModified": meta.get("last_modified"),
            "ETag": meta.get("e_tag"),
        }

    def exists(self, key: str) -> bool:
        try:
            self.info(key)
        except FileNotFoundError:
            return False
        return True

    def read_all(self, key: str) -> bytes:
        store, name = self._store(key)
        result = self._obstore.get(store, name)
        data = bytes(result.bytes())
        size = int(result.meta["size"])
        if len(data) != size:
            raise CutShort(f"{len(data)} of {size} bytes")
        return data

    def read_plain(self, key: str, start: int, end: int) -> bytes:
        return self.get(key, f"bytes={start}-{end - 1}", None)[1]


def obstore_error_code(e: BaseException) -> str | None:
    """S3's error code for an obstore exception that answers like one (None for others)."""
    if type(e).__module__.split(".")[0] != "obstore":
        return None
    return {
        "PreconditionError": "PreconditionFailed",
        "PermissionDeniedError": "AccessDenied",
        "UnauthenticatedError": "InvalidAccessKeyId",
        "NotModifiedError": "NotModified",
    }.get(type(e).__name__)


# What obstore's (reqwest's and hyper's) messages say when a connection or a body failed, not
# the store: these are worth a fresh request.
_CUT_MARKERS = (
    "error decoding response body",
    "error reading a body",
    "error sending request",
    "connection",
    "incomplete",
    "end of file",
    "timed out",
    "broken pipe",
)


def obstore_is_cut(e: BaseException) -> bool:
    """Whether an obstore failure is a connection or body failure worth a fresh request (not an
    answer of the store)."""
    if type(e).__module__.split(".")[0] != "obstore" or type(e).__name__ != "GenericError":
        return False
    text = str(e).lower()
    return any(m in text for m in _CUT_MARKERS)


# -- s3fs ----------------------------------------------------------------------------------------


async def _get_range(
    fs: Any, bucket: str, key: str, wanted: str, etag: str | None
) -> tuple[dict[str, Any], bytes]:
    extra = {"IfMatch": etag} if etag else {}
    response = await fs._call_s3("get_object", Bucket=bucket, Key=key, Range=wanted, **extra)
    async with response["Body"] as body:
        data = await body.read()
    length = response.get("ContentLength")
    if (
        isinstance(length, int) and len(data) != length
    ):  # the body reader checks this too; never trust a short one
        raise CutShort(f"{len(data)} of {length} bytes")
    return response, bytes(data)


class S3fsReader:
    """Reads through s3fs (see the module docstring)."""

    def __init__(self, fs: Any) -> None:
        self.fs = fs

    def get(self, key: str, wanted: str, etag: str | None) -> tuple[dict[str, Any], bytes]:
        import fsspec.asyn

        bucket, _, name = key.partition("/")
        return cast(
            "tuple[dict[str, Any], bytes]",
            fsspec.asyn.sync(self.fs.loop, _get_range, self.fs, bucket, name, wanted, etag),
        )

    def info(self, key: str) -> dict[str, Any]:
        return dict(self.fs.info(key))

    def exists(self, key: str) -> bool:
        """One HEAD (s3fs's `isfile` follows a miss with a listing, to tell a folder; an object
        path is never one here)."""
        import fsspec.asyn

        bucket, _, name = key.partition("/")
        if not name or name.endswith("/"):
            return bool(self.fs.isfile(key))
        try:
            fsspec.asyn.sync(self.fs.loop, self.fs._call_s3, "head_object", Bucket=bucket, Key=name)
        except FileNotFoundError:
            return False
        return True

    def read_all(self, key: str) -> bytes:
        # one GET: with concurrency s3fs first HEADs every object to size its chunks
        return bytes(self.fs.cat_file(key, max_concurrency=1))

    def read_plain(self, key: str, start: int, end: int) -> bytes:
        return bytes(self.fs.cat_file(key, start=start, end=end))
