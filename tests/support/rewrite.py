"""Re-encoding Iceberg files with one value changed, for tests of hostile inputs: Avro manifests and
manifest lists (fastavro: same schema, metadata and codec), Puffin footers (the JSON between the
magics), a table's current manifest files. Independent of iceduck's own codecs."""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro

PUFFIN_MAGIC = b"PFA1"


def avro_parts(data: bytes) -> tuple[Any, dict[str, str], str, list[dict[str, Any]]]:
    """(writer schema, user metadata, codec, records) of an Avro container file."""
    reader = fastavro.reader(io.BytesIO(data))
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    return reader.writer_schema, meta, reader.metadata.get("avro.codec", "null"), list(reader)


def avro_bytes(schema: Any, meta: dict[str, str], codec: str, records: list[dict[str, Any]]) -> bytes:
    """An Avro container file of `records` (the inverse of `avro_parts`)."""
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), records, metadata=meta, codec=codec)
    return out.getvalue()


def rewrite_avro(path: str | Path, edit: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Rewrite an Avro file in place with `edit` applied to every record."""
    schema, meta, codec, records = avro_parts(Path(path).read_bytes())
    Path(path).write_bytes(avro_bytes(schema, meta, codec, [edit(r) for r in records]))


def current_manifests(metadata_location: str, content: int | None = None) -> list[str]:
    """Paths of the manifests of the current snapshot (`content`: 0 data, 1 deletes, None both)."""
    md = json.loads(Path(metadata_location).read_text())
    snap = next(s for s in md["snapshots"] if s["snapshot-id"] == md["current-snapshot-id"])
    with open(snap["manifest-list"], "rb") as f:
        return [r["manifest_path"] for r in fastavro.reader(f) if content is None or r["content"] == content]


def puffin_footer(data: bytes) -> tuple[dict[str, Any], int]:
    """(footer JSON, offset of the JSON) of an uncompressed Puffin file."""
    size = struct.unpack("<i", data[-12:-8])[0]
    start = len(data) - 12 - size
    assert data[start - 4 : start] == PUFFIN_MAGIC and data[-4:] == PUFFIN_MAGIC
    return json.loads(data[start : start + size]), start


def rewrite_puffin_footer(path: str | Path, edit: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Rewrite the footer JSON of a Puffin file (flags kept: uncompressed footers only)."""
    data = Path(path).read_bytes()
    footer, start = puffin_footer(data)
    assert data[-8:-4] == b"\x00\x00\x00\x00", "compressed Puffin footers are not rewritten here"
    payload = json.dumps(edit(footer)).encode()
    Path(path).write_bytes(
        data[:start] + payload + struct.pack("<i", len(payload)) + data[-8:-4] + PUFFIN_MAGIC
    )
