"""ORC data and delete files (Trino, Hive and Impala write them) as Arrow with Iceberg field ids.

pyarrow's ORC reader exposes each ORC type's attributes as Arrow field metadata; Iceberg's ORC
writers put the field id in the `iceberg.id` attribute (and `iceberg.long-type` / `iceberg.binary-type`
where one ORC type holds several Iceberg types: `time` is a long of microseconds, `uuid` and `fixed`
are binaries). `orc_batches` yields one Arrow table per stripe with the ids as `PARQUET:field_id`
and those values in their Iceberg types, so the Parquet copy (read/copies.py) is read by field id
like every Parquet data file; rows keep their order (positions stay valid for deletes and row ids).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc

from iceduck.errors import CorruptFileError

FIELD_ID_KEY = b"PARQUET:field_id"
_ORC_ID = b"iceberg.id"
_LONG_TYPE = b"iceberg.long-type"
_BINARY_TYPE = b"iceberg.binary-type"


def _convert_field(f: pa.Field, array: pa.Array | None) -> tuple[pa.Field, pa.Array | None]:
    """The field with its id as Parquet metadata, and the column converted where the ORC type stands
    for another Iceberg type (None `array`: only the type is wanted)."""
    meta = f.metadata or {}
    new_meta = {FIELD_ID_KEY: meta[_ORC_ID]} if _ORC_ID in meta else {}
    t = f.type
    new_type: pa.DataType
    if pa.types.is_struct(t):
        children = [
            _convert_field(t.field(i), None if array is None else array.field(i)) for i in range(t.num_fields)
        ]
        new_type = pa.struct([c for c, _ in children])
        if array is not None:
            array = pa.StructArray.from_arrays(
                [a for _, a in children],
                fields=list(new_type),
                mask=array.is_null() if array.null_count else None,
            )
        return pa.field(f.name, new_type, f.nullable, new_meta), array
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item, values = _convert_field(t.value_field, None if array is None else array.flatten())
        new_type = pa.list_(item)
        if array is not None:
            offsets = array.offsets
            array = pa.ListArray.from_arrays(
                offsets, values, type=new_type, mask=array.is_null() if array.null_count else None
            )
        return pa.field(f.name, new_type, f.nullable, new_meta), array
    if pa.types.is_map(t):
        key, keys = _convert_field(t.key_field, None if array is None else array.keys)
        item, items = _convert_field(t.item_field, None if array is None else array.items)
        new_type = pa.map_(key, item)
        if array is not None:
            array = pa.MapArray.from_arrays(
                array.offsets, keys, items, type=new_type, mask=array.is_null() if array.null_count else None
            )
        return pa.field(f.name, new_type, f.nullable, new_meta), array
    if meta.get(_LONG_TYPE) == b"TIME" and pa.types.is_integer(t):
        new_type = pa.time64("us")
        return pa.field(f.name, new_type, f.nullable, new_meta), None if array is None else array.cast(
            pa.int64()
        ).cast(new_type)
    if meta.get(_BINARY_TYPE) == b"UUID" and pa.types.is_binary(t):
        new_type = pa.uuid()
        if array is not None:
            array = pa.ExtensionArray.from_storage(new_type, array.cast(pa.binary(16)))
        return pa.field(f.name, new_type, f.nullable, new_meta), array
    if meta.get(_BINARY_TYPE) == b"FIXED" and pa.types.is_binary(t):
        return pa.field(f.name, t, f.nullable, new_meta), array
    if pa.types.is_timestamp(t) and t.tz is not None and t.tz != "UTC":
        new_type = pa.timestamp(t.unit, tz="UTC")
        return pa.field(f.name, new_type, f.nullable, new_meta), None if array is None else pc.cast(
            array, new_type
        )
    return pa.field(f.name, t, f.nullable, new_meta), array


def orc_batches(path: str) -> Iterator[pa.Table]:
    """The file's rows, one table per stripe, with Iceberg field ids as Parquet field ids."""
    try:
        reader = orc.ORCFile(path)
        schema = reader.schema
        converted = pa.schema([_convert_field(f, None)[0] for f in schema])
        for i in range(reader.nstripes):
            batch = reader.read_stripe(i)
            columns = [_convert_field(f, batch.column(j))[1] for j, f in enumerate(schema)]
            table = pa.Table.from_arrays(columns, schema=converted)
            # ORC carries no checksums and pyarrow does not check strings: DuckDB would refuse
            # invalid UTF-8 naming the copy, not this file
            table.validate(full=True)
            yield table
        if reader.nstripes == 0:
            yield converted.empty_table()
    except (OSError, pa.ArrowException) as e:
        raise CorruptFileError(path, f"cannot read ORC file: {str(e).strip().splitlines()[0] if str(e).strip() else 'damaged'}") from None
