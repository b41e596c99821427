"""`POST /v1/{prefix}/transactions/commit` as a hostile client probes it (redteam, session 9): a
transaction cannot do what its tables' commits one by one may not, such as putting two tables in
one folder (purge and orphan removal of one would delete the other's files).

Truth: the catalog's own pointers (each table's location as served) before and after.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iceduck.serve.server import RestServer
from tests.support.rest_helpers import assert_error, call, serving

P = "/v1/iceduck"
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


def _create(name: str, location: str) -> dict[str, Any]:
    return {
        "identifier": {"namespace": ["ns"], "name": name},
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": str(uuid.uuid4())},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": SCHEMA, "last-column-id": 1},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": location},
        ],
    }


def _move(name: str, location: str) -> dict[str, Any]:
    return {
        "identifier": {"namespace": ["ns"], "name": name},
        "requirements": [],
        "updates": [{"action": "set-location", "location": location}],
    }


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestServer]:
    with serving(tmp_path / "wh") as s:
        call(s.url, "POST", f"{P}/namespaces", {"namespace": ["ns"]})
        for name in ("x", "y"):
            assert (
                call(s.url, "POST", f"{P}/namespaces/ns/tables", {"name": name, "schema": SCHEMA})[0] == 200
            )
        yield s


def test_a_transaction_puts_no_two_tables_in_one_folder(server: RestServer, tmp_path: Path) -> None:
    u = server.url
    folder = str(tmp_path / "wh" / "ns" / "shared")
    before = {n: call(u, "GET", f"{P}/namespaces/ns/tables/{n}")[1]["metadata-location"] for n in ("x", "y")}
    for changes in (
        [_create("a", folder), _create("b", folder)],  # two new tables, one location
        [_create("a", folder), _create("b", f"{folder}/inner")],  # one inside the other
        [_move("x", folder), _move("y", folder)],  # two tables moved to one place
        [_move("x", folder), _create("b", f"file://{folder}/sub/../inner")],
    ):
        status, body, _ = call(u, "POST", f"{P}/transactions/commit", {"table-changes": changes})
        assert_error(status, body, 400, "BadRequestException", "overlapping folders")
    assert call(u, "GET", f"{P}/namespaces/ns/tables")[1]["identifiers"] == [
        {"namespace": ["ns"], "name": "x"},
        {"namespace": ["ns"], "name": "y"},
    ]
    assert {
        n: call(u, "GET", f"{P}/namespaces/ns/tables/{n}")[1]["metadata-location"] for n in ("x", "y")
    } == before
    # apart, the same transaction commits
    changes = [_create("a", folder), _move("x", f"{folder}-2")]
    status, body, _ = call(u, "POST", f"{P}/transactions/commit", {"table-changes": changes})
    assert status == 204, body
