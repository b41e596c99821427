"""DuckDB-style `CREATE SECRET (TYPE s3 | gcs | azure, ...)` statements, read by iceduck itself.

DuckDB 2.0.1 has no httpfs here, so it cannot create S3 secrets; `Lake.sql` and the shell hand such
statements to this module instead, and the settings go to iceduck's S3 registry (`iceduck.io.s3`),
the registry of the lake that ran them (no other connection sees them),
where they rank below vended credentials and table/catalog properties, above the AWS environment.
GCS and Azure secrets go the same way to `iceduck.io.fsspec_store`'s registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from iceduck.errors import ValidationError
from iceduck.io import fsspec_store
from iceduck.io.s3_settings import S3Registry, register_secret
from iceduck.sql.tokens import WORD, Token


@dataclass(frozen=True, slots=True)
class SecretStatement:
    """`CREATE [OR REPLACE] [PERSISTENT|TEMPORARY] SECRET [IF NOT EXISTS] [name] (KEY value, ...)`."""

    name: str | None
    options: dict[str, Any]  # upper-case keys, values as written (strings decoded)
    or_replace: bool = False
    if_not_exists: bool = False


def secret_statement(tokens: list[Token]) -> SecretStatement | None:
    """The parts of a CREATE SECRET statement, or None when the statement is something else."""
    words = [t.text.upper() if t.kind == WORD else t.text for t in tokens]
    i = 0
    if words[i : i + 1] != ["CREATE"]:
        return None
    i += 1
    or_replace = words[i : i + 2] == ["OR", "REPLACE"]
    if or_replace:
        i += 2
    if i < len(words) and words[i] in ("PERSISTENT", "TEMPORARY", "TEMP"):
        i += 1
    if words[i : i + 1] != ["SECRET"]:
        return None
    i += 1
    if_not_exists = words[i : i + 3] == ["IF", "NOT", "EXISTS"]
    if if_not_exists:
        i += 3
    name = None
    if i < len(tokens) and tokens[i].is_name:
        name = tokens[i].text
        i += 1
    if i >= len(tokens) or not tokens[i].is_op("("):
        return None
    body = tokens[i + 1 :]
    while body and body[-1].is_op(";"):
        body = body[:-1]
    if not body or not body[-1].is_op(")"):
        raise ValidationError("CREATE SECRET: expected the options to end with ')'")
    options: dict[str, Any] = {}
    for item in split_options(body[:-1]):
        if len(item) != 2 or item[0].kind != WORD:
            raise ValidationError("CREATE SECRET: each option is a name and one value (KEY_ID 'value')")
        key, value = item
        options[key.text.upper()] = value.text
    return SecretStatement(name, options, or_replace, if_not_exists)


def split_options(tokens: list[Token]) -> list[list[Token]]:
    """The comma-separated items of an option list (the tokens between its parentheses)."""
    items: list[list[Token]] = [[]]
    for t in tokens:
        if t.is_op(","):
            items.append([])
        else:
            items[-1].append(t)
    return [item for item in items if item]


def handle_s3_secret(tokens: list[Token], registry: S3Registry | None = None) -> bool:
    """Register the S3 settings of a `CREATE SECRET (TYPE s3, ...)` statement in `registry` (the
    connection's; the process's when None); False if it is not one."""
    secret = secret_statement(tokens)
    if secret is None or str(secret.options.get("TYPE", "")).lower() != "s3":
        return False
    register_secret(secret.options, registry, name=secret.name)
    return True


def handle_store_secret(tokens: list[Token], registry: fsspec_store.StoreRegistry | None = None) -> bool:
    """Register the settings of a `CREATE SECRET (TYPE gcs | azure, ...)` statement in `registry`
    (the connection's; the process's when None); False if it is not one."""
    secret = secret_statement(tokens)
    if secret is None or str(secret.options.get("TYPE", "")).lower() not in (fsspec_store.GCS, fsspec_store.AZURE):
        return False
    fsspec_store.register_secret(secret.options, registry)
    return True
