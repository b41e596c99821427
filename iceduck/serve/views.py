"""`iceduck serve`'s view endpoints: the REST catalog's view operations over the warehouse's SQLite
catalog (`iceduck.catalog.views`), with the server's rules: every name checked as a table name is,
every location a request names or implies (a create's `location`, the default one, `set-location`,
register's metadata file) inside the warehouse and clear of other tables before anything is read or
written, malformed bodies answered 400, a missing view 404 `NoSuchViewException`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from iceduck.catalog.base import check_new_name
from iceduck.catalog.locations import check_location_free
from iceduck.catalog.views import LoadedView, ViewNotFoundError
from iceduck.errors import AlreadyExistsError, ValidationError
from iceduck.io.paths import normalize_path, table_folder_of
from iceduck.rest import protocol as wire
from iceduck.serve.asgi import NO_CONTENT, HttpError, Reply
from iceduck.spec import view_metadata as vm
from iceduck.spec.types import parse_schema

if TYPE_CHECKING:
    import threading

    from iceduck.catalog.sql import SqlCatalog
    from iceduck.io.fileio import FileIO


class Warehouse(Protocol):
    """What the view operations use of `iceduck.serve.warehouse.Warehouse`."""

    catalog: SqlCatalog
    io: FileIO

    @property
    def write_lock(self) -> threading.Lock: ...

    def check_inside(self, location: str, what: str) -> None: ...

    def check_table_location(self, location: str, identifier: str) -> None: ...

VIEW_ENDPOINTS = (
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/views/rename",
    "POST /v1/{prefix}/namespaces/{namespace}/register-view",
)


@contextlib.contextmanager
def _view_errors() -> Iterator[None]:
    try:
        yield
    except ViewNotFoundError as e:
        raise HttpError(404, wire.NO_SUCH_VIEW, str(e)) from None


def _reply(view: LoadedView) -> Reply:
    return Reply(
        200,
        {
            "metadata-location": view.metadata_location,
            "metadata": vm.view_metadata_to_json(view.metadata),
            "config": {},
        },
    )


def _name(value: Any, limit: int) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(f"a view needs a non-empty 'name', not {value!r:.60}")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValidationError(f"view name {value[:60]!r} is {size} bytes long: at most {limit} bytes")
    return check_new_name(value, "view name")


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(f"{what} must be a JSON object, not {type(value).__name__}")
    return value


def _properties(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValidationError("'properties' must be an object of string values")
    return dict(value)


class ViewOperations:
    """The view operations of one `Warehouse` (no HTTP: `route` maps requests to these)."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse
        self.catalog = warehouse.catalog

    def _check(self, identifier: str) -> Callable[[vm.ViewMetadata | None, vm.ViewMetadata], None]:
        def check(base: vm.ViewMetadata | None, new: vm.ViewMetadata) -> None:
            if base is None or normalize_path(base.location) != normalize_path(new.location):
                self.warehouse.check_table_location(new.location, f"view {identifier}")

        return check

    def list_views(self, namespace: str) -> dict[str, Any]:
        return {
            "identifiers": [wire.table_identifier(namespace, v) for v in self.catalog.list_views(namespace)]
        }

    def create_view(self, namespace: str, body: Any, limit: int) -> Reply:
        obj = _object(body, "CreateViewRequest")
        name = _name(obj.get("name"), limit)
        schema = parse_schema(_object(obj.get("schema"), "schema"))
        raw = _object(obj.get("view-version"), "view-version")
        problems = vm.version_problems(raw)
        if problems:
            raise ValidationError(f"view-version: {problems[0]}")
        version = vm.parse_view_version(raw)
        location = obj.get("location")
        if location is not None and not isinstance(location, str):
            raise ValidationError(f"'location' must be a string, not {location!r:.60}")
        target = (location or self.catalog.default_view_location(namespace, name)).rstrip("/")
        self.warehouse.check_table_location(target, f"view {namespace}.{name}")
        if self.catalog.table_exists(namespace, name):
            raise AlreadyExistsError(f"a table {namespace}.{name} exists already")
        with self.warehouse.write_lock:
            view = self.catalog.create_view(
                namespace, name, schema=schema, version=version, properties=_properties(obj.get("properties")),
                location=target, check=self._check(f"{namespace}.{name}"),
            )  # fmt: skip
        return _reply(view)

    def load_view(self, namespace: str, name: str) -> Reply:
        with _view_errors():
            return _reply(self.catalog.load_view(namespace, name))

    def view_exists(self, namespace: str, name: str) -> Reply:
        if not self.catalog.view_exists(namespace, name):
            raise HttpError(404, wire.NO_SUCH_VIEW, f"view {namespace}.{name} does not exist")
        return NO_CONTENT

    def replace_view(self, namespace: str, name: str, body: Any) -> Reply:
        obj = _object(body, "CommitViewRequest")
        if obj.get("identifier") is not None:
            ident = wire.parse_table_identifier(obj["identifier"])
            if ident != (namespace, name):
                raise ValidationError(f"commit for view {namespace}.{name} names another in its identifier")
        requirements, updates = obj.get("requirements") or [], obj.get("updates")
        if not isinstance(requirements, list) or not isinstance(updates, list):
            raise ValidationError("a view commit needs 'requirements' and 'updates' lists")
        parsed_requirements = [vm.view_requirement_from_json(r) for r in requirements]
        parsed = [vm.view_update_from_json(u) for u in updates]
        for u in parsed:
            if isinstance(u, vm.SetLocation):
                self.warehouse.check_inside(u.location, "set-location")
        with _view_errors(), self.warehouse.write_lock:
            view = self.catalog.commit_view(
                namespace, name, parsed_requirements, parsed, check=self._check(f"{namespace}.{name}")
            )
        return _reply(view)

    def drop_view(self, namespace: str, name: str) -> Reply:
        with _view_errors(), self.warehouse.write_lock:
            self.catalog.drop_view(namespace, name)
        return NO_CONTENT

    def rename_view(self, body: Any, limit: int) -> Reply:
        obj = _object(body, "RenameTableRequest")
        ns, name = wire.parse_table_identifier(obj.get("source"))
        new_ns, new_name = wire.parse_table_identifier(obj.get("destination"))
        _name(new_name, limit)
        with _view_errors(), self.warehouse.write_lock:
            self.catalog.rename_view(ns, name, new_ns, new_name)
        return NO_CONTENT

    def register_view(self, namespace: str, body: Any, limit: int) -> Reply:
        obj = _object(body, "RegisterViewRequest")
        name = _name(obj.get("name"), limit)
        location = obj.get("metadata-location")
        if not isinstance(location, str) or not location:
            raise ValidationError("RegisterViewRequest needs 'metadata-location'")
        self.warehouse.check_inside(location, "metadata-location")  # before the file is read
        if not self.warehouse.io.exists(location):
            raise ValidationError(f"cannot register view {namespace}.{name}: no metadata file {location!r}")
        # before the row is added: the view's location, and the folder its commits write metadata
        # files to (beside this one), clear of every table
        ident = f"view {namespace}.{name}"
        metadata = vm.read_view_metadata(self.warehouse.io.read(location), path=location)
        self.warehouse.check_table_location(metadata.location, ident)
        check_location_free(self.catalog, ident, table_folder_of(location), self.warehouse.io, served=True)
        with self.warehouse.write_lock:
            view = self.catalog.register_view(namespace, name, location)
        return _reply(view)


def route(
    ops: ViewOperations, method: str, namespace: str, tail: list[str], body: Callable[[], Any], limit: int
) -> Reply | None:
    """The reply to a request under `/v1/{prefix}/namespaces/{namespace}/` (`tail`: the path after
    it) when it is a view route, else None."""
    if tail == ["register-view"]:
        if method != "POST":
            raise _no_method(method, "POST")
        return ops.register_view(namespace, body(), limit)
    if tail[:1] != ["views"] or len(tail) > 2:
        return None
    if len(tail) == 1:
        if method == "GET":
            return Reply(200, ops.list_views(namespace))
        if method == "POST":
            return ops.create_view(namespace, body(), limit)
        raise _no_method(method, "GET, POST")
    name = tail[1]
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > limit or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name) or not name or "." in name:
        raise ValidationError(f"view name {name[:60]!r}: not a usable name")
    if method == "GET":
        return ops.load_view(namespace, name)
    if method == "HEAD":
        return ops.view_exists(namespace, name)
    if method == "POST":
        return ops.replace_view(namespace, name, body())
    if method == "DELETE":
        return ops.drop_view(namespace, name)
    raise _no_method(method, "GET, HEAD, POST, DELETE")


def _no_method(method: str, allowed: str) -> HttpError:
    return HttpError(
        405,
        wire.BAD_REQUEST,
        f"method {method[:20]!r} is not allowed here: use {allowed}",
        (("Allow", allowed),),
    )
