"""Files of other tables: what expiry and orphan removal of one table must never delete.

A table can share folders with other tables: a table created at `<location of s.o>/data/nested`
(by another tool, or with `iceduck.allow-nested-location`), two catalog entries registered on the
same location, a table inside another's folder. For the table being maintained, a path belongs to
another table `T` the catalog knows when

* it is under a location of `T` that is strictly inside this table's location, or the path is not
  under this table's location at all (the most specific location holding it is `T`'s), or
* `T`'s location is this table's location or holds it, and some metadata file of `T` reaches the
  path (`reachable_from_all_metadata`: every metadata file in `T`'s log).

A table `T` whose metadata cannot be read, with a location overlapping this table's, makes every
path under that location `T`'s (what `T` reaches is unknown).

Tables nobody registered cannot be listed; their metadata files can still be recognised by name:
`foreign_metadata` reads a `*.metadata.json` file found under the table location and reports it
when it describes another table (another `table-uuid`, or for a v1 file without one, another
location). Manifests and manifest lists record no table uuid: they are attributed through the
metadata files that reach them, so a foreign metadata file stops the run before any of them counts.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from iceduck.catalog.locate import is_metadata_file_name
from iceduck.catalog.locations import KnownTable, key_is_under, location_key, overlap
from iceduck.errors import IcebergError
from iceduck.io.paths import base_name, normalize_path
from iceduck.maintenance.reachability import reachable_from_all_metadata
from iceduck.spec.table_metadata import read_table_metadata
from iceduck.table import Table


@dataclass(frozen=True, slots=True)
class _Claim:
    table: KnownTable
    root_key: str
    whole_folder: bool  # True: everything under root is the other table's; False: only what it reaches


@dataclass(slots=True)
class Neighbours:
    """Other tables whose locations matter to the maintenance of `table`."""

    table: Table
    others: Sequence[KnownTable]
    _claims: list[_Claim] = field(default_factory=list)
    _reach: dict[str, frozenset[str] | None] = field(default_factory=dict)
    _own_key: str = ""

    def __post_init__(self) -> None:
        own = normalize_path(self.table.resolver.actual_location)
        self._own_key = location_key(own)
        for t in self.others:
            for loc in t.locations:
                how = overlap(loc, own)
                # Strictly inside ours: the whole folder is theirs. Same or holding ours: only what
                # their metadata reaches. Elsewhere: theirs too, for paths our metadata names there.
                whole = how in ("inside", None) or not t.readable
                self._claims.append(_Claim(t, location_key(loc), whole))

    @classmethod
    def of(cls, table: Table, known: Sequence[KnownTable], *, name: str | None = None) -> Neighbours:
        """The neighbours of `table` among `known` (the table itself, by name or metadata file, left out)."""
        me = normalize_path(table.metadata_location)
        others = [t for t in known if t.identifier != name and normalize_path(t.metadata_location) != me]
        return cls(table, others)

    def owner(self, path: str) -> str | None:
        """The identifier of the other table `path` belongs to, or None."""
        key = location_key(path)
        for c in self._claims:
            if not key_is_under(key, c.root_key):
                continue
            if c.whole_folder:
                return c.table.identifier
            reached = self._reached(c.table)
            # What it reaches unknown: everything under its location is treated as its own.
            if reached is None or normalize_path(path) in reached:
                return c.table.identifier
        return None

    def _reached(self, t: KnownTable) -> frozenset[str] | None:
        if t.identifier not in self._reach:
            try:
                other = Table.load(t.metadata_location, io=self.table.io)
                self._reach[t.identifier] = frozenset(reachable_from_all_metadata(other).files)
            except IcebergError:
                self._reach[t.identifier] = None
        return self._reach[t.identifier]


def foreign_metadata(table: Table, path: str, data: bytes) -> str | None:
    """Why the file at `path` (bytes `data`), found under `table`'s location, is the metadata of
    another table; None if it is not a metadata file, cannot be parsed, or is this table's."""
    if not is_metadata_file_name(base_name(path)):
        return None
    own = table.metadata
    try:
        md = read_table_metadata(data, path=path)
    except IcebergError:
        # Not metadata anyone can read; still another table's if its JSON says so.
        other = _uuid_in_json(data)
        if other is not None and own.table_uuid is not None and other != str(own.table_uuid):
            return f"table uuid {other} (the file does not parse as metadata)"
        return None
    if md.table_uuid is not None and own.table_uuid is not None:
        if md.table_uuid == own.table_uuid:
            return None
        return f"table uuid {md.table_uuid}, location {md.location}"
    if normalize_path(md.location) == normalize_path(own.location):
        return None
    return f"location {md.location}"


def _uuid_in_json(data: bytes) -> str | None:
    try:
        text = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        doc = json.loads(text)
    except (OSError, EOFError, ValueError, RecursionError):
        return None
    value = doc.get("table-uuid") if isinstance(doc, dict) else None
    return value.lower() if isinstance(value, str) else None
