"""The one place iceduck touches DuckDB's private Python hooks.

DuckDB 2.0's Python package has no public way to register a Python table function. Its Arrow scan
protocol (`duckdb._sources.ArrowScanSource` registered with `con._register_arrow_source`) is the
fastest hook measured: it streams Arrow batches and offers predicates for pushdown. iceduck uses it
behind the small `Source` interface below; nothing else in the package imports `duckdb._sources`.

Private names can change in any release, so the duckdb version is pinned to 2.0.x and
`tests/test_duckdb_hooks.py` fails loudly when any hook used here changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
from duckdb import _sources  # private: see the module docstring

# Every private attribute used, so a test can check they still exist.
PRIVATE_HOOKS = (
    "duckdb._sources.ArrowScanSource",
    "duckdb._sources.nodes.Binary",
    "duckdb._sources.nodes.Col",
    "duckdb._sources.nodes.Lit",
    "DuckDBPyConnection._register_arrow_source",
)

# What a source's `open` gets: the value of the constant equality filter on the key column, and
# the names of the columns the query reads (None: all of them).
Opener = Callable[[Any, list[str] | None], pa.RecordBatchReader | pa.Table]


@dataclass(frozen=True, slots=True)
class Source:
    """A virtual table whose rows are produced on demand for one key value.

    Queries must filter `key_column = <constant>`; the constant reaches `open`, which returns the
    rows for that key. The key column itself is never materialised by `open`.
    """

    name: str
    schema: pa.Schema
    key_column: str
    open: Opener
    rows_estimate: int = 1000
    missing_key_message: str = "the arguments must be constants"


class _KeyedArrowSource(_sources.ArrowScanSource):
    """Adapter from the private ArrowScanSource protocol to `Source`."""

    schema_is_stable = True

    def __init__(self, source: Source) -> None:
        super().__init__(None)
        self._source = source
        self._capsule_schema = source.schema

    def __arrow_c_schema__(self) -> object:
        return self._capsule_schema.__arrow_c_schema__()

    def rows(self) -> int | None:
        return self._source.rows_estimate

    def accepts(self, predicate: Any) -> bool:
        return constant_equality(predicate, self._source.key_column) is not None

    def stream(self, columns: Sequence[int] | None, filters: Sequence[Any]) -> tuple[object, bool]:
        keys = [k for f in filters if (k := constant_equality(f, self._source.key_column)) is not None]
        if not keys:
            raise ValueError(f"{self._source.name}: {self._source.missing_key_message}")
        schema = self._source.schema
        wanted = None if columns is None else [schema.field(i).name for i in columns]
        data_columns = None if wanted is None else [c for c in wanted if c != self._source.key_column]
        result = self._source.open(keys[0][0], data_columns or None)
        exact = wanted is not None and len(wanted) > 0
        return _narrow(result, schema, self._source.key_column, keys[0][0], wanted), exact


def _narrow(
    result: pa.RecordBatchReader | pa.Table,
    schema: pa.Schema,
    key: str,
    key_value: Any,
    wanted: list[str] | None,
) -> object:
    """Export `result` as a stream holding exactly the `wanted` columns (all when None), in order."""
    names = list(wanted if wanted is not None else schema.names)
    if not names:  # count(*) reads no column, yet DuckDB still needs the row count
        names = [schema.names[0]]
    out_schema = pa.schema([schema.field(n) for n in names])
    reader = result if isinstance(result, pa.RecordBatchReader) else result.to_reader()

    def batches() -> Any:
        for batch in reader:
            arrays = []
            for n in names:
                if n == key:
                    arrays.append(pa.array([key_value] * batch.num_rows, schema.field(n).type))
                else:
                    arrays.append(batch.column(n).cast(schema.field(n).type))
            yield pa.RecordBatch.from_arrays(arrays, schema=out_schema)

    return pa.RecordBatchReader.from_batches(out_schema, batches()).__arrow_c_stream__()


def constant_equality(predicate: Any, column: str) -> tuple[Any] | None:
    """`(value,)` when the predicate is `column = constant`, else None."""
    nodes = _sources.nodes
    if (
        isinstance(predicate, nodes.Binary)
        and predicate.op == "="
        and isinstance(predicate.left, nodes.Col)
        and predicate.left.parts == (column,)
        and isinstance(predicate.right, nodes.Lit)
    ):
        return (predicate.right.value,)
    return None


def register_source(con: duckdb.DuckDBPyConnection, source: Source) -> None:
    """Make `source` queryable by name on this connection."""
    con._register_arrow_source(source.name, _KeyedArrowSource(source))
