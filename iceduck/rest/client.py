"""`RestCatalog`: an Iceberg REST catalog as an iceduck catalog, on the standard library's HTTP.

    cat = RestCatalog("http://localhost:8181", authorization_type="none")
    cat = RestCatalog("https://catalog.example/api/catalog", warehouse="analytics",
                      client_id="...", client_secret="...", oauth2_scope="PRINCIPAL_ROLE:ALL")

Option names are those of DuckDB's iceberg extension (`ENDPOINT`, `AUTHORIZATION_TYPE`, `TOKEN`,
`CLIENT_ID`, `CLIENT_SECRET`, `OAUTH2_SERVER_URI`, `OAUTH2_SCOPE`, `ACCESS_DELEGATION_MODE`,
`DEFAULT_REGION`), lower-cased as keyword arguments; `RestCatalog.from_options` takes them in any case.

What it does on the wire:
- `GET /v1/config?warehouse=...` first; `defaults`, then the client's options, then `overrides`
  (`prefix` among them) make the catalog's settings. Every other path is under `/v1/{prefix}`.
- Authentication: none, AWS SigV4 signatures (`authorization_type="sigv4"`, `iceduck.rest.sigv4`;
  `endpoint_type="glue" | "s3_tables"` derives AWS's endpoint as DuckDB's extension does), a
  static bearer `token`, or OAuth2 client credentials (`POST` to
  `oauth2_server_uri`, default `<endpoint>/v1/oauth/tokens`; id and secret in HTTP Basic, or in the
  form when the server refuses Basic). A token with `expires_in` is renewed before it expires, and
  a 401 renews it once and repeats the request (a 401 means the server did not act on it).
- Namespaces are `%1F`-joined path segments; tables load with `X-Iceberg-Access-Delegation:
  vended-credentials` (unless `access_delegation_mode="none"`), and each table's `config` and
  `storage-credentials` are kept for the storage layer (`table_config`).
- A commit (`commit_table`) sends the change's requirements and updates as iceduck's committer
  planned them (`iceduck.spec.updates`); creating a table is a staged create, then that commit
  with `assert-create`. The server writes the metadata file.
- A 409 on a commit is `CommitConflictError`: the committer reloads, re-plans on the fresh metadata
  and retries. A 5xx, a timeout or a lost connection during a commit is `CommitStateUnknownError`:
  the commit may have happened, so it is never retried as a new one.
- Errors are iceduck's (`NamespaceNotFoundError`, `TableNotFoundError`, `AlreadyExistsError`,
  `ForbiddenError`, `ValidationError`) with the server's own message.

Views are listed by no method here, and a name that is a view on the server is refused as not a table.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from iceduck.catalog.base import NamedCatalog, check_namespace, check_table_name
from iceduck.catalog.commit import CommittedTable, LoadedMetadata, TableChange
from iceduck.errors import (
    CommitStateUnknownError,
    ForbiddenError,
    IcebergError,
    NamespaceNotFoundError,
    TableNotFoundError,
    ValidationError,
)
from iceduck.io import fsspec_store
from iceduck.io.fileio import FileIO
from iceduck.io.s3_settings import is_s3, register_vended_credentials
from iceduck.io.storage import default_io, s3_registry, store_registry
from iceduck.rest import protocol as wire
from iceduck.rest.sigv4 import AwsKeys, SigV4Signer, endpoint_for, service_and_region
from iceduck.rest.view_client import RestViews
from iceduck.spec import updates as upd
from iceduck.spec.partitioning import partition_spec_to_json
from iceduck.spec.sorting import sort_order_to_json
from iceduck.spec.table_metadata import TableMetadata, read_table_metadata
from iceduck.spec.types import schema_to_json

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_SCOPE = "PRINCIPAL_ROLE:ALL"  # what DuckDB's extension asks for
REFRESH_MARGIN = 0.1  # renew a token when less than this share of its lifetime is left

OPTION_NAMES = (
    "endpoint",
    "warehouse",
    "authorization_type",
    "token",
    "client_id",
    "client_secret",
    "oauth2_server_uri",
    "oauth2_scope",
    "oauth2_grant_type",
    "access_delegation_mode",
    "default_region",
    "prefix",
    "timeout",
    "name",
    "secret",
    "support_nested_namespaces",
    "support_stage_create",
    "purge_requested",
    "endpoint_type",
    "signing_name",
    "signing_region",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "aws_region",
    "aws_profile",
)


@dataclass(frozen=True, slots=True)
class LoadedTable:
    """What loading a table returned: its metadata location and metadata, and its settings."""

    metadata_location: str
    metadata: TableMetadata
    config: Mapping[str, str] = field(default_factory=dict)
    storage_credentials: tuple[Mapping[str, Any], ...] = ()


@dataclass(slots=True)
class _Token:
    value: str
    renew_at: float | None  # monotonic seconds; None: never expires


def _choice(option: str, value: str, allowed: tuple[str, ...]) -> str:
    """`value` lower-cased, if it is one of `allowed` (compared case-insensitively)."""
    chosen = value.lower()
    if chosen not in allowed:
        spelled = ", ".join(repr(a) for a in allowed[:-1]) + f" or {allowed[-1]!r}"
        raise ValidationError(f"{option} must be {spelled}, not {value!r}")
    return chosen


class RestCatalog(NamedCatalog, RestViews):
    """An Iceberg REST catalog (see the module docstring)."""

    def __init__(
        self,
        endpoint: str,
        *,
        warehouse: str | None = None,
        authorization_type: str = "oauth2",
        token: str | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        oauth2_server_uri: str | None = None,
        oauth2_scope: str | None = None,
        oauth2_grant_type: str = "client_credentials",
        access_delegation_mode: str = "vended_credentials",
        default_region: str | None = None,
        prefix: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        name: str | None = None,
        io: FileIO | None = None,
        signing_name: str | None = None,
        signing_region: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        aws_region: str | None = None,
        aws_profile: str | None = None,
        support_stage_create: bool = True,
    ) -> None:
        """Connect to the catalog at `endpoint` (fetches `/v1/config`, and a token if configured).

        `authorization_type="sigv4"` signs every request with AWS Signature Version 4
        (`iceduck.rest.sigv4`): `signing_name`/`signing_region` (else what the endpoint names,
        else `aws_region`, the AWS environment or profile), keys `aws_access_key_id`/
        `aws_secret_access_key`/`aws_session_token` (else botocore's chain, `aws_profile`).

        `support_stage_create=False` (DuckDB's SUPPORT_STAGE_CREATE; off for `endpoint_type`, as
        DuckDB has it for AWS's catalogs) creates a table with a plain create, then commits its
        first snapshot, instead of a staged create committed whole."""
        if not endpoint.startswith(("http://", "https://")):
            raise ValidationError(
                f"REST catalog endpoint must be an http:// or https:// URL, not {endpoint!r}"
            )
        auth = _choice("AUTHORIZATION_TYPE", authorization_type, ("oauth2", "sigv4", "none"))
        if oauth2_grant_type != "client_credentials":
            raise ValidationError(
                f"OAUTH2_GRANT_TYPE {oauth2_grant_type!r}: only client_credentials is supported"
            )
        delegation = _choice("ACCESS_DELEGATION_MODE", access_delegation_mode, ("vended_credentials", "none"))
        if auth == "oauth2" and token is None and (client_id is None) != (client_secret is None):
            raise ValidationError("OAuth2 client credentials need both CLIENT_ID and CLIENT_SECRET")
        self.endpoint = endpoint.rstrip("/")
        self.warehouse_name = warehouse  # a name the server knows, not a folder
        self.timeout = float(timeout)
        self.default_region = default_region
        self._auth = auth
        self._client_id = client_id
        self._client_secret = client_secret
        self._token_uri = oauth2_server_uri or f"{self.endpoint}/v1/oauth/tokens"
        self._scope = oauth2_scope or DEFAULT_SCOPE
        self._delegation = delegation
        self._token: _Token | None = _Token(token, None) if (auth == "oauth2" and token) else None
        self._signer: SigV4Signer | None = None
        self.support_stage_create = bool(support_stage_create)
        if auth == "sigv4":
            if (aws_access_key_id is None) != (aws_secret_access_key is None):
                raise ValidationError("AWS keys for sigv4 need both the access key id and the secret key")
            keys = None
            if aws_access_key_id is not None and aws_secret_access_key is not None:
                keys = AwsKeys(aws_access_key_id, aws_secret_access_key, aws_session_token or None)
            self._signer = SigV4Signer(
                self.endpoint,
                signing_name=signing_name,
                signing_region=signing_region
                or (None if service_and_region(self.endpoint)[1] else aws_region),
                keys=keys,
                profile=aws_profile,
            )
        self._lock = threading.Lock()
        self._io = io or default_io()
        self._tables: dict[tuple[str, str], LoadedTable] = {}
        if auth == "oauth2" and self._token is None and client_id is not None:
            self._fetch_token()
        query = f"?{urlencode({'warehouse': warehouse})}" if warehouse else ""
        config = self._request("GET", f"/v1/config{query}", prefixed=False)
        if not isinstance(config, dict):
            raise IcebergError(f"{self.endpoint}: /v1/config answered {config!r}, not a configuration object")
        props: dict[str, str] = {}
        props.update(config.get("defaults") or {})
        if prefix is not None:
            props["prefix"] = prefix
        props.update(config.get("overrides") or {})
        self.properties: Mapping[str, str] = props
        self.prefix = props.get("prefix") or None
        self.endpoints: frozenset[str] | None = (
            frozenset(config["endpoints"]) if isinstance(config.get("endpoints"), list) else None
        )
        self._name = name or warehouse or "rest"

    @classmethod
    def from_options(cls, endpoint: str | None = None, **options: Any) -> RestCatalog:
        """A catalog from DuckDB-style option names in any case (`ENDPOINT`, `CLIENT_ID`, `TOKEN`, ...)."""
        opts = {k.lower(): v for k, v in options.items()}
        unknown = sorted(set(opts) - set(OPTION_NAMES) - {"io"})
        if unknown:
            raise ValidationError(
                f"unknown REST catalog option(s) {', '.join(unknown)}; known: {', '.join(OPTION_NAMES)}"
            )
        url = endpoint or opts.pop("endpoint", None)
        opts.pop("endpoint", None)
        endpoint_type = opts.pop("endpoint_type", None)
        if endpoint_type is not None:
            # DuckDB's ENDPOINT_TYPE: an AWS catalog, signed; an ENDPOINT given too replaces AWS's
            # (a VPC endpoint, a proxy) but keeps the service's signing name
            if "authorization_type" in opts:
                raise ValidationError(
                    "ENDPOINT_TYPE cannot be combined with AUTHORIZATION_TYPE (it implies sigv4)"
                )
            region = opts.get("signing_region") or opts.get("aws_region") or _environment_region()
            aws_url, service = endpoint_for(str(endpoint_type), str(opts.get("warehouse") or ""), region)
            url = url or aws_url
            opts["authorization_type"] = "sigv4"
            opts.setdefault("signing_name", service)
            if region and not service_and_region(str(url))[1]:
                opts.setdefault("signing_region", region)
        if not url:
            raise ValidationError("a REST catalog needs an ENDPOINT")
        stage = opts.pop("support_stage_create", None)
        if stage is not None:
            opts["support_stage_create"] = _flag("SUPPORT_STAGE_CREATE", stage)
        elif endpoint_type is not None:
            opts["support_stage_create"] = False  # DuckDB's default for AWS's catalogs
        for ignored in ("secret", "support_nested_namespaces", "purge_requested"):
            opts.pop(ignored, None)
        return cls(url, **opts)

    # -- plumbing ----------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"RestCatalog({self.endpoint!r}, prefix={self.prefix!r})"

    def _fetch_token(self) -> None:
        assert self._client_id is not None and self._client_secret is not None
        form = {"grant_type": "client_credentials", "scope": self._scope}
        basic = base64.b64encode(f"{self._client_id}:{self._client_secret}".encode()).decode()
        try:
            body = self._token_request(form, {"Authorization": f"Basic {basic}"})
        except ForbiddenError:
            # some servers take the credentials only in the form body (RFC 6749 allows both)
            body = self._token_request(
                {**form, "client_id": self._client_id, "client_secret": self._client_secret}, {}
            )
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise ForbiddenError(f"{self._token_uri}: token response without an access_token")
        expires = body.get("expires_in")
        renew_at = None
        if isinstance(expires, int | float) and expires > 0:
            renew_at = time.monotonic() + float(expires) * (1 - REFRESH_MARGIN)
        self._token = _Token(token, renew_at)

    def _token_request(self, form: Mapping[str, str], headers: Mapping[str, str]) -> Any:
        request = urllib.request.Request(
            self._token_uri,
            data=urlencode(form).encode(),
            method="POST",
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
                **headers,
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as e:
            detail = _oauth_message(e)
            if e.code in (400, 401, 403):
                raise ForbiddenError(
                    f"{self._token_uri}: token request refused ({e.code}): {detail}"
                ) from None
            raise IcebergError(f"{self._token_uri}: token request failed ({e.code}): {detail}") from None
        except (urllib.error.URLError, OSError) as e:
            raise IcebergError(f"{self._token_uri}: cannot reach the token endpoint: {_reason(e)}") from None

    def _bearer(self) -> str | None:
        if self._auth == "none":
            return None
        with self._lock:
            token = self._token
            if (
                token is not None
                and token.renew_at is not None
                and time.monotonic() >= token.renew_at
                and self._client_id is not None
            ):
                self._fetch_token()
                token = self._token
        return token.value if token is not None else None

    def _path(self, *parts: str) -> str:
        head = f"/v1/{quote(self.prefix, safe='')}" if self.prefix else "/v1"
        return head + "".join("/" + p for p in parts)

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        prefixed: bool = True,
        commit: bool = False,
        headers: Mapping[str, str] | None = None,
        retry_auth: bool = True,
    ) -> Any:
        """One HTTP exchange; JSON result (None for an empty body); errors mapped to iceduck's."""
        url = self.endpoint + path
        all_headers = {"Accept": "application/json", **(headers or {})}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = "application/json"
        bearer = self._bearer()
        if bearer:
            all_headers["Authorization"] = f"Bearer {bearer}"
        if self._signer is not None:
            all_headers = self._signer.sign(method, url, all_headers, data)
        request = urllib.request.Request(url, data=data, method=method, headers=all_headers)
        what = f"{method} {url}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as e:
            if e.code == 401 and retry_auth and self._client_id is not None and self._auth == "oauth2":
                with self._lock:
                    self._fetch_token()
                return self._request(
                    method, path, body, prefixed=prefixed, commit=commit, headers=headers, retry_auth=False
                )
            code, error_type, message = _error_of(e)
            raise wire.error_for(code, error_type, message, commit=commit, where=f"{what}: {code}") from None
        except TimeoutError as e:
            raise _lost(what, f"no answer within {self.timeout:g}s", commit) from e
        except (urllib.error.URLError, OSError) as e:
            raise _lost(what, _reason(e), commit) from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise IcebergError(f"{what}: the answer is not JSON: {raw[:200]!r}") from None

    def _delegation_headers(self) -> dict[str, str]:
        if self._delegation == "vended_credentials":
            return {wire.ACCESS_DELEGATION_HEADER: "vended-credentials"}
        return {}

    # -- namespaces --------------------------------------------------------------------------

    def list_namespaces(self, parent: str | None = None) -> tuple[str, ...]:
        """Namespaces one level below `parent` (top level when None), sorted."""
        query: dict[str, str] = {}
        if parent is not None:
            check_namespace(parent)
            query["parent"] = wire.NAMESPACE_SEPARATOR.join(wire.namespace_parts(parent))
        found: list[str] = []
        for page in self._pages(self._path("namespaces"), query, "namespaces"):
            found.extend(wire.namespace_name(ns) for ns in page)
        return tuple(sorted(set(found)))

    def _pages(self, path: str, query: dict[str, str], key: str) -> Any:
        token: str | None = None
        while True:
            params = dict(query)
            if token is not None:
                params["pageToken"] = token
            body = self._request("GET", path + (f"?{urlencode(params)}" if params else ""))
            if not isinstance(body, dict) or not isinstance(body.get(key, []), list):
                raise IcebergError(f"GET {self.endpoint}{path}: expected an object with a '{key}' list")
            yield body.get(key, [])
            token = body.get("next-page-token")
            if not token:
                return

    def namespace_exists(self, namespace: str) -> bool:
        """True if the namespace exists (`HEAD`)."""
        check_namespace(namespace)
        try:
            self._request("HEAD", self._path("namespaces", wire.encode_namespace(namespace)))
        except NamespaceNotFoundError:
            return False
        except TableNotFoundError:  # a server answering 404 without a type
            return False
        return True

    def create_namespace(self, namespace: str, properties: Mapping[str, str] | None = None) -> None:
        """Create a namespace; `AlreadyExistsError` if it exists."""
        check_namespace(namespace)
        body = {"namespace": wire.namespace_parts(namespace), "properties": dict(properties or {})}
        self._request("POST", self._path("namespaces"), body)

    def drop_namespace(self, namespace: str) -> None:
        """Drop an empty namespace."""
        check_namespace(namespace)
        self._request("DELETE", self._path("namespaces", wire.encode_namespace(namespace)))

    def namespace_properties(self, namespace: str) -> dict[str, str]:
        """The namespace's properties."""
        check_namespace(namespace)
        body = self._request("GET", self._path("namespaces", wire.encode_namespace(namespace)))
        return dict((body or {}).get("properties") or {})

    def update_namespace_properties(
        self,
        namespace: str,
        updates: Mapping[str, str] | None = None,
        removals: frozenset[str] | set[str] | None = None,
    ) -> None:
        """Set `updates` and remove `removals`."""
        check_namespace(namespace)
        body = {"updates": dict(updates or {}), "removals": sorted(removals or ())}
        self._request("POST", self._path("namespaces", wire.encode_namespace(namespace), "properties"), body)

    # -- tables ------------------------------------------------------------------------------

    def _table_path(self, namespace: str, name: str, *more: str) -> str:
        check_namespace(namespace)
        check_table_name(name)
        return self._path(
            "namespaces", wire.encode_namespace(namespace), "tables", quote(name, safe=""), *more
        )

    def list_tables(self, namespace: str) -> tuple[str, ...]:
        """Names of the tables in `namespace`, sorted."""
        check_namespace(namespace)
        names = []
        path = self._path("namespaces", wire.encode_namespace(namespace), "tables")
        for page in self._pages(path, {}, "identifiers"):
            for ident in page:
                ns, name = wire.parse_table_identifier(ident)
                if ns == namespace:
                    names.append(name)
        return tuple(sorted(set(names)))

    def table_exists(self, namespace: str, name: str) -> bool:
        """True if the catalog has the table (`HEAD`)."""
        try:
            self._request("HEAD", self._table_path(namespace, name))
        except (TableNotFoundError, NamespaceNotFoundError):
            return False
        return True

    def load(self, namespace: str, name: str) -> LoadedTable:
        """Load the table: metadata location, metadata, table config and storage credentials."""
        body = self._request("GET", self._table_path(namespace, name), headers=self._delegation_headers())
        return self._remember(namespace, name, body)

    def _loaded(self, body: Any, table: str) -> LoadedTable:
        if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
            raise IcebergError(f"{self.endpoint}: the load result of table {table} has no metadata")
        location = body.get("metadata-location")
        if not isinstance(location, str) or not location:
            raise IcebergError(f"{self.endpoint}: the load result of table {table} has no metadata-location")
        metadata = read_table_metadata(json.dumps(body["metadata"]).encode(), path=location)
        creds = tuple(c for c in body.get("storage-credentials") or () if isinstance(c, dict))
        return LoadedTable(location, metadata, dict(body.get("config") or {}), creds)

    def table_url(self, namespace: str, name: str) -> str:
        """The URL a load of the table requests (`iceberg_load_table_response`'s request_url)."""
        return self.endpoint + self._table_path(namespace, name)

    def load_table(self, namespace: str, name: str) -> str:
        """The current metadata location of the table; `TableNotFoundError` if absent."""
        return self.load(namespace, name).metadata_location

    def table_config(self, namespace: str, name: str) -> Mapping[str, str]:
        """Settings for reading the table's files: the catalog's, then the table's `config`, then
        the storage credentials whose prefix is the longest match for the table's location."""
        with self._lock:
            loaded = self._tables.get((namespace, name))
        if loaded is None:
            loaded = self.load(namespace, name)
        return self._settings(loaded, loaded.metadata.location)

    def _settings(self, loaded: LoadedTable, path: str) -> dict[str, str]:
        """The catalog's settings, then the table's `config`, then those of the storage credential
        whose prefix is the longest one `path` starts with."""
        config: dict[str, str] = dict(self.properties)
        config.update(loaded.config)
        best: Mapping[str, Any] | None = None
        for cred in loaded.storage_credentials:
            prefix = cred.get("prefix")
            longer = best is None or (isinstance(prefix, str) and len(prefix) > len(best.get("prefix", "")))
            if isinstance(prefix, str) and path.startswith(prefix) and longer:
                best = cred
        if best is not None:
            config.update({str(k): str(v) for k, v in (best.get("config") or {}).items()})
        return config

    def default_table_location(self, namespace: str, name: str) -> str:
        """Where the server would put a new table: it stages one (nothing is created) and says.
        Without stage-create (`support_stage_create=False`), under the namespace's `location`
        property when it has one (a Glue database's location), else it stages all the same."""
        if not self.support_stage_create:
            folder = self.namespace_properties(namespace).get("location")
            if folder:
                return f"{folder.rstrip('/')}/{check_table_name(name)}"
        body = self._request(
            "POST",
            self._path("namespaces", wire.encode_namespace(namespace), "tables"),
            {
                "name": check_table_name(name),
                "schema": {"type": "struct", "fields": []},
                "stage-create": True,
            },
            headers=self._delegation_headers(),
        )
        location = ((body or {}).get("metadata") or {}).get("location")
        if not isinstance(location, str) or not location:
            raise IcebergError(f"{self.endpoint}: staging table {namespace}.{name} returned no location")
        return location

    def create_table_entry(self, namespace: str, name: str, metadata_location: str) -> str:
        """Register a new table whose first metadata file the caller has written (`POST
        .../register`); returns its metadata location."""
        body = self._request(
            "POST",
            self._path("namespaces", wire.encode_namespace(namespace), "register"),
            {"name": check_table_name(name), "metadata-location": metadata_location},
            headers=self._delegation_headers(),
        )
        return self._remember(namespace, name, body).metadata_location

    def _remember(self, namespace: str, name: str, body: Any) -> LoadedTable:
        """Keep a table result, and hand its S3 settings to the storage layer: for the table's
        location, and for the prefix of each storage credential (data may live outside it)."""
        loaded = self._loaded(body, f"{namespace}.{name}")
        with self._lock:
            self._tables[(namespace, name)] = loaded
        scopes = [loaded.metadata.location, *(c.get("prefix") for c in loaded.storage_credentials)]
        for scope in scopes:
            if isinstance(scope, str) and is_s3(scope):
                register_vended_credentials(scope, self._settings(loaded, scope), s3_registry(self._io))
            elif isinstance(scope, str) and fsspec_store.is_store_path(scope):  # gcs.* / adls.*
                fsspec_store.register_vended_credentials(
                    scope, self._settings(loaded, scope), store_registry(self._io)
                )
        return loaded

    def drop_table(self, namespace: str, name: str, purge: bool = False) -> None:
        """Remove the table from the catalog (`purge`: the server also deletes its files)."""
        query = "?purgeRequested=true" if purge else ""
        self._request("DELETE", self._table_path(namespace, name) + query)
        with self._lock:
            self._tables.pop((namespace, name), None)

    def rename_table(self, namespace: str, name: str, new_namespace: str, new_name: str) -> None:
        """Rename a table (its files do not move)."""
        check_namespace(new_namespace)
        check_table_name(new_name)
        self._request(
            "POST",
            self._path("tables", "rename"),
            {"source": wire.table_identifier(namespace, name),
             "destination": wire.table_identifier(new_namespace, new_name)},
        )  # fmt: skip

    def commit(
        self, namespace: str, name: str, expected_metadata_location: str, new_metadata_location: str
    ) -> str:
        """Commit the change from the metadata at `expected_...` to the one at `new_...` (both
        written already) as the updates between them and the requirements that guard them. The
        server writes its own metadata file; returns its location."""
        with self._lock:
            cached = self._tables.get((namespace, name))
        if cached is not None and cached.metadata_location == expected_metadata_location:
            base = cached.metadata
        else:
            base = read_table_metadata(
                self._io.read(expected_metadata_location), path=expected_metadata_location
            )
        new = read_table_metadata(self._io.read(new_metadata_location), path=new_metadata_location)
        updates = updates_between(base, new)
        committed = self.commit_table(
            namespace, name, upd.requirements_for(base, updates), updates,
            loaded=LoadedMetadata(expected_metadata_location, base),
        )  # fmt: skip
        return committed.metadata_location

    def commit_table(
        self,
        namespace: str,
        name: str,
        requirements: Sequence[upd.TableRequirement],
        updates: Sequence[upd.TableUpdate],
        *,
        loaded: LoadedMetadata | None = None,
    ) -> CommittedTable:
        """Send a change (`POST .../tables/{name}`): the server checks the requirements, applies the
        updates and writes the metadata file. With `assert-create` the table is staged first
        (`stage-create`), as a create transaction is.

        `CommitConflictError` when a requirement fails (409: reload, re-plan, retry);
        `CommitStateUnknownError` when the outcome is unknown (5xx, timeout): never retry that."""
        if any(isinstance(r, upd.AssertCreate) for r in requirements):
            if self.support_stage_create:
                self._create(namespace, name, updates, stage=True)
            else:
                # a plain create makes the table (its uuid is the server's); what the create's
                # updates add beyond it (a first snapshot) is an ordinary commit on that table
                created = self._remember(namespace, name, self._create(namespace, name, updates, stage=False))
                rest = [u for u in updates if not isinstance(u, _CREATION_UPDATES)]
                if not rest:
                    return CommittedTable(created.metadata_location, created.metadata, None, None)
                refs = sorted({u.ref_name for u in rest if isinstance(u, upd.SetSnapshotRef)})
                uuid = created.metadata.table_uuid
                requirements = [
                    *([upd.AssertTableUUID(uuid)] if uuid is not None else []),
                    *(upd.AssertRefSnapshotId(ref, None) for ref in refs),
                ]
                updates = rest
        body = self._request(
            "POST",
            self._table_path(namespace, name),
            {"identifier": wire.table_identifier(namespace, name),
             "requirements": upd.requirements_to_json(requirements), "updates": upd.updates_to_json(updates)},
            commit=True,
        )  # fmt: skip
        done = self._remember(namespace, name, body)
        # the file the server applied the updates to is the last one its new metadata logs
        base_location = done.metadata.metadata_log[-1].metadata_file if done.metadata.metadata_log else None
        base = loaded.metadata if loaded is not None and loaded.location == base_location else None
        if base_location is not None and base is None:
            with contextlib.suppress(IcebergError, OSError):
                base = read_table_metadata(self._io.read(base_location), path=base_location)
        return CommittedTable(done.metadata_location, done.metadata, base_location, base)

    def commit_tables(self, changes: Sequence[TableChange]) -> None:
        """Commit several tables' changes all or nothing (`POST .../transactions/commit`, the spec's
        CommitTransactionRequest): the server checks every table's requirements and applies every
        change, or none. `CommitConflictError` when a requirement fails (409; nothing changed);
        `CommitStateUnknownError` when the outcome is unknown. A server whose config lists its
        endpoints without this one is refused here, before anything is sent. The tables' next
        loads ask the server again (its answer, 204, carries no metadata)."""
        route = "POST /v1/{prefix}/transactions/commit"
        if self.endpoints is not None and route not in self.endpoints:
            raise ValidationError(
                f"{self.endpoint}: this REST catalog does not offer multi-table commits ({route} is not "
                "among the endpoints its /v1/config lists); nothing was committed"
            )
        if any(isinstance(r, upd.AssertCreate) for c in changes for r in c.requirements):
            raise ValidationError(f"{self.endpoint}: a multi-table commit cannot create tables here")
        body = {
            "table-changes": [
                {"identifier": wire.table_identifier(c.namespace, c.name),
                 "requirements": upd.requirements_to_json(c.requirements),
                 "updates": upd.updates_to_json(c.updates)}
                for c in changes
            ]
        }  # fmt: skip
        self._request("POST", self._path("transactions", "commit"), body, commit=True)
        with self._lock:
            for c in changes:
                self._tables.pop((c.namespace, c.name), None)

    def _create(self, namespace: str, name: str, updates: Sequence[upd.TableUpdate], *, stage: bool) -> Any:
        """`POST .../tables` (with `stage-create` when `stage`): the table as the create's updates
        describe it; the server's answer (a LoadTableResult)."""
        request: dict[str, Any] = {"name": check_table_name(name), "stage-create": stage}
        props: dict[str, str] = {}
        for u in updates:
            if isinstance(u, upd.AddSchema):
                request["schema"] = schema_to_json(u.schema)
            elif isinstance(u, upd.AddPartitionSpec):
                request["partition-spec"] = partition_spec_to_json(u.spec)
            elif isinstance(u, upd.AddSortOrder):
                request["write-order"] = sort_order_to_json(u.sort_order)
            elif isinstance(u, upd.SetLocation):
                request["location"] = u.location
            elif isinstance(u, upd.SetProperties):
                props.update(u.updates)
            elif isinstance(u, upd.UpgradeFormatVersion):
                props["format-version"] = str(u.format_version)
        if "schema" not in request:
            raise ValidationError(f"creating table {namespace}.{name}: the updates add no schema")
        request["properties"] = props
        path = self._path("namespaces", wire.encode_namespace(namespace), "tables")
        return self._request("POST", path, request, headers=self._delegation_headers())


# the updates of a create that a plain create request carries itself
_CREATION_UPDATES = (
    upd.AssignUUID,
    upd.UpgradeFormatVersion,
    upd.AddSchema,
    upd.SetCurrentSchema,
    upd.AddPartitionSpec,
    upd.SetDefaultSpec,
    upd.AddSortOrder,
    upd.SetDefaultSortOrder,
    upd.SetLocation,
    upd.SetProperties,
)


def _flag(option: str, value: Any) -> bool:
    """A boolean option given as a bool or as text (`true`/`false`)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValidationError(f"{option} must be true or false, not {value!r}")


# -- updates between two metadata versions ---------------------------------------------------------


def updates_between(base: TableMetadata, new: TableMetadata) -> list[upd.TableUpdate]:
    """The updates that turn `base` into `new` (as a commit planned on `base` produced it).

    The metadata log, `last-updated-ms`, the sequence number and `next-row-id` are not updates:
    the catalog derives them when it applies the others."""
    if new.table_uuid != base.table_uuid:
        raise ValidationError(
            f"a commit cannot change the table uuid ({base.table_uuid} -> {new.table_uuid})"
        )
    out: list[upd.TableUpdate] = []
    if new.format_version != base.format_version:
        out.append(upd.UpgradeFormatVersion(new.format_version))
    base_schemas = {s.schema_id for s in base.schemas}
    out += [upd.AddSchema(s, new.last_column_id) for s in new.schemas if s.schema_id not in base_schemas]
    if new.current_schema_id != base.current_schema_id:
        out.append(upd.SetCurrentSchema(new.current_schema_id))
    base_specs = {s.spec_id for s in base.partition_specs}
    out += [upd.AddPartitionSpec(s) for s in new.partition_specs if s.spec_id not in base_specs]
    if new.default_spec_id != base.default_spec_id:
        out.append(upd.SetDefaultSpec(new.default_spec_id))
    base_orders = {o.order_id for o in base.sort_orders}
    out += [upd.AddSortOrder(o) for o in new.sort_orders if o.order_id not in base_orders]
    if new.default_sort_order_id != base.default_sort_order_id:
        out.append(upd.SetDefaultSortOrder(new.default_sort_order_id))
    base_snapshots = {s.snapshot_id for s in base.snapshots}
    out += [upd.AddSnapshot(s) for s in new.snapshots if s.snapshot_id not in base_snapshots]
    if removed := sorted(base_snapshots - {s.snapshot_id for s in new.snapshots}):
        out.append(upd.RemoveSnapshots(tuple(removed)))
    for ref_name in sorted(set(base.refs) | set(new.refs)):
        old_ref, new_ref = base.refs.get(ref_name), new.refs.get(ref_name)
        if old_ref != new_ref:
            out.append(
                upd.RemoveSnapshotRef(ref_name) if new_ref is None else upd.SetSnapshotRef(ref_name, new_ref)
            )
    if changed := {k: v for k, v in new.properties.items() if base.properties.get(k) != v}:
        out.append(upd.SetProperties(changed))
    if gone := sorted(set(base.properties) - set(new.properties)):
        out.append(upd.RemoveProperties(tuple(gone)))
    if new.location != base.location:
        out.append(upd.SetLocation(new.location))
    old_stats = {s.snapshot_id: s for s in base.statistics}
    new_stats = {s.snapshot_id: s for s in new.statistics}
    out += [upd.SetStatistics(s) for sid, s in new_stats.items() if old_stats.get(sid) != s]
    out += [upd.RemoveStatistics(sid) for sid in sorted(set(old_stats) - set(new_stats))]
    old_pstats = {s.snapshot_id: s for s in base.partition_statistics}
    new_pstats = {s.snapshot_id: s for s in new.partition_statistics}
    out += [upd.SetPartitionStatistics(s) for sid, s in new_pstats.items() if old_pstats.get(sid) != s]
    out += [upd.RemovePartitionStatistics(sid) for sid in sorted(set(old_pstats) - set(new_pstats))]
    if gone_specs := sorted(base_specs - {s.spec_id for s in new.partition_specs}):
        out.append(upd.RemovePartitionSpecs(tuple(gone_specs)))
    if gone_schemas := sorted(base_schemas - {s.schema_id for s in new.schemas}):
        out.append(upd.RemoveSchemas(tuple(gone_schemas)))
    old_keys = {k.key_id: k for k in base.encryption_keys}
    new_keys = {k.key_id: k for k in new.encryption_keys}
    out += [upd.AddEncryptionKey(k) for kid, k in new_keys.items() if old_keys.get(kid) != k]
    out += [upd.RemoveEncryptionKey(kid) for kid in sorted(set(old_keys) - set(new_keys))]
    return out


def _error_of(e: urllib.error.HTTPError) -> tuple[int, str, str]:
    """(status, error type, message) of an error response, in the spec's shape or not."""
    try:
        raw = e.read()
    except OSError:
        raw = b""
    try:
        body = json.loads(raw) if raw else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        return e.code, str(err.get("type") or ""), str(err.get("message") or e.reason)
    if isinstance(body, dict) and isinstance(body.get("message") or body.get("Message"), str):
        # AWS's own error shape (API Gateway, Glue, a signature refused): {"message": ...}
        return e.code, "", " ".join(str(body.get("message") or body.get("Message")).split())
    text = raw.decode(errors="replace").strip()[:300] if raw else ""
    return e.code, "", text or str(e.reason)


def _environment_region() -> str | None:
    """The region of the AWS environment (`AWS_REGION`, `AWS_DEFAULT_REGION`), without botocore."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None


def _oauth_message(e: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(e.read() or b"{}")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return str(e.reason)
    if isinstance(body, dict):
        return str(body.get("error_description") or body.get("error") or e.reason)
    return str(e.reason)


def _reason(e: BaseException) -> str:
    reason = getattr(e, "reason", None)
    return str(reason if reason is not None else e)


def _lost(what: str, why: str, commit: bool) -> IcebergError:
    if commit:
        return CommitStateUnknownError(
            f"{what}: {why}; the commit may or may not have been applied (reload the table to see)"
        )
    return IcebergError(f"{what}: {why}")
