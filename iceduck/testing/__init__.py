"""Helpers for iceduck's own tests and benchmarks (not part of the user-facing API)."""

from __future__ import annotations
