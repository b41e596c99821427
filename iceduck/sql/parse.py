"""Recognising the statements that can write Iceberg tables, and parsing them into values.

Two steps, so that a statement about a DuckDB table never depends on this parser:

* `target(tokens)` looks at the head of a statement only (`INSERT INTO <name>`, `ALTER TABLE
  <name>`, ...) and returns its kind and the name it is about, or None for every other statement.
* `parse(text, tokens)` parses the whole statement once the name is known to be an Iceberg table of
  the lake, and raises `SqlSyntaxError` naming what it cannot do (RETURNING, ON CONFLICT, ...).

Clauses that are SQL expressions or queries (WHERE, SET values, the SELECT of an INSERT) are kept as
the user's own text, sliced from the statement: DuckDB evaluates them.
"""

from __future__ import annotations

from dataclasses import dataclass

from iceduck.sql import clauses
from iceduck.sql.tokens import (
    IDENT,
    NUMBER,
    STRING,
    WORD,
    SqlSyntaxError,
    Token,
    closing,
    nesting,
    quote_name,
    tokenize,
)

# -- values ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Name:
    """A possibly qualified name as written (`lake.ns.t` -> ("lake", "ns", "t")), quotes removed."""

    parts: tuple[str, ...]

    def __str__(self) -> str:
        return ".".join(quote_name(p) for p in self.parts)


@dataclass(frozen=True, slots=True)
class Target:
    """The head of a statement: what it does and to which name."""

    kind: str  # one of the KIND_* constants
    name: Name


KIND_CREATE_SCHEMA = "create schema"
KIND_DROP_SCHEMA = "drop schema"
KIND_CREATE_TABLE = "create table"
KIND_DROP_TABLE = "drop table"
KIND_INSERT = "insert"
KIND_DELETE = "delete"
KIND_UPDATE = "update"
KIND_ALTER = "alter table"
KIND_TRUNCATE = "truncate"
KIND_ANALYZE = "analyze"
KIND_MERGE = "merge"  # MERGE INTO: run by iceduck.sql.merge
KIND_UNSUPPORTED = "unsupported"  # COPY ... FROM, WITH ... INSERT: refused for lake tables


@dataclass(frozen=True, slots=True)
class CreateSchema:
    name: Name
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropSchema:
    name: Name
    if_exists: bool = False
    cascade: bool = False


@dataclass(frozen=True, slots=True)
class CreateTable:
    """`CREATE TABLE` with a column list (`columns`: the text inside the parentheses) or `AS query`."""

    name: Name
    if_not_exists: bool = False
    columns: str | None = None
    query: str | None = None
    with_data: bool = True
    partition_by: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    or_replace: bool = False  # CREATE OR REPLACE: Iceberg's atomic replace of an existing table


@dataclass(frozen=True, slots=True)
class DropTable:
    name: Name
    if_exists: bool = False
    purge: bool = False


@dataclass(frozen=True, slots=True)
class Insert:
    """`INSERT INTO name [(columns)] query`; `query` None for DEFAULT VALUES."""

    name: Name
    columns: tuple[str, ...] | None = None
    by_name: bool = False
    query: str | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    name: Name
    where: str | None = None


@dataclass(frozen=True, slots=True)
class Update:
    name: Name
    assignments: tuple[tuple[str, str], ...]
    where: str | None = None


@dataclass(frozen=True, slots=True)
class Truncate:
    name: Name


# ALTER TABLE actions


@dataclass(frozen=True, slots=True)
class AddColumn:
    definition: str  # `name TYPE [NOT NULL] [DEFAULT v]`, as written
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropColumn:
    column: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class RenameColumn:
    column: str
    new_name: str


@dataclass(frozen=True, slots=True)
class AlterColumnType:
    column: str
    type: str  # as written


@dataclass(frozen=True, slots=True)
class SetPartitioning:
    terms: tuple[str, ...]  # empty: unpartitioned


@dataclass(frozen=True, slots=True)
class SetSortOrder:
    terms: tuple[str, ...]  # empty: unsorted


@dataclass(frozen=True, slots=True)
class SetProperties:
    options: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class ResetProperties:
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RenameTable:
    new_name: Name


@dataclass(frozen=True, slots=True)
class SetDefault:
    """`ALTER COLUMN c SET DEFAULT <value>` / `DROP DEFAULT` (`default` None): the v3 write-default."""

    column: str
    default: str | None  # the expression as written


@dataclass(frozen=True, slots=True)
class SetIdentifierFields:
    """`SET IDENTIFIER FIELDS a, b` / `DROP IDENTIFIER FIELDS [a, b]` (Spark's spelling): the key."""

    columns: tuple[str, ...]
    drop: bool = False  # drop these (all when `columns` is empty)


AlterAction = (
    AddColumn | DropColumn | RenameColumn | AlterColumnType | SetPartitioning | SetSortOrder | SetProperties
    | ResetProperties | RenameTable | SetDefault | SetIdentifierFields
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class AlterTable:
    name: Name
    action: AlterAction
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class Analyze:
    """`ANALYZE <table> [(columns)]`: distinct-count statistics (no columns: every one it can sketch)."""

    name: Name
    columns: tuple[str, ...] = ()


Statement = (
    CreateSchema
    | DropSchema
    | CreateTable
    | DropTable
    | Insert
    | Delete
    | Update
    | Truncate
    | AlterTable
    | Analyze
)


# -- the cursor over tokens -----------------------------------------------------------------------


class _Cursor:
    def __init__(self, text: str, tokens: list[Token]) -> None:
        self.text = text
        self.tokens = clauses.strip(tokens)  # a trailing `;` is not part of any clause
        self.i = 0
        self._depth: list[int] | None = None

    @property
    def depth(self) -> list[int]:
        """Each token's bracket depth (`clauses.depths`), made on the first question."""
        if self._depth is None or len(self._depth) != len(self.tokens):
            self._depth = clauses.depths(self.tokens)
        return self._depth

    @property
    def done(self) -> bool:
        return self.i >= len(self.tokens)

    def peek(self, ahead: int = 0) -> Token | None:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def at_word(self, *words: str) -> bool:
        t = self.peek()
        return t is not None and t.is_word(*words)

    def at_op(self, *ops: str) -> bool:
        t = self.peek()
        return t is not None and t.is_op(*ops)

    def accept_word(self, *words: str) -> bool:
        if self.at_word(*words):
            self.i += 1
            return True
        return False

    def accept_words(self, *sequence: str) -> bool:
        """Consume the words in order if they are all next."""
        for k, w in enumerate(sequence):
            t = self.peek(k)
            if t is None or not t.is_word(w):
                return False
        self.i += len(sequence)
        return True

    def expect_word(self, *words: str) -> str:
        t = self.peek()
        if t is None or not t.is_word(*words):
            raise SqlSyntaxError(f"expected {' or '.join(words)} {self._where()}")
        self.i += 1
        return t.text.upper()

    def accept_op(self, *ops: str) -> bool:
        if self.at_op(*ops):
            self.i += 1
            return True
        return False

    def expect_op(self, op: str) -> None:
        if not self.accept_op(op):
            raise SqlSyntaxError(f"expected '{op}' {self._where()}")

    def name(self) -> Name:
        """A qualified name: parts separated by dots (`clauses.name_end`)."""
        end = clauses.name_end(self.tokens, self.i)
        if end == self.i:
            raise SqlSyntaxError(f"expected a name {self._where()}")
        parts = clauses.name_parts(self.tokens, self.i, end)
        self.i = end
        return Name(parts)

    def group(self) -> tuple[int, int]:
        """Consume a parenthesised group; returns the token range inside the parentheses."""
        self.expect_op("(")
        start = self.i
        end = closing(self.tokens, start - 1)
        if end is None:
            raise SqlSyntaxError("unbalanced parentheses")
        self.i = end + 1
        return start, end

    def slice(self, start: int, end: int) -> str:
        """The original text of tokens [start, end)."""
        if start >= end:
            return ""
        return self.text[self.tokens[start].start : self.tokens[end - 1].end]

    def rest(self) -> str:
        text = self.slice(self.i, len(self.tokens))
        self.i = len(self.tokens)
        return text

    def find_top(self, *words: str, start: int | None = None) -> int | None:
        """Index of the first clause keyword of `words` at the statement's top level from `start`
        (default: here), or None (`clauses.find`: not the FROM of `IS DISTINCT FROM`, nor a word
        inside brackets or CASE ... END)."""
        return clauses.find(
            self.tokens, self.depth, self.i if start is None else start, len(self.tokens), *words
        )

    def split_top(self, start: int, end: int) -> list[tuple[int, int]]:
        """Token ranges of the comma-separated items in [start, end), at bracket depth 0."""
        items: list[tuple[int, int]] = []
        depth, first = 0, start
        for j in range(start, end):
            t = self.tokens[j]
            depth += nesting(t)
            if depth == 0 and t.is_op(","):
                items.append((first, j))
                first = j + 1
        if first < end or items:
            items.append((first, end))
        return items

    def end(self) -> None:
        if not self.done:
            raise SqlSyntaxError(f"unexpected {self.tokens[self.i].text!r} {self._where()}")

    def _where(self) -> str:
        t = self.peek()
        if t is None:
            return "at the end of the statement"
        return f"at {self.text[t.start : t.start + 30]!r}"


def _single_value(cur: _Cursor, start: int, end: int) -> str:
    """A key or value of an options list: a string, number or name, or the raw text."""
    if end - start == 1:
        t = cur.tokens[start]
        if t.kind in (STRING, IDENT, NUMBER, WORD):
            return t.text
    return "".join(cur.slice(start, end).split())


def _options(cur: _Cursor) -> tuple[tuple[str, str], ...]:
    """`( key = value, ... )` (also `key value` and `key := value`)."""
    start, end = cur.group()
    out = []
    for a, b in cur.split_top(start, end):
        eq = next((j for j in range(a, b) if cur.tokens[j].is_op("=", ":=")), None)
        if eq is None:
            if b - a != 2:
                raise SqlSyntaxError(f"expected key = value in {cur.slice(a, b)!r}")
            eq = a + 1
            key, value = _single_value(cur, a, a + 1), _single_value(cur, a + 1, b)
        else:
            key, value = _single_value(cur, a, eq), _single_value(cur, eq + 1, b)
        if not key or (not value and eq == b - 1):
            raise SqlSyntaxError(f"expected key = value in {cur.slice(a, b)!r}")
        out.append((key, value))
    return tuple(out)


def _keys(cur: _Cursor) -> tuple[str, ...]:
    start, end = cur.group()
    return tuple(_single_value(cur, a, b) for a, b in cur.split_top(start, end))


def _terms(cur: _Cursor) -> tuple[str, ...]:
    """`( term, term )`, each term as written; a single bare term is accepted without parentheses."""
    if not cur.at_op("("):
        start = cur.i
        cur.name()
        if cur.at_op("("):  # a transform call: day(ts)
            cur.group()
        return (cur.slice(start, cur.i),)
    start, end = cur.group()
    return tuple(cur.slice(a, b) for a, b in cur.split_top(start, end))


def _dotted(name: Name, table: Name) -> str:
    """A column path as the schema layer takes it (`s.x` reaches into struct `s`). A quoted part
    holding a '.' (`"a.b"`, one name to DuckDB) has no spelling there: refused by name."""
    for part in name.parts:
        if "." in part:
            raise SqlSyntaxError(
                f"ALTER TABLE {table}: column {quote_name(part)}: a column whose name contains '.' cannot be named "
                "here (a dotted path reaches into a struct)"
            )
    return ".".join(name.parts)


# -- step 1: the head -------------------------------------------------------------------------------


def target(tokens: list[Token]) -> Target | None:
    """The kind and name of a statement that may write an Iceberg table; None for other statements."""
    cur = _Cursor("", list(tokens))
    try:
        return _target(cur)
    except SqlSyntaxError:
        return None


def _target(cur: _Cursor) -> Target | None:
    if cur.accept_word("CREATE"):
        if cur.accept_words("OR", "REPLACE"):
            pass
        if cur.at_word("TEMP", "TEMPORARY"):
            return None  # temporary tables live in DuckDB
        if cur.accept_word("SCHEMA"):
            cur.accept_words("IF", "NOT", "EXISTS")
            return Target(KIND_CREATE_SCHEMA, cur.name())
        if cur.accept_word("TABLE"):
            cur.accept_words("IF", "NOT", "EXISTS")
            return Target(KIND_CREATE_TABLE, cur.name())
        return None
    if cur.accept_word("DROP"):
        if cur.accept_word("SCHEMA"):
            cur.accept_words("IF", "EXISTS")
            return Target(KIND_DROP_SCHEMA, cur.name())
        if cur.accept_word("TABLE"):
            cur.accept_words("IF", "EXISTS")
            return Target(KIND_DROP_TABLE, cur.name())
        return None
    if cur.accept_word("INSERT"):
        if cur.accept_word("OR"):
            cur.expect_word("REPLACE", "IGNORE")
        cur.expect_word("INTO")
        return Target(KIND_INSERT, cur.name())
    if cur.accept_word("DELETE"):
        cur.expect_word("FROM")
        return Target(KIND_DELETE, cur.name())
    if cur.accept_word("UPDATE"):
        return Target(KIND_UPDATE, cur.name())
    if cur.accept_words("ALTER", "TABLE"):
        cur.accept_words("IF", "EXISTS")
        return Target(KIND_ALTER, cur.name())
    if cur.accept_word("TRUNCATE"):
        cur.accept_word("TABLE")
        return Target(KIND_TRUNCATE, cur.name())
    if cur.accept_word("ANALYZE"):
        cur.accept_word("VERBOSE")
        return Target(KIND_ANALYZE, cur.name())
    if cur.accept_words("MERGE", "INTO"):
        return Target(KIND_MERGE, cur.name())
    if cur.accept_word("COPY"):
        name = cur.name()
        if cur.at_op("("):
            cur.group()
        return Target(KIND_UNSUPPORTED, name) if cur.at_word("FROM") else None
    if cur.at_word("WITH"):
        # WITH ... INSERT/UPDATE/DELETE: find the statement after the common table expressions
        cur.i += 1
        cur.accept_word("RECURSIVE")
        while True:
            cur.name()
            if cur.at_op("("):
                cur.group()
            cur.expect_word("AS")
            cur.accept_word("NOT")
            cur.accept_word("MATERIALIZED")
            cur.group()
            if not cur.accept_op(","):
                break
        inner = _target(cur)
        if inner is not None and inner.kind in (KIND_INSERT, KIND_UPDATE, KIND_DELETE):
            return Target(KIND_UNSUPPORTED, inner.name)
        return None
    return None


def unsupported_reason(tokens: list[Token]) -> str:
    """Why a statement of kind KIND_UNSUPPORTED cannot run on an Iceberg table."""
    first = tokens[0].text.upper() if tokens else ""
    if first == "MERGE":
        return "MERGE INTO is not supported on Iceberg tables; use DELETE, UPDATE and INSERT"
    if first == "COPY":
        return "COPY ... FROM is not supported on Iceberg tables; use INSERT INTO ... SELECT * FROM read_csv(...)"
    return "a WITH clause before INSERT, UPDATE or DELETE is not supported on Iceberg tables; put it in the query (INSERT INTO t WITH ... SELECT ...)"


# -- step 2: the whole statement ------------------------------------------------------------------


def parse(text: str, tokens: list[Token]) -> Statement:
    """The statement as a value; `SqlSyntaxError` naming the part that is not supported."""
    cur = _Cursor(text, list(tokens))
    head = cur.expect_word("CREATE", "DROP", "INSERT", "DELETE", "UPDATE", "ALTER", "TRUNCATE", "ANALYZE")
    if head == "ANALYZE":
        return _analyze(cur)
    if head == "CREATE":
        return _create(cur)
    if head == "DROP":
        return _drop(cur)
    if head == "INSERT":
        return _insert(cur)
    if head == "DELETE":
        return _delete(cur)
    if head == "UPDATE":
        return _update(cur)
    if head == "ALTER":
        return _alter(cur)
    cur.accept_word("TABLE")
    name = cur.name()
    cur.end()
    return Truncate(name)


def _analyze(cur: _Cursor) -> Statement:
    cur.accept_word("VERBOSE")
    name = cur.name()
    columns: tuple[str, ...] = ()
    if cur.at_op("("):
        start, end = cur.group()
        columns = tuple(_column_name(cur, a, b) for a, b in cur.split_top(start, end))
    cur.end()
    return Analyze(name, columns)


def _create(cur: _Cursor) -> Statement:
    or_replace = cur.accept_words("OR", "REPLACE")
    if or_replace and not cur.at_word("TABLE"):
        raise SqlSyntaxError("CREATE OR REPLACE SCHEMA is not supported on an Iceberg catalog")
    if cur.accept_word("SCHEMA"):
        if_not_exists = cur.accept_words("IF", "NOT", "EXISTS")
        name = cur.name()
        cur.end()
        return CreateSchema(name, if_not_exists)
    cur.expect_word("TABLE")
    if_not_exists = cur.accept_words("IF", "NOT", "EXISTS")
    if or_replace and if_not_exists:
        raise SqlSyntaxError("CREATE OR REPLACE TABLE cannot have IF NOT EXISTS")
    name = cur.name()
    columns: str | None = None
    if cur.at_op("("):
        start, end = cur.group()
        columns = cur.slice(start, end)
        if not columns.strip():
            raise SqlSyntaxError(f"CREATE TABLE {name}: a table needs at least one column")
    partition_by: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    while True:
        if cur.accept_words("PARTITIONED", "BY"):
            partition_by = _terms(cur)
        elif cur.accept_words("SORTED", "BY") or cur.accept_words("ORDER", "BY"):
            sort_by = _terms(cur)
        elif cur.at_word("WITH") and (p := cur.peek(1)) is not None and p.is_op("("):
            cur.i += 1
            options = _options(cur)
        else:
            break
    query: str | None = None
    with_data = True
    if cur.accept_word("AS"):
        if columns is not None:
            raise SqlSyntaxError(f"CREATE TABLE {name}: give either a column list or AS query, not both")
        n = len(cur.tokens)
        if n >= 3 and cur.tokens[n - 1].is_word("DATA") and cur.tokens[n - 3].is_word("WITH"):
            with_data = not cur.tokens[n - 2].is_word("NO")
            cur.tokens = cur.tokens[: n - 3]
        elif n >= 2 and cur.tokens[n - 1].is_word("DATA") and cur.tokens[n - 2].is_word("WITH"):
            cur.tokens = cur.tokens[: n - 2]
        query = cur.rest()
        if not query:
            raise SqlSyntaxError(f"CREATE TABLE {name}: AS needs a query")
    elif columns is None:
        raise SqlSyntaxError(f"CREATE TABLE {name}: expected a column list or AS query")
    cur.end()
    return CreateTable(
        name, if_not_exists, columns, query, with_data, partition_by, sort_by, options, or_replace
    )


def _drop(cur: _Cursor) -> Statement:
    if cur.accept_word("SCHEMA"):
        if_exists = cur.accept_words("IF", "EXISTS")
        name = cur.name()
        cascade = cur.accept_word("CASCADE")
        if not cascade:
            cur.accept_word("RESTRICT")
        cur.end()
        return DropSchema(name, if_exists, cascade)
    cur.expect_word("TABLE")
    if_exists = cur.accept_words("IF", "EXISTS")
    name = cur.name()
    if cur.at_op(","):
        raise SqlSyntaxError("drop one Iceberg table per DROP TABLE statement")
    purge = cur.accept_word("PURGE")
    cur.accept_word("CASCADE", "RESTRICT")
    purge = purge or cur.accept_word("PURGE")
    cur.end()
    return DropTable(name, if_exists, purge)


def _insert(cur: _Cursor) -> Statement:
    s = clauses.insert_spans(cur.text, cur.tokens)  # the one INSERT grammar, shared with sql/upsert.py
    name = Name(s.name)
    if s.how is not None:
        raise SqlSyntaxError(f"INSERT OR {s.how} is not supported on Iceberg tables (they have no keys)")
    if s.alias is not None:
        raise SqlSyntaxError(f"INSERT INTO {name} AS alias is not supported on Iceberg tables")
    if s.returning is not None:
        raise SqlSyntaxError("INSERT ... RETURNING is not supported on Iceberg tables")
    if s.conflict is not None:
        raise SqlSyntaxError("INSERT ... ON CONFLICT is not supported on Iceberg tables (they have no keys)")
    if s.by_name and s.columns is not None:
        raise SqlSyntaxError(f"INSERT INTO {name}: BY NAME cannot be combined with a column list")
    cur.i = len(cur.tokens)
    return Insert(name, s.columns, s.by_name, None if s.body is None else s.slice(s.body))


def _column_name(cur: _Cursor, a: int, b: int) -> str:
    if b - a != 1 or not cur.tokens[a].is_name:
        raise SqlSyntaxError(f"expected a column name, not {cur.slice(a, b)!r}")
    return cur.tokens[a].text


def _joined(cur: _Cursor, statement: str) -> tuple[clauses.Joined, Name]:
    """The UPDATE / DELETE as `sql/merge.py` reads it (one grammar), refused when it needs that
    module (an alias, RETURNING; its FROM / USING source is refused by the caller)."""
    s = clauses.joined(cur.text, cur.tokens)
    name = Name(s.name)
    if s.aliased:
        raise SqlSyntaxError(
            f"{statement} {name}: a table alias is not supported on Iceberg tables; refer to the columns by name"
        )
    if s.returning:
        raise SqlSyntaxError(f"{statement.split()[0]} ... RETURNING is not supported on Iceberg tables")
    cur.i = len(cur.tokens)
    return s, name


def _where(s: clauses.Joined, name: Name, statement: str) -> str | None:
    if s.condition is None:
        return None
    where = s.slice(*s.condition)
    if not where:
        raise SqlSyntaxError(f"{statement} {name}: WHERE needs a condition")
    return where


def _delete(cur: _Cursor) -> Statement:
    s, name = _joined(cur, "DELETE FROM")
    if s.source is not None:
        raise SqlSyntaxError(
            f"DELETE FROM {name} USING is not supported on Iceberg tables; use WHERE ... IN (SELECT ...)"
        )
    return Delete(name, _where(s, name, "DELETE FROM"))


def _update(cur: _Cursor) -> Statement:
    s, name = _joined(cur, "UPDATE")
    if s.source is not None:
        raise SqlSyntaxError(
            f"UPDATE {name} ... FROM is not supported on Iceberg tables; use a subquery in SET or WHERE"
        )
    assert s.set_list is not None
    assignments = []
    for a, b in cur.split_top(*s.set_list):
        eq = a + 1
        if b - a < 3 or not cur.tokens[a].is_name or not cur.tokens[eq].is_op("="):
            if b > a and cur.tokens[a].is_op("("):
                raise SqlSyntaxError(f"UPDATE {name}: SET (a, b) = (...) is not supported; set each column")
            raise SqlSyntaxError(f"UPDATE {name}: expected column = expression, not {cur.slice(a, b)!r}")
        if b - a == 3 and cur.tokens[eq + 1].is_word("DEFAULT"):
            raise SqlSyntaxError(f"UPDATE {name}: SET column = DEFAULT is not supported on Iceberg tables")
        assignments.append((cur.tokens[a].text, cur.slice(eq + 1, b)))
    if not assignments:
        raise SqlSyntaxError(f"UPDATE {name}: SET needs at least one column")
    columns = [c.lower() for c, _ in assignments]
    if len(set(columns)) != len(columns):
        raise SqlSyntaxError(f"UPDATE {name}: a column is set twice")
    return Update(name, tuple(assignments), _where(s, name, "UPDATE"))


def _alter(cur: _Cursor) -> Statement:
    cur.expect_word("TABLE")
    if_exists = cur.accept_words("IF", "EXISTS")
    name = cur.name()
    action = _alter_action(cur, name)
    cur.end()
    return AlterTable(name, action, if_exists)


def _alter_action(cur: _Cursor, name: Name) -> AlterAction:
    if cur.accept_word("ADD"):
        cur.accept_word("COLUMN")
        if_not_exists = cur.accept_words("IF", "NOT", "EXISTS")
        definition = cur.rest()
        if not definition:
            raise SqlSyntaxError(f"ALTER TABLE {name} ADD COLUMN: expected a column definition")
        return AddColumn(definition, if_not_exists)
    if cur.accept_words("DROP", "IDENTIFIER", "FIELDS"):
        return SetIdentifierFields(_column_list(cur, name), drop=True)
    if cur.accept_words("SET", "IDENTIFIER", "FIELDS"):
        columns = _column_list(cur, name)
        if not columns:
            raise SqlSyntaxError(f"ALTER TABLE {name} SET IDENTIFIER FIELDS: name the key columns")
        return SetIdentifierFields(columns)
    if cur.accept_word("DROP"):
        cur.accept_word("COLUMN")
        if_exists = cur.accept_words("IF", "EXISTS")
        column = _dotted(cur.name(), name)
        cur.accept_word("CASCADE", "RESTRICT")
        return DropColumn(column, if_exists)
    if cur.accept_word("RENAME"):
        if cur.accept_word("TO"):
            return RenameTable(cur.name())
        cur.accept_word("COLUMN")
        column = _dotted(cur.name(), name)
        cur.expect_word("TO")
        new = cur.name()
        if len(new.parts) != 1:
            raise SqlSyntaxError(f"ALTER TABLE {name} RENAME COLUMN: the new name is a single name")
        return RenameColumn(column, new.parts[0])
    if cur.accept_word("ALTER"):
        cur.accept_word("COLUMN")
        column = _dotted(cur.name(), name)
        if cur.accept_words("SET", "DATA", "TYPE") or cur.accept_word("TYPE"):
            j = cur.find_top("USING")
            if j is not None:
                raise SqlSyntaxError(
                    f"ALTER TABLE {name} ALTER COLUMN {column} TYPE ... USING is not supported on Iceberg "
                    "tables (only widening a type, which needs no conversion)"
                )
            type_text = cur.rest()
            if not type_text:
                raise SqlSyntaxError(f"ALTER TABLE {name} ALTER COLUMN {column}: expected a type")
            return AlterColumnType(column, type_text)
        if cur.accept_words("SET", "DEFAULT"):
            default = cur.rest()
            if not default:
                raise SqlSyntaxError(
                    f"ALTER TABLE {name} ALTER COLUMN {column} SET DEFAULT: expected a value"
                )
            return SetDefault(column, default)
        if cur.accept_words("DROP", "DEFAULT"):
            return SetDefault(column, None)
        what = " ".join(t.text.upper() for t in cur.tokens[cur.i : cur.i + 3])
        raise SqlSyntaxError(
            f"ALTER TABLE {name} ALTER COLUMN {column} {what}: not supported on Iceberg tables "
            "(ADD, DROP, RENAME, ALTER COLUMN ... TYPE and SET/DROP DEFAULT are)"
        )
    if cur.accept_word("SET"):
        if cur.accept_words("PARTITIONED", "BY"):
            return SetPartitioning(_terms(cur))
        if cur.accept_words("SORTED", "BY"):
            return SetSortOrder(_terms(cur))
        if cur.at_op("("):
            return SetProperties(_options(cur))
        raise SqlSyntaxError(
            f"ALTER TABLE {name} SET: expected PARTITIONED BY (...), SORTED BY (...) or ('key' = 'value')"
        )
    if cur.accept_word("RESET"):
        if cur.accept_words("PARTITIONED", "BY"):
            return SetPartitioning(())
        if cur.accept_words("SORTED", "BY"):
            return SetSortOrder(())
        if cur.at_op("("):
            return ResetProperties(_keys(cur))
        raise SqlSyntaxError(f"ALTER TABLE {name} RESET: expected PARTITIONED BY, SORTED BY or ('key', ...)")
    t = cur.peek()
    raise SqlSyntaxError(
        f"ALTER TABLE {name} {t.text if t else ''}: not supported on Iceberg tables (ADD/DROP/RENAME/ALTER "
        "COLUMN, RENAME TO, SET/RESET PARTITIONED BY, SORTED BY, ('key' = 'value'))"
    )


def _column_list(cur: _Cursor, name: Name) -> tuple[str, ...]:
    """`a, b.c` or `(a, b.c)` to the end of the statement (dotted names reach into structs)."""
    parens = cur.accept_op("(")
    out: list[str] = []
    while not cur.done and not cur.at_op(")"):
        out.append(_dotted(cur.name(), name))
        if not cur.accept_op(","):
            break
    if parens:
        cur.expect_op(")")
    return tuple(out)


def values_rows(query: str) -> list[list[str]] | None:
    """The expressions of each row when `query` is a plain `VALUES (...), (...)` list, else None.

    DuckDB types an INSERT's VALUES by the target columns, so the caller casts each expression.
    """
    try:
        cur = _Cursor(query, tokenize(query))
    except SqlSyntaxError:
        return None
    if not cur.accept_word("VALUES"):
        return None
    rows: list[list[str]] = []
    try:
        while True:
            start, end = cur.group()
            rows.append([cur.slice(a, b) for a, b in cur.split_top(start, end)])
            if not cur.accept_op(","):
                break
    except SqlSyntaxError:
        return None
    return rows if cur.done else None


__all__ = [
    "AddColumn",
    "AlterColumnType",
    "AlterTable",
    "CreateSchema",
    "CreateTable",
    "Delete",
    "DropColumn",
    "DropSchema",
    "DropTable",
    "Insert",
    "Name",
    "RenameColumn",
    "RenameTable",
    "ResetProperties",
    "SetDefault",
    "SetIdentifierFields",
    "SetPartitioning",
    "SetProperties",
    "SetSortOrder",
    "Statement",
    "Target",
    "Truncate",
    "Update",
    "parse",
    "target",
    "values_rows",
]
