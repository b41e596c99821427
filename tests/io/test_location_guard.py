"""The location guard (`iceduck.io.paths.is_inside` / `is_under`): is a path inside a location?

Truth: `posixpath.normpath` of the percent-decoded path (the reading a client that decodes acts on)
and the path as written, both compared component by component; on disk, where `pathlib.Path.resolve`
(the kernel's answer through symlinks) puts the path. Hypothesis draws paths from segments that
include every spelling of `..` the issue probed (`..`, `%2e%2e`, `%252e%252e`, `.%2E`), `.`, empty
segments (`//`) and `%2f`.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iceduck.errors import ValidationError
from iceduck.io.paths import check_inside, containment_key, is_inside, is_under

NAMES = st.sampled_from(["a", "b", "t", "data", "x.parquet", "n=1", "n%3A2", "c%2Fd"])
TRICKS = st.sampled_from(["..", ".", "", "%2e%2e", "%2E%2e", ".%2e", "%252e%252e", "%2e", "..%2f..", "%2f"])
SEGMENTS = st.lists(st.one_of(NAMES, TRICKS), max_size=8)


def _components(path: str) -> list[str]:
    return [p for p in posixpath.normpath(path).split("/") if p]


def _truth_inside(path: str, root: str) -> bool:
    """Every reading (as written, decoded once, twice, ...) lexically below `root` (a clean absolute path)."""
    spellings = [path]
    while "%" in spellings[-1] and unquote(spellings[-1]) != spellings[-1]:
        spellings.append(unquote(spellings[-1]))
    root_parts = _components(root)
    for s in spellings:
        if not s.startswith("/"):
            return False
        if _components(s)[: len(root_parts)] != root_parts:
            return False
    return True


@settings(max_examples=400, deadline=None)
@given(SEGMENTS)
def test_local_paths_are_inside_exactly_when_every_reading_is(segments: list[str]) -> None:
    root = "/srv/wh"
    path = root + "/" + "/".join(segments)
    assert is_inside(path, root) == _truth_inside(path, root)
    # a file: URI spelling says the same
    assert is_inside("file://" + path, root) == _truth_inside(path, root)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "n=1", "x.y"]), max_size=5),
    st.lists(st.one_of(NAMES, st.sampled_from([".", "", "%2e"])), max_size=5),
    st.sampled_from(["..", "%2e%2e", "%2E%2E", "%252e%252e", ".%2e"]),
)
def test_a_path_that_climbs_out_is_never_inside_however_spelled(
    down: list[str], after: list[str], up: str
) -> None:
    root = "/srv/wh/ns/t"
    # down k folders, up k + 1: one level above the root, then down anywhere but back
    path = "/".join([root, *down, *[up] * (len(down) + 1), "victim", *after])
    assert not is_inside(path, root), path
    assert not is_inside(path.replace("/srv/wh", "s3://lake/wh", 1), "s3://lake/wh/ns/t"), path


@settings(max_examples=300, deadline=None)
@given(SEGMENTS, st.sampled_from(["s3", "s3a", "s3n"]), st.sampled_from(["lake", "other", "lake2"]))
def test_s3_paths_inside_only_in_the_same_bucket_and_below_the_prefix(
    segments: list[str], scheme: str, bucket: str
) -> None:
    root = "s3://lake/wh"
    path = f"{scheme}://{bucket}/wh/" + "/".join(segments)
    expected = bucket == "lake" and _truth_inside(path.split(f"://{bucket}", 1)[1], "/wh")
    assert is_inside(path, root) == expected, path


def test_spellings_the_issue_probed() -> None:
    root = "/srv/wh"
    assert is_inside("/srv/wh/ns/t", root) and is_inside("/srv/wh//ns/./t/", root)
    assert is_inside("file:///srv/wh/ns/t", root) and is_inside("file:/srv/wh/ns/t", root)
    for outside in (
        "/srv/wh/../victim/t",
        "/srv/wh/%2e%2e/victim",
        "/srv/wh/%2E%2E%2Fvictim",
        "/srv/wh/ns/%252e%252e/%252e%252e/victim",
        "/srv/whx/t",  # component by component: /srv/whx is not below /srv/wh
        "relative/t",
        "srv/wh/t",
        "/srv/wh/t\x00x",
        "/srv/wh/t%00",
        "/srv/wh/ns\n/t",
        "s3://lake/srv/wh/t",
        "file://host/srv/wh/t",  # a file URI with a host is no local path
    ):
        assert not is_inside(outside, root), outside
    # strict: the location itself is no file inside it
    assert is_inside("/srv/wh", root) and not is_inside("/srv/wh", root, strict=True)
    assert not is_inside("/srv/wh/.", root, strict=True)


def test_s3_buckets_and_scheme_aliases() -> None:
    root = "s3://lake/wh"
    assert is_inside("s3a://lake/wh/ns/t/data/f.parquet", root)
    assert is_inside("S3N://lake/wh/t", root)
    assert not is_inside("s3://other/wh/t", root)
    assert not is_inside("s3://lake/wh/../x", root)
    assert not is_inside("s3://lake/../other/wh/t", root)  # climbs above the bucket: inside nothing
    assert not is_inside("s3://lake%2fwh/t", root)
    assert not is_inside("s3:/lake/wh/t", root) and not is_inside("s3:lake/wh/t", root)
    assert not is_inside("/wh/t", root) and not is_inside("gs://lake/wh/t", root)
    assert containment_key("s3a://lake/wh/a/../b") == "s3://lake/wh/b"
    assert containment_key("s3://lake/../x") is None


def test_symlinks_are_followed_on_disk(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    victim = tmp_path / "victim"
    (wh / "ns").mkdir(parents=True)
    victim.mkdir()
    (victim / "secret").write_text("x")
    (wh / "ns" / "link").symlink_to(victim)
    (wh / "ns" / "inner").symlink_to(wh / "ns" / "real", target_is_directory=True)
    (wh / "ns" / "real").mkdir()
    cases = [
        str(wh / "ns" / "link" / "secret"),  # through a link pointing out
        str(wh / "ns" / "link" / "new-file"),  # a file not there yet, under that link
        str(wh / "ns" / "link" / ".." / "wh" / "ns" / "t"),  # `..` after a link: the link's parent
        str(wh / "ns" / "inner" / "t"),  # a link pointing inside
        str(wh / "ns" / "real" / ".." / "t"),
    ]
    for case in cases:
        truth = Path(case).resolve().is_relative_to(wh.resolve())
        assert is_under(case, str(wh)) == truth, case
    assert not is_under(str(wh / "ns" / "link" / "secret"), str(wh))
    assert is_under(str(wh / "ns" / "inner" / "t"), str(wh))
    # a warehouse reached through a symlink holds its own files, however spelled
    alias = tmp_path / "alias"
    alias.symlink_to(wh)
    assert is_under(str(wh / "ns" / "t"), str(alias)) and is_under(str(alias / "ns" / "t"), str(wh))


def test_check_inside_names_the_client_path_never_the_root(tmp_path: Path) -> None:
    root = str(tmp_path / "secret-root")
    with pytest.raises(ValidationError) as err:
        check_inside("/etc/passwd", root, "metadata-location")
    assert "'/etc/passwd'" in str(err.value) and "metadata-location" in str(err.value)
    assert root not in str(err.value)
    assert check_inside(root + "/t", root, "x") == root + "/t"
    with pytest.raises(ValidationError, match="non-empty string"):
        check_inside(None, root, "location")
    assert os.path.sep == "/"


def test_a_root_with_percent_escapes_is_read_in_step_with_the_path() -> None:
    root = "/srv/w%41h"  # a folder literally named so
    assert is_inside("/srv/w%41h/ns/t", root)
    assert not is_inside("/srv/w%41h/%2e%2e/x", root)
    assert not is_inside("/srv/wAh/ns/t", root)  # another folder as written


def test_a_path_that_walks_out_and_back_in_is_not_inside() -> None:
    """`..` taken where the path is not strictly inside the root names a folder outside on the way,
    though the path ends inside: `os.makedirs` creates that folder, and an object store (which
    resolves no `..`) keys the object below another prefix."""
    root = "/srv/wh"
    for outside in (
        "/srv/wh/../x/../wh/ns/t",
        "/srv/wh/ns/../../wh/ns/t",
        "/srv/wh/%2e%2e/x/%2e%2e/wh/t",
        "file:///srv/wh/../x/../wh/t",
        "/srv/../srv/wh/t",
    ):
        assert not is_inside(outside, root), outside
    assert not is_inside("s3://lake/a/../a/wh/t", "s3://lake/a/wh")
    assert not is_inside("s3://lake/a/wh/../wh/t", "s3://lake/a/wh")
    # a `..` that stays inside is fine
    assert is_inside("/srv/wh/ns/../t", root) and is_inside("/srv/wh/ns/x/%2e%2e/t", root)
    assert is_inside("s3://lake/a/wh/ns/../t", "s3://lake/a/wh")
