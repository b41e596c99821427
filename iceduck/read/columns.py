"""Which column of a data file without Iceberg field ids holds which table column (pure).

Files converted from Hive tables or registered with `add_files` carry no field ids. The table's
`schema.name-mapping.default` then says which names each field id had; a field the mapping does not
name is absent from such files (as in Java's `ParquetSchemaUtil.applyNameMapping`).

Without a mapping, Java's readers differ by format: Parquet assigns fallback ids by position to the
top-level columns (`ParquetSchemaUtil.addFallbackIds`: the k-th column gets id k, which is how Spark
and Hive number a migrated schema), ORC builds a mapping from the table schema's names
(`MappingUtil.create(schema)`). iceduck follows Parquet's rule where it applies and resolves by name
where it does not, so a column the file has is never read as NULL:
- a field whose id is a position in the file takes that column, unless another column carries
  the field's own name (then position and name disagree and the file cannot be read exactly);
- any other field takes the column with its name (exact, else the one case-insensitive match);
- no file column serves two fields.
Nested fields inside the chosen columns are matched by name (DuckDB casts structs by name).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from iceduck.errors import InvalidMetadataError
from iceduck.spec.types import NestedField


def _by_name(name: str, names: Sequence[str]) -> str | None:
    if name in names:
        return name
    folded = [n for n in names if n.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def columns_without_ids(
    fields: Sequence[NestedField],
    names: Sequence[str],
    *,
    mapping: Mapping[int, Sequence[str]] | None,
    by_position: bool,
    path: str,
) -> dict[int, str]:
    """Field id -> the file's top-level column for each of `fields` the file holds (see the module
    docstring). `mapping` is the table's parsed name mapping, or None; `by_position` applies the
    Parquet fallback ids. `InvalidMetadataError` naming `path` where the file cannot be read exactly."""
    out: dict[int, str] = {}
    if mapping is not None:
        for f in fields:
            for candidate in mapping.get(f.id, ()):
                if candidate in names:
                    out[f.id] = candidate
                    break
    else:
        for f in fields:
            named = _by_name(f.name, names)
            positional = names[f.id - 1] if by_position and 1 <= f.id <= len(names) else None
            if positional is not None and named is not None and positional != named:
                raise InvalidMetadataError(
                    f"{path}: the file has no field ids and the table no schema.name-mapping.default, and "
                    f"its columns are in another order than the table's: column {f.id} is {positional!r} "
                    f"but field {f.name!r} (id {f.id}) is column {names.index(named) + 1}; "
                    "set schema.name-mapping.default to say which column is which"
                )
            chosen = positional or named
            if chosen is not None:
                out[f.id] = chosen
    used: dict[str, int] = {}
    for fid, column in out.items():
        if column in used:
            raise InvalidMetadataError(
                f"{path}: file column {column!r} (no field ids) would be read as both field {used[column]} "
                f"and field {fid}"
            )
        used[column] = fid
    return out
