"""iceduck.catalog: finding a table (path, folder, name), the SQLite catalog and the folder catalog.

The names below load on first use (PEP 562): finding a table by its metadata path (`locate`) must
not load the SQLite catalog (sqlite3) and the commit machinery, which a plain scan never uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from iceduck._lazy import lazy_attribute

if TYPE_CHECKING:
    from iceduck.catalog.base import Catalog
    from iceduck.catalog.folder import FolderCatalog
    from iceduck.catalog.locate import TableLocation, find_metadata_file, locate_table
    from iceduck.catalog.sql import SqlCatalog

__all__ = ["Catalog", "FolderCatalog", "SqlCatalog", "TableLocation", "find_metadata_file", "locate_table"]

_LAZY = {
    "Catalog": "iceduck.catalog.base",
    "FolderCatalog": "iceduck.catalog.folder",
    "SqlCatalog": "iceduck.catalog.sql",
    "TableLocation": "iceduck.catalog.locate",
    "find_metadata_file": "iceduck.catalog.locate",
    "locate_table": "iceduck.catalog.locate",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, globals(), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
