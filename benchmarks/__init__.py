"""iceduck benchmarks: ``python -m benchmarks`` times each case on iceduck and on the reference peer.

Cases live in ``benchmarks/bench_*.py`` and register themselves with :func:`benchmark`; see
``benchmarks/README.md``.
"""

from __future__ import annotations

from benchmarks.harness import Case, Context, FreshMemory, Result, benchmark, pending

__all__ = ["Case", "Context", "FreshMemory", "Result", "benchmark", "pending"]
