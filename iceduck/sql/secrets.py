"""DuckDB-style `CREATE SECRET (TYPE s3, ...)` statements, read by iceduck itself.

DuckDB 2.0.1 has no httpfs here, so it cannot create S3 secrets; `Lake.sql` and the shell hand such
statements to this module instead, and the settings go to iceduck's S3 registry (`iceduck.io.s3`),
where they rank below vended credentials and table/catalog properties, above the AWS environment.
"""

from __future__ import annotations

from typing import Any

from iceduck.errors import ValidationError
from iceduck.io.s3 import register_secret
from iceduck.sql.tokens import WORD, Token


def s3_secret_options(tokens: list[Token]) -> dict[str, Any] | None:
    """The options of `CREATE [OR REPLACE] [PERSISTENT|TEMPORARY] SECRET [IF NOT EXISTS] [name]
    (TYPE s3, KEY value, ...)`, or None when the statement is something else."""
    words = [t.text.upper() if t.kind == WORD else t.text for t in tokens]
    i = 0
    if words[i : i + 1] != ["CREATE"]:
        return None
    i += 1
    if words[i : i + 2] == ["OR", "REPLACE"]:
        i += 2
    if i < len(words) and words[i] in ("PERSISTENT", "TEMPORARY", "TEMP"):
        i += 1
    if words[i : i + 1] != ["SECRET"]:
        return None
    i += 1
    if words[i : i + 3] == ["IF", "NOT", "EXISTS"]:
        i += 3
    if i < len(tokens) and tokens[i].kind == WORD:
        i += 1  # the secret's name
    if i >= len(tokens) or not tokens[i].is_op("("):
        return None
    body = tokens[i + 1 :]
    while body and body[-1].is_op(";"):
        body = body[:-1]
    if not body or not body[-1].is_op(")"):
        raise ValidationError("CREATE SECRET: expected the options to end with ')'")
    options: dict[str, Any] = {}
    for item in _split(body[:-1]):
        if len(item) != 2 or item[0].kind != WORD:
            raise ValidationError("CREATE SECRET: each option is a name and one value (KEY_ID 'value')")
        key, value = item
        options[key.text.upper()] = value.text
    if str(options.get("TYPE", "")).lower() != "s3":
        return None
    return options


def _split(tokens: list[Token]) -> list[list[Token]]:
    items: list[list[Token]] = [[]]
    for t in tokens:
        if t.is_op(","):
            items.append([])
        else:
            items[-1].append(t)
    return [item for item in items if item]


def handle_s3_secret(tokens: list[Token]) -> bool:
    """Register the S3 settings of a `CREATE SECRET (TYPE s3, ...)` statement; False if it is not one."""
    options = s3_secret_options(tokens)
    if options is None:
        return False
    register_secret(options)
    return True
