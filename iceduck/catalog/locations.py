"""Where the tables of a catalog live, and whether two table locations overlap.

Expiry and orphan removal delete files by path. A file under the location of another table is that
table's, however unreferenced it looks from here: orphan removal of `s.o` must never delete the
files of a table created at `<location of s.o>/data/nested_tbl`. `known_tables` lists every table
a catalog knows with the folders it may own: the `location` its metadata records and the folder
its metadata file is in (they differ for moved tables; the second is all we know when the metadata
cannot be read).

Locations are compared component by component (`/t/ab` is not inside `/t/a`), local paths with
symlinks resolved, URIs with the scheme aliases of `iceduck.io.paths` (`s3a://` = `s3://`).
The location guard (what `iceduck serve` accepts, what purge and orphan removal may delete) is
`iceduck.io.paths.is_under` / `check_inside`.

Creating a table whose location is inside another table's location, equal to it, or containing it
is refused unless the new table's property `iceduck.allow-nested-location` is `true`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from iceduck.catalog.base import Catalog
from iceduck.catalog.locate import table_folder_of
from iceduck.errors import IcebergError, ValidationError
from iceduck.io.fileio import FileIO
from iceduck.io.paths import containment_key, is_local, key_is_under, normalize_path, storage_key
from iceduck.io.storage import default_io
from iceduck.spec.table_metadata import read_table_metadata
from iceduck.spec.view_metadata import read_view_metadata

ALLOW_NESTED_PROPERTY = "iceduck.allow-nested-location"


def location_key(path: str) -> str:
    """A comparable form of a location or file path: local paths absolute with symlinks resolved,
    URIs normalised with one spelling per storage scheme (`iceduck.io.paths.containment_key`)."""
    if is_local(path) and not normalize_path(path).startswith("/"):
        path = os.path.abspath(normalize_path(path))
    key = containment_key(path, real=os.path.realpath)
    return key if key is not None else storage_key(path)  # inside nothing; still a stable key


def overlap(a: str, b: str) -> str | None:
    """How location `a` relates to location `b`: "same", "inside" (a below b), "contains" (b below a),
    or None when neither holds the other."""
    ka, kb = location_key(a), location_key(b)
    if ka == kb:
        return "same"
    if key_is_under(ka, kb):
        return "inside"
    if key_is_under(kb, ka):
        return "contains"
    return None


@dataclass(frozen=True, slots=True)
class KnownTable:
    """A table of the catalog: its name, current metadata file and the folders it may own."""

    identifier: str
    metadata_location: str
    locations: tuple[str, ...]
    table_uuid: str | None
    readable: bool  # False: the metadata could not be read, `locations` is only the metadata's folder


def _namespaces(catalog: Catalog) -> list[str]:
    out: list[str] = []
    todo = list(catalog.list_namespaces(None))
    while todo:
        ns = todo.pop()
        out.append(ns)
        try:
            todo.extend(catalog.list_namespaces(ns))
        except IcebergError:
            continue  # dropped meanwhile
    return sorted(out)


def known_tables(catalog: Catalog | None, io: FileIO | None = None) -> tuple[KnownTable, ...]:
    """Every table `catalog` knows (none without a catalog), with its locations."""
    if catalog is None:
        return ()
    fio = io or default_io()
    out: list[KnownTable] = []
    for ns in _namespaces(catalog):
        try:
            names = catalog.list_tables(ns)
        except IcebergError:
            continue
        for name in names:
            try:
                metadata_location = catalog.load_table(ns, name)
            except IcebergError:
                continue  # dropped meanwhile
            folder = normalize_path(table_folder_of(metadata_location))
            try:
                md = read_table_metadata(fio.read(metadata_location), path=metadata_location)
            except (IcebergError, OSError):
                out.append(KnownTable(f"{ns}.{name}", metadata_location, (folder,), None, False))
                continue
            locations = tuple(dict.fromkeys((normalize_path(md.location), folder)))
            uuid = str(md.table_uuid) if md.table_uuid is not None else None
            out.append(KnownTable(f"{ns}.{name}", metadata_location, locations, uuid, True))
    return tuple(out)


def known_views(catalog: Catalog | None, io: FileIO | None = None) -> tuple[KnownTable, ...]:
    """Every Iceberg view `catalog` holds (identifier `view <ns>.<name>`), with its `location` and
    the folder its metadata file is in: a table there would have orphan removal and purge delete the
    view's metadata files, and the view's commits write `*.metadata.json` files into its folder."""
    list_all = getattr(catalog, "list_all_views", None)
    if list_all is None:
        return ()
    fio = io or default_io()
    out: list[KnownTable] = []
    for ns, name, metadata_location in list_all():
        folder = normalize_path(table_folder_of(metadata_location))
        try:
            location = read_view_metadata(fio.read(metadata_location), path=metadata_location).location
        except (IcebergError, OSError):
            out.append(KnownTable(f"view {ns}.{name}", metadata_location, (folder,), None, False))
            continue
        locations = tuple(dict.fromkeys((normalize_path(location), folder)))
        out.append(KnownTable(f"view {ns}.{name}", metadata_location, locations, None, True))
    return tuple(out)


def check_location_free(
    catalog: Catalog, identifier: str, location: str, io: FileIO | None = None, *, served: bool = False
) -> None:
    """`ValidationError` if `location` (of the new table `identifier`) is inside, equal to, or holds
    the location of a table or view the catalog knows (`identifier` `view <ns>.<name>` for a view):
    orphan removal and expiry of one would have to tell its files from the other's. `served` (`iceduck serve`): the message names the other table but
    not its location, and offers no property to override."""
    for t in (*known_tables(catalog, io), *known_views(catalog, io)):
        if t.identifier == identifier or (
            t.identifier.startswith("view ") and identifier.startswith("view ")
        ):
            continue  # views delete no files: two may share a folder
        for loc in t.locations:
            how = overlap(location, loc)
            if how is None:
                continue
            relation = {
                "same": "is the location of",
                "inside": "is inside the location of",
                "contains": "contains the location of",
            }[how] + ("" if t.identifier.startswith("view ") else " table")
            if served:
                who = identifier if identifier.startswith("view ") else f"table {identifier}"
                raise ValidationError(
                    f"{who}: location {location!r} {relation} {t.identifier}; tables "
                    "sharing folders make file clean-up unsafe"
                )
            if identifier.startswith("view "):
                raise ValidationError(
                    f"cannot create {identifier}: its location {location} {relation} {t.identifier} ({loc}); "
                    "a table's clean-up would delete the view's files (name the view otherwise)"
                )
            raise ValidationError(
                f"cannot create table {identifier}: its location {location} {relation} "
                f"{t.identifier} ({loc}); tables sharing folders make file clean-up unsafe (set the table "
                f"property '{ALLOW_NESTED_PROPERTY}' = 'true' to create it anyway)"
            )
