"""A small SQL tokenizer: enough structure to recognise statements and slice their parts.

Tokens keep their offsets in the text, so a parser can hand a clause (a WHERE predicate, a SELECT)
to DuckDB exactly as the user wrote it. Comments and white space are dropped; strings and quoted
names are decoded. The rules follow DuckDB's (Postgres') lexer where it matters for structure:
`''` and `""` escapes, `` `name` `` (a quoted name, as `"name"`; never empty), `E'...'` backslash
strings, `$tag$...$tag$` strings, nested block comments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from iceduck.errors import ValidationError
from iceduck.vocabulary import quote_ident

WORD = "word"  # an unquoted name or keyword, as written
IDENT = "ident"  # a "quoted name", unquoted
STRING = "string"  # a 'string literal', decoded
NUMBER = "number"
PARAM = "param"  # ?, ?1, $1, $name
OP = "op"  # punctuation and operators

_WORD = re.compile(r"[A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*")
_NUMBER = re.compile(r"0[xX][0-9A-Fa-f_]+|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?")
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_PARAM = re.compile(r"\?\d*|\$\d+|\$[A-Za-z_][A-Za-z0-9_]*")
# 'string' and "name" (E'...' is a string with backslash escapes)
_QUOTE_KINDS = {"'": STRING, '"': IDENT, "`": IDENT}  # DuckDB also reads `name` as a quoted name
_OPERATORS = ("->>", "::", ":=", "=>", "->", "<=", ">=", "<>", "!=", "==", "||", "**", "//", "<<", ">>")


# Characters that may start a comment, a quoted token, a `$` token or a `-`/`/` operator: the
# step-by-step path below decides. Every other token is matched by `_FAST` (same rules as that path).
_SLOW_STARTS = frozenset("'\"`$-/")
_FAST = re.compile(
    r"(?P<space>\s+)"
    r"|(?P<word>[A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*)"
    r"|(?P<number>0[xX][0-9A-Fa-f_]+|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?)"
    r"|(?P<param>\?\d*)"
    r"|(?P<op>" + "|".join(re.escape(o) for o in _OPERATORS if o[0] not in _SLOW_STARTS) + r"|.)",
    re.DOTALL,
)
_FAST_KINDS = {"word": WORD, "number": NUMBER, "param": PARAM, "op": OP}


class SqlSyntaxError(ValidationError):
    """Text the tokenizer or the statement parser cannot make sense of."""


@dataclass(frozen=True, slots=True)
class Token:
    """One token: its kind, its text (decoded for strings and quoted names) and where it sits."""

    kind: str
    text: str
    start: int
    end: int

    def is_word(self, *words: str) -> bool:
        """True for an unquoted word equal (case-insensitively) to one of `words` (upper case)."""
        return self.kind == WORD and self.text.upper() in words

    def is_op(self, *ops: str) -> bool:
        return self.kind == OP and self.text in ops

    @property
    def is_name(self) -> bool:
        """A name part: an unquoted word or a quoted identifier."""
        return self.kind in (WORD, IDENT)


def tokenize(text: str) -> list[Token]:
    """The tokens of `text`; `SqlSyntaxError` for an unterminated string, name or comment."""
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c not in _SLOW_STARTS and not (c in "eE" and text.startswith("'", i + 1)):
            # white space, a word, a number, a `?` parameter or an operator: one regular expression
            # (a 20,000-term WHERE is ~200,000 tokens)
            m = _FAST.match(text, i)
            if m is not None:
                kind = m.lastgroup
                if kind != "space":
                    out.append(Token(_FAST_KINDS[kind or ""], m.group(), i, m.end()))
                i = m.end()
                continue
        if c.isspace():
            i += 1
            continue
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if text.startswith("/*", i):
            i = _skip_block_comment(text, i)
            continue
        escaped = c in "eE" and i + 1 < n and text[i + 1] == "'" and not _after_word(text, i)
        if c in _QUOTE_KINDS or escaped:
            quote = text[i + 1] if escaped else c
            end, value = _quoted(text, i + escaped, quote, backslash=escaped)
            out.append(Token(_QUOTE_KINDS[quote], value, i, end))
            i = end
            continue
        if c == "$" and not _after_word(text, i):
            m = _DOLLAR.match(text, i)
            if m:
                close = text.find(m.group(0), m.end())
                if close < 0:
                    raise SqlSyntaxError(f"unterminated dollar-quoted string starting at offset {i}")
                end = close + len(m.group(0))
                out.append(Token(STRING, text[m.end() : close], i, end))
                i = end
                continue
        m = _WORD.match(text, i)
        if m:
            out.append(Token(WORD, m.group(0), i, m.end()))
            i = m.end()
            continue
        m = _NUMBER.match(text, i)
        if m and m.group(0) not in (".",):
            out.append(Token(NUMBER, m.group(0), i, m.end()))
            i = m.end()
            continue
        if c in "?$":
            m = _PARAM.match(text, i)
            if m:
                out.append(Token(PARAM, m.group(0), i, m.end()))
                i = m.end()
                continue
        op = next((o for o in _OPERATORS if text.startswith(o, i)), c)
        out.append(Token(OP, op, i, i + len(op)))
        i += len(op)
    return out


def _after_word(text: str, i: int) -> bool:
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_$")


def _quoted(text: str, start: int, quote: str, *, backslash: bool) -> tuple[int, str]:
    """(end offset, decoded content) of the quoted token opening at `start`."""
    parts: list[str] = []
    j, n = start + 1, len(text)
    while True:
        if j >= n:
            what = "string" if quote == "'" else "quoted name"
            raise SqlSyntaxError(f"unterminated {what} starting at offset {start}")
        ch = text[j]
        if backslash and ch == "\\" and j + 1 < n:
            parts.append(_ESCAPES.get(text[j + 1], text[j + 1]))
            j += 2
            continue
        if ch == quote:
            if j + 1 < n and text[j + 1] == quote:  # a doubled quote stands for itself
                parts.append(quote)
                j += 2
                continue
            if quote != "'" and not parts:  # as DuckDB: "zero-length delimited identifier"
                raise SqlSyntaxError(f"a quoted name cannot be empty (offset {start})")
            return j + 1, "".join(parts)
        parts.append(ch)
        j += 1


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0"}


def _skip_block_comment(text: str, start: int) -> int:
    depth, j, n = 1, start + 2, len(text)
    while depth:  # block comments nest in DuckDB's grammar
        if j >= n:
            raise SqlSyntaxError(f"unterminated comment starting at offset {start}")
        if text.startswith("/*", j):
            depth, j = depth + 1, j + 2
        elif text.startswith("*/", j):
            depth, j = depth - 1, j + 2
        else:
            j += 1
    return j


_NESTING = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}


def nesting(t: Token) -> int:
    """How a token changes the bracket depth: 1 for `(`, `[`, `{`, -1 for their closing ones, else 0."""
    return _NESTING.get(t.text, 0) if t.kind == OP else 0


def split_arguments(text: str, tokens: list[Token], *assign: str) -> list[tuple[str | None, str]] | None:
    """The comma-separated items of `tokens` (an argument list without its brackets) at bracket
    depth 0: (the name as written for `name <assign> value`, else None; the value's text sliced from
    `text`); None when an item is empty."""
    items: list[list[Token]] = []
    depth, start = 0, 0
    for j, t in enumerate(tokens):
        depth += nesting(t)
        if depth == 0 and t.is_op(","):
            items.append(tokens[start:j])
            start = j + 1
    if tokens:
        items.append(tokens[start:])
    out: list[tuple[str | None, str]] = []
    for item in items:
        if not item:
            return None
        if len(item) > 2 and item[0].is_name and item[1].is_op(*assign):
            out.append((item[0].text, text[item[2].start : item[-1].end]))
        else:
            out.append((None, text[item[0].start : item[-1].end]))
    return out


def closing(tokens: list[Token], i: int) -> int | None:
    """The index of the bracket closing the one at `i`, None when it is not closed."""
    depth = 0
    for j in range(i, len(tokens)):
        depth += nesting(tokens[j])
        if depth == 0:
            return j
    return None


def trim_statement(text: str, tokens: list[Token]) -> tuple[str, list[Token]]:
    """One statement's text and tokens without its closing `;` and what follows it (comments, white
    space). DuckDB runs `SELECT 1; -- c` but cannot wrap that text in another query (a relation's
    `show()` or `limit()` then fails at the `;`), so the text it is given ends at its last token."""
    last = len(tokens)
    while last and tokens[last - 1].is_op(";"):
        last -= 1
    if last == 0 or (last == len(tokens) and len(text) == tokens[-1].end):
        return text, tokens
    return text[: tokens[last - 1].end], tokens[:last]


def split_statements(text: str) -> list[str]:
    """The statements of a script, split at `;` outside strings, names, comments and brackets
    (for scripts DuckDB's own parser refuses, such as `DROP TABLE ns.t PURGE`)."""
    tokens = tokenize(text)
    out: list[str] = []
    start = 0
    depth = 0
    for t in tokens:
        depth = max(0, depth + nesting(t))
        if t.is_op(";") and depth == 0:
            piece = text[start : t.end].strip()
            if piece.rstrip(";").strip():
                out.append(piece)
            start = t.end
    rest = text[start:].strip()
    if rest and tokenize(rest):
        out.append(rest)
    return out


def quote_name(name: str) -> str:
    """`name` as a SQL identifier: bare when it is a plain lower-case word, else double-quoted."""
    if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name.upper() not in _RESERVED:
        return name
    return quote_ident(name)


# Words that cannot stand as bare names (a conservative subset of DuckDB's reserved keywords).
_RESERVED_WORDS = """ALL ANALYSE ANALYZE AND ANY ARRAY AS ASC ASYMMETRIC BOTH CASE CAST CHECK COLLATE COLUMN CONSTRAINT
    CREATE DEFAULT DEFERRABLE DESC DISTINCT DO ELSE END EXCEPT FALSE FETCH FOR FOREIGN FROM GRANT GROUP
    HAVING IN INITIALLY INTERSECT INTO LATERAL LEADING LIMIT NOT NULL OFFSET ON ONLY OR ORDER PLACING
    PRIMARY REFERENCES RETURNING SELECT SOME SYMMETRIC TABLE THEN TO TRAILING TRUE UNION UNIQUE USING
    VARIADIC WHEN WHERE WINDOW WITH"""
_RESERVED = frozenset(_RESERVED_WORDS.split())
