"""The one row of live-row bit strings a scan with deletes reads (`read.deletes.alive_bits`) is
assembled from Arrow buffers, not `pa.array` (which imports pandas): the same array either way."""

from __future__ import annotations

import pyarrow as pa
import pytest

from iceduck.read.deletes import _one_list


@pytest.mark.parametrize(
    "values",
    [[], [b""], [b"\x80\x01", b"", b"\xff" * 1000], [bytes([i]) * i for i in range(50)]],
)
def test_the_row_is_the_array_pyarrow_builds(values: list[bytes]) -> None:
    built = _one_list(values)
    built.validate(full=True)
    assert built.type == pa.list_(pa.binary())
    assert built.equals(pa.array([values], pa.list_(pa.binary())))
    assert built.to_pylist() == [values]
