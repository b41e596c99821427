"""The REST catalog's view endpoints, as `RestCatalog` offers them (`iceduck.catalog.views.ViewCatalog`):

    GET    /v1/{prefix}/namespaces/{ns}/views            list
    POST   /v1/{prefix}/namespaces/{ns}/views            create (CreateViewRequest)
    GET    /v1/{prefix}/namespaces/{ns}/views/{v}        load (LoadViewResult)
    HEAD   /v1/{prefix}/namespaces/{ns}/views/{v}        exists
    POST   /v1/{prefix}/namespaces/{ns}/views/{v}        replace (CommitViewRequest)
    DELETE /v1/{prefix}/namespaces/{ns}/views/{v}        drop
    POST   /v1/{prefix}/views/rename                     rename

A server holds views when its `/v1/config` lists the load endpoint (or, listing no endpoints, sets
`view-endpoints-supported`, as Java's client reads it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from iceduck.catalog.base import check_namespace, check_table_name
from iceduck.catalog.views import LoadedView, ViewNotFoundError
from iceduck.errors import IcebergError, NamespaceNotFoundError, TableNotFoundError
from iceduck.rest import protocol as wire
from iceduck.spec import view_metadata as vm
from iceduck.spec.types import schema_to_json

if TYPE_CHECKING:
    from iceduck.spec.types import Schema

LOAD_VIEW_ENDPOINT = "GET /v1/{prefix}/namespaces/{namespace}/views/{view}"
VIEW_ENDPOINTS_SUPPORTED = "view-endpoints-supported"


class RestViews:
    """View operations over a REST catalog (mixed into `RestCatalog`)."""

    endpoint: str
    endpoints: frozenset[str] | None
    properties: Mapping[str, str]

    if TYPE_CHECKING:

        def _path(self, *parts: str) -> str: ...
        def _request(self, method: str, path: str, body: Any = None) -> Any: ...
        def _pages(self, path: str, query: dict[str, str], key: str) -> Iterator[Any]: ...

    def holds_views(self) -> bool:
        if self.endpoints is None:
            return str(self.properties.get(VIEW_ENDPOINTS_SUPPORTED, "false")).lower() == "true"
        return LOAD_VIEW_ENDPOINT in self.endpoints

    def _view_path(self, namespace: str, name: str | None = None) -> str:
        check_namespace(namespace)
        parts = ["namespaces", wire.encode_namespace(namespace), "views"]
        if name is not None:
            parts.append(quote(check_table_name(name), safe=""))
        return self._path(*parts)

    def list_views(self, namespace: str) -> tuple[str, ...]:
        names = []
        for page in self._pages(self._view_path(namespace), {}, "identifiers"):
            for ident in page:
                ns, name = wire.parse_table_identifier(ident)
                if ns == namespace:
                    names.append(name)
        return tuple(sorted(set(names)))

    def view_exists(self, namespace: str, name: str) -> bool:
        try:
            self._request("HEAD", self._view_path(namespace, name))
        except (TableNotFoundError, NamespaceNotFoundError):
            return False
        return True

    def _loaded_view(self, namespace: str, name: str, body: Any) -> LoadedView:
        if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
            raise IcebergError(f"{self.endpoint}: the load result of view {namespace}.{name} has no metadata")
        location = body.get("metadata-location")
        if not isinstance(location, str) or not location:
            raise IcebergError(
                f"{self.endpoint}: the load result of view {namespace}.{name} has no metadata-location"
            )
        return LoadedView(namespace, name, location, vm.parse_view_metadata(body["metadata"], path=location))

    def load_view(self, namespace: str, name: str) -> LoadedView:
        try:
            body = self._request("GET", self._view_path(namespace, name))
        except NamespaceNotFoundError:
            raise
        except TableNotFoundError as e:
            raise ViewNotFoundError(str(e)) from None
        return self._loaded_view(namespace, name, body)

    def create_view(
        self,
        namespace: str,
        name: str,
        *,
        schema: Schema,
        version: vm.ViewVersion,
        properties: Mapping[str, str] | None = None,
        location: str | None = None,
    ) -> LoadedView:
        body: dict[str, Any] = {
            "name": check_table_name(name),
            "schema": schema_to_json(schema),
            "view-version": vm.view_version_to_json(version),
            "properties": dict(properties or {}),
        }
        if location is not None:
            body["location"] = location
        answer = self._request("POST", self._view_path(namespace), body)
        return self._loaded_view(namespace, name, answer)

    def commit_view(
        self,
        namespace: str,
        name: str,
        requirements: Sequence[vm.AssertViewUUID],
        updates: Sequence[vm.ViewUpdate],
    ) -> LoadedView:
        body = {
            "identifier": wire.table_identifier(namespace, name),
            "requirements": [{"type": "assert-view-uuid", "uuid": r.uuid} for r in requirements],
            "updates": [vm.view_update_to_json(u) for u in updates],
        }
        answer = self._request("POST", self._view_path(namespace, name), json.loads(json.dumps(body)))
        return self._loaded_view(namespace, name, answer)

    def drop_view(self, namespace: str, name: str) -> None:
        try:
            self._request("DELETE", self._view_path(namespace, name))
        except NamespaceNotFoundError:
            raise
        except TableNotFoundError as e:
            raise ViewNotFoundError(str(e)) from None

    def rename_view(self, namespace: str, name: str, new_namespace: str, new_name: str) -> None:
        check_namespace(new_namespace)
        check_table_name(new_name)
        self._request(
            "POST",
            self._path("views", "rename"),
            {
                "source": wire.table_identifier(namespace, name),
                "destination": wire.table_identifier(new_namespace, new_name),
            },
        )
