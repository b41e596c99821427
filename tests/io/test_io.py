"""iceduck.io: LocalFileIO (local files, exclusive/atomic writes, random access) and path resolution."""

from __future__ import annotations

import json
import os
import struct
import threading
from pathlib import Path
from typing import Any, cast

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iceduck.errors import (
    AlreadyExistsError,
    CorruptFileError,
    FileNotFoundInTableError,
    UnsupportedFormatError,
)
from iceduck.io.fileio import FileInfo, FileIO, InputFile, LocalFileIO, local_path
from iceduck.io.paths import (
    PathResolver,
    base_name,
    is_local,
    is_relative,
    join_path,
    normalize_path,
    parent_path,
)

IO = LocalFileIO()

# -- LocalFileIO ---------------------------------------------------------------------------------


def test_local_file_io_satisfies_the_protocols(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    assert isinstance(IO, FileIO)
    with IO.open_input(str(tmp_path / "f")) as f:
        assert isinstance(f, InputFile)


@pytest.mark.parametrize("form", ["plain", "file:", "file://", "file:///"])
def test_path_forms_reach_the_same_file(tmp_path: Path, form: str) -> None:
    target = tmp_path / "sub" / "a.bin"
    path = {
        "plain": str(target),
        "file:": f"file:{target}",
        "file://": f"file://localhost{target}",
        "file:///": f"file://{target}",  # tmp_path is absolute, so this is file:///...
    }[form]
    IO.write_new(path, b"hello")
    assert target.read_bytes() == b"hello"
    assert IO.read(path) == b"hello"
    assert IO.exists(path)
    assert IO.size(path) == 5
    IO.delete(path)
    assert not target.exists()
    assert not IO.exists(path)


def test_relative_paths_are_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    IO.write_new("rel/x.txt", b"1")
    assert (tmp_path / "rel" / "x.txt").read_bytes() == b"1"
    assert IO.read("file:rel/x.txt") == b"1"


@pytest.mark.parametrize(
    "path", ["s3://bucket/t/metadata/v1.metadata.json", "gs://b/x", "abfss://c@a/x", "hdfs:/x"]
)
def test_other_schemes_are_refused_naming_the_path(path: str) -> None:
    for call in (
        lambda: IO.read(path),
        lambda: IO.exists(path),
        lambda: IO.open_input(path),
        lambda: IO.size(path),
        lambda: IO.write_new(path, b""),
        lambda: IO.write_atomic(path, b""),
        lambda: IO.delete(path),
        lambda: list(IO.list_prefix(path)),
    ):
        with pytest.raises(UnsupportedFormatError) as e:
            call()
        assert path in str(e.value)
        assert "scheme" in str(e.value)


def test_missing_files_raise_file_not_found_in_table_naming_the_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.avro")
    for call in (
        lambda: IO.read(missing),
        lambda: IO.open_input(missing),
        lambda: IO.size(missing),
        lambda: IO.delete(missing),
    ):
        with pytest.raises(FileNotFoundInTableError) as e:
            call()
        assert missing in str(e.value)
        assert isinstance(e.value, FileNotFoundError)  # callers catching the builtin still work
    assert not IO.exists(missing)
    assert not IO.exists(str(tmp_path))  # a folder is not a file


def test_write_new_is_exclusive_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = str(tmp_path / "m" / "v1.metadata.json")
    IO.write_new(path, b"first")
    with pytest.raises(AlreadyExistsError) as e:
        IO.write_new(path, b"second")
    assert path in str(e.value)
    assert IO.read(path) == b"first"
    assert sorted(os.listdir(tmp_path / "m")) == ["v1.metadata.json"]


def test_write_new_race_has_exactly_one_winner(tmp_path: Path) -> None:
    path = str(tmp_path / "v2.metadata.json")
    barrier = threading.Barrier(16)
    outcomes: dict[int, str] = {}

    def writer(i: int) -> None:
        barrier.wait()
        try:
            IO.write_new(path, f"writer {i} ".encode() * 1000)
            outcomes[i] = "won"
        except AlreadyExistsError:
            outcomes[i] = "lost"

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, o in outcomes.items() if o == "won"]
    assert len(outcomes) == 16 and len(winners) == 1
    # The file holds the winner's bytes, whole.
    assert IO.read(path) == f"writer {winners[0]} ".encode() * 1000
    assert os.listdir(tmp_path) == ["v2.metadata.json"]


def test_write_atomic_replaces_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = str(tmp_path / "metadata" / "version-hint.text")
    IO.write_atomic(path, b"1")
    IO.write_atomic(path, b"2")
    assert IO.read(path) == b"2"
    assert os.listdir(tmp_path / "metadata") == ["version-hint.text"]


@settings(max_examples=60, deadline=None)
@given(
    data=st.binary(max_size=5000),
    cuts=st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 5000)), max_size=8),
)
def test_random_access_reads_match_slices(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, cuts: list[tuple[int, int]]
) -> None:
    path = str(tmp_path_factory.mktemp("ra") / "f.bin")
    IO.write_new(path, data)
    assert IO.read(path) == data
    with IO.open_input(path) as f:
        assert f.size == len(data) == IO.size(path)
        for offset, length in cuts:
            if offset + length <= len(data):
                assert f.read_at(offset, length) == data[offset : offset + length]
            else:
                with pytest.raises(CorruptFileError) as e:
                    f.read_at(offset, length)
                assert path in str(e.value)


def test_puffin_footer_read_from_the_tail(conformance: Path) -> None:
    # Puffin layout (spec): ... Magic FooterPayload PayloadSize(int32 LE) Flags(4 bytes) Magic.
    puffin = conformance / "apache-iceberg-go/table/dv/testdata/deletes/multi-blob-dv.puffin"
    with IO.open_input(str(puffin)) as f:
        assert f.read_at(0, 4) == b"PFA1"
        tail = f.read_at(f.size - 12, 12)
        (payload_size,) = struct.unpack("<i", tail[:4])
        assert tail[8:] == b"PFA1"
        assert tail[4] & 1 == 0  # payload not compressed
        footer = f.read_at(f.size - 12 - payload_size - 4, payload_size + 4)
    assert footer[:4] == b"PFA1"
    blobs = json.loads(footer[4:])["blobs"]
    assert blobs and all(b["type"] == "deletion-vector-v1" for b in blobs)
    assert f.size == puffin.stat().st_size


def test_list_prefix_lists_recursively_with_size_and_mtime(tmp_path: Path) -> None:
    files = {
        "a.txt": b"1",
        "data/x=1/f.parquet": b"22",
        "data/x=2/g.parquet": b"333",
        "metadata/v1.metadata.json": b"",
    }
    for rel, content in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    (tmp_path / "empty").mkdir()
    listed = list(IO.list_prefix(f"file://{tmp_path}/"))
    assert all(isinstance(i, FileInfo) for i in listed)
    assert [i.path for i in listed] == [f"{tmp_path}/{rel}" for rel in sorted(files)]
    for info in listed:
        rel = info.path[len(str(tmp_path)) + 1 :]
        assert info.size == len(files[rel])
        assert info.mtime_ms == os.stat(info.path).st_mtime_ns // 1_000_000
    assert list(IO.list_prefix(str(tmp_path / "absent"))) == []


def test_list_prefix_counts_the_corpus_like_os_walk(conformance: Path) -> None:
    root = conformance / "duckdb-iceberg/data/persistent/iceberg"
    expected = sorted(str(Path(d) / f) for d, _, fs in os.walk(root) for f in fs)
    listed = list(IO.list_prefix(str(root)))
    assert sorted(i.path for i in listed) == expected
    assert sum(i.size for i in listed) == sum(os.path.getsize(p) for p in expected)


# -- normalisation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("file:///tmp/wh/t", "/tmp/wh/t"),
        ("file:/tmp/wh/t/", "/tmp/wh/t"),
        ("file://localhost/tmp//wh", "/tmp/wh"),
        ("/tmp//wh///t/./data/", "/tmp/wh/t/data"),
        ("/", "/"),
        ("file:///", "/"),
        ("./lineitem_iceberg", "lineitem_iceberg"),
        ("data/persistent/uuid/", "data/persistent/uuid"),
        ("file://data/persistent/map_stats", "data/persistent/map_stats"),  # corpus: relative path as a URI
        ("S3://bucket//wh/t/", "s3://bucket/wh/t"),
        ("s3://bucket", "s3://bucket"),
        ("s3://bucket/", "s3://bucket"),
        ("gs://b/x/../y", "gs://b/x/../y"),  # `..` is kept
        ("partition_col=2023-05-15T14%3A30%3A45", "partition_col=2023-05-15T14%3A30%3A45"),
        ("t=12:34:56/f.parquet", "t=12:34:56/f.parquet"),  # not a scheme: '=' cannot be in one
    ],
)
def test_normalize_path_examples(raw: str, canonical: str) -> None:
    assert normalize_path(raw) == canonical


# No ':' here: a relative path whose first folder looks like `scheme:` is a URI by definition.
segment = st.text(alphabet=st.sampled_from("abcXYZ019_-=%."), min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..")
)
segments = st.lists(segment, min_size=0, max_size=5)


@given(
    segments,
    st.sampled_from(["", "/", "file:", "file://", "file:///", "s3://bkt/", "s3://bkt"]),
    st.booleans(),
)
def test_normalize_is_idempotent(parts: list[str], prefix: str, trailing: bool) -> None:
    path = prefix + "//".join(parts) + ("/" if trailing else "")
    once = normalize_path(path)
    assert normalize_path(once) == once
    assert not once.endswith("/") or once == "/"
    assert "//" not in once.split("://", 1)[-1]


@given(st.lists(segment, min_size=1, max_size=5))
def test_local_uri_forms_are_one_path(parts: list[str]) -> None:
    plain = "/" + "/".join(parts)
    assert normalize_path(f"file://{plain}") == normalize_path(f"file:{plain}") == plain
    assert normalize_path(f"file://localhost{plain}") == plain
    assert normalize_path(plain + "/") == plain
    assert parent_path(plain) == ("/" + "/".join(parts[:-1]) if len(parts) > 1 else "/")
    assert base_name(plain) == parts[-1]
    assert join_path(parent_path(plain), base_name(plain)) == plain


def test_is_relative() -> None:
    assert is_relative("data/persistent/x") and is_relative("file://data/x") and is_relative("./t")
    assert not is_relative("/abs") and not is_relative("file:///abs") and not is_relative("s3://b/x")


# -- PathResolver ----------------------------------------------------------------------------------

roots = st.sampled_from(["/", "s3://bucket/", "file:///", "gs://b/", ""])


@given(roots, segments.filter(bool), roots, segments.filter(bool), segments)
def test_paths_under_the_recorded_location_move_to_the_actual_one(
    rec_root: str, rec: list[str], act_root: str, act: list[str], rest: list[str]
) -> None:
    recorded = rec_root + "/".join(rec)
    actual = act_root + "/".join(act)
    resolver = PathResolver(recorded, actual)
    suffix = "/".join(rest)
    # The recorded form, and spelling variants of it, all land under the actual location.
    for spelled in (recorded + "/" + suffix, recorded + "//" + suffix + ("/" if rest else "")):
        assert resolver.resolve(spelled) == join_path(actual, suffix)
    if rec_root == "/":
        assert resolver.resolve("file://" + recorded + "/" + suffix) == join_path(actual, suffix)
    if rec_root == "s3://bucket/":
        assert resolver.resolve("s3a://bucket/" + "/".join(rec) + "/" + suffix) == join_path(actual, suffix)


@given(st.sampled_from(["/", "s3://bucket/"]), segments.filter(bool), segments.filter(bool), segments)
def test_absolute_paths_outside_the_location_are_unchanged(
    root: str, rec: list[str], act: list[str], rest: list[str]
) -> None:
    recorded = root + "/".join(rec)
    resolver = PathResolver(recorded, "/actual/" + "/".join(act))
    # A sibling whose name merely starts with the table folder's name is outside.
    sibling = recorded + "x/" + "/".join(rest)
    # In remote storage the sibling lies beside the location when the folders below the one they
    # share moved along (the actual location ends with them): it is then found beside the table.
    parts = [*rec[:-1], rec[-1] + "x", *rest]
    shared = next((i for i, (a, b) in enumerate(zip(parts, rec, strict=False)) if a != b), len(rec))
    below = rec[shared:]
    if root != "/" and below and act[len(act) - len(below) :] == below and len(act) >= len(below):
        beside = "/actual/" + "/".join(act[: len(act) - len(below)] + parts[shared:])
        assert resolver.resolve(sibling) == normalize_path(beside)
    else:
        assert resolver.resolve(sibling) == normalize_path(sibling)
    elsewhere = "gs://other-bucket/" + "/".join(rest)
    assert resolver.resolve(elsewhere) == normalize_path(elsewhere)


@given(
    st.sampled_from(["hdfs://namenode:20500", ""]),
    segments.filter(bool),
    st.sampled_from(["/actual/t", "hdfs://namenode:20500/w/t"]),
    segments.filter(bool),
)
def test_every_spelling_of_a_file_under_the_table_has_one_match_key(
    root: str, loc: list[str], actual: str, rest: list[str]
) -> None:
    """How Hive/Spark (short paths), Trino (qualified) and Java (`file:`) name one file."""
    location = "/" + "/".join(loc)
    resolver = PathResolver(root + location, actual)
    suffix = "/".join(rest)
    spellings = [
        f"{location}/{suffix}",
        f"hdfs://namenode:20500{location}/{suffix}",
        f"hdfs://namenode:20500{location}//{suffix}",
    ]
    if not root:
        spellings += [f"file:{location}/{suffix}", f"file://{location}/{suffix}"]
    keys = {resolver.match_key(p) for p in spellings}
    assert keys == {resolver.match_key(resolver.resolve(spellings[0]))}
    # and another file's key differs
    assert resolver.match_key(f"{location}/{suffix}x") not in keys
    # a foreign bucket is another storage even when its path matches
    assert resolver.match_key(f"s3://bucket{location}/{suffix}") not in keys


@given(st.sampled_from(["/", "file:/", "file://", "file:///", "", "//"]), st.lists(st.sampled_from(["a", ".", "..", "", "b c", "x%3A"]), max_size=5), st.booleans())
def test_local_path_is_the_canonical_form(root: str, parts: list[str], trailing: bool) -> None:
    path = root + "/".join(parts) + ("/" if trailing else "")
    assert local_path(path) == normalize_path(path)


spelled_locations = st.sampled_from(["file://", "file:", "FILE://", "file://localhost", "", "s3://bucket", "S3://bucket"])
rests = st.lists(st.sampled_from(["a", "b.parquet", ".", "..", "", "x%3A1", "./c"]), min_size=0, max_size=4)


@given(spelled_locations, segments.filter(bool), st.booleans(), spelled_locations, rests, segments.filter(bool))
def test_a_path_resolves_alike_however_its_table_location_is_spelled(
    root: str, loc: list[str], trailing: bool, path_root: str, rest: list[str], actual: list[str]
) -> None:
    """The fast paths (a path spelled as the location is, canonically or as written) give what
    resolving the path's canonical form gives, and so does every other spelling."""
    location = root + "/" + "/".join(loc) + ("/" if trailing else "")
    resolver = PathResolver(location, "/moved/" + "/".join(actual))
    for path in (location.rstrip("/") + "/" + "/".join(rest), path_root + "/" + "/".join(loc) + "/" + "/".join(rest)):
        assert resolver.resolve(path) == resolver.resolve(normalize_path(path))
        assert resolver.match_key(path) == resolver.match_key(normalize_path(path))


@given(segments.filter(bool), segments)
def test_an_unmoved_table_resolves_to_its_own_paths(loc: list[str], rest: list[str]) -> None:
    location = "/wh/" + "/".join(loc)
    resolver = PathResolver("file:" + location, location)
    assert not resolver.moved
    path = location + "/" + "/".join(rest)
    assert resolver.resolve(path) == normalize_path(path)


def test_relative_recorded_location_found_inside_paths() -> None:
    resolver = PathResolver("data/persistent/t", "/corpus/duckdb-iceberg/data/persistent/t")
    assert resolver.moved
    assert (
        resolver.resolve("data/persistent/t/data/f.parquet")
        == "/corpus/duckdb-iceberg/data/persistent/t/data/f.parquet"
    )
    # Written with an absolute prefix by some writer: found by the recorded components.
    assert resolver.resolve("/ci/work/data/persistent/t/metadata/m.avro") == (
        "/corpus/duckdb-iceberg/data/persistent/t/metadata/m.avro"
    )


def test_relative_paths_use_the_folder_name_or_the_actual_location() -> None:
    # big_query_error: location gs://.../table_name, files recorded relative to the writer's folder.
    resolver = PathResolver("gs://bucket/table_name", "/c/persistent/big_query_error")
    assert (
        resolver.resolve("data/persistent/big_query_error/metadata/x.avro")
        == "/c/persistent/big_query_error/metadata/x.avro"
    )
    assert resolver.resolve("metadata/x.avro") == "/c/persistent/big_query_error/metadata/x.avro"
    # With an existence check the first existing reading wins, "as given" first.
    existing = {"metadata/y.avro"}
    checked = PathResolver("gs://bucket/table_name", "/c/t", exists=existing.__contains__)
    assert checked.resolve("metadata/y.avro") == "metadata/y.avro"
    assert checked.resolve("metadata/z.avro") == "/c/t/metadata/z.avro"  # none exists: the join


def _avro_rows(path: str) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return [cast(dict[str, Any], row) for row in fastavro.reader(f)]


def test_every_recorded_path_of_the_corpus_resolves_to_an_existing_file(conformance: Path) -> None:
    """Every manifest list, manifest, data/delete file and metadata-log entry the corpus records
    (relative, `file://`-relative, `./`, foreign-bucket locations) exists once resolved."""
    from iceduck.spec.table_metadata import read_table_metadata

    inventory = {t["path"]: t for t in json.loads((conformance / "TABLE_INVENTORY.json").read_text())}
    checked = foreign = 0
    for rel, entry in inventory.items():
        folder = conformance / rel
        for metadata_file in sorted((folder / "metadata").iterdir()):
            if ".metadata.json" not in metadata_file.name:
                continue
            try:
                md = read_table_metadata(metadata_file.read_bytes(), path=str(metadata_file))
            except Exception:
                continue  # a deliberately broken file (e.g. v0 without a location) is not this test's subject
            resolver = PathResolver(md.location, str(folder), exists=IO.exists)
            missing_refs = {r.rpartition("/")[2] for r in entry["missing_manifest_refs"]}
            for log in md.metadata_log:
                # Old metadata files may be deleted (the corpus keeps only some): check the place.
                assert parent_path(resolver.resolve(log.metadata_file)) == f"{folder}/metadata", (
                    log.metadata_file
                )
            for snap in md.snapshots:
                if snap.manifest_list is None or snap.manifest_list.rpartition("/")[2] in missing_refs:
                    continue
                manifest_list = resolver.resolve(snap.manifest_list)
                assert IO.exists(manifest_list), (rel, snap.manifest_list, manifest_list)
                manifests = [r["manifest_path"] for r in _avro_rows(manifest_list)]
                for manifest in manifests:
                    resolved = resolver.resolve(manifest)
                    assert IO.exists(resolved), (rel, manifest, resolved)
                    for row in _avro_rows(resolved):
                        recorded: str = row["data_file"]["file_path"]
                        data_file = resolver.resolve(recorded)
                        if not is_local(data_file):
                            # generated_bounds lists files in s3://fake-bucket that nobody has:
                            # another bucket is outside the table and stays as recorded.
                            assert data_file == normalize_path(recorded)
                            foreign += 1
                            continue
                        assert IO.exists(data_file), (rel, recorded, data_file)
                        checked += 1
    assert checked > 60 and foreign == 5000
