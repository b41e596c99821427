"""The schema a Parquet footer declares, read from its Thrift bytes (pure).

Planning asks of every data file whether its columns carry Iceberg field ids, and which top-level
names and field ids it has (`read.parquet_columns.parquet_columns`). That is a few fields of the footer's
`FileMetaData.schema` (field 2: a depth-first list of `SchemaElement`s: name 4, num_children 5,
field_id 9; parquet-format's parquet.thrift) and its `num_rows` (field 3), in Thrift's compact
protocol. Decoding them here spares a
fresh process pyarrow.parquet (~5 MB of its peak) on the path of a plain scan.

Reading stops once the schema and the row count are read (walking the row groups' metadata in
Python cost ~0.3 ms per footer of a 40-row-group file, 10x pyarrow); the schema list must form
exactly one tree. Anything this reader cannot decode or does not expect returns None: the caller
then asks pyarrow, whose verdict (values, or the error naming the damage) stands. Damage after
the schema (row groups, statistics, key-value metadata) is DuckDB's to judge when it reads the
file: seeded byte flips there gave DuckDB's error naming the file, or the undamaged rows.
"""

from __future__ import annotations

from dataclasses import dataclass

# Thrift compact protocol type codes
_BOOL_TRUE, _BOOL_FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY = 1, 2, 3, 4, 5, 6, 7, 8
_LIST, _SET, _MAP, _STRUCT = 9, 10, 11, 12
_MAX_DEPTH = 64  # deeper nesting than any real footer holds is treated as damage


@dataclass(frozen=True, slots=True)
class SchemaNode:
    """One `SchemaElement` of the footer's schema tree: its name, field id (None: not set, or
    negative, as Parquet readers take it) and children (empty for a primitive column)."""

    name: str
    field_id: int | None
    children: tuple[SchemaNode, ...]

    def field_ids(self) -> list[int]:
        """The field ids of every node below this one (nested ones too)."""
        out: list[int] = []
        stack = list(self.children)
        while stack:
            node = stack.pop()
            if node.field_id is not None:
                out.append(node.field_id)
            stack.extend(node.children)
        return out


@dataclass(frozen=True, slots=True)
class FooterSchema:
    """What a footer says about a file: its schema tree (the root's children are the top-level
    columns) and its row count (`FileMetaData.num_rows`)."""

    root: SchemaNode
    num_rows: int


class _Damaged(Exception):
    """The bytes are not what this reader expects (the caller falls back to pyarrow)."""


class _Reader:
    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes, start: int, end: int) -> None:
        self.data, self.pos, self.end = data, start, end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise _Damaged
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = acc = 0
        while True:
            b = self.byte()
            acc |= (b & 0x7F) << shift
            if not b & 0x80:
                return acc
            shift += 7
            if shift > 63:
                raise _Damaged

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def binary(self) -> bytes:
        n = self.varint()
        if self.pos + n > self.end:
            raise _Damaged
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return bytes(out)

    def field(self, last: int) -> tuple[int, int]:
        """(field id, type) of the next field of a struct; type 0 at the struct's end."""
        b = self.byte()
        kind = b & 0x0F
        if kind == 0:
            return 0, 0
        delta = b >> 4
        return (last + delta if delta else self.zigzag()), kind

    def list_header(self) -> tuple[int, int]:
        b = self.byte()
        size = b >> 4
        if size == 15:
            size = self.varint()
        return size, b & 0x0F

    def skip(self, kind: int, depth: int = 0) -> None:
        if depth > _MAX_DEPTH:
            raise _Damaged
        if kind in (_BOOL_TRUE, _BOOL_FALSE):
            return
        if kind == _BYTE:
            self.byte()
        elif kind in (_I16, _I32, _I64):
            self.varint()
        elif kind == _DOUBLE:
            if self.pos + 8 > self.end:
                raise _Damaged
            self.pos += 8
        elif kind == _BINARY:
            self.binary()
        elif kind in (_LIST, _SET):
            size, element = self.list_header()
            for _ in range(size):
                if element in (_BOOL_TRUE, _BOOL_FALSE):
                    self.byte()  # booleans in containers take a byte each
                else:
                    self.skip(element, depth + 1)
        elif kind == _MAP:
            size = self.varint()
            if size:
                kinds = self.byte()
                for _ in range(size):
                    for k in (kinds >> 4, kinds & 0x0F):
                        if k in (_BOOL_TRUE, _BOOL_FALSE):
                            self.byte()
                        else:
                            self.skip(k, depth + 1)
        elif kind == _STRUCT:
            last = 0
            while True:
                fid, k = self.field(last)
                if k == 0:
                    return
                self.skip(k, depth + 1)
                last = fid
        else:
            raise _Damaged


def _element(r: _Reader) -> tuple[str, int | None, int | None, bool]:
    """(name, field id, num_children, has a physical type) of one SchemaElement."""
    name: bytes | None = None
    field_id: int | None = None
    children: int | None = None
    typed = False
    last = 0
    while True:
        fid, kind = r.field(last)
        if kind == 0:
            break
        if fid == 4 and kind == _BINARY:
            name = r.binary()
        elif fid == 5 and kind == _I32:
            children = r.zigzag()
        elif fid == 9 and kind == _I32:
            field_id = r.zigzag()
        elif fid in (4, 5, 9):
            raise _Damaged  # a known field of another type
        else:
            if fid == 1:
                typed = True
            r.skip(kind, 1)
        last = fid
    if name is None or (children is not None and children < 0):
        raise _Damaged
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        raise _Damaged from None
    return text, (field_id if field_id is not None and field_id >= 0 else None), children, typed


def footer_schema(footer: bytes) -> FooterSchema | None:
    """The schema tree and row count of a footer framed as `io.fileio.parquet_footer` gives it
    (`PAR1`, FileMetaData, length, `PAR1`); None when this reader cannot decode it exactly."""
    if len(footer) < 12 or footer[:4] != b"PAR1" or footer[-4:] != b"PAR1":
        return None
    r = _Reader(footer, 4, len(footer) - 8)
    elements: list[tuple[str, int | None, int | None, bool]] | None = None
    num_rows: int | None = None
    try:
        last = 0
        while True:
            fid, kind = r.field(last)
            if kind == 0:
                break
            if fid == 2:
                if kind != _LIST:
                    return None
                size, element = r.list_header()
                if element != _STRUCT:
                    return None
                elements = [_element(r) for _ in range(size)]
            elif fid == 3:
                if kind != _I64:
                    return None
                num_rows = r.zigzag()
            else:
                r.skip(kind, 1)
            last = fid
            if elements is not None and num_rows is not None:
                break  # all this reader needs (see the module docstring)
        if elements is None or not elements or num_rows is None or num_rows < 0:
            return None
        root, used = _tree(elements, 0, 0)
    except (_Damaged, RecursionError):
        return None
    return FooterSchema(root, num_rows) if used == len(elements) else None


def _tree(elements: list[tuple[str, int | None, int | None, bool]], at: int, depth: int) -> tuple[SchemaNode, int]:
    """The node at `elements[at]` with its subtree, and the index after it."""
    if at >= len(elements) or depth > _MAX_DEPTH:
        raise _Damaged
    name, field_id, count, typed = elements[at]
    if (count is None and not typed) or (typed and count):
        raise _Damaged  # neither a group nor a primitive column, or both
    children = []
    nxt = at + 1
    for _ in range(count or 0):
        child, nxt = _tree(elements, nxt, depth + 1)
        children.append(child)
    return SchemaNode(name, field_id, tuple(children)), nxt
