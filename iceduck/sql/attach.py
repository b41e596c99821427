"""`ATTACH ... (TYPE iceberg, ...)`, `DETACH` and `CREATE SECRET (TYPE iceberg, ...)` on a lake.

DuckDB 2.0 here has no iceberg extension, so `Lake.sql` and the shell read these statements
themselves (the lake's `Router` hands every statement to `Attachments` first):

    CREATE SECRET s (TYPE iceberg, CLIENT_ID '...', CLIENT_SECRET '...', OAUTH2_SERVER_URI '...');  -- or TOKEN '...'
    ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT 'http://127.0.0.1:8181', AUTHORIZATION_TYPE 'none');
    ATTACH 'analytics' AS prod (TYPE iceberg, ENDPOINT 'https://catalog.example/api/catalog', SECRET s);
    SELECT * FROM cat.demo.services;  CREATE SCHEMA cat.demo;  INSERT INTO cat.demo.t ...;
    SELECT * FROM iceberg_snapshots(cat.demo.services);
    DETACH cat;

An attached catalog is a `RestCatalog` (the options are the extension's: ENDPOINT,
AUTHORIZATION_TYPE, SECRET, CLIENT_ID, CLIENT_SECRET, OAUTH2_SERVER_URI, OAUTH2_SCOPE, TOKEN,
DEFAULT_REGION, ACCESS_DELEGATION_MODE, ...; the attached path is the `warehouse` sent to
`/v1/config`) with a `Router` of its own: its tables are the views `<name>.<namespace>.<table>`
and the statements naming them become Iceberg commits there, exactly as `lake.ns.t` does for the
lake's own catalog (only the qualified name reaches it: `ns.t` stays the lake's). The SQL
functions find `<name>.ns.t` through `iceduck.catalog.attached.AttachedCatalogs`.

With `AUTHORIZATION_TYPE 'sigv4'` or `ENDPOINT_TYPE glue | s3_tables` the requests are signed for
AWS (`iceduck.rest.sigv4`), and SECRET names a secret of TYPE s3 whose keys and REGION sign, as
in DuckDB's extension (`_aws_options`).

Secrets of TYPE iceberg belong to the lake (DuckDB keeps secrets per connection); an unnamed one
is used by an ATTACH that names no SECRET and no authorization, as DuckDB's default secret is.
Any other ATTACH, DETACH or secret goes to DuckDB unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb

from iceduck.catalog.attached import AttachedCatalogs
from iceduck.io.fileio import FileIO
from iceduck.io.storage import s3_registry
from iceduck.sql import catalog_ddl
from iceduck.sql import parse as p
from iceduck.sql import views as iceberg_views
from iceduck.sql.router import LAKE_DATABASE, NOT_MINE, Router, SqlError, mentions
from iceduck.sql.secrets import secret_statement, split_options
from iceduck.sql.tokens import NUMBER, STRING, WORD, Token
from iceduck.tables import Tables
from iceduck.vocabulary import quote_ident

if TYPE_CHECKING:
    from iceduck.rest.client import RestCatalog

__all__ = ["AttachStatement", "Attachments", "DetachStatement", "attach_statement", "detach_statement"]

ICEBERG = "iceberg"
DEFAULT_SECRET = "__default_iceberg"  # DuckDB's name for an unnamed secret of this type
# words of statements that list tables: the attached catalogs' views are brought up to date first
_LISTINGS = ("SHOW", "DESCRIBE", "INFORMATION_SCHEMA", "DUCKDB_TABLES", "DUCKDB_VIEWS", "DUCKDB_COLUMNS")
# ATTACH options that describe DuckDB's side of the attachment, not the REST catalog
_DUCKDB_ONLY = frozenset({"TYPE", "READ_ONLY", "READ_WRITE", "DEFAULT_SCHEMA"})
# secret options that are not the catalog's
_SECRET_ONLY = frozenset({"TYPE", "SCOPE", "PROVIDER"})


@dataclass(frozen=True, slots=True)
class AttachStatement:
    """`ATTACH [OR REPLACE] [DATABASE] [IF NOT EXISTS] 'path' [AS name] [(KEY value, ...)]`."""

    path: str
    name: str
    options: dict[str, Any] = field(default_factory=dict)  # upper-case keys; a bare key is True
    or_replace: bool = False
    if_not_exists: bool = False

    @property
    def is_iceberg(self) -> bool:
        return str(self.options.get("TYPE", "")).lower() == ICEBERG


@dataclass(frozen=True, slots=True)
class DetachStatement:
    """`DETACH [DATABASE] [IF EXISTS] name`."""

    name: str
    if_exists: bool = False


def attach_statement(tokens: list[Token]) -> AttachStatement | None:
    """The parts of an ATTACH statement, or None for another statement (or a form this does not read)."""
    toks = _strip(tokens)
    if not toks or not toks[0].is_word("ATTACH"):
        return None
    i = 1
    or_replace = _words(toks, i, "OR", "REPLACE")
    i += 2 if or_replace else 0
    i += 1 if _words(toks, i, "DATABASE") else 0
    if_not_exists = _words(toks, i, "IF", "NOT", "EXISTS")
    i += 3 if if_not_exists else 0
    if i >= len(toks) or toks[i].kind != STRING:
        return None
    path = toks[i].text
    i += 1
    name = _default_name(path)
    if _words(toks, i, "AS"):
        if i + 1 >= len(toks) or not toks[i + 1].is_name:
            raise SqlError("ATTACH: expected a database name after AS")
        name = toks[i + 1].text
        i += 2
    options: dict[str, Any] = {}
    if i < len(toks):
        if not toks[i].is_op("(") or not toks[-1].is_op(")"):
            return None  # DuckDB reads (and refuses) whatever this is
        for item in split_options(toks[i + 1 : -1]):
            if item[0].kind != WORD or len(item) > 2:
                raise SqlError("ATTACH: each option is a name and at most one value (ENDPOINT 'http://...')")
            options[item[0].text.upper()] = _value(item[1]) if len(item) == 2 else True
    return AttachStatement(path, name, options, or_replace, if_not_exists)


def detach_statement(tokens: list[Token]) -> DetachStatement | None:
    """The parts of a DETACH statement, or None for another statement."""
    toks = _strip(tokens)
    if not toks or not toks[0].is_word("DETACH"):
        return None
    i = 1
    i += 1 if _words(toks, i, "DATABASE") else 0
    if_exists = _words(toks, i, "IF", "EXISTS")
    i += 2 if if_exists else 0
    if i != len(toks) - 1 or not toks[i].is_name:
        return None
    return DetachStatement(toks[i].text, if_exists)


def _drop_secret(tokens: list[Token]) -> tuple[str, bool] | None:
    """`DROP [PERSISTENT|TEMPORARY] SECRET [IF EXISTS] name` -> (name, if_exists)."""
    toks = _strip(tokens)
    if not toks or not toks[0].is_word("DROP"):
        return None
    i = 1
    i += 1 if i < len(toks) and toks[i].is_word("PERSISTENT", "TEMPORARY", "TEMP") else 0
    if not _words(toks, i, "SECRET"):
        return None
    i += 1
    if_exists = _words(toks, i, "IF", "EXISTS")
    i += 2 if if_exists else 0
    if i != len(toks) - 1 or not toks[i].is_name:
        return None
    return toks[i].text, if_exists


@dataclass(slots=True)
class _Attached:
    catalog: RestCatalog
    tables: Tables  # holds the router's lake (the router only keeps a weak reference)
    router: Router


class Attachments:
    """The iceberg catalogs and secrets of one lake; the `Front` of its router (see the module docstring).

    `tables_for(catalog)` makes the write API over an attached catalog on the lake's connection
    (`iceduck.lake` passes a `Lake`, so DELETE and UPDATE prune by their WHERE as on the lake).
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        catalogs: AttachedCatalogs,
        tables_for: Callable[[RestCatalog], Tables],
        io: FileIO | None = None,
    ) -> None:
        """`io`: the lake's FileIO; attached catalogs hand their vended credentials to its S3
        settings (the lake's own, not the process's)."""
        self.con = con
        self.catalogs = catalogs
        self.tables_for = tables_for
        self.io = io
        self.secrets: dict[str, dict[str, Any]] = {}  # lower-case name -> options (upper-case keys)
        self._attached: dict[str, _Attached] = {}  # lower-case database name -> its catalog and router

    # -- the router's front ---------------------------------------------------------------------

    def wants(self, tokens: list[Token]) -> bool:
        if self._attached and tokens and tokens[0].is_word("EXPLAIN", "CALL"):
            return True  # maybe a write or procedure on an attached catalog: `statement` decides
        return any(t.is_word("ATTACH", "DETACH") for t in tokens[:1]) or any(
            tokens[i].is_op(";") and tokens[i + 1].is_word("ATTACH", "DETACH") for i in range(len(tokens) - 1)
        )

    def before_read(self, tokens: list[Token]) -> None:
        listing = any(t.is_word(*_LISTINGS) for t in tokens)  # SHOW ALL TABLES, duckdb_tables(), ...
        for name, attached in self._attached.items():
            if listing or mentions(tokens, name):
                attached.router.refresh_views(only_if_changed=True)

    def statement(self, tokens: list[Token], text: str, params: Any) -> Any:
        attach = attach_statement(tokens)
        if attach is not None:
            return self.attach(attach) if attach.is_iceberg else NOT_MINE
        detach = detach_statement(tokens)
        if detach is not None:
            return self.detach(detach) if detach.name.lower() in self._attached else NOT_MINE
        if self._secret(tokens):
            return None
        special = catalog_ddl.recognise(tokens, text)  # COMMENT ON, COPY ... TO an attached catalog
        if special is not None and catalog_ddl.about(special) in self._attached:
            return self._attached[catalog_ddl.about(special)].router.statement(text, params)
        view = iceberg_views.recognise(tokens, text)  # CREATE/DROP/ALTER VIEW: see sql/views.py
        if view is not None:
            for key, attached in self._attached.items():
                if view.parts[0].lower() == key or (
                    len(view.parts) == 1 and attached.router.used_namespace()
                ):
                    return attached.router.statement(text, params)
        owner = self._owner_of_explain_or_call(tokens, text)
        if owner is not None:  # EXPLAIN DELETE/UPDATE/MERGE cat.ns.t, CALL ...(table => 'cat.ns.t')
            return owner.router.statement(text, params)
        head = p.target(tokens)
        if head is not None and len(head.name.parts) == 1:  # after `USE cat.ns`
            for attached in self._attached.values():
                if attached.router.used_namespace():
                    return attached.router.statement(text, params)
        if head is not None and head.name.parts[0].lower() in self._attached:
            attached = self._attached[head.name.parts[0].lower()]
            table_kind = head.kind not in (p.KIND_CREATE_SCHEMA, p.KIND_DROP_SCHEMA)
            if table_kind and len(head.name.parts) < 3:
                raise SqlError(
                    f"{head.name}: name the namespace too ({head.name.parts[0]}.<namespace>.{head.name.parts[-1]}); "
                    "an Iceberg catalog has no default schema"
                )
            return attached.router.statement(text, params)
        self.before_read(tokens)
        return NOT_MINE

    def _owner_of_explain_or_call(self, tokens: list[Token], text: str) -> _Attached | None:
        """The attached catalog an `EXPLAIN <write>` writes into, or a Spark procedure is about:
        `CALL cat.system.p(...)`, or its table argument `'cat.ns.t'`; None for every other statement."""
        if not self._attached or not tokens or not tokens[0].is_word("EXPLAIN", "CALL"):
            return None
        if tokens[0].is_word("EXPLAIN"):
            from iceduck.sql import explain_write

            inner = explain_write.explained(tokens)
            head = p.target(inner) if inner is not None else None
            if head is None:
                return None
            if len(head.name.parts) == 1:  # after `USE cat.ns`
                return next((a for a in self._attached.values() if a.router.used_namespace()), None)
            return self._attached.get(head.name.parts[0].lower())
        from iceduck.sql import procedures

        call = procedures.recognise(tokens, text)
        if call is None:
            return None
        if len(tokens) > 3 and tokens[1].is_name and tokens[2].is_op(".") and tokens[3].is_word("SYSTEM"):
            owner = self._attached.get(tokens[1].text.lower())
            if owner is not None:
                return owner
        table = procedures.table_argument(call, self.con)
        parts = table.split(".") if table is not None else []
        return self._attached.get(parts[0].lower()) if len(parts) == 3 else None

    def travelling_table(self, parts: tuple[str, ...]) -> str | None:
        """`cat.ns.t` when `parts` name a table of an attached catalog (for `AT (...)`)."""
        attached = self._attached.get(parts[0].lower()) if len(parts) == 3 else None
        return attached.router.travelling_table(parts) if attached is not None else None

    # -- ATTACH / DETACH ------------------------------------------------------------------------

    def attach(self, s: AttachStatement) -> None:
        """Attach the REST catalog `s` describes as database `s.name`."""
        key = s.name.lower()
        if key == LAKE_DATABASE:
            raise SqlError(f"ATTACH ... AS {s.name}: '{LAKE_DATABASE}' is the lake's own catalog")
        if key in self._duck_databases():
            if s.if_not_exists:
                return
            if not (s.or_replace and key in self._attached):
                raise SqlError(f"ATTACH ... AS {s.name}: a database named {s.name} exists already")
        # imported on the first ATTACH: the HTTP client is startup time every lake would pay
        from iceduck.rest.client import RestCatalog

        catalog = RestCatalog.from_options(io=self.io, **self._catalog_options(s))
        if key in self._attached:
            self.detach(DetachStatement(s.name))
        tables = self.tables_for(catalog)
        router = Router(tables, database=key, implicit=False)
        self._attached[key] = _Attached(catalog, tables, router)
        self.catalogs.attach(key, catalog)
        router.refresh_views()  # makes the database even when the catalog is empty (SHOW DATABASES)
        if key not in self._duck_databases():  # the views could not be made: say so, attach nothing
            self.detach(DetachStatement(s.name, if_exists=True))
            raise SqlError(f"ATTACH ... AS {s.name}: could not list the catalog's tables")

    def detach(self, s: DetachStatement) -> None:
        """Detach an attached iceberg catalog (its views go; the catalog is untouched)."""
        key = s.name.lower()
        if self._attached.pop(key, None) is None:
            if s.if_exists:
                return
            raise SqlError(f"DETACH {s.name}: no iceberg catalog is attached under that name")
        self.catalogs.detach(key)
        if key in self._duck_databases():
            self.con.execute(f"DETACH {quote_ident(key)}")

    def _catalog_options(self, s: AttachStatement) -> dict[str, Any]:
        opts = {k: v for k, v in s.options.items() if k not in _DUCKDB_ONLY}
        if "ENDPOINT_TYPE" in opts or str(opts.get("AUTHORIZATION_TYPE", "")).lower() == "sigv4":
            return self._aws_options(s, opts)
        secret_name = opts.pop("SECRET", None)
        secret: dict[str, Any] = {}
        if secret_name is not None:
            found = self.secrets.get(str(secret_name).lower())
            if found is None:
                raise SqlError(
                    f"ATTACH ... AS {s.name}: no secret of TYPE iceberg named {secret_name} (CREATE SECRET {secret_name} "
                    "(TYPE iceberg, CLIENT_ID ..., CLIENT_SECRET ... | TOKEN ...) first)"
                )
            secret = found
        elif "AUTHORIZATION_TYPE" not in opts and DEFAULT_SECRET in self.secrets:
            secret = self.secrets[DEFAULT_SECRET]
        options = {k: v for k, v in secret.items() if k not in _SECRET_ONLY}
        options.update(opts)
        if "ENDPOINT" not in options:
            raise SqlError(
                f"ATTACH '{s.path}' AS {s.name} (TYPE iceberg): give the catalog's ENDPOINT 'http(s)://...'"
            )
        options["WAREHOUSE"] = s.path
        options["NAME"] = s.name
        return {k.lower(): _option_value(k, v) for k, v in options.items()}

    def _aws_options(self, s: AttachStatement, opts: dict[str, Any]) -> dict[str, Any]:
        """The options of an ATTACH signed with AWS SigV4 (`AUTHORIZATION_TYPE 'sigv4'` or
        `ENDPOINT_TYPE glue | s3_tables`): as in DuckDB's extension, SECRET names a secret of TYPE
        s3 (the unnamed one, or one without a SCOPE, when none is named) whose keys and REGION
        sign; with none, botocore's chain (the AWS environment, profiles, roles) does."""
        secret_name = opts.pop("SECRET", None)
        registry = s3_registry(self.io)
        settings = registry.named_secret(None if secret_name is None else str(secret_name))
        if secret_name is not None and settings is None:
            raise SqlError(
                f"ATTACH ... AS {s.name}: no secret of TYPE s3 named {secret_name} (CREATE SECRET {secret_name} "
                "(TYPE s3, KEY_ID ..., SECRET ..., REGION ...) first)"
            )
        options: dict[str, Any] = dict(opts)
        if settings is not None:
            aws = {
                "AWS_ACCESS_KEY_ID": settings.access_key_id,
                "AWS_SECRET_ACCESS_KEY": settings.secret_access_key,
                "AWS_SESSION_TOKEN": settings.session_token,
                "AWS_REGION": settings.region,
                "AWS_PROFILE": settings.profile,
            }
            options.update({k: v for k, v in aws.items() if v is not None})
        options["WAREHOUSE"] = s.path
        options["NAME"] = s.name
        return {k.lower(): _option_value(k, v) for k, v in options.items()}

    def _secret(self, tokens: list[Token]) -> bool:
        """Keep (or drop) a secret of TYPE iceberg; False for any other statement."""
        secret = secret_statement(tokens)
        if secret is not None:
            if str(secret.options.get("TYPE", "")).lower() != ICEBERG:
                return False
            name = (secret.name or DEFAULT_SECRET).lower()
            if name in self.secrets and not secret.or_replace:
                if secret.if_not_exists:
                    return True
                raise SqlError(f"CREATE SECRET {secret.name or ''}: a secret of that name exists already")
            unknown = sorted(set(secret.options) - _SECRET_ONLY - {k.upper() for k in _CATALOG_OPTIONS})
            if unknown:
                raise SqlError(f"CREATE SECRET (TYPE iceberg): unknown option(s) {', '.join(unknown)}")
            self.secrets[name] = dict(secret.options)
            return True
        dropped = _drop_secret(tokens)
        if dropped is None or dropped[0].lower() not in self.secrets:
            return False
        del self.secrets[dropped[0].lower()]
        return True

    def _duck_databases(self) -> set[str]:
        return {
            str(r[0]).lower()
            for r in self.con.execute("SELECT database_name FROM duckdb_databases()").fetchall()
        }


# the options a secret of TYPE iceberg may carry (the REST catalog's own)
_CATALOG_OPTIONS = frozenset(
    {"endpoint", "client_id", "client_secret", "oauth2_server_uri", "oauth2_scope", "oauth2_grant_type",
     "token", "default_region", "authorization_type", "access_delegation_mode"}
)  # fmt: skip


def _option_value(key: str, value: Any) -> Any:
    if key.upper() == "TIMEOUT":
        try:
            return float(value)
        except (TypeError, ValueError):
            raise SqlError(f"TIMEOUT must be a number of seconds, not {value!r}") from None
    return value if isinstance(value, bool) else str(value)


def _strip(tokens: list[Token]) -> list[Token]:
    out = list(tokens)
    while out and out[-1].is_op(";"):
        out.pop()
    return out


def _words(tokens: list[Token], i: int, *words: str) -> bool:
    return len(tokens) >= i + len(words) and all(tokens[i + k].is_word(w) for k, w in enumerate(words))


def _value(token: Token) -> Any:
    if token.kind == WORD and token.text.upper() in ("TRUE", "FALSE"):
        return token.text.upper() == "TRUE"
    if token.kind in (STRING, NUMBER) or token.is_name:
        return token.text
    raise SqlError(f"ATTACH: unexpected option value {token.text!r}")


def _default_name(path: str) -> str:
    """DuckDB's default database name for an attached path: its last part, without an extension."""
    base = path.rstrip("/").rsplit("/", 1)[-1]
    return base.split(".", 1)[0] or path
