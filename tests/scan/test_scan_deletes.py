"""Delete matching as the spec's "Scan Planning" states it, on model values only (no files)."""

from __future__ import annotations

from iceduck.io.paths import storage_key as path_key
from iceduck.scan.deletes import KIND_DV, KIND_EQUALITY, KIND_POSITION, DeleteIndex
from iceduck.spec.manifest import CONTENT_DATA, CONTENT_EQUALITY_DELETES, CONTENT_POSITION_DELETES, DataFile
from iceduck.spec.partitioning import PartitionField, PartitionSpec
from iceduck.spec.transforms import IdentityTransform
from iceduck.spec.types import STRING
from iceduck.spec.values import to_bytes

UNPART = PartitionSpec(0, ())
BY_K = PartitionSpec(1, (PartitionField((1,), 1000, "k", IdentityTransform()),))
SPECS = {0: UNPART, 1: BY_K}


def data(path: str, spec: int = 1, part: tuple[object, ...] = ("a",)) -> DataFile:
    return DataFile(CONTENT_DATA, path, "PARQUET", spec, part if spec else (), 10, 100)


def dv(path: str, target: str, spec: int = 1, part: tuple[object, ...] = ("a",)) -> DataFile:
    return DataFile(
        CONTENT_POSITION_DELETES, path, "PUFFIN", spec, part if spec else (), 1, 50,
        referenced_data_file=target, content_offset=4, content_size_in_bytes=40,
    )  # fmt: skip


def pos(path: str, spec: int = 1, part: tuple[object, ...] = ("a",), target: str | None = None) -> DataFile:
    return DataFile(
        CONTENT_POSITION_DELETES,
        path,
        "PARQUET",
        spec,
        part if spec else (),
        1,
        50,
        referenced_data_file=target,
    )


def eq(path: str, spec: int = 1, part: tuple[object, ...] = ("a",)) -> DataFile:
    return DataFile(
        CONTENT_EQUALITY_DELETES, path, "PARQUET", spec, part if spec else (), 1, 50, equality_ids=(2,)
    )


def kinds(index: DeleteIndex, f: DataFile, seq: int) -> list[tuple[str, str]]:
    return sorted((d.path, d.kind) for d in index.for_data_file(f, seq))


def test_sequence_numbers_decide_what_applies() -> None:
    index = DeleteIndex.of(
        [
            (pos("p3", target="s3://b/d.parquet"), 3),
            (eq("e3"), 3),
            (eq("e5"), 5),
            (pos("p1", target="s3://b/d.parquet"), 1),
        ],
        SPECS,
    )
    f = data("s3://b/d.parquet")
    # position deletes: data seq <= delete seq; equality deletes: data seq < delete seq
    assert kinds(index, f, 3) == [("e5", KIND_EQUALITY), ("p3", KIND_POSITION)]
    assert kinds(index, f, 1) == [
        ("e3", KIND_EQUALITY),
        ("e5", KIND_EQUALITY),
        ("p1", KIND_POSITION),
        ("p3", KIND_POSITION),
    ]
    assert kinds(index, f, 6) == []


def test_a_dv_hides_position_delete_files_of_its_data_file() -> None:
    index = DeleteIndex.of(
        [(pos("p2", target="/t/d.parquet"), 2), (dv("v3", "/t/d.parquet"), 3), (eq("e4"), 4)], SPECS
    )
    assert kinds(index, data("/t/d.parquet"), 1) == [("e4", KIND_EQUALITY), ("v3", KIND_DV)]
    # a DV older than the data file does not apply, and then neither hides anything
    assert kinds(index, data("/t/d.parquet"), 3) == [("e4", KIND_EQUALITY), ("v3", KIND_DV)]
    assert kinds(index, data("/t/d.parquet"), 4) == []


def test_partition_scope_and_global_equality_deletes() -> None:
    index = DeleteIndex.of(
        [
            (eq("e-a"), 5),
            (eq("e-b", part=("b",)), 5),
            (eq("e-global", spec=0), 5),
            (pos("p-a"), 5),
            (pos("p-b", part=("b",)), 5),
        ],
        SPECS,
    )
    assert kinds(index, data("/t/x.parquet", part=("a",)), 1) == [
        ("e-a", KIND_EQUALITY), ("e-global", KIND_EQUALITY), ("p-a", KIND_POSITION)
    ]  # fmt: skip
    # a data file of another spec sees only the global (unpartitioned) equality delete
    assert kinds(index, data("/t/y.parquet", spec=0), 1) == [("e-global", KIND_EQUALITY)]


def test_paths_match_after_normalising_scheme_and_authority() -> None:
    assert path_key("file:///t/d.parquet") == path_key("/t/d.parquet") == path_key("file:/t//d.parquet")
    assert path_key("s3a://bucket/x/y") == path_key("s3://bucket/x/y")
    assert path_key("s3://bucket/x") != path_key("s3://other/x")
    bounds = to_bytes(STRING, "file:/t/d.parquet")
    single = DataFile(
        CONTENT_POSITION_DELETES, "p", "PARQUET", 1, ("a",), 1, 50,
        lower_bounds={2147483546: bounds}, upper_bounds={2147483546: bounds},
    )  # fmt: skip
    index = DeleteIndex.of([(dv("v", "file:///t/d.parquet"), 2), (single, 2)], SPECS)
    assert kinds(index, data("/t/d.parquet"), 1) == [("v", KIND_DV)]
    index = DeleteIndex.of([(single, 2)], SPECS)
    assert kinds(index, data("/t/d.parquet"), 1) == [("p", KIND_POSITION)]
    assert kinds(index, data("/t/other.parquet", part=("b",)), 1) == []  # bounds name one file only
