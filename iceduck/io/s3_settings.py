"""Where an S3 path is and how to reach it: paths (`s3://`, `s3a://`, `s3n://`), settings and the registry.

Settings for a path are looked up in this order (the first source with a scope covering the path
wins; within a source the longest scope wins):
1. vended credentials / a REST catalog's `config` for a table location (`register_vended_credentials`),
2. table and catalog properties with PyIceberg's FileIO names (`s3.endpoint`, `s3.access-key-id`,
   `s3.secret-access-key`, `s3.session-token`, `s3.region`, `s3.path-style-access`),
3. DuckDB-style `CREATE SECRET (TYPE s3, KEY_ID, SECRET, SESSION_TOKEN, REGION, ENDPOINT, URL_STYLE,
   USE_SSL, SCOPE)` statements seen by `Lake.sql` and the shell,
4. the AWS environment (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, `AWS_PROFILE`, ~/.aws/...), which
   botocore reads itself when nothing above applies.

Each lake (`iceduck.connect`) has its own registry, whose parent is the process's `REGISTRY`: a
`CREATE SECRET` run on one lake, or the credentials its REST catalog vends, reach that lake's
reads and writes (its FileIO and the filesystem its DuckDB connection reads through) and no other
connection's; what is registered on `REGISTRY` applies to every connection below its own.
"""

from __future__ import annotations

import ipaddress
import os
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import IntEnum
from typing import Any

from iceduck.errors import IcebergError, UnsupportedFormatError
from iceduck.io.paths import normalize_path, split_scheme

S3_SCHEMES = ("s3", "s3a", "s3n")


class Source(IntEnum):
    """Where settings came from; lower values win."""

    VENDED = 0
    PROPERTIES = 1
    SECRET = 2


@dataclass(frozen=True, slots=True)
class S3Settings:
    """How to reach one S3 location. None means "not set here" (botocore's defaults apply)."""

    endpoint: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    region: str | None = None
    path_style: bool | None = None
    profile: str | None = None

    @property
    def is_empty(self) -> bool:
        """True when no field is set."""
        return all(getattr(self, f.name) is None for f in fields(self))


def _bool(value: str | bool | None, name: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise IcebergError(f"{name}: expected true or false, not {value!r}")


def settings_from_properties(props: Mapping[str, str]) -> S3Settings:
    """Settings from FileIO properties with PyIceberg's names (vended `config`, table, catalog)."""
    return S3Settings(
        endpoint=props.get("s3.endpoint") or None,
        access_key_id=props.get("s3.access-key-id") or None,
        secret_access_key=props.get("s3.secret-access-key") or None,
        session_token=props.get("s3.session-token") or None,
        region=props.get("s3.region") or props.get("client.region") or None,
        path_style=_bool(props.get("s3.path-style-access"), "s3.path-style-access"),
        profile=props.get("s3.profile-name") or None,
    )


def properties_from_settings(settings: S3Settings) -> dict[str, str]:
    """The FileIO properties with PyIceberg's names for `settings` (the inverse of
    `settings_from_properties`; what a REST catalog vends in a table's `config`)."""
    values = {
        "s3.endpoint": settings.endpoint,
        "s3.access-key-id": settings.access_key_id,
        "s3.secret-access-key": settings.secret_access_key,
        "s3.session-token": settings.session_token,
        "s3.region": settings.region,
        "s3.path-style-access": None if settings.path_style is None else str(settings.path_style).lower(),
        "s3.profile-name": settings.profile,
    }
    return {k: v for k, v in values.items() if v is not None}


def effective_settings(path: str, registry: S3Registry | None = None) -> S3Settings:
    """The settings `registry` (the process's when None) reaches an S3 path with, else what botocore finds
    (the AWS environment and profiles), resolved into keys, region and endpoint. An endpoint whose
    host is an IP address or localhost is read path-style, as botocore reads it."""
    settings = (registry or REGISTRY).settings_for(path)
    if settings.access_key_id is not None or settings.profile is not None:
        return settings
    import botocore.session  # first use only: botocore is a second of start-up

    session = botocore.session.get_session()
    credentials = session.get_credentials()
    frozen = credentials.get_frozen_credentials() if credentials is not None else None
    endpoint = settings.endpoint
    if endpoint is None and os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() != "true":
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
    region = settings.region or os.environ.get("AWS_REGION") or session.get_config_variable("region") or None
    path_style = settings.path_style
    if path_style is None and endpoint is not None:
        host = urllib.parse.urlsplit(endpoint).hostname or ""
        path_style = True if host == "localhost" or _is_ip(host) else None
    return S3Settings(
        endpoint=endpoint,
        access_key_id=frozen.access_key if frozen else None,
        secret_access_key=frozen.secret_key if frozen else None,
        session_token=frozen.token if frozen else None,
        region=region,
        path_style=path_style,
    )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def settings_from_secret(options: Mapping[str, Any]) -> tuple[S3Settings, str | None]:
    """(settings, scope) from the options of DuckDB's `CREATE SECRET (TYPE s3, ...)` (any case).

    DuckDB's ENDPOINT has no scheme (`localhost:4568`); USE_SSL (default true) picks http or https.
    """
    opts = {str(k).lower(): v for k, v in options.items()}
    endpoint = opts.get("endpoint")
    if endpoint is not None:
        endpoint = str(endpoint)
        if "://" not in endpoint:
            use_ssl = _bool(opts.get("use_ssl"), "USE_SSL")
            endpoint = ("https://" if use_ssl in (None, True) else "http://") + endpoint
    style = opts.get("url_style")
    path_style = None if style is None else str(style).lower() == "path"
    scope = opts.get("scope")
    settings = S3Settings(
        endpoint=endpoint,
        access_key_id=_text(opts.get("key_id")),
        secret_access_key=_text(opts.get("secret")),
        session_token=_text(opts.get("session_token")),
        region=_text(opts.get("region")),
        path_style=path_style,
        profile=_text(opts.get("profile")),
    )
    return settings, (str(scope) if scope is not None else None)


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def is_s3(path: str) -> bool:
    """True for `s3://`, `s3a://` and `s3n://` paths."""
    return split_scheme(path)[0] in S3_SCHEMES


def bucket_key(path: str) -> tuple[str, str]:
    """(bucket, key) of an S3 path in any of its schemes."""
    scheme, rest = split_scheme(normalize_path(path))
    if scheme not in S3_SCHEMES or not rest.startswith("//"):
        raise UnsupportedFormatError(f"{path}: not an s3:// path")
    bucket, _, key = rest[2:].partition("/")
    if not bucket:
        raise UnsupportedFormatError(f"{path}: an s3:// path needs a bucket")
    return bucket, key


def fs_path(path: str) -> str:
    """`bucket/key` (the bucket alone for its root) of an S3 path: how s3fs and the readers name an object."""
    bucket, key = bucket_key(path)
    return f"{bucket}/{key}" if key else bucket


def _scope_key(prefix: str) -> str:
    """The comparable form of a scope: `bucket/key...` without scheme and without trailing slash."""
    if not is_s3(prefix):
        raise IcebergError(f"{prefix}: S3 settings need an s3:// scope")
    bucket, key = bucket_key(prefix)
    return f"{bucket}/{key}".rstrip("/")


def _covers(scope: str, target: str) -> bool:
    return scope == "" or target == scope or target.startswith(scope + "/")


class S3Registry:
    """S3 settings by source and scope (a location prefix); thread-safe.

    A connection's registry has the process's (`REGISTRY`) as its `parent`: what the connection
    registers (its `CREATE SECRET`s, its REST catalog's vended credentials) is seen by that
    connection alone, and the process's registrations apply below it at equal source and scope."""

    def __init__(self, parent: S3Registry | None = None) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[Source, str], S3Settings] = {}
        self._secrets: dict[str, tuple[S3Settings, str | None]] = {}  # by lower-case name ("" unnamed)
        self.parent = parent

    def _matches(self, target: str, depth: int) -> list[tuple[Source, int, int, S3Settings]]:
        """(source, -scope length, depth, settings) of every entry covering `target`, here and in
        the parents (depth 0 here, 1 in the parent, ...)."""
        with self._lock:
            found = [
                (src, -len(scope), depth, s)
                for (src, scope), s in self._entries.items()
                if _covers(scope, target)
            ]
        if self.parent is not None:
            found.extend(self.parent._matches(target, depth + 1))
        return found

    def register(self, settings: S3Settings, *, scope: str | None = None, source: Source) -> None:
        """Use `settings` for paths under `scope` (all of S3 when None), at priority `source`."""
        key = "" if scope is None else _scope_key(scope)
        with self._lock:
            self._entries[(source, key)] = settings

    def registered(self, *, scope: str | None = None, source: Source) -> S3Settings | None:
        """The settings registered at exactly `scope` and `source`, if any."""
        key = "" if scope is None else _scope_key(scope)
        with self._lock:
            return self._entries.get((source, key))

    def unregister(self, *, scope: str | None = None, source: Source) -> None:
        """Drop the settings registered at exactly `scope` and `source`."""
        key = "" if scope is None else _scope_key(scope)
        with self._lock:
            self._entries.pop((source, key), None)

    def forget(self, *, source: Source | None = None) -> None:
        """Drop every registration (of one source)."""
        with self._lock:
            for k in [k for k in self._entries if source is None or k[0] == source]:
                del self._entries[k]

    def name_secret(self, name: str | None, settings: S3Settings, scope: str | None) -> None:
        """Remember the settings of a `CREATE SECRET [name] (TYPE s3, ...)` by its name (None: the
        unnamed one), for what names an S3 secret (`ATTACH ... (AUTHORIZATION_TYPE 'sigv4', SECRET name)`)."""
        with self._lock:
            self._secrets[(name or "").lower()] = (settings, scope)

    def named_secret(self, name: str | None) -> S3Settings | None:
        """The settings of the S3 secret `name`, here or in a parent. None as `name`: the unnamed
        secret, else one without a SCOPE (DuckDB's choice of a default secret for `s3://`)."""
        with self._lock:
            if name is not None:
                found = self._secrets.get(name.lower())
            else:
                found = self._secrets.get("") or next(
                    (v for v in self._secrets.values() if v[1] is None), None
                )
        if found is not None:
            return found[0]
        return self.parent.named_secret(name) if self.parent is not None else None

    def settings_for(self, path: str) -> S3Settings:
        """The settings for an S3 path: the highest-priority source covering it, longest scope first."""
        bucket, key = bucket_key(path)
        matches = self._matches(f"{bucket}/{key}".rstrip("/"), 0)
        if not matches:
            return S3Settings()
        return min(matches, key=lambda m: (m[0], m[1], m[2]))[3]


REGISTRY = S3Registry()


def register_vended_credentials(
    location: str, config: Mapping[str, str], registry: S3Registry | None = None
) -> None:
    """Use a REST catalog's vended S3 settings (PyIceberg names) for files under `location`, in
    `registry` (the process's when None).

    Called by the REST client for each loaded table with its `config` / `storage-credentials`;
    these win over table/catalog properties, `CREATE SECRET` and the environment.
    """
    settings = settings_from_properties(config)
    if not settings.is_empty:
        (registry or REGISTRY).register(settings, scope=location, source=Source.VENDED)


def register_properties(
    properties: Mapping[str, str], *, scope: str | None = None, registry: S3Registry | None = None
) -> None:
    """Use the S3 settings among table or catalog `properties` for paths under `scope`, in
    `registry` (the process's when None)."""
    settings = settings_from_properties(properties)
    if not settings.is_empty:
        (registry or REGISTRY).register(settings, scope=scope, source=Source.PROPERTIES)


def register_secret(
    options: Mapping[str, Any], registry: S3Registry | None = None, *, name: str | None = None
) -> None:
    """Use the settings of a DuckDB-style `CREATE SECRET [name] (TYPE s3, ...)` (its SCOPE, else all
    of S3) in `registry` (a connection's; the process's when None), and keep them by `name`."""
    settings, scope = settings_from_secret(options)
    target = registry or REGISTRY
    target.register(settings, scope=scope, source=Source.SECRET)
    target.name_secret(name, settings, scope)


__all__ = [
    "REGISTRY",
    "S3_SCHEMES",
    "S3Registry",
    "S3Settings",
    "Source",
    "bucket_key",
    "effective_settings",
    "fs_path",
    "is_s3",
    "properties_from_settings",
    "register_properties",
    "register_secret",
    "register_vended_credentials",
    "settings_from_properties",
    "settings_from_secret",
]
