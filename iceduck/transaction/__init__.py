"""Snapshot producers, metadata updates and commits (optimistic concurrency over a catalog)."""
