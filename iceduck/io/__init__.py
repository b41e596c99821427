"""iceduck.io: the FileIO interface (local files) and path resolution for moved tables."""

from __future__ import annotations

from iceduck.io.fileio import FileInfo, FileIO, InputFile, LocalFileIO, LocalInputFile
from iceduck.io.paths import PathResolver, normalize_path

__all__ = [
    "FileIO",
    "FileInfo",
    "InputFile",
    "LocalFileIO",
    "LocalInputFile",
    "PathResolver",
    "normalize_path",
]
