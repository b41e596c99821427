"""Every query block of EXPECTED_RESULTS_FROM_DUCKDB_TESTS.json, run on iceduck.

The blocks are DuckDB's own iceberg extension tests (the SQL as that extension runs it, and the rows
it must return). Each block is translated to iceduck's functions:

- `ICEBERG_SCAN(path, k=v, ...)` keeps its name and parameters (`snapshot_from_id`,
  `snapshot_from_timestamp`, `allow_moved_paths`, `version_name_format`, ...), written `k := v`;
  `version=3.1` becomes `version := '3.1'`;
- the extension's virtual column `filename` becomes `_file` (with `metadata_columns := true`);
- `SET iceberg_unsafe_skip_puffin_verification = true` becomes `allow_bare_deletion_vectors := true`;
- a query over one `iceberg_scan` with a WHERE clause also passes the condition as `filter :=`, so
  iceduck prunes with it as the extension does (`generated_bounds` has no data files at all: only
  pruning by column bounds can answer it);
- `{WORKING_DIRECTORY}`, `__WORKING_DIRECTORY__` and relative `data/persistent/...` paths point at the
  corpus folder;
- the blocks of the extension's logging test (`CALL enable_logging('Iceberg')`) run through
  `Lake.sql` as written, settings included: its front door knows the 'Iceberg' log type and prunes
  with the natural WHERE (no `filter :=`); a block reading the logs first runs the query of the
  block before it in the upstream file, which wrote them.

A block that needs a feature iceduck does not have would be skipped with a reason naming it (`Skip`);
none is. Results are compared as text the way sqllogictest prints them (DuckDB casts every value to
VARCHAR; NULL as `NULL`), as multisets.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import duckdb
import pytest

from iceduck.lake import Lake
from tests.conftest import conformance_dir
from tests.support.peer import Peer

_CORPUS = conformance_dir()
_FOLDER = _CORPUS / "duckdb-iceberg" if _CORPUS is not None else None
_BLOCKS: list[dict[str, Any]] = (
    json.loads((_FOLDER / "EXPECTED_RESULTS_FROM_DUCKDB_TESTS.json").read_text())
    if _FOLDER is not None
    else []
)

# Blocks reading the 'Iceberg' log an earlier block's query wrote (block -> that block).
_READS_LOGS_OF = {84: 83}
# The extension's metadata functions iceduck offers with the extension's columns
# (iceduck/duckdb/extension.py); their `name=value` arguments become `name := value`.
_METADATA_FUNCTIONS = ("iceberg_metadata", "iceberg_partition_stats", "iceberg_column_stats")
# Blocks upstream runs before loading the extension ("this will fail"): they check that plain
# DuckDB has no such function, so they run on a connection without iceduck.
_BEFORE_LOAD = {41, 47, 63}
# Blocks where the extension refuses a table iceduck reads on purpose: a folder without a version
# hint (the extension wants a setting to guess; iceduck reads the newest version) and gzip
# metadata without `metadata_compression_codec` (iceduck recognises the file names). iceduck must
# read them as the reference peer does once told how (the setting, or the parameter).
_DELIBERATE = {
    52: ("", "METADATA_COMPRESSION_CODEC='gzip', "),
    56: ("SET unsafe_enable_version_guessing = true", ""),
}

# Settings that only change logging, or that iceduck does not need (it always guesses a folder's
# newest metadata file when there is no version hint).
_HARMLESS_SETTINGS = (
    "enable_logging",
    "truncate_duckdb_logs",
    "logging_level",
    "unsafe_enable_version_guessing",
)
_BARE_DV_SETTING = "iceberg_unsafe_skip_puffin_verification"

# Blocks reading tables the upstream test file creates first: the answers computed with the
# row-group pruner off (the block's first setting), as upstream does.
_ORACLES = {
    "oracle_desc": "SELECT id FROM iceberg_scan('{table}') ORDER BY id DESC LIMIT 5",
    "oracle_asc": "SELECT id FROM iceberg_scan('{table}') ORDER BY id ASC LIMIT 5",
}
# Blocks added by hand: the upstream test reads the table through a view; the SQL is given in words.
_BY_HAND = {
    130: "SELECT * FROM {view} ORDER BY id ASC",
    131: "SELECT * FROM {view} WHERE value IS NULL ORDER BY id",
    132: "SELECT * FROM {view} WHERE value IS NOT NULL ORDER BY id",
    133: "SELECT * FROM {view} ORDER BY id",
}
_BY_HAND_TABLE = {
    130: "is_null_is_not_null",
    131: "is_null_is_not_null",
    132: "is_null_is_not_null",
    133: "expression_filter",
}

_KEPT = {
    "version",
    "version_name_format",
    "metadata_compression_codec",
    "snapshot_from_id",
    "snapshot_from_timestamp",
    "allow_moved_paths",
}


class Skip(Exception):
    """The block needs a feature iceduck does not have (the message names it)."""


def _split_args(text: str) -> list[str]:
    parts, depth, quote, current = [], 0, False, ""
    for ch in text:
        if ch == "'" and depth >= 0:
            quote = not quote
        if not quote:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(current.strip())
                current = ""
                continue
        current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def _translate_call(args: list[str], extra: list[str]) -> str:
    out = [args[0]]
    for arg in args[1:]:
        m = re.match(r"(?is)^\s*(\w+)\s*:?=\s*(.+)$", arg)
        if m is None:
            raise Skip(f"positional argument {arg!r} of the extension's iceberg_scan")
        name, value = m.group(1).lower(), m.group(2).strip()
        if value.startswith('"') and value.endswith('"'):
            value = "'" + value[1:-1] + "'"
        if name == "version" and not value.startswith("'"):
            value = f"'{value}'"
        if name in _KEPT:
            out.append(f"{name} := {value}")
        else:
            raise Skip(f"the extension's iceberg_scan parameter {name}")
    return "iceberg_scan(" + ", ".join(out + extra) + ")"


def translate(block: dict[str, Any], *, natural: bool = False) -> tuple[list[str], str]:
    """(settings to run first, the query) for iceduck; raises Skip for extension-only features.
    `natural`: the query runs through the front door, whose WHERE prunes without `filter :=`."""
    assert _FOLDER is not None
    sql = block["sql"].strip().rstrip(";")
    extra: list[str] = []
    settings: list[str] = []
    for s in block.get("settings_before", []):
        if any(h in s.lower() for h in _HARMLESS_SETTINGS):
            continue
        if _BARE_DV_SETTING in s.lower():
            extra.append("allow_bare_deletion_vectors := true")
            continue
        settings.append(s)
    sql = sql.replace("{WORKING_DIRECTORY}", str(_FOLDER)).replace("__WORKING_DIRECTORY__", str(_FOLDER))
    sql = re.sub(r"'data/persistent/", f"'{_FOLDER}/data/persistent/", sql)
    if re.search(r"\bfilename\b", sql):
        sql = re.sub(r"\bfilename\b", "_file", sql)
        extra.append("metadata_columns := true")
    sql = _translate_metadata_calls(sql)
    out, pos = "", 0
    for m in re.finditer(r"(?i)\biceberg_scan\s*\(", sql):
        if m.start() < pos:
            continue
        depth, i = 1, m.end()
        quote = False
        while depth:
            ch = sql[i]
            if ch == "'":
                quote = not quote
            elif not quote and ch == "(":
                depth += 1
            elif not quote and ch == ")":
                depth -= 1
            i += 1
        out += sql[pos : m.start()] + _translate_call(_split_args(sql[m.end() : i - 1]), extra)
        pos = i
    out += sql[pos:]
    return settings, out if natural else _with_filter(out)


def _calls(sql: str, name: str) -> list[tuple[int, int, int]]:
    """(start, arguments start, end) of every call of `name` in `sql`."""
    found = []
    for m in re.finditer(rf"(?i)\b{name}\s*\(", sql):
        depth, i, quote = 1, m.end(), False
        while depth:
            ch = sql[i]
            if ch == "'":
                quote = not quote
            elif not quote and ch == "(":
                depth += 1
            elif not quote and ch == ")":
                depth -= 1
            i += 1
        found.append((m.start(), m.end(), i))
    return found


def _translate_metadata_calls(sql: str) -> str:
    """The extension's `name=value` arguments of its metadata functions as `name := value`."""
    for fn in _METADATA_FUNCTIONS:
        for start, args_start, end in reversed(_calls(sql, fn)):
            args = _split_args(sql[args_start : end - 1])
            out = [args[0]]
            for arg in args[1:]:
                m = re.match(r"(?is)^\s*(\w+)\s*:?=\s*(.+)$", arg)
                if m is None:
                    raise Skip(f"positional argument {arg!r} of the extension's {fn}")
                value = m.group(2).strip()
                if value.startswith('"') and value.endswith('"'):
                    value = "'" + value[1:-1] + "'"
                out.append(f"{m.group(1).lower()} := {value}")
            call = f"{fn}(" + ", ".join(out) + ")"
            if fn == "iceberg_column_stats" and re.match(r"(?is)^\s*select\s+\*\s+from\s*$", sql[:start]):
                # iceduck adds field_id and the distinct count after the extension's columns
                sql = (
                    "SELECT * EXCLUDE (field_id, distinct_count, distinct_count_snapshot_id) FROM " + call + sql[end:]
                )
            else:
                sql = sql[:start] + call + sql[end:]
    return sql


_WHERE = re.compile(
    r"(?is)^(?P<head>.*?\bfrom\s+iceberg_scan\((?P<args>.*)\))\s+where\s+(?P<cond>.*?)"
    r"(?P<tail>\s+(?:order\s+by|group\s+by|limit)\b.*)?$"
)


def _with_filter(sql: str) -> str:
    """`... FROM iceberg_scan(args) WHERE c ...` also passing `filter := 'c'` to iceberg_scan."""
    if sql.lower().count("iceberg_scan(") != 1 or re.search(r"(?i)\bjoin\b", sql):
        return sql
    m = _WHERE.match(sql)
    if m is None:
        return sql
    cond = m.group("cond")
    quoted = "'" + cond.replace("'", "''") + "'"
    head = m.group("head")[:-1] + f", filter := {quoted})"
    return f"{head} WHERE {cond}{m.group('tail') or ''}"


def _text(value: Any) -> str:
    if value is None:
        return "NULL"
    if value == "":
        return "(empty)"
    # DuckDB 2.0 quotes BLOB values inside nested values ('\\x01'); DuckDB 1.5 printed \x01
    return re.sub(r"'((?:\\\\x[0-9A-Fa-f]{2})+)'", lambda m: m.group(1).replace("\\\\", "\\"), str(value))


def _as_text(con: duckdb.DuckDBPyConnection | Lake, sql: str) -> list[str]:
    rel = con.sql(sql)
    assert rel is not None
    names = [f"c{i}" for i in range(len(rel.columns))]
    casts = ", ".join(f"CAST({n} AS VARCHAR)" for n in names)
    text = con.sql(f"SELECT {casts} FROM (SELECT * FROM ({sql})) AS q({', '.join(names)})")
    assert text is not None
    return ["\t".join(_text(v) for v in row) for row in text.fetchall()]


def _block_id(i: int) -> str:
    b = _BLOCKS[i]
    return f"{i}-{Path(b['file']).stem}"


@pytest.mark.parametrize("index", range(len(_BLOCKS)), ids=_block_id)
def test_expected_results_block(
    conformance: Path, con: duckdb.DuckDBPyConnection, index: int, request: pytest.FixtureRequest
) -> None:
    block = _BLOCKS[index]
    if any("enable_logging('iceberg')" in s.lower() for s in block["settings_before"]):
        _compare(block, _logged_block(request.getfixturevalue("lake"), index))
        return
    if index in _DELIBERATE:
        _read_as_the_peer_does_when_told(con, request.getfixturevalue("peer"), block, *_DELIBERATE[index])
        return
    if index in _BEFORE_LOAD:
        plain = duckdb.connect(
            config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
        )
        with pytest.raises(duckdb.Error, match="iceberg"):
            plain.sql(block["sql"].replace("{WORKING_DIRECTORY}", str(_FOLDER))).fetchall()
        plain.close()
        return
    if index in _BY_HAND:
        table = _FOLDER / "data" / "persistent" / _BY_HAND_TABLE[index]  # type: ignore[operator]
        con.execute(f"CREATE VIEW v AS SELECT * FROM iceberg_scan('{table}')")
        settings, sql = [], _BY_HAND[index].format(view="v")
    else:
        try:
            settings, sql = translate(block)
        except Skip as reason:
            pytest.skip(str(reason))
    if "oracle_" in sql:
        table = _FOLDER / "data" / "persistent" / "is_null_is_not_null"  # type: ignore[operator]
        con.execute(settings.pop(0))
        for name, query in _ORACLES.items():
            con.execute(f"CREATE TABLE {name} AS {query.format(table=table)}")
    for s in settings:
        con.execute(s)
    if block["kind"] == "error":
        with pytest.raises(duckdb.Error) as failure:
            con.sql(sql).fetchall()
        if "legacy_bare_deletion_vector" in sql:  # refused with iceduck's own wording
            assert "bare deletion-vector" in str(failure.value)
        if "iceberg_table_properties" in sql:  # the extension's own refusal of a path
            assert re.search(block["expected_error"].removeprefix("<REGEX>:"), str(failure.value))
        return
    _compare(block, sorted(_as_text(con, sql)), sql, index)


def _compare(block: dict[str, Any], got: list[str], sql: str = "", index: int = -1) -> None:
    got = sorted(got)
    if index == 100:  # the extension prints this identity-partition BOOLEAN column as 0/1
        got = sorted(
            re.sub(r"^(true|false)\t", lambda m: "1\t" if m.group(1) == "true" else "0\t", r) for r in got
        )
    expected = sorted(block["expected_rows"])
    if "iceberg_partition_stats" in sql:  # upstream prints these BOOLEAN columns as 0/1 in some blocks
        got, expected = _booleans_as_digits(got), _booleans_as_digits(expected)
    if "partition_double" in sql:  # stores FLOAT values: compare with a tolerance (corpus README)
        got, expected = _rounded(got), _rounded(expected)
    assert got == expected, f"SQL: {sql}"


def _logged_block(lake: Lake, index: int) -> list[str]:
    """The rows of a block of the extension's logging test, run as written through `Lake.sql`."""
    block = _BLOCKS[index]
    for setting in block["settings_before"]:
        lake.sql(setting)
    if index in _READS_LOGS_OF:
        writer = _BLOCKS[_READS_LOGS_OF[index]]
        _, earlier = translate(writer, natural=True)
        assert sorted(_as_text(lake, earlier)) == sorted(writer["expected_rows"])  # runs it once
    _, sql = translate(block, natural=True)
    return _as_text(lake, sql)


def _read_as_the_peer_does_when_told(
    con: duckdb.DuckDBPyConnection, peer: Peer, block: dict[str, Any], setting: str, parameter: str
) -> None:
    """A block the extension refuses by default: iceduck reads it, with the rows the peer reads once
    given `setting` or `parameter` (the extension's own way to accept the table)."""
    assert block["kind"] == "error"
    sql = block["sql"].strip().rstrip(";").replace("{WORKING_DIRECTORY}", str(_FOLDER))
    # the columns DuckDB 1.5.5's iceberg_metadata shares with today's (its status/content differ)
    sql = sql.replace(
        "SELECT *", "SELECT manifest_path, manifest_content, file_path, file_format, record_count"
    )
    peer_sql = sql.replace("ALLOW_MOVED_PATHS=TRUE", parameter + "ALLOW_MOVED_PATHS=TRUE")
    try:
        if setting:
            peer.execute(setting)
        expected = sorted(peer.query(peer_sql))
    finally:
        peer.reset()
    got = sorted(con.sql(_translate_metadata_calls(sql)).fetchall())
    assert got == expected and len(got) > 0


def _rounded(rows: list[str]) -> list[str]:
    def cell(text: str) -> str:
        try:
            return f"{float(text):.6g}" if "." in text else text
        except ValueError:
            return text

    return sorted("\t".join(cell(c) for c in row.split("\t")) for row in rows)


def _booleans_as_digits(rows: list[str]) -> list[str]:
    digits = {"true": "1", "false": "0"}
    return sorted("\t".join(digits.get(c, c) for c in row.split("\t")) for row in rows)
