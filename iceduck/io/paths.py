"""Path normalisation, moved-table path resolution and the location guard (pure: strings in,
strings out; only `is_under` / `check_inside` look at the disk, for local symlinks).

Iceberg metadata records absolute locations: the table `location`, manifest lists, manifests,
data and delete files. A table that was copied or moved still records its old locations, and some
writers (the DuckDB test corpus among them) record relative ones such as
`data/persistent/<table>/metadata/...`. `PathResolver` maps every recorded path that lies under
the recorded table location onto the folder where the table actually is now.

Canonical form produced by `normalize_path`:
- local paths are plain paths: `file:///a/b`, `file:/a/b`, `file://localhost/a/b` all become `/a/b`;
  `file://rel/x` (a relative path wrongly written as a URI, seen in the corpus) becomes `rel/x`;
- other URIs keep `scheme://authority/path` with a lower-case scheme;
- runs of `/` collapse, `.` segments and a trailing `/` go (the root `/` stays); `..` is kept,
  because resolving it without the file system is wrong under symlinks.
Percent escapes are left alone: writers put literal `%3A` into partition folder names.

`PathResolver.match_key` is the one answer to "do these two recorded paths name the same file": a
delete file's `file_path` values and a DV's `referenced_data_file` are matched to data files by it,
never by raw string (engines spell one file `hdfs://nn:8020/w/t/f`, `/w/t/f`, `s3a://b/f`, `s3://b/f`).

`is_inside` is the one answer to "is this path inside that location?" (the location guard of
`iceduck serve`, purge, orphan removal, metadata clean-up; `is_under` is it with the file system's
symlinks resolved, `check_inside` its error). A path is inside only if every reading of it is: as written and percent-decoded (once,
twice, ... `%2e%2e` is `..` to some clients), each with `.`, `..` and `//` resolved (`..` that
climbs above a bucket is outside everything), the scheme's aliases folded (`s3a://b` is `s3://b`),
the bucket compared exactly, and every `..` taken where the path is still strictly inside the root
(a path that walks out and back in names folders outside on its way: `os.makedirs` creates them, an
object store keys it under another prefix). Relative paths, control characters and `scheme:` forms
without an authority are inside nothing.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from iceduck.errors import ValidationError

# Two or more characters, so that a Windows drive letter (`C:`) is not taken for a scheme.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):(.*)$", re.DOTALL)

# Schemes that name the same storage; a table written through `s3a://` may record `s3://` paths.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}
_HADOOP_SCHEMES = frozenset({"hdfs", "viewfs", "webhdfs", "maprfs"})


def split_scheme(path: str) -> tuple[str | None, str]:
    """Split `scheme:rest` into (lower-case scheme, rest); (None, path) for a plain path."""
    m = _SCHEME.match(path)
    if m is None:
        return None, path
    return m.group(1).lower(), m.group(2)


def _clean(path: str) -> str:
    """Collapse `//` runs and `.` segments, drop a trailing slash; keep a leading `/`."""
    absolute = path.startswith("/")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    body = "/".join(parts)
    if absolute:
        return "/" + body
    return body or "."


METADATA_FOLDER = "metadata"  # where a table keeps its metadata files (Java, PyIceberg, iceduck)


def table_folder_of(metadata_location: str) -> str:
    """The table folder for a metadata file: the parent of its `metadata/` folder, else its folder."""
    folder = parent_path(metadata_location)
    return parent_path(folder) if base_name(folder) == METADATA_FOLDER else folder


def normalize_path(path: str) -> str:
    """The canonical form of `path` (see the module docstring); idempotent."""
    scheme, rest = split_scheme(path)
    if scheme is None:
        return _clean(path)
    if scheme == "file":
        if rest.startswith("//"):
            after = rest[2:]
            if after.startswith("/"):  # file:///abs
                return _clean(after)
            if after == "localhost" or after.startswith("localhost/"):
                return _clean("/" + after[len("localhost") :])
            # file://rel/x: the "authority" is really the first folder of a relative path.
            return _clean(after)
        return _clean(rest)  # file:/abs or file:rel
    if rest.startswith("//"):
        authority, _, tail = rest[2:].partition("/")
        cleaned = _clean("/" + tail)
        return f"{scheme}://{authority}" + ("" if cleaned == "/" else cleaned)
    return f"{scheme}:{_clean(rest)}" if rest else f"{scheme}:"


def is_local(path: str) -> bool:
    """True for plain paths and `file:` URIs."""
    scheme, _ = split_scheme(path)
    return scheme is None or scheme == "file"


def is_relative(path: str) -> bool:
    """True for a path with neither a scheme nor a leading `/` (after normalisation)."""
    norm = normalize_path(path)
    return split_scheme(norm)[0] is None and not norm.startswith("/")


def join_path(base: str, relative: str) -> str:
    """`base` and `relative` joined by exactly one `/`, normalised; `relative` may be empty."""
    if not relative or relative == ".":
        return normalize_path(base)
    if normalize_path(base) == ".":
        return normalize_path(relative)
    return normalize_path(normalize_path(base) + "/" + relative)


def parent_path(path: str) -> str:
    """The folder holding `path` (normalised); a bare relative name's parent is `.`."""
    norm = normalize_path(path)
    head, sep, _ = norm.rpartition("/")
    if not sep:
        return "."
    if norm.startswith("/") and head == "":
        return "/"
    if head.endswith(":/"):  # "s3://bucket" had no path part: the parent is itself
        return norm
    return head


def base_name(path: str) -> str:
    """The last component of `path` (normalised)."""
    return normalize_path(path).rpartition("/")[2]


def _key(path: str) -> tuple[str, tuple[str, ...]]:
    """(root, components) of a normalised path; the root is `scheme://authority`, `/` or ``."""
    scheme, rest = split_scheme(path)
    if scheme is not None:
        scheme = _SCHEME_ALIASES.get(scheme, scheme)
        if rest.startswith("//"):
            authority, _, tail = rest[2:].partition("/")
            return f"{scheme}://{authority}", tuple(p for p in tail.split("/") if p)
        return f"{scheme}:", tuple(p for p in rest.split("/") if p)
    if path.startswith("/"):
        return "/", tuple(p for p in path.split("/") if p)
    return "", tuple(p for p in path.split("/") if p and p != ".")


def _same_storage(root: str, other: str) -> bool:
    """Whether two path roots name the same storage for paths under a table location.

    Equal roots do; so do a plain absolute root (`/`) and a `scheme://authority` root: a path
    without a scheme lives on the default file system, which is the one holding the table (Hadoop
    qualifies `/w/t/f` against `fs.defaultFS`; Hive and Spark record the short form, Trino the
    qualified one).
    """
    if root == other:
        return True
    if root == "/":
        return "://" in other
    # The reverse (a table recorded without a scheme, a path with one) only for Hadoop file
    # systems, whose authority is a name node: a bucket in another scheme is another storage.
    return other == "/" and root.partition("://")[0] in _HADOOP_SCHEMES


def storage_key(path: str) -> str:
    """`normalize_path` with scheme aliases folded (`s3a://b/x` and `s3n://b/x` are `s3://b/x`)."""
    norm = normalize_path(path)
    scheme, rest = split_scheme(norm)
    alias = _SCHEME_ALIASES.get(scheme or "")
    return f"{alias}:{rest}" if alias is not None else norm


# Percent-decoding rounds a path gets before it counts as decoded; one still changing after this many
# (`%25252e...`) is inside nothing.
_MAX_DECODES = 4
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def containment_key(path: str, *, real: Callable[[str], str] | None = None) -> str | None:
    """The form of one reading of `path` that containment compares: an absolute local path
    (`/a/b`; symlinks resolved by `real`, e.g. `os.path.realpath`, else `..` resolved lexically) or
    `scheme://authority/a/b` with scheme aliases folded and `..` resolved lexically. None when the
    path is inside nothing: relative, with a control character, without an authority, or with a
    `..` that climbs above its bucket."""
    if _CONTROL.search(path):
        return None
    norm = normalize_path(path)
    scheme, rest = split_scheme(norm)
    if scheme is None or scheme == "file":
        if not norm.startswith("/"):
            return None
        return real(norm) if real is not None else posixpath.normpath(norm)
    if not rest.startswith("//"):
        return None
    authority, _, tail = rest[2:].partition("/")
    if not authority or authority in (".", ".."):
        return None
    parts: list[str] = []
    for part in tail.split("/"):
        if part == "..":
            if not parts:
                return None  # above the bucket
            parts.pop()
        elif part and part != ".":
            parts.append(part)
    root = f"{_SCHEME_ALIASES.get(scheme, scheme)}://{authority}"
    return root + "".join("/" + p for p in parts)


def key_is_under(key: str, root_key: str) -> bool:
    """True if `key` is `root_key` or below it, component by component (`/t/ab` is not under `/t/a`)."""
    if key == root_key:
        return True
    return key.startswith(root_key if root_key.endswith("/") else root_key + "/")


def _climbs_through_outside(path: str, root_key: str | None) -> bool:
    """True if some `..` of `path` is taken where the path is not strictly inside `root_key` (the
    root spelled as written, `..` resolved lexically). Such a path may end inside the root, but on
    its way it names folders outside: `os.makedirs` creates them (`<wh>/../x/../wh/t` makes `x`
    beside the warehouse), and an object store, which resolves no `..`, files the key under
    another prefix (`s3://b/a/../a/wh/t` is a key below `a/`, not below `a/wh/`)."""
    parts = normalize_path(path).split("/")
    for i, part in enumerate(parts):
        if part != "..":
            continue
        here = containment_key("/".join(parts[:i]) or "/")
        if root_key is None or here is None or here == root_key or not key_is_under(here, root_key):
            return True
    return False


def readings(path: str) -> tuple[str, ...] | None:
    """`path` as written, then percent-decoded until nothing changes: the spellings a store or a
    client may act on. None when decoding does not settle within a few rounds."""
    out = [path]
    for _ in range(_MAX_DECODES):
        decoded = unquote(out[-1], errors="surrogateescape") if "%" in out[-1] else out[-1]
        if decoded == out[-1]:
            return tuple(out)
        out.append(decoded)
    return None


def is_inside(
    path: str, root: str, *, strict: bool = False, real: Callable[[str], str] | None = None
) -> bool:
    """True if every reading of `path` (see `readings`, `containment_key`) is `root` or below it;
    with `strict`, below it only (a file of a table, never the folder itself). A reading is compared
    with the root as the same client reads it (decoded as many times; a root without `%` escapes
    reads one way). `real` resolves local symlinks (`os.path.realpath`); without it the answer is pure."""
    path_readings = readings(path)
    root_readings = readings(root)
    if path_readings is None or root_readings is None:
        return False
    try:
        root_keys = [containment_key(r, real=real) for r in root_readings]
        written_keys = [containment_key(r) for r in root_readings]
        for i, spelling in enumerate(path_readings):
            root_key = root_keys[min(i, len(root_keys) - 1)]
            key = containment_key(spelling, real=real)
            if root_key is None or key is None or not key_is_under(key, root_key):
                return False
            if _climbs_through_outside(spelling, written_keys[min(i, len(written_keys) - 1)]):
                return False
            if strict and key == root_key:
                return False
    except (OSError, ValueError):
        return False
    return True


def is_under(path: str, root: str, *, strict: bool = False) -> bool:
    """The location guard: `is_inside` with local symlinks resolved on disk (`os.path.realpath`
    resolves each existing component's links before the `..` after it, as the kernel does)."""
    return is_inside(path, root, strict=strict, real=os.path.realpath)


def check_inside(
    path: Any, root: str, what: str, *, strict: bool = False, where: str = "the warehouse"
) -> str:
    """`path` if `is_under(path, root)`; else `ValidationError` naming `what` and `path` (as the
    client wrote it) and `where` in words, never `root` itself (a server path)."""
    if not isinstance(path, str) or not path:
        raise ValidationError(f"{what} must be a non-empty string, not {path!r}")
    if not is_under(path, root, strict=strict):
        shown = repr(path) if len(path) <= 300 else repr(path[:300]) + "..."
        raise ValidationError(f"{what} {shown} is not inside {where}")
    return path


def _unkey(root: str, parts: tuple[str, ...]) -> str:
    """The inverse of `_key`."""
    if root in ("", "/"):
        return normalize_path(root + "/".join(parts)) if (root or parts) else "."
    return normalize_path(root + "/" + "/".join(parts)) if parts else root


def _find_run(parts: tuple[str, ...], run: tuple[str, ...]) -> int | None:
    """Index just past the last occurrence of `run` as consecutive components of `parts`."""
    if not run:
        return None
    for start in range(len(parts) - len(run), -1, -1):
        if parts[start : start + len(run)] == run:
            return start + len(run)
    return None


class PathResolver:
    """Maps paths recorded in table metadata onto the table's actual folder.

    Rules, in order, for a recorded path `p` (all compared in canonical form, component by
    component, so `/t/ab` never counts as under `/t/a`):
    1. `p` is the recorded location or under it: replace that prefix by the actual location.
    2. The recorded location is relative: where its components occur inside `p`, everything up
       to them is replaced by the actual location.
    3. `p` is relative: the first existing of (as given; joined to the base folder the relative
       recorded location hangs off, when the actual location ends with the recorded one; what
       follows the last component equal to the table folder's name (recorded or actual), under
       the actual location; joined to the actual location). Without an `exists` callable, or
       when none exists, the first of these readings that applies, not counting "as given".
    4. `p` is in the same remote storage but outside the location (`write.data.path`, object-storage
       paths, several data locations): on a table moved together with its data folders, the
       folder `p` shares with the recorded location maps onto the matching ancestor of the actual
       location (see `_beside`).
    5. Anything else (another bucket, or a tree that did not move along) is returned unchanged.

    `exists` is only consulted for relative paths that no other rule explains, so the resolver
    stays pure unless given one.
    """

    __slots__ = (
        "_actual",
        "_base",
        "_exists",
        "_fast_alias",
        "_fast_from",
        "_fast_key",
        "_fast_to",
        "_names",
        "_recorded",
        "_recorded_key",
        "_recorded_relative",
    )

    def __init__(
        self,
        recorded_location: str,
        actual_location: str,
        *,
        exists: Callable[[str], bool] | None = None,
    ) -> None:
        self._recorded = normalize_path(recorded_location)
        self._actual = normalize_path(actual_location)
        self._exists = exists
        self._recorded_key = _key(self._recorded)
        self._recorded_relative = self._recorded_key[0] == ""
        # A relative recorded location is relative to some base folder; when the actual location
        # ends with the recorded one, that base is known and other relative paths hang off it too.
        self._base: str | None = None
        act_root, act_parts = _key(self._actual)
        rec_parts = self._recorded_key[1]
        if (
            self._recorded_relative
            and rec_parts
            and act_parts[len(act_parts) - len(rec_parts) :] == rec_parts
        ):
            self._base = _unkey(act_root, act_parts[: len(act_parts) - len(rec_parts)])
        # Fast path for the common case: a path spelled canonically under the recorded location.
        self._fast_from = "" if self._recorded == "." else self._recorded.rstrip("/") + "/"
        self._fast_to = "" if self._actual == "." else self._actual.rstrip("/") + "/"
        self._fast_key = storage_key(self._fast_to) + "/" if self._fast_to else ""
        # PyIceberg and Java record a local table's paths as `file:` URIs under a location spelled
        # the same way (`file:///w/t/data/...`): those take the fast path too, by the location as
        # written (when it is a spelling of the canonical absolute one; ~15 us a path otherwise).
        alias = recorded_location.rstrip("/") + "/"
        canonical = self._fast_from.startswith("/") and normalize_path(alias + "x") == self._fast_from + "x"
        self._fast_alias = alias if canonical and alias != self._fast_from else ""
        names = [base_name(self._recorded), base_name(self._actual)]
        self._names = tuple(n for i, n in enumerate(names) if n not in ("", ".", "..") and n not in names[:i])

    @property
    def recorded_location(self) -> str:
        """The table location as the metadata records it (canonical form)."""
        return self._recorded

    @property
    def actual_location(self) -> str:
        """The folder the table is in now (canonical form)."""
        return self._actual

    @property
    def moved(self) -> bool:
        """True when the recorded and the actual location differ."""
        return self._recorded_key != _key(self._actual)

    def _under(self, rest: tuple[str, ...]) -> str:
        return join_path(self._actual, "/".join(rest))

    def resolve(self, path: str) -> str:
        """The path where the file recorded as `path` is now (canonical form)."""
        return self._resolve(path, use_exists=True)

    def match_key(self, path: str) -> str:
        """The identity of the file recorded as `path`: equal keys name the same file.

        Both sides of every delete-to-data-file match go through here: the path is resolved onto
        the actual table folder (so `hdfs://nn:8020/w/t/f`, `/w/t/f` and `file:///w/t/f` in a table
        recorded at `/w/t` or `hdfs://nn:8020/w/t` are one file), then scheme aliases are folded.
        A plain absolute path outside the location is qualified with the location's storage root
        (the default file system). The file system is never consulted, so a key computed from the
        same recorded and actual locations is the same in every process.
        """
        rest = self._fast_rest(path)
        if rest is not None and self._fast_key:
            return self._fast_key + rest
        resolved = self._resolve(path, use_exists=False)
        root = self._recorded_key[0]
        if resolved.startswith("/") and "://" in root and not self._under_actual(resolved):
            resolved = root + resolved
        return storage_key(resolved)

    def _fast_rest(self, path: str) -> str | None:
        """The part after the recorded location of a path spelled canonically under it (the common
        case, answered without normalising), else None."""
        if self._fast_from and path.startswith(self._fast_from):
            rest = path[len(self._fast_from) :]
        elif self._fast_alias and path.startswith(self._fast_alias):
            rest = path[len(self._fast_alias) :]
        else:
            return None
        if rest and "//" not in f"/{rest}/" and "/./" not in f"/{rest}/":
            return rest
        return None

    def _under_actual(self, path: str) -> bool:
        act_root, act_parts = _key(self._actual)
        root, parts = _key(path)
        return root == act_root and parts[: len(act_parts)] == act_parts

    def _beside(self, root: str, parts: tuple[str, ...]) -> str | None:
        """A path outside the recorded location but in the same storage (`write.data.path`, object
        storage prefixes, several data locations) on a table moved together with its data folders.

        Below the deepest folder the path shares with the recorded location, the location goes
        down k more components; when the actual location ends with those same k names, the table
        tree moved as a whole and the shared folder is the actual location's k-th ancestor."""
        # Only for storage this machine reads through the table folder (s3://, hdfs://, ...): a
        # local absolute path outside the location may well still be where it was (`local_beside`
        # offers the same mapping for local paths, which `Table.resolve` takes only when the path
        # as recorded is absent and the mapped one exists).
        if "://" not in root:
            return None
        return self._beside_mapping(root, parts)

    def _beside_mapping(self, root: str, parts: tuple[str, ...]) -> str | None:
        rec_root, rec_parts = self._recorded_key
        if not self.moved or self._recorded_relative or not _same_storage(root, rec_root):
            return None
        shared = 0
        while shared < min(len(parts), len(rec_parts)) and parts[shared] == rec_parts[shared]:
            shared += 1
        below = rec_parts[shared:]
        act_root, act_parts = _key(self._actual)
        if not below or len(act_parts) < len(below) or act_parts[len(act_parts) - len(below) :] != below:
            return None
        return _unkey(act_root, act_parts[: len(act_parts) - len(below)] + parts[shared:])

    def local_beside(self, path: str) -> str | None:
        """For a local absolute path outside the recorded location of a moved table: where it is when
        its folder moved along with the table (rule 4's mapping, e.g. a `write.data.path` or the
        `_data`, `_data01` folders beside the table), else None. One exact candidate, never a search:
        the caller takes it only when the path as recorded does not exist and the candidate does."""
        if self._fast_rest(path) is not None:
            return None
        norm = normalize_path(path)
        root, parts = _key(norm)
        if root not in ("/", "file://") or (
            _same_storage(root, self._recorded_key[0]) and self._under_recorded(parts)
        ):
            return None
        mapped = self._beside_mapping("/" if root == "file://" else root, parts)
        return mapped if mapped is not None and mapped != norm else None

    def _under_recorded(self, parts: tuple[str, ...]) -> bool:
        rec_parts = self._recorded_key[1]
        return parts[: len(rec_parts)] == rec_parts

    def _resolve(self, path: str, *, use_exists: bool) -> str:
        rest = self._fast_rest(path)
        if rest is not None:
            return self._fast_to + rest
        norm = normalize_path(path)
        root, parts = _key(norm)
        rec_root, rec_parts = self._recorded_key
        # 1. Under the recorded location (a plain absolute path on a table in `scheme://authority`
        #    storage, or the reverse, counts as the same storage).
        if _same_storage(root, rec_root) and parts[: len(rec_parts)] == rec_parts:
            return self._under(parts[len(rec_parts) :])
        # 2. A relative recorded location found inside the path.
        if self._recorded_relative:
            end = _find_run(parts, rec_parts)
            if end is not None:
                return self._under(parts[end:])
        if root != "":
            return self._beside(root, parts) or norm  # 4. beside the location, else elsewhere
        # 3. A relative path the rules above do not explain.
        candidates: list[str] = []
        if self._base is not None:
            candidates.append(join_path(self._base, "/".join(parts)))
        for name in self._names:
            end = _find_run(parts, (name,))
            if end is not None:
                candidates.append(self._under(parts[end:]))
                break
        joined = self._under(parts)
        candidates.append(joined)
        if self._exists is not None and use_exists:
            for candidate in (norm, *candidates):
                if self._exists(candidate):
                    return candidate
        return candidates[0]
