"""Replays the findings of a fuzz report (`ICEDUCK_FUZZ_REPORT`) on freshly built tables and prints
how each is classified now: `python -m tests.reliability.fuzz_replay fuzz.json [outcome ...]`.

A release run's findings are the regression list of the next round: after a fix, this says which
of them now give the same rows or one clear error, without a 20-minute run. Mutations are rebuilt
from their descriptions (`byte 12 ^ 0x0f`, `truncated to 9 of 40 bytes`, a JSON or Avro field
path and value). The tables iceduck writes get new file names on every build, so their files are
matched by the shape of the name (hex runs and numbers masked) and by size; a mutation whose file
has no such twin is reported as not replayed.
"""

from __future__ import annotations

import ast
import gzip
import json
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from tests.reliability.test_fuzz import FuzzTable, Worker, _replace, build_tables, classify
from tests.support.rewrite import avro_bytes, avro_parts, puffin_footer

_SHAPE = re.compile(r"[0-9a-f]{8,}(?:-[0-9a-f]{4,})*|\d{6,}")


def _shape(rel: str) -> str:
    return _SHAPE.sub("#", rel)


def build(root: Path) -> tuple[dict[str, FuzzTable], Worker]:
    """The fuzzer's tables by name, built as its fixture builds them."""
    found, worker = build_tables(root)
    return {t.name: t for t in found}, worker


def find_file(table: FuzzTable, rel: str, size_hint: int | None = None) -> Path | None:
    exact = table.folder / rel
    if exact.is_file():
        return exact
    twins = [p for p in table.files if _shape(str(p.relative_to(table.folder))) == _shape(rel)]
    return twins[0] if len(twins) == 1 else (twins[0] if twins and size_hint is None else None)


def mutate(data: bytes, family: str, description: str) -> bytes | None:
    """The bytes the fuzzer wrote for this mutation, or None when it cannot be rebuilt."""
    if m := re.fullmatch(r"byte (\d+) \^ (0x[0-9a-f]+)", description):
        at, xor = int(m.group(1)), int(m.group(2), 16)
        return data[:at] + bytes([data[at] ^ xor]) + data[at + 1 :] if at < len(data) else None
    if m := re.fullmatch(r"truncated to (\d+) of (\d+) bytes", description):
        return data[: int(m.group(1))] if int(m.group(2)) == len(data) else None
    if m := re.fullmatch(r"hint (.*)", description, re.S):
        return str(ast.literal_eval(m.group(1))).encode()
    if family == "avro_field":
        m = re.fullmatch(r"record (\d+) (\(.*?\)): (.*) -> (.*)", description, re.S)
        if m is None:
            return None
        schema, meta, codec, records = avro_parts(data)
        i, path, new = int(m.group(1)), ast.literal_eval(m.group(2)), ast.literal_eval(m.group(4))
        _replace(records[i], path, new)
        return bytes(avro_bytes(schema, meta, codec, records))
    if family in ("json_field", "gzip_field", "puffin_field"):
        raw = gzip.decompress(data) if family == "gzip_field" else data
        start = 0
        if family == "puffin_field":
            footer, start = puffin_footer(data)
            raw = json.dumps(footer).encode()
        new_json = _json_mutation(json.loads(raw), description)
        if new_json is None:
            return None
        if family == "gzip_field":
            return gzip.compress(new_json)
        if family == "puffin_field":
            return data[:start] + new_json + len(new_json).to_bytes(4, "little") + data[-8:]
        return new_json
    return None


def _json_mutation(doc: Any, description: str) -> bytes | None:
    if m := re.fullmatch(r"deep nesting at (\(.*\))", description):
        text = json.dumps(_replace(doc, ast.literal_eval(m.group(1)), "__DEEP__"))
        return text.replace('"__DEEP__"', "[" * 200_000 + "]" * 200_000).encode()
    if m := re.fullmatch(r"delete (\(.*\))", description):
        return json.dumps(_replace(doc, ast.literal_eval(m.group(1)), None, delete=True)).encode()
    if m := re.fullmatch(r"(\(.*?\)) = (.*)", description, re.S):
        return json.dumps(_replace(doc, ast.literal_eval(m.group(1)), ast.literal_eval(m.group(2)))).encode()
    return None


def main(argv: list[str]) -> None:
    report = json.loads(Path(argv[0]).read_text())
    wanted = set(argv[1:])
    findings = [f for f in report["findings"] if not wanted or f["outcome"] in wanted]
    now: Counter[tuple[str, str]] = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        tables, worker = build(Path(tmp))
        try:
            for f in findings:
                family, description = f["mutation"].split(": ", 1)
                table = tables.get(f["table"])
                path = find_file(table, f["file"]) if table is not None else None
                try:
                    new = mutate(path.read_bytes(), family, description) if path is not None else None
                except (IndexError, KeyError, TypeError, ValueError):  # a twin of another shape
                    new = None
                if table is None or path is None or new is None:
                    now[(f["outcome"], "not replayed")] += 1
                    continue
                original = path.read_bytes()
                path.write_bytes(new)
                try:
                    out = worker.scan(table)
                finally:
                    path.write_bytes(original)
                outcome = classify(table, path, family, description, original, out, new)
                now[(f["outcome"], outcome)] += 1
                if outcome not in ("same", "error", "page_flip", "parquet_footer_flip", "data_flip", "default_value"):
                    print(f"{f['outcome']} -> {outcome}: {f['table']} {f['file']} {f['mutation']}: {str(out)[:300]}")
        finally:
            worker.stop()
    for (before, after), n in sorted(now.items()):
        print(f"{n:6d}  {before} -> {after}")


if __name__ == "__main__":
    main(sys.argv[1:])
