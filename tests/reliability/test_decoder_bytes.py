"""Byte-level fuzzing of the decoders that read untrusted files (issue 15): Puffin footers,
deletion-vector blobs and their portable Roaring bitmaps, Avro containers (manifests and manifest
lists), and table metadata (plain and gzip).

Hypothesis mutates real inputs (files other engines wrote, from the corpus, and files iceduck
writes) by flipping, inserting, deleting and overwriting byte runs, truncating, or replacing them
outright. A decoder either returns or raises an `IcebergError` whose message is one line naming
the file: never another exception (no KeyError, struct.error, RecursionError, MemoryError...).
`ICEDUCK_FUZZ_EXAMPLES` scales the budget with the scan fuzzer's (tests/reliability/test_fuzz.py)."""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iceduck.errors import IcebergError
from iceduck.puffin import Roaring64
from iceduck.puffin.deletion_vector import decode_deletion_vector, encode_deletion_vector
from iceduck.puffin.puffin import (
    deletion_vector_blobs,
    read_deletion_vector,
    read_footer,
    write_deletion_vectors,
)
from iceduck.puffin.roaring64 import decode_roaring64
from iceduck.read.avro import avro_batches
from iceduck.spec.manifest import read_manifest
from iceduck.spec.manifest_list import read_manifest_list
from iceduck.spec.table_metadata import read_table_metadata
from tests.conftest import conformance_dir

TRINO_AVRO = "more/trinodb-trino/plugin/trino-iceberg/src/test/resources/iceberg/invalid_compression_codec/none_avro"
EXAMPLES = max(50, int(os.environ.get("ICEDUCK_FUZZ_EXAMPLES", "250")) // 2)
PATH = "/fuzz/file.bin"
CORPUS = "duckdb-iceberg/data/persistent"


def _positions() -> Roaring64:
    return Roaring64.from_positions([0, 1, 7, 65_535, 65_536, 1 << 33, (1 << 33) + 5, *range(100, 400, 3)])


def _puffin() -> bytes:
    data, _ = write_deletion_vectors([("s3://b/t/data/a.parquet", _positions()), ("/t/data/b.parquet", [3, 4])])
    return data


def _corpus(pattern: str) -> list[bytes]:
    root = conformance_dir()
    if root is None:
        return []
    return [p.read_bytes() for p in sorted((root / CORPUS).glob(pattern))[:3]]


def _read_puffin(data: bytes) -> Any:
    footer = read_footer(data, path=PATH)
    out = []
    for blob in deletion_vector_blobs(footer, path=PATH):
        out.append(read_deletion_vector(data, blob.offset, blob.length, path=PATH, record_count=blob.cardinality))
    return out


DECODERS: dict[str, tuple[Callable[[bytes], Any], Callable[[], list[bytes]]]] = {
    "puffin": (_read_puffin, lambda: [_puffin()]),
    "dv": (
        lambda b: decode_deletion_vector(b, path=PATH),
        lambda: [encode_deletion_vector(_positions()), encode_deletion_vector([])],
    ),
    "roaring": (
        lambda b: decode_roaring64(b, path=PATH),
        lambda: [encode_deletion_vector(_positions())[8:-4]],
    ),
    "manifest": (
        lambda b: read_manifest(b, path=PATH),
        lambda: _corpus("partition_integer/metadata/*-m0.avro") + _corpus("*/default.db/*/metadata/*-m0.avro"),
    ),
    "manifest_list": (
        lambda b: read_manifest_list(b, path=PATH),
        lambda: _corpus("partition_integer/metadata/snap-*.avro") + _corpus("*/default.db/*/metadata/snap-*.avro"),
    ),
    "metadata": (
        lambda b: read_table_metadata(b, path=PATH),
        lambda: _corpus("partition_integer/metadata/v2.metadata.json"),
    ),
    "metadata_gzip": (
        lambda b: read_table_metadata(b, path=PATH),
        lambda: [gzip.compress(s) for s in _corpus("partition_integer/metadata/v2.metadata.json")],
    ),
}


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.sampled_from(["flip", "overwrite", "insert", "delete", "truncate", "random"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if how == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif how == "overwrite":
            run = draw(st.binary(min_size=1, max_size=16))
            data[at : at + len(run)] = run
        elif how == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif how == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        elif how == "truncate":
            del data[at:]
        else:
            data = bytearray(draw(st.binary(max_size=64)))
    return bytes(data)


@pytest.mark.parametrize("kind", sorted(DECODERS))
def test_damaged_bytes_decode_or_give_one_clear_error(kind: str) -> None:
    decode, seeds_of = DECODERS[kind]
    seeds = seeds_of()
    if not seeds:
        pytest.skip("conformance corpus not found")
    for seed in seeds:
        decode(seed)  # the undamaged inputs decode

    @settings(
        max_examples=EXAMPLES, derandomize=True, database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )  # fmt: skip
    @given(data=mutated(seeds))
    def check(data: bytes) -> None:
        try:
            decode(data)
        except IcebergError as e:
            message = str(e)
            assert "\n" not in message and "Traceback" not in message, message
            assert PATH in message, f"{type(e).__name__} names no file: {message}"
        # anything else (KeyError, struct.error, MemoryError, ...) fails the test with its traceback

    check()


def test_the_seeds_are_real() -> None:
    """Each decoder's seeds are files it reads (so mutations start from valid inputs)."""
    footer = read_footer(_puffin(), path=PATH)
    assert len(deletion_vector_blobs(footer, path=PATH)) == 2
    if conformance_dir() is not None:
        md = json.loads(_corpus("partition_integer/metadata/v2.metadata.json")[0])
        assert md["format-version"] in (1, 2)
        assert len(DECODERS["manifest"][1]()) >= 2 and len(DECODERS["manifest_list"][1]()) >= 2


@pytest.mark.parametrize("flip", [(8, 0x08), (14, 0x0E)])
def test_a_damaged_avro_data_file_header_is_one_clear_error(tmp_path: Path, flip: tuple[int, int]) -> None:
    """The 20-minute fuzz run's two bare built-ins: a flipped byte in an Avro data file's header
    made fastavro raise KeyError('avro.schema')."""
    root = conformance_dir()
    if root is None:
        pytest.skip("conformance corpus not found")
    (src,) = (root / TRINO_AVRO / "data").glob("*.avro")
    data = bytearray(src.read_bytes())
    data[flip[0]] ^= flip[1]
    damaged = tmp_path / src.name
    damaged.write_bytes(bytes(data))
    with pytest.raises(IcebergError, match=re.escape(str(damaged))) as e:
        list(avro_batches(str(damaged)))
    assert "\n" not in str(e.value)
