"""Finding a table's current metadata file from a path, a folder or a catalog name.

`locate_table(arg)` accepts
- a metadata file: `.../metadata/v3.metadata.json`, `00002-<uuid>.metadata.json`,
  `v2.gz.metadata.json`, `00001-<uuid>.metadata.json.gz` (any existing file is taken as given);
- a table folder (or its `metadata/` folder): the version comes from `version=`, else from
  `metadata/version-hint.text`, else it is guessed (see `guess_metadata_file`);
- a name `ns.table` / `a.b.table` / `<catalog>.ns.table`, looked up in `catalog`.

Version strings, as DuckDB's iceberg extension accepts them: a number `N` names `vN.metadata.json`
or `N.metadata.json` (either also gzip: `.gz.metadata.json`, `.metadata.json.gz`) and, failing
those, the one `000N-<uuid>.metadata.json` whose leading number is N; any other text names
`<text>.metadata.json` (e.g. `00002-0e059d4b-...`), `v<text>.metadata.json` (`3.1` ->
`v3.1.metadata.json`) or, ending in `.metadata.json`, that file. `version_name_format` replaces
the default name patterns `v%s%s.metadata.json,%s%s.metadata.json` (first `%s`: version, second:
`.gz` or nothing); `metadata_compression_codec` `'gzip'` / `'none'` restricts the compression
(default: either). A `version-hint.text` is read the same way, then read forward as Java's Hadoop
tables do (`HadoopTableOperations.refresh`): while the next version (`N+1`, in either naming) exists,
it is taken, so a hint an engine left stale does not pin the table to an old version. An explicit
`version=` is taken as asked.

Deliberately more lenient than DuckDB 1.5.5 (checked against it): the hint's surrounding whitespace
is ignored (DuckDB fails on a trailing newline); a number also finds `000N-<uuid>` files; either
compression is tried unless one is asked for; a folder without a hint is guessed without an opt-in,
ordering version numbers numerically (DuckDB compares names as text, so `v9` beats `v10`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from iceduck.catalog.base import Catalog
from iceduck.errors import IcebergError, InvalidMetadataError, TableNotFoundError, ValidationError
from iceduck.io.fileio import FileIO
from iceduck.io.paths import (
    METADATA_FOLDER,
    base_name,
    join_path,
    normalize_path,
    parent_path,
    split_scheme,
    table_folder_of,
)
from iceduck.io.storage import absolute, default_io
from iceduck.spec.table_metadata import TableMetadata, read_table_metadata

VERSION_HINT_FILE = "version-hint.text"
DEFAULT_VERSION_NAME_FORMAT = "v%s%s.metadata.json,%s%s.metadata.json"
GUESS_VERSION = "?"

_PLAIN = ".metadata.json"
_GZ_INFIX = ".gz.metadata.json"
_GZ_TRAILER = ".metadata.json.gz"
_DOTTED_VERSION = re.compile(r"v?(\d+(?:\.\d+)*)")
_LEADING_NUMBER = re.compile(r"(\d+)-.+")


@dataclass(frozen=True, slots=True)
class TableLocation:
    """Where a table is: its current metadata file, its actual folder, its catalog name if any."""

    metadata_location: str
    table_folder: str
    name: str | None = None


def is_metadata_file_name(name: str) -> bool:
    """True for `*.metadata.json`, `*.gz.metadata.json` and `*.metadata.json.gz` names."""
    return name.endswith(_PLAIN) or name.endswith(_GZ_TRAILER)


def _stem(name: str) -> tuple[str, bool] | None:
    """(name without the metadata suffix, gzip?) for a metadata file name, else None."""
    if name.endswith(_GZ_TRAILER):
        return name[: -len(_GZ_TRAILER)], True
    if name.endswith(_GZ_INFIX):
        return name[: -len(_GZ_INFIX)], True
    if name.endswith(_PLAIN):
        return name[: -len(_PLAIN)], False
    return None


def metadata_version(name: str) -> tuple[int, ...] | None:
    """The version a metadata file name carries: `v7...` -> (7,), `v3.1...` -> (3, 1),
    `00004-<anything>...` -> (4,); None for names without one (`vfinal.metadata.json`)."""
    stem = _stem(base_name(name))
    if stem is None:
        return None
    m = _DOTTED_VERSION.fullmatch(stem[0])
    if m is not None:
        return tuple(int(p) for p in m.group(1).split("."))
    m = _LEADING_NUMBER.fullmatch(stem[0])
    return (int(m.group(1)),) if m is not None else None


# ---------------------------------------------------------------------------------------------
# name patterns


def _formats(version_name_format: str | None) -> tuple[tuple[str, str, str], ...]:
    """Each format split at its two `%s`; `ValidationError` unless every one has exactly two."""
    text = DEFAULT_VERSION_NAME_FORMAT if version_name_format is None else version_name_format
    out = []
    for fmt in text.split(","):
        parts = fmt.strip().split("%s")
        if len(parts) != 3:
            raise ValidationError(
                f"version_name_format {fmt.strip()!r} must contain '%s' exactly twice "
                f"(version, then compression suffix), found {len(parts) - 1}"
            )
        out.append((parts[0], parts[1], parts[2]))
    return tuple(out)


def _suffixes(codec: str | None) -> tuple[str, ...]:
    if codec is None:
        return ("", ".gz")
    if codec.lower() == "gzip":
        return (".gz",)
    if codec.lower() in ("", "none"):
        return ("",)
    raise ValidationError(f"unknown metadata_compression_codec {codec!r}: expected 'gzip' or 'none'")


def _candidate_names(version: str, version_name_format: str | None, codec: str | None) -> list[str]:
    """File names `version` may stand for, in the order they are tried."""
    if is_metadata_file_name(version):
        return [version]
    names: list[str] = []
    suffixes = _suffixes(codec)
    for head, mid, tail in _formats(version_name_format):
        for suffix in suffixes:
            names.append(f"{head}{version}{mid}{suffix}{tail}")
        if version_name_format is None and ".gz" in suffixes:
            names.append(f"{head}{version}{mid}{tail}.gz")  # `*.metadata.json.gz`
    return list(dict.fromkeys(names))


def _parse_listed(name: str, version_name_format: str | None, codec: str | None) -> str | None:
    """The version string a listed file name carries under the formats, or None if no match."""
    suffixes = _suffixes(codec)
    for head, mid, tail in _formats(version_name_format):
        for suffix in suffixes:
            pattern = re.escape(head) + "(.+?)" + re.escape(mid + suffix + tail)
            m = re.fullmatch(pattern, name)
            if m is not None:
                return m.group(1)
        if version_name_format is None and ".gz" in suffixes:
            m = re.fullmatch(re.escape(head) + "(.+?)" + re.escape(mid + tail + ".gz"), name)
            if m is not None:
                return m.group(1)
    return None


# ---------------------------------------------------------------------------------------------
# resolving a folder


def _listed_metadata(io: FileIO, metadata_dir: str) -> list[str]:
    """Names of the files directly inside `metadata_dir`."""
    return [base_name(f.path) for f in io.list_prefix(metadata_dir) if parent_path(f.path) == metadata_dir]


def _finalist(io: FileIO, path: str) -> TableMetadata:
    """A metadata file competing to be the newest, read in full: one that cannot be read is an
    error naming it, never a reason to take another (that would read the table at an older
    version without saying so)."""
    try:
        return read_table_metadata(io.read(path), path=path)
    except IcebergError as e:
        raise InvalidMetadataError(
            f"{e}; it competes as the newest metadata file of a folder without a version hint, so the "
            "current version cannot be told (pass version := to choose one)"
        ) from None


def guess_metadata_file(
    table_folder: str,
    *,
    io: FileIO | None = None,
    version_name_format: str | None = None,
    metadata_compression_codec: str | None = None,
) -> str:
    """The newest metadata file of a table without a version hint (a guess, as DuckDB's
    `unsafe_enable_version_guessing`): the highest version number in the file names; names
    without a number (`vfinal.metadata.json`) compete with the highest-numbered file(s) by their
    `last-updated-ms`, then version, then name, after dropping those another finalist's
    `metadata-log` names. Every finalist is read in full: a damaged one is an error naming it.
    `TableNotFoundError` if there is none."""
    io = io or default_io()
    folder = normalize_path(table_folder)
    metadata_dir = join_path(folder, METADATA_FOLDER)
    numbered: list[tuple[tuple[int, ...], str]] = []
    unnumbered: list[str] = []
    for name in _listed_metadata(io, metadata_dir):
        version = _parse_listed(name, version_name_format, metadata_compression_codec)
        if version is None:
            continue
        number = metadata_version(name)
        if number is None:
            unnumbered.append(name)
        else:
            numbered.append((number, name))
    if not numbered and not unnumbered:
        fmt = version_name_format or DEFAULT_VERSION_NAME_FORMAT
        raise TableNotFoundError(
            f"{table_folder}: not an Iceberg table folder: no {METADATA_FOLDER}/{VERSION_HINT_FILE} and no "
            f"metadata files matching '{fmt}' in {metadata_dir}"
        )
    top = max((n for n, _ in numbered), default=None)
    finalists = [name for n, name in numbered if n == top] + unnumbered
    if len(finalists) == 1:
        return join_path(metadata_dir, finalists[0])

    read = {name: _finalist(io, join_path(metadata_dir, name)) for name in finalists}
    # A file another finalist's metadata-log names is older than that one, whatever its clock says.
    logged = {base_name(e.metadata_file) for md in read.values() for e in md.metadata_log}
    newest = [name for name in finalists if name not in logged] or finalists

    def rank(name: str) -> tuple[int, tuple[int, ...], str]:
        return (read[name].last_updated_ms, metadata_version(name) or (-1,), name)

    return join_path(metadata_dir, max(newest, key=rank))


def _require_version(
    io: FileIO,
    table_folder: str,
    metadata_dir: str,
    version: str,
    named: str,
    version_name_format: str | None,
    codec: str | None,
) -> str:
    """The path of the file `version` names; `TableNotFoundError` listing the names tried, saying
    who `named` the version (the caller, the version hint)."""
    path, tried = _find_version(io, metadata_dir, version, version_name_format, codec)
    if path is None:
        raise TableNotFoundError(
            f"{table_folder}: {named} version '{version}', but no metadata file of it is in "
            f"{metadata_dir}: tried " + ", ".join(tried)
        )
    return path


def _find_version(
    io: FileIO,
    metadata_dir: str,
    version: str,
    version_name_format: str | None,
    codec: str | None,
) -> tuple[str | None, list[str]]:
    """(path of the file `version` names or None, the names tried)."""
    version = base_name(version) if "/" in version else version
    tried = _candidate_names(version, version_name_format, codec)
    for name in tried:
        path = join_path(metadata_dir, name)
        if io.exists(path):
            return path, tried
    if version.isdigit():
        # `N` may also name `0000N-<uuid>.metadata.json`, the naming most writers use.
        wanted = (int(version),)
        matches = sorted(
            name
            for name in _listed_metadata(io, metadata_dir)
            if _LEADING_NUMBER.fullmatch((_stem(name) or ("", False))[0])
            and metadata_version(name) == wanted
            and _parse_listed(name, version_name_format, codec) is not None
        )
        tried.append(f"{int(version):05d}-*{_PLAIN}")
        if len(matches) == 1:
            return join_path(metadata_dir, matches[0]), tried
        if len(matches) > 1:
            raise TableNotFoundError(
                f"{metadata_dir}: version '{version}' is ambiguous: several metadata files carry it: "
                + ", ".join(matches)
            )
    return None, tried


def _read_forward(
    io: FileIO, metadata_dir: str, path: str, version_name_format: str | None, codec: str | None
) -> str:
    """The newest of `path`, version N+1, N+2, ... while each next one exists (Java's Hadoop tables
    do the same: writers update the hint after the metadata file, and some never do)."""
    number = metadata_version(path)
    if number is None or len(number) != 1:
        return path  # `vfinal`, `v3.1`: no successor is defined
    version = number[0]
    while True:
        following, _ = _find_version(io, metadata_dir, str(version + 1), version_name_format, codec)
        if following is None:
            return path
        path, version = following, version + 1


def find_metadata_file(
    table_folder: str,
    *,
    version: str | int | None = None,
    io: FileIO | None = None,
    version_name_format: str | None = None,
    metadata_compression_codec: str | None = None,
) -> str:
    """The metadata file of the table in `table_folder` for `version` (see the module docstring):
    explicit version, else `metadata/version-hint.text`, else a guess. `TableNotFoundError` saying
    what was tried."""
    io = io or default_io()
    folder = normalize_path(table_folder)
    metadata_dir = join_path(folder, METADATA_FOLDER)
    requested = None if version is None else str(version).strip()
    if requested is not None and requested != GUESS_VERSION:
        if not requested:
            raise ValidationError(f"{table_folder}: empty version")
        return _require_version(
            io, table_folder, metadata_dir, requested, "the caller asked for", version_name_format, metadata_compression_codec
        )
    hint_path = join_path(metadata_dir, VERSION_HINT_FILE)
    if io.exists(hint_path):
        hint = io.read(hint_path).decode("utf-8", errors="replace").strip()
        if hint:
            path = _require_version(
                io,
                table_folder,
                metadata_dir,
                hint,
                f"{METADATA_FOLDER}/{VERSION_HINT_FILE} names",
                version_name_format,
                metadata_compression_codec,
            )
            return _read_forward(io, metadata_dir, path, version_name_format, metadata_compression_codec)
    return guess_metadata_file(
        folder,
        io=io,
        version_name_format=version_name_format,
        metadata_compression_codec=metadata_compression_codec,
    )


# ---------------------------------------------------------------------------------------------
# the entry point


def _looks_like_name(arg: str) -> bool:
    return (
        "." in arg
        and "/" not in arg
        and "\\" not in arg
        and split_scheme(arg)[0] is None
        and not (is_metadata_file_name(arg) or arg.endswith(".json"))
    )


# The DuckDB database iceduck attaches a catalog's tables as (`lake.ns.t`, see
# iceduck.duckdb.catalog_views.attach_catalog_views): a name written as in a query finds the table too.
DATABASE_ALIAS = "lake"


def _name_candidates(arg: str, catalog: Catalog) -> Iterable[tuple[str, str]]:
    parts = arg.split(".")
    if len(parts) >= 3 and parts[0] in (catalog.name, DATABASE_ALIAS):
        yield ".".join(parts[1:-1]), parts[-1]
    yield ".".join(parts[:-1]), parts[-1]


def _has_files(io: FileIO, folder: str) -> bool:
    return next(iter(io.list_prefix(folder)), None) is not None


def _locate_path(
    arg: str,
    version: str | int | None,
    io: FileIO,
    version_name_format: str | None,
    codec: str | None,
) -> TableLocation | None:
    """The table at path `arg`, or None if nothing exists there."""
    path = absolute(arg)
    if io.exists(path):
        if version is not None and str(version).strip() not in ("", GUESS_VERSION):
            raise ValidationError(
                f"{arg}: a version ({version!r}) only applies to a table folder, not a metadata file"
            )
        return TableLocation(path, table_folder_of(path))
    if not _has_files(io, path):
        return None
    folder = path
    if not _has_files(io, join_path(folder, METADATA_FOLDER)) and base_name(folder) == METADATA_FOLDER:
        folder = parent_path(folder)  # the `metadata/` folder itself was given
    if not _has_files(io, join_path(folder, METADATA_FOLDER)):
        raise TableNotFoundError(
            f"{arg}: not an Iceberg table folder: {join_path(folder, METADATA_FOLDER)} does not exist or is empty"
        )
    metadata = find_metadata_file(
        folder,
        version=version,
        io=io,
        version_name_format=version_name_format,
        metadata_compression_codec=codec,
    )
    return TableLocation(metadata, folder)


def locate_table(
    arg: str,
    *,
    version: str | int | None = None,
    catalog: Catalog | None = None,
    io: FileIO | None = None,
    version_name_format: str | None = None,
    metadata_compression_codec: str | None = None,
) -> TableLocation:
    """Find the table `arg` names (a metadata file, a table folder or a catalog name; see the
    module docstring). Local paths come back absolute and normalised; a catalog's metadata
    location comes back exactly as the catalog stores it (commit compares it verbatim).
    `TableNotFoundError` saying what was tried."""
    io = io or default_io()
    tried: list[str] = []
    if catalog is not None and _looks_like_name(arg):
        for namespace, name in _name_candidates(arg, catalog):
            try:
                metadata = catalog.load_table(namespace, name)
            except IcebergError as e:  # not found, no such namespace, invalid name: try the next reading
                tried.append(f"catalog '{catalog.name}': {e}")
                continue
            folder = table_folder_of(metadata)
            if version is not None and str(version).strip() not in ("", GUESS_VERSION):
                metadata = find_metadata_file(
                    folder,
                    version=version,
                    io=io,
                    version_name_format=version_name_format,
                    metadata_compression_codec=metadata_compression_codec,
                )
            return TableLocation(metadata, folder, f"{namespace}.{name}")
    found = _locate_path(arg, version, io, version_name_format, metadata_compression_codec)
    if found is not None:
        return found
    tried.append(f"path {absolute(arg)}: no such file or folder")
    if catalog is None and _looks_like_name(arg):
        tried.append("no catalog given to look the name up in")
    raise TableNotFoundError(f"{arg}: no Iceberg table found; tried " + "; ".join(tried))
