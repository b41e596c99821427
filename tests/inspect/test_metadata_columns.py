"""Map columns of the metadata tables are built from flat key and item lists (`map_array`): the same
Arrow array as converting each row's pairs, for mappings, pair lists, NULL rows, empty maps,
repeated keys, NULL items and struct items."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from iceduck.inspect.metadata import STR_MAP, map_array

_TEXT = st.text(max_size=4)
_PAIRS = st.lists(st.tuples(_TEXT, st.none() | _TEXT), max_size=4)
_METRIC = pa.struct([("count", pa.int64()), ("low", pa.string())])


@settings(max_examples=300)
@given(
    rows=st.lists(
        st.one_of(st.none(), _PAIRS, st.dictionaries(_TEXT, st.none() | _TEXT, max_size=4)), max_size=8
    )
)
def test_string_maps_equal_the_pairs_converted_one_by_one(rows: list[Any]) -> None:
    as_pairs = [None if r is None else list(r.items()) if isinstance(r, dict) else r for r in rows]
    expected = pa.array(as_pairs, STR_MAP)
    got = map_array(rows, STR_MAP)
    assert got.equals(expected)
    assert got.to_pylist() == expected.to_pylist()


@settings(max_examples=100)
@given(
    rows=st.lists(
        st.none()
        | st.lists(
            st.tuples(
                st.integers(min_value=-(2**31), max_value=2**31 - 1),
                st.none()
                | st.fixed_dictionaries({"count": st.none() | st.integers(0, 2**62), "low": st.none() | _TEXT}),
            ),
            max_size=3,
        ),
        max_size=6,
    )
)
def test_maps_of_structs_equal_the_pairs_converted_one_by_one(rows: list[Any]) -> None:
    t = pa.map_(pa.int32(), _METRIC)
    assert map_array(rows, t).equals(pa.array(rows, t))
