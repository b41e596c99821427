"""iceduck.catalog: finding a table (path, folder, name), the SQLite catalog and the folder catalog."""

from __future__ import annotations

from iceduck.catalog.base import Catalog
from iceduck.catalog.folder import FolderCatalog
from iceduck.catalog.locate import TableLocation, find_metadata_file, locate_table
from iceduck.catalog.sql import SqlCatalog

__all__ = ["Catalog", "FolderCatalog", "SqlCatalog", "TableLocation", "find_metadata_file", "locate_table"]
