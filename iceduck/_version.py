"""The package version: the bottom of the import graph, so any layer may read it without loading others."""

from __future__ import annotations

__version__ = "0.1.0"
