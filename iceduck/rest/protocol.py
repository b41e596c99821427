"""Wire conventions of the Iceberg REST catalog protocol, shared by `iceduck serve` and the client.

Pure: no I/O. Namespaces are lists of parts on the wire and dotted strings in iceduck (`["a", "b"]`
is `"a.b"`), so a part containing a dot has no iceduck name and is refused. In a URL path or the
`parent` query parameter, parts are joined with the unit separator 0x1F (`%1F` once encoded), the
spec's default `namespace-separator`.

Errors travel as the spec's `IcebergErrorResponse`: `{"error": {"message", "type", "code"}}`. The
`type` names are the Java exception names that the reference implementation and other clients
(PyIceberg, DuckDB's extension) recognise.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

from iceduck.errors import (
    AlreadyExistsError,
    CommitConflictError,
    CommitStateUnknownError,
    ForbiddenError,
    IcebergError,
    NamespaceNotFoundError,
    TableNotFoundError,
    ValidationError,
)

NAMESPACE_SEPARATOR = "\x1f"
ACCESS_DELEGATION_HEADER = "X-Iceberg-Access-Delegation"

# error `type` names
BAD_REQUEST = "BadRequestException"
NOT_AUTHORIZED = "NotAuthorizedException"
FORBIDDEN = "ForbiddenException"
NO_SUCH_NAMESPACE = "NoSuchNamespaceException"
NO_SUCH_TABLE = "NoSuchTableException"
NO_SUCH_VIEW = "NoSuchViewException"
NO_SUCH_FUNCTION = "NoSuchFunctionException"
NO_SUCH_PLAN_ID = "NoSuchPlanIdException"
NO_SUCH_PLAN_TASK = "NoSuchPlanTaskException"
ALREADY_EXISTS = "AlreadyExistsException"
NAMESPACE_NOT_EMPTY = "NamespaceNotEmptyException"
COMMIT_FAILED = "CommitFailedException"
COMMIT_STATE_UNKNOWN = "CommitStateUnknownException"
UNSUPPORTED = "UnsupportedOperationException"
UNPROCESSABLE = "UnprocessableEntityException"
SERVER_ERROR = "InternalServerError"
SERVICE_UNAVAILABLE = "ServiceUnavailableException"


def namespace_parts(namespace: str) -> list[str]:
    """`"a.b"` -> `["a", "b"]`."""
    return namespace.split(".")


def namespace_name(parts: Any) -> str:
    """`["a", "b"]` -> `"a.b"`; `ValidationError` for an empty list, a non-string, an empty part, or
    a part with a dot (iceduck names namespaces by dotted strings)."""
    if not isinstance(parts, list | tuple) or not parts:
        raise ValidationError(f"a namespace is a non-empty list of names, not {parts!r}")
    for part in parts:
        if not isinstance(part, str) or not part:
            raise ValidationError(f"namespace {list(parts)!r}: every level must be a non-empty string")
        if "." in part:
            raise ValidationError(
                f"namespace {list(parts)!r}: level {part!r} contains '.', which this catalog uses to "
                "join levels"
            )
    return ".".join(parts)


def encode_namespace(namespace: str) -> str:
    """A dotted namespace as one URL path segment: levels joined by `%1F`, each percent-encoded."""
    return quote(NAMESPACE_SEPARATOR.join(namespace_parts(namespace)), safe="")


def decode_namespace(segment: str) -> str:
    """A URL path segment (or `parent` value, already URL-decoded or not) -> dotted namespace."""
    return namespace_name(unquote(segment).split(NAMESPACE_SEPARATOR))


def table_identifier(namespace: str, name: str) -> dict[str, Any]:
    """The spec's `TableIdentifier` object."""
    return {"namespace": namespace_parts(namespace), "name": name}


def parse_table_identifier(obj: Any) -> tuple[str, str]:
    """A `TableIdentifier` object -> (dotted namespace, name); `ValidationError` if malformed."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        raise ValidationError(f"a table identifier is {{'namespace': [...], 'name': '...'}}, not {obj!r}")
    return namespace_name(obj.get("namespace")), obj["name"]


def error_body(code: int, error_type: str, message: str) -> dict[str, Any]:
    """The spec's `IcebergErrorResponse`."""
    return {"error": {"message": message, "type": error_type, "code": code}}


# (error class, HTTP status, error type) a server answers with, most specific first.
_ERROR_STATUSES: tuple[tuple[type[IcebergError], int, str], ...] = (
    (NamespaceNotFoundError, 404, NO_SUCH_NAMESPACE),
    (TableNotFoundError, 404, NO_SUCH_TABLE),
    (AlreadyExistsError, 409, ALREADY_EXISTS),
    (CommitConflictError, 409, COMMIT_FAILED),
    (ForbiddenError, 403, FORBIDDEN),
    (CommitStateUnknownError, 500, COMMIT_STATE_UNKNOWN),
)


def error_status(error: IcebergError) -> tuple[int, str]:
    """(HTTP status, error type) a server answers an iceduck error with."""
    for cls, status, error_type in _ERROR_STATUSES:
        if isinstance(error, cls):
            return status, error_type
    return 400, BAD_REQUEST


def error_for(
    code: int, error_type: str, message: str, *, commit: bool = False, where: str = ""
) -> IcebergError:
    """The iceduck error a client raises for an error response; `message` is the server's, `where`
    (the request) is added to it. On a commit, a 5xx leaves the outcome unknown."""
    text = f"{message} ({where})" if where else message
    if code == 404 or error_type in (NO_SUCH_NAMESPACE, NO_SUCH_TABLE, NO_SUCH_VIEW):
        about_namespace = error_type == NO_SUCH_NAMESPACE or (
            not error_type and "namespace" in message.lower() and "table" not in message.lower()
        )
        return NamespaceNotFoundError(text) if about_namespace else TableNotFoundError(text)
    if code == 409:
        if error_type == COMMIT_FAILED or commit:
            return CommitConflictError(text)
        if error_type == NAMESPACE_NOT_EMPTY:
            return ValidationError(text)
        return AlreadyExistsError(text)
    if code in (401, 403, 419):
        return ForbiddenError(text)
    if commit and code >= 500:
        return CommitStateUnknownError(
            f"{text}; the commit may or may not have been applied (reload the table to see)"
        )
    return ValidationError(text) if code < 500 else IcebergError(text)
