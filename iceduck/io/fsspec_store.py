"""Tables on Google Cloud Storage and Azure storage, through the ecosystem's fsspec backends.

Paths: `gs://bucket/key` and `gcs://bucket/key` (gcsfs); `az://container/key`,
`abfs[s]://container@account.dfs.core.windows.net/key` (adlfs; the account named in the URL
overrides the settings' account). Both backends are optional dependencies
(`pip install 'iceduck[gcs]'`, `'iceduck[azure]'`), imported on first use.

Settings for a path are looked up as for S3 (`iceduck.io.s3_settings`), the first source covering it
winning, the longest scope within a source:
1. vended credentials / a REST catalog's `config` for a table location (`register_vended_credentials`),
2. table and catalog properties with PyIceberg's FileIO names (`gcs.oauth2.token`,
   `gcs.project-id`, `gcs.service.host`, `gcs.no-auth`; `adls.connection-string`,
   `adls.account-name`, `adls.account-key`, `adls.sas-token`, `adls.sas-token.<account host>`,
   `adls.tenant-id`, `adls.client-id`, `adls.client-secret`, `adls.account-host`),
3. DuckDB-style `CREATE SECRET (TYPE gcs, BEARER_TOKEN, ENDPOINT, ...)` and
   `CREATE SECRET (TYPE azure, CONNECTION_STRING | ACCOUNT_NAME, ...)` statements,
4. the environment: `STORAGE_EMULATOR_HOST` and Google's default credentials
   (`GOOGLE_APPLICATION_CREDENTIALS`, ...); `AZURE_STORAGE_CONNECTION_STRING`,
   `AZURE_STORAGE_ACCOUNT_NAME` + `AZURE_STORAGE_ACCOUNT_KEY` / `AZURE_STORAGE_SAS_TOKEN`.

Each lake has its own registry whose parent is the process's `REGISTRY`, as for S3.

Reads are exact byte ranges (`cat_file(start, end)`), never the backends' read-ahead blocks, both
for iceduck's own reads and for DuckDB's, which go through `register_filesystems`: one fsspec
filesystem per store kind routing each path to the backend instance its settings choose.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any, cast

from iceduck._lazy import LazyModule
from iceduck.errors import (
    AlreadyExistsError,
    FileNotFoundInTableError,
    IcebergError,
    StorageAccessDeniedError,
    UnsupportedFormatError,
    ValidationError,
)
from iceduck.io.fileio import DeleteOutcome, FileInfo, OpenedInputFile, RangeReader, StoreErrors
from iceduck.io.paths import normalize_path, split_scheme
from iceduck.io.s3_settings import Source

if TYPE_CHECKING:
    import fsspec
else:
    fsspec = LazyModule("fsspec")

GCS = "gcs"
AZURE = "azure"
GCS_SCHEMES = ("gs", "gcs")
AZURE_SCHEMES = ("az", "abfs", "abfss")
STORE_SCHEMES = GCS_SCHEMES + AZURE_SCHEMES
_KIND = {**dict.fromkeys(GCS_SCHEMES, GCS), **dict.fromkeys(AZURE_SCHEMES, AZURE)}
_PACKAGE = {GCS: "gcsfs", AZURE: "adlfs"}
_EXTRA = {GCS: "gcs", AZURE: "azure"}


def store_kind(path: str) -> str | None:
    """`gcs` or `azure` for a path on those stores, else None."""
    scheme = split_scheme(path)[0]
    return _KIND.get(scheme) if scheme is not None else None


def is_store_path(path: str) -> bool:
    """True for gs://, gcs://, az://, abfs:// and abfss:// paths."""
    return store_kind(path) is not None


@dataclass(frozen=True, slots=True)
class Location:
    """One path on a store: its scheme, bucket (container), account (Azure URLs may name one) and key."""

    scheme: str
    bucket: str
    account: str | None
    key: str

    @property
    def kind(self) -> str:
        return _KIND[self.scheme]

    @property
    def fs_path(self) -> str:
        """The path the backend takes: `bucket/key`."""
        return f"{self.bucket}/{self.key}" if self.key else self.bucket

    @property
    def root(self) -> str:
        """`scheme://netloc` as the path spelled it (the account host kept)."""
        return f"{self.scheme}://{self._netloc}"

    _netloc: str = ""


def locate(path: str) -> Location:
    """The parts of a GCS or Azure path; `UnsupportedFormatError` naming the path otherwise."""
    scheme, rest = split_scheme(normalize_path(path))
    if scheme not in _KIND or not rest.startswith("//"):
        raise UnsupportedFormatError(f"{path}: not a gs:// or az:// / abfss:// path")
    netloc, _, key = rest[2:].partition("/")
    bucket, at, host = netloc.partition("@")
    if not bucket:
        raise UnsupportedFormatError(f"{path}: a {scheme}:// path needs a bucket (container)")
    account = host.split(".", 1)[0] if at and host else None
    return Location(scheme, bucket, account, key, netloc)


def duckdb_spelling(path: str) -> str:
    """The one spelling DuckDB is handed (gcs:// read as gs://), so names it reports back match."""
    loc = locate(path)
    scheme = "gs" if loc.kind == GCS else loc.scheme
    return f"{scheme}://{loc._netloc}/{loc.key}" if loc.key else f"{scheme}://{loc._netloc}"


# -- settings ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """How to reach one GCS or Azure location: backend options by name (None: not set here).

    GCS: `endpoint`, `token` (an OAuth2 access token), `credentials_file`, `project`, `anon`.
    Azure: `connection_string`, `account_name`, `account_key`, `sas_token`, `tenant_id`,
    `client_id`, `client_secret`, `account_host`, `anon`, and `sas_token.<account host>`.
    """

    kind: str
    options: tuple[tuple[str, str], ...] = ()

    def get(self, name: str) -> str | None:
        return dict(self.options).get(name)

    @property
    def is_empty(self) -> bool:
        return not self.options


def _settings(kind: str, values: Mapping[str, Any]) -> StoreSettings:
    return StoreSettings(kind, tuple(sorted((k, str(v)) for k, v in values.items() if v not in (None, ""))))


_GCS_PROPERTIES = {
    "gcs.oauth2.token": "token",
    "gcs.project-id": "project",
    "gcs.service.host": "endpoint",
    "gcs.no-auth": "anon",
}
_AZURE_OPTIONS = (
    "connection_string",
    "account_name",
    "account_key",
    "sas_token",
    "tenant_id",
    "client_id",
    "client_secret",
    "account_host",
)
_AZURE_PROPERTIES = {
    "adls.connection-string": "connection_string",
    "adls.account-name": "account_name",
    "adls.account-key": "account_key",
    "adls.sas-token": "sas_token",
    "adls.tenant-id": "tenant_id",
    "adls.client-id": "client_id",
    "adls.client-secret": "client_secret",
    "adls.account-host": "account_host",
}


_PROPERTIES = {GCS: _GCS_PROPERTIES, AZURE: _AZURE_PROPERTIES}


def _emulator_host() -> str | None:
    """`STORAGE_EMULATOR_HOST` as a URL (`http://` when it names no scheme), None when unset."""
    host = os.environ.get("STORAGE_EMULATOR_HOST") or None
    return host if host is None or "://" in host else "http://" + host


def _azure_environment() -> dict[str, str]:
    """Azure settings from the standard environment variables (options by name; unset ones left out)."""
    env = os.environ
    values = {
        "connection_string": env.get("AZURE_STORAGE_CONNECTION_STRING"),
        "account_name": env.get("AZURE_STORAGE_ACCOUNT_NAME"),
        "account_key": env.get("AZURE_STORAGE_ACCOUNT_KEY"),
        "sas_token": env.get("AZURE_STORAGE_SAS_TOKEN"),
    }
    return {k: v for k, v in values.items() if v}


def settings_from_properties(kind: str, props: Mapping[str, str]) -> StoreSettings:
    """Settings from FileIO properties with PyIceberg's (and Java's) names."""
    names = _PROPERTIES[kind]
    values: dict[str, Any] = {opt: props.get(prop) for prop, opt in names.items()}
    if kind == AZURE:
        # Java's vended form: `adls.sas-token.<account>.dfs.core.windows.net` (one per account)
        for prop, value in props.items():
            if prop.startswith("adls.sas-token.") and value:
                values[f"sas_token.{prop.removeprefix('adls.sas-token.').split('.', 1)[0]}"] = value
            if prop.startswith("adls.connection-string.") and value:
                values.setdefault("connection_string", value)
    return _settings(kind, values)


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def settings_from_secret(options: Mapping[str, Any]) -> tuple[StoreSettings, str | None]:
    """(settings, scope) from the options of DuckDB's `CREATE SECRET (TYPE gcs | azure, ...)`.

    GCS: BEARER_TOKEN (an OAuth2 access token), ENDPOINT (`host:port` with USE_SSL, or a URL),
    and iceduck's PROJECT and CREDENTIALS_FILE (a service-account key). GCS HMAC keys (KEY_ID,
    SECRET) serve DuckDB's S3-compatible access, which iceduck does not use: refused by name.
    Azure: CONNECTION_STRING; or ACCOUNT_NAME with ACCOUNT_KEY, SAS_TOKEN, or TENANT_ID +
    CLIENT_ID + CLIENT_SECRET (PROVIDER service_principal), or nothing else (PROVIDER
    credential_chain: Azure's default credential chain).
    """
    opts = {str(k).lower(): v for k, v in options.items()}
    kind = str(opts.get("type", "")).lower()
    scope = _text(opts.get("scope"))
    if kind == GCS:
        if opts.get("key_id") is not None or opts.get("secret") is not None:
            raise ValidationError(
                "CREATE SECRET (TYPE gcs): HMAC keys (KEY_ID, SECRET) are not supported; use BEARER_TOKEN, "
                "CREDENTIALS_FILE, or GOOGLE_APPLICATION_CREDENTIALS"
            )
        endpoint = _text(opts.get("endpoint"))
        if endpoint is not None and "://" not in endpoint:
            use_ssl = str(opts.get("use_ssl", "true")).lower() not in ("false", "0", "no", "off")
            endpoint = ("https://" if use_ssl else "http://") + endpoint
        values = {
            "endpoint": endpoint,
            "token": _text(opts.get("bearer_token")),
            "project": _text(opts.get("project")),
            "credentials_file": _text(opts.get("credentials_file")),
        }
        return _settings(GCS, values), scope
    if kind == AZURE:
        known = {
            "type", "scope", "provider", "chain", "connection_string", "account_name", "account_key",
            "sas_token", "tenant_id", "client_id", "client_secret", "account_host", "endpoint",
        }  # fmt: skip
        unknown = sorted(set(opts) - known)
        if unknown:
            raise ValidationError(f"CREATE SECRET (TYPE azure): unknown option {unknown[0].upper()}")
        values = {name: _text(opts.get(name)) for name in _AZURE_OPTIONS}
        if values["account_host"] is None and _text(opts.get("endpoint")) is not None:
            values["account_host"] = _text(opts.get("endpoint"))
        return _settings(AZURE, values), scope
    raise ValidationError(f"CREATE SECRET: TYPE {kind!r} is not a GCS or Azure secret")


def _scope_keys(path: str) -> tuple[str, list[str]]:
    """(kind, comparable keys) of a path: `bucket/key` and, for an Azure URL naming its account,
    `bucket@account/key` too (a scope naming the account covers only that account's paths)."""
    loc = locate(path)
    plain = f"{loc.bucket}/{loc.key}".rstrip("/")
    keys = [plain]
    if loc.account:
        keys.insert(0, f"{loc.bucket}@{loc.account}/{loc.key}".rstrip("/"))
    return loc.kind, keys


def _covers(scope: str, target: str) -> bool:
    return scope == "" or target == scope or target.startswith(scope + "/")


class StoreRegistry:
    """GCS and Azure settings by kind, source and scope (a location prefix); thread-safe. A
    connection's registry has the process's as `parent` (see `iceduck.io.s3_settings.S3Registry`)."""

    def __init__(self, parent: StoreRegistry | None = None) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, Source, str], StoreSettings] = {}
        self.parent = parent

    def _matches(
        self, kind: str, targets: list[str], depth: int
    ) -> list[tuple[Source, int, int, StoreSettings]]:
        with self._lock:
            found = [
                (src, -len(scope), depth, s)
                for (k, src, scope), s in self._entries.items()
                if k == kind and any(_covers(scope, t) for t in targets)
            ]
        if self.parent is not None:
            found.extend(self.parent._matches(kind, targets, depth + 1))
        return found

    def _key(self, kind: str, scope: str | None) -> str:
        if scope is None:
            return ""
        scope_kind, keys = _scope_keys(scope)
        if scope_kind != kind:
            raise IcebergError(f"{scope}: {kind} settings need a scope on that store")
        return keys[0]

    def register(self, settings: StoreSettings, *, scope: str | None = None, source: Source) -> None:
        """Use `settings` for paths of its kind under `scope` (the whole store when None)."""
        key = self._key(settings.kind, scope)
        with self._lock:
            self._entries[(settings.kind, source, key)] = settings

    def unregister(self, kind: str, *, scope: str | None = None, source: Source) -> None:
        """Drop the settings registered at exactly `scope` and `source`."""
        key = self._key(kind, scope)
        with self._lock:
            self._entries.pop((kind, source, key), None)

    def settings_for(self, path: str) -> StoreSettings:
        """The settings for a path: the highest-priority source covering it, longest scope first."""
        kind, targets = _scope_keys(path)
        matches = self._matches(kind, targets, 0)
        if not matches:
            return StoreSettings(kind)
        return min(matches, key=lambda m: (m[0], m[1], m[2]))[3]


REGISTRY = StoreRegistry()


def register_secret(options: Mapping[str, Any], registry: StoreRegistry | None = None) -> None:
    """Use the settings of a `CREATE SECRET (TYPE gcs | azure, ...)` (its SCOPE, else the whole store)."""
    settings, scope = settings_from_secret(options)
    (registry or REGISTRY).register(settings, scope=scope, source=Source.SECRET)


def _register_properties(
    props: Mapping[str, str], scope: str, source: Source, registry: StoreRegistry | None
) -> None:
    kind = store_kind(scope)
    if kind is None:
        return
    settings = settings_from_properties(kind, props)
    if not settings.is_empty:
        (registry or REGISTRY).register(settings, scope=scope, source=source)


def register_vended_credentials(
    location: str, config: Mapping[str, str], registry: StoreRegistry | None = None
) -> None:
    """Use a REST catalog's vended `gcs.*` / `adls.*` settings for files under `location`."""
    _register_properties(config, location, Source.VENDED, registry)


def register_properties(
    properties: Mapping[str, str], *, scope: str, registry: StoreRegistry | None = None
) -> None:
    """Use the GCS / Azure settings among table or catalog `properties` for paths under `scope`."""
    _register_properties(properties, scope, Source.PROPERTIES, registry)


def vended_properties(path: str, registry: StoreRegistry | None = None) -> dict[str, str]:
    """The FileIO properties (PyIceberg's names) reaching `path` with the settings `registry` (the
    process's when None) has for it, else the environment's: what `iceduck serve
    --vend-credentials` hands its clients. No token service here: a client gets the server's own
    token, connection string or key; a service-account key file is not vended."""
    kind = store_kind(path)
    if kind is None:
        return {}
    settings = (registry or REGISTRY).settings_for(path)
    names = _PROPERTIES[kind]
    props = {prop: settings.get(opt) for prop, opt in names.items()}
    if kind == GCS:
        props["gcs.service.host"] = props["gcs.service.host"] or _emulator_host()
        if props["gcs.service.host"] is not None and props["gcs.oauth2.token"] is None:
            props["gcs.no-auth"] = props["gcs.no-auth"] or "true"  # an emulator
    elif not any(props.values()):
        env = _azure_environment()
        if "connection_string" in env:  # it names the account and its keys itself
            env = {"connection_string": env["connection_string"]}
        props.update({prop: env.get(opt) for prop, opt in names.items()})
    return {k: v for k, v in props.items() if v}


# -- backends ------------------------------------------------------------------------------------


@functools.cache
def has_backend(kind: str) -> bool:
    """Whether the fsspec backend of a store kind is installed (without importing it)."""
    return importlib.util.find_spec(_PACKAGE[kind]) is not None


def _backend(kind: str, path: str) -> Any:
    if not has_backend(kind):
        raise UnsupportedFormatError(
            f"{path}: {split_scheme(path)[0]}:// paths need the optional dependency {_PACKAGE[kind]}: "
            f"pip install 'iceduck[{_EXTRA[kind]}]'"
        )
    return importlib.import_module(_PACKAGE[kind])


# Process-wide on purpose: one client per distinct settings and account (values, not a lake's
# registry), shared by every lake with those settings so its pooled connections are reused.
_FS_LOCK = threading.Lock()
_FILESYSTEMS: dict[tuple[StoreSettings, str | None], Any] = {}


def _gcs_kwargs(settings: StoreSettings, path: str) -> dict[str, Any]:
    endpoint = settings.get("endpoint") or _emulator_host()
    if endpoint is not None and "://" not in endpoint:
        endpoint = "http://" + endpoint
    token: Any
    if settings.get("anon") in ("true", "True", "1"):
        token = "anon"
    elif settings.get("token"):
        import google.oauth2.credentials

        token = google.oauth2.credentials.Credentials(token=settings.get("token"))
    elif settings.get("credentials_file"):
        token = settings.get("credentials_file")
    elif endpoint is not None and not os.environ.get("GOOGLE_APPLICATION_CREDENTIALS"):
        token = "anon"  # an emulator asks for no credentials
    else:
        token = "google_default"
    kwargs: dict[str, Any] = {"token": token, "endpoint_url": endpoint}
    if settings.get("project"):
        kwargs["project"] = settings.get("project")
    return kwargs


def _azure_kwargs(settings: StoreSettings, account: str | None, path: str) -> dict[str, Any]:
    values = dict(settings.options)
    env = _azure_environment()
    if not any(values.get(k) for k in ("connection_string", "account_name")) and account is None:
        values.setdefault("connection_string", env.get("connection_string", ""))
        values.setdefault("account_name", env.get("account_name", ""))
    if account is not None and not values.get("connection_string"):
        values["account_name"] = account
    name = values.get("account_name") or None
    if name is not None and name == env.get("account_name"):
        values.setdefault("account_key", env.get("account_key", ""))
        values.setdefault("sas_token", env.get("sas_token", ""))
    if name is not None and values.get(f"sas_token.{name}"):
        values["sas_token"] = values[f"sas_token.{name}"]
    if not values.get("connection_string") and not name:
        if env.get("connection_string"):
            values["connection_string"] = env["connection_string"]
        else:
            raise StorageAccessDeniedError(
                f"{path}: no Azure credentials: CREATE SECRET (TYPE azure, CONNECTION_STRING ...) or "
                "(ACCOUNT_NAME ...), or set AZURE_STORAGE_CONNECTION_STRING / AZURE_STORAGE_ACCOUNT_NAME"
            )
    kwargs: dict[str, Any] = {}
    for k in _AZURE_OPTIONS:
        if values.get(k):
            kwargs[k] = values[k]
    if values.get("anon") in ("true", "True", "1"):
        kwargs["anon"] = True
    if "connection_string" in kwargs:  # it names the account and its keys itself
        kwargs = {k: v for k, v in kwargs.items() if k in ("connection_string", "anon")}
    return kwargs


def filesystem(settings: StoreSettings, path: str, account: str | None = None) -> Any:
    """The backend filesystem for `settings` (and the account an Azure URL names): one per distinct
    settings, reused (keeps connections)."""
    module = _backend(settings.kind, path)
    with _FS_LOCK:
        fs = _FILESYSTEMS.get((settings, account))
        if fs is not None:
            return fs
    if settings.kind == GCS:
        kwargs = _gcs_kwargs(settings, path)
        # gcsfs.core: the package's default class first asks a gRPC control plane for each
        # bucket's layout (a minute of timeouts against an emulator)
        cls = importlib.import_module("gcsfs.core").GCSFileSystem
        try:
            fs = cls(skip_instance_cache=True, cache_timeout=0, **kwargs)
        except Exception as e:
            if "credentials" in str(e).lower() or type(e).__module__.startswith("google.auth"):
                raise StorageAccessDeniedError(
                    f"{path}: no GCS credentials: CREATE SECRET (TYPE gcs, BEARER_TOKEN ...), "
                    "GOOGLE_APPLICATION_CREDENTIALS, or STORAGE_EMULATOR_HOST for an emulator"
                ) from None
            raise
    else:
        kwargs = _azure_kwargs(settings, account, path)
        # no listings cache: another process's objects (a catalog's next version) show at once
        fs = module.AzureBlobFileSystem(skip_instance_cache=True, use_listings_cache=False, **kwargs)
    with _FS_LOCK:
        return _FILESYSTEMS.setdefault((settings, account), fs)


def _is_store_error(e: BaseException) -> bool:
    top = type(e).__module__.split(".")[0]
    return isinstance(e, OSError | ValueError) or top in ("google", "azure", "aiohttp", "gcsfs", "adlfs")


def _status(e: BaseException) -> int | None:
    for attr in ("code", "status_code", "status"):
        value = getattr(e, attr, None)
        if isinstance(value, int):
            return value
    response = getattr(e, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def _is_denied(e: BaseException) -> bool:
    name = type(e).__name__
    return (
        isinstance(e, PermissionError)
        or _status(e) in (401, 403)
        or name in ("ClientAuthenticationError", "RefreshError", "DefaultCredentialsError")
    )


def _denied_by(path: str) -> str:
    return f"{'GCS' if store_kind(path) == GCS else 'Azure'} (check its credentials)"


def _is_missing(e: BaseException) -> bool:
    return isinstance(e, FileNotFoundError) or type(e).__name__ == "ResourceNotFoundError"


_ERRORS = StoreErrors(_is_store_error, _is_denied, _denied_by, _is_missing)


def _missing_bucket(fs: Any, loc: Location, path: str) -> IcebergError | None:
    """A one-line error when the bucket (container) of `path` does not exist, else None."""
    try:
        exists = bool(fs.exists(loc.bucket))
    except Exception:
        return None
    if exists:
        return None
    what = "bucket" if loc.kind == GCS else "container"
    return FileNotFoundInTableError(f"{path}: the {what} {loc.bucket!r} does not exist")


@contextlib.contextmanager
def _checked(fs: Any, loc: Location, path: str) -> Iterator[None]:
    """Errors of a request, translated; a missing bucket (container) said so."""
    try:
        yield
    except IcebergError:
        raise
    except Exception as e:
        if not _is_store_error(e):
            raise
        if isinstance(e, FileNotFoundError) or _status(e) == 404 or "NotFound" in type(e).__name__:
            missing = _missing_bucket(fs, loc, path)
            if missing is not None:
                raise missing from None
        raise _ERRORS.error(path, e) from None


def _mtime_ms(info: Mapping[str, Any]) -> int:
    for name in ("mtime", "last_modified", "updated"):
        value = info.get(name)
        if isinstance(value, datetime):
            return int(value.timestamp() * 1000)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    return 0


class StoreRangeReader(RangeReader):
    """Exact ranged reads of a GCS / Azure object (each range one GET)."""

    def __init__(self, fs: Any, key: str, size: int) -> None:
        super().__init__(size)
        self._fs = fs
        self._key = key

    def _fetch(self, start: int, end: int) -> bytes:
        return bytes(self._fs.cat_file(self._key, start=start, end=end))


class StoreInputFile(OpenedInputFile):
    """A GCS / Azure object opened for ranged reads (each range one GET)."""

    __slots__ = ("_fs", "_key")

    def __init__(self, path: str, fs: Any, key: str, size: int) -> None:
        self._fs = fs
        self._key = key
        super().__init__(path, size)

    def read_range(self, offset: int, length: int) -> bytes:
        with _ERRORS.translated(self._path):
            return bytes(self._fs.cat_file(self._key, start=offset, end=offset + length))


class StoreFileIO:
    """`FileIO` on GCS and Azure; settings from `registry` per path (the process's `REGISTRY`, or a
    connection's registry whose parent it is).

    An upload becomes visible whole on both stores. `write_new` checks first and asks the store
    for an exclusive create (GCS `ifGenerationMatch=0`, Azure `If-None-Match: *`); the catalog's
    compare-and-swap stays the commit point either way."""

    def __init__(self, registry: StoreRegistry | None = None) -> None:
        self.registry = registry or REGISTRY

    def _fs(self, path: str) -> tuple[Any, Location]:
        loc = locate(path)
        return filesystem(self.registry.settings_for(path), path, loc.account), loc

    def _info(self, fs: Any, loc: Location, path: str) -> Mapping[str, Any]:
        with _checked(fs, loc, path):
            info = fs.info(loc.fs_path)
        if info.get("type") != "file":
            raise FileNotFoundInTableError(f"{path}: file not found")
        return cast(Mapping[str, Any], info)

    def read(self, path: str) -> bytes:
        """The whole object; `FileNotFoundInTableError` if it does not exist."""
        fs, loc = self._fs(path)
        with _checked(fs, loc, path):
            return bytes(fs.cat_file(loc.fs_path))

    def open_input(self, path: str, *, expected_size: int | None = None) -> StoreInputFile:
        """The object opened for ranged reads (its size from metadata when given: no request)."""
        fs, loc = self._fs(path)
        size = expected_size if expected_size is not None else int(self._info(fs, loc, path)["size"])
        return StoreInputFile(path, fs, loc.fs_path, size)

    def open_stream(self, path: str) -> IO[bytes]:
        """A seekable binary file object (for pyarrow), reading ranges on demand."""
        fs, loc = self._fs(path)
        size = int(self._info(fs, loc, path)["size"])
        return cast(IO[bytes], StoreRangeReader(fs, loc.fs_path, size))

    def exists(self, path: str) -> bool:
        """True if an object exists at `path`."""
        fs, loc = self._fs(path)
        with _ERRORS.translated(path):
            return bool(fs.isfile(loc.fs_path))

    def size(self, path: str) -> int:
        """Length of the object in bytes."""
        fs, loc = self._fs(path)
        return int(self._info(fs, loc, path)["size"])

    def stamp(self, path: str) -> tuple[int, int] | None:
        """Objects a table references are immutable: the path and the store's settings identify them."""
        return (0, hash(self.registry.settings_for(path)))

    def list_prefix(self, prefix: str) -> Iterator[FileInfo]:
        """Every object under the folder `prefix` (recursively), in path order."""
        fs, loc = self._fs(prefix)
        root = loc.fs_path.rstrip("/")
        with _ERRORS.translated(prefix):
            try:
                found = fs.find(root + "/", detail=True)
            except FileNotFoundError:
                return
        for key in sorted(found):
            info = found[key]
            if info.get("type") != "file" or key.endswith("/"):
                continue
            rest = key.partition("/")[2]
            yield FileInfo(f"{loc.root}/{rest}", int(info.get("size") or 0), _mtime_ms(info))

    def list_children(self, prefix: str) -> tuple[list[str], list[str]]:
        """(sub-folder names, object names) one level below the folder `prefix` (one listing with
        a delimiter), each sorted; empty when nothing is there."""
        fs, loc = self._fs(prefix)
        root = loc.fs_path.rstrip("/")
        with _ERRORS.translated(prefix):
            try:
                found = fs.ls(root + "/", detail=True)
            except FileNotFoundError:
                return [], []
        folders: set[str] = set()
        files: set[str] = set()
        for info in found:
            full = str(info.get("name") or "").rstrip("/")
            if not full.startswith(root + "/"):  # the folder itself
                continue
            name = full[len(root) + 1 :]
            (files if info.get("type") == "file" else folders).add(name)
        return sorted(folders), sorted(files - folders)

    def write_new(self, path: str, data: bytes) -> None:
        """Create the object; `AlreadyExistsError` if it exists."""
        fs, loc = self._fs(path)
        with _checked(fs, loc, path):
            if fs.isfile(loc.fs_path):
                raise AlreadyExistsError(f"{path}: file exists already")
        self.create_exclusive(path, data)

    def create_exclusive(self, path: str, data: bytes) -> None:
        """One upload with the store's create-only precondition (GCS `ifGenerationMatch=0`, Azure
        `If-None-Match: *`) and no check of iceduck's own first: `AlreadyExistsError` when the store
        refuses it (a store that ignores the condition replaces the object)."""
        fs, loc = self._fs(path)
        with _checked(fs, loc, path):
            try:
                if loc.kind == GCS:
                    fs.pipe_file(loc.fs_path, data, mode="create")
                else:
                    fs.pipe_file(loc.fs_path, data, overwrite=False)
            except FileExistsError:
                raise AlreadyExistsError(f"{path}: file exists already") from None
            except OSError as e:
                if _status(e) == 412 or "412" in str(e) or "Precondition" in str(e):
                    raise AlreadyExistsError(f"{path}: file exists already") from None
                raise

    def write_atomic(self, path: str, data: bytes) -> None:
        """Create or replace the object (one upload: readers see the old or the new content)."""
        fs, loc = self._fs(path)
        with _checked(fs, loc, path):
            fs.pipe_file(loc.fs_path, data)

    def put_file(self, local: str, path: str) -> None:
        """Upload the local file `local` as the object `path`."""
        fs, loc = self._fs(path)
        with _checked(fs, loc, path):
            fs.put_file(local, loc.fs_path)

    def delete(self, path: str) -> None:
        """Remove the object; `FileNotFoundInTableError` if it does not exist."""
        fs, loc = self._fs(path)
        with _ERRORS.translated(path):
            if not fs.isfile(loc.fs_path):
                raise FileNotFoundInTableError(f"{path}: file not found")
            fs.rm_file(loc.fs_path)

    def delete_many(self, paths: Sequence[str]) -> list[DeleteOutcome]:
        """Delete objects one by one; one outcome per path (deleted, not_found, denied or other)."""
        out: list[DeleteOutcome] = []
        for p in paths:
            try:
                self.delete(p)
            except FileNotFoundInTableError:
                out.append(DeleteOutcome(p, "not_found"))
            except StorageAccessDeniedError as e:
                out.append(DeleteOutcome(p, "denied", str(e)))
            except IcebergError as e:
                out.append(DeleteOutcome(p, "other", str(e)))
            else:
                out.append(DeleteOutcome(p, "deleted"))
        return out


# -- the filesystems DuckDB reads and writes through ---------------------------------------------


@functools.cache
def routing_filesystem_class(kind: str) -> type[Any]:
    """The fsspec filesystem DuckDB reaches one store kind through, defined on first use (fsspec
    loads only when a connection first needs it)."""

    class RoutingStoreFileSystem(fsspec.AbstractFileSystem):
        """Each call goes to the backend instance the registry's settings choose for that path
        (per-table vended credentials work in one connection). Reads are exact ranges. Paths are
        handed back with their scheme (and an Azure URL's account host): DuckDB keeps a returned
        URL as it is."""

        protocol = GCS_SCHEMES if kind == GCS else AZURE_SCHEMES
        cachable = False

        def __init__(self, registry: StoreRegistry | None = None, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.registry = registry or REGISTRY

        def _full(self, path: str) -> str:
            if "://" in path:
                return path
            path = path.lstrip("/")
            if kind == GCS:
                return f"gs://{path}"
            return f"abfss://{path}" if "@" in path.partition("/")[0] else f"az://{path}"

        def _route(self, path: str) -> tuple[Any, Location, str]:
            full = self._full(path)
            loc = locate(full)
            return filesystem(self.registry.settings_for(full), full, loc.account), loc, full

        def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
            return self.open(path, mode, **kwargs)

        def open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
            fs, loc, _ = self._route(path)
            if "r" in mode:
                info = fs.info(loc.fs_path)
                if info.get("type") != "file":
                    raise FileNotFoundError(path)
                return StoreRangeReader(fs, loc.fs_path, int(info["size"]))
            return fs.open(loc.fs_path, mode, **kwargs)

        def info(self, path: str, **kwargs: Any) -> Any:
            fs, loc, full = self._route(path)
            info = dict(fs.info(loc.fs_path))
            info["name"] = full
            return info

        def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
            fs, loc, _ = self._route(path)
            return fs.ls(loc.fs_path, detail=detail, **kwargs)

        def glob(self, path: str, **kwargs: Any) -> Any:
            fs, loc, full = self._route(path)
            if not any(c in loc.key for c in "*?["):  # one file named exactly
                return [full] if fs.isfile(loc.fs_path) else []
            return [f"{loc.root}/{k.partition('/')[2]}" for k in fs.glob(loc.fs_path, **kwargs)]

        def exists(self, path: str, **kwargs: Any) -> bool:
            fs, loc, _ = self._route(path)
            return bool(fs.exists(loc.fs_path))

        def isdir(self, path: str) -> bool:
            fs, loc, _ = self._route(path)
            return bool(fs.isdir(loc.fs_path))

        def isfile(self, path: str) -> bool:
            fs, loc, _ = self._route(path)
            return bool(fs.isfile(loc.fs_path))

        def size(self, path: str) -> Any:
            fs, loc, _ = self._route(path)
            return fs.size(loc.fs_path)

        def modified(self, path: str) -> Any:
            fs, loc, _ = self._route(path)
            info = fs.info(loc.fs_path)
            for name in ("mtime", "last_modified"):
                if isinstance(info.get(name), datetime):
                    return info[name]
            return fs.modified(loc.fs_path)

        def rm_file(self, path: str) -> None:
            fs, loc, _ = self._route(path)
            fs.rm_file(loc.fs_path)

        def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
            for p in [path] if isinstance(path, str) else path:
                fs, loc, _ = self._route(p)
                fs.rm(loc.fs_path, recursive=recursive, maxdepth=maxdepth)

        def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
            """Object stores have no folders: nothing to make."""

        def makedirs(self, path: str, exist_ok: bool = False) -> None:
            """Object stores have no folders: nothing to make."""

    RoutingStoreFileSystem.__name__ = "RoutingGcsFileSystem" if kind == GCS else "RoutingAzureFileSystem"
    return RoutingStoreFileSystem


def mentions_store(text: str | None) -> bool:
    """Whether `text` (SQL) names a GCS or Azure path."""
    return text is not None and any(f"{scheme}://" in text for scheme in STORE_SCHEMES)


def has_any_backend() -> bool:
    """Whether gcsfs or adlfs is installed (without importing either)."""
    return has_backend(GCS) or has_backend(AZURE)


def register_filesystems(con: Any, registry: StoreRegistry | None = None) -> None:
    """Let DuckDB connection `con` read and write gs:// and az:// / abfss:// paths through the
    settings of `registry` (the connection's; the process's when None), for each store whose
    backend is installed (without it, such paths fail with DuckDB's own message)."""
    for kind, protocol in ((GCS, "gs"), (AZURE, "az")):
        if has_backend(kind) and not con.filesystem_is_registered(protocol):
            con.register_filesystem(routing_filesystem_class(kind)(registry))


__all__ = [
    "AZURE",
    "AZURE_SCHEMES",
    "GCS",
    "GCS_SCHEMES",
    "REGISTRY",
    "STORE_SCHEMES",
    "Location",
    "StoreFileIO",
    "StoreRegistry",
    "StoreSettings",
    "duckdb_spelling",
    "filesystem",
    "has_backend",
    "is_store_path",
    "locate",
    "mentions_store",
    "register_filesystems",
    "register_properties",
    "register_secret",
    "register_vended_credentials",
    "settings_from_properties",
    "settings_from_secret",
    "store_kind",
    "vended_properties",
]
