"""`iceduck serve` on the wire: every endpoint with raw HTTP, checked against the warehouse itself.

Truth here is the warehouse's own files and catalog (the SQLite file the embedded lake reads, the
metadata files the server writes), not the server's answers about itself.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import iceduck
from iceduck.catalog.sql import SqlCatalog
from iceduck.errors import ValidationError
from iceduck.serve.routes import Tokens
from iceduck.serve.server import RestServer, parse_credentials
from iceduck.spec.table_metadata import read_table_metadata
from tests.support.rest_helpers import assert_error, basic, call, serving

ICEDUCK = [sys.executable, "-c", "import sys; from iceduck.cli import main; sys.exit(main())"]
P = "/v1/iceduck"  # the prefix /v1/config hands out: the SQLite catalog's name

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "day", "type": "date", "required": False},
    ],
}


def create_body(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schema": SCHEMA, **extra}


@pytest.fixture
def server(tmp_path: Path):
    with serving(tmp_path / "wh") as s:
        yield s


def test_config_hands_out_the_prefix_and_endpoints(server: RestServer) -> None:
    status, body, _ = call(server.url, "GET", "/v1/config?warehouse=anything")
    assert status == 200
    assert body["overrides"]["prefix"] == "iceduck"
    assert body["defaults"] == {}
    assert "POST /v1/{prefix}/transactions/commit" in body["endpoints"]


def test_namespaces_nested_with_unit_separator(server: RestServer, tmp_path: Path) -> None:
    u = server.url
    assert call(u, "POST", f"{P}/namespaces", {"namespace": ["a"], "properties": {"owner": "me"}})[0] == 200
    assert call(u, "POST", f"{P}/namespaces", {"namespace": ["a", "b"]})[0] == 200
    assert call(u, "POST", f"{P}/namespaces", {"namespace": ["z"]})[0] == 200
    status, body, _ = call(u, "POST", f"{P}/namespaces", {"namespace": ["a"]})
    assert_error(status, body, 409, "AlreadyExistsException", "'a'")
    assert call(u, "GET", f"{P}/namespaces")[1] == {"namespaces": [["a"], ["z"]]}
    assert call(u, "GET", f"{P}/namespaces?parent=a")[1] == {"namespaces": [["a", "b"]]}
    assert call(u, "GET", f"{P}/namespaces?parent=a%1Fb")[1] == {"namespaces": []}
    assert call(u, "HEAD", f"{P}/namespaces/a%1Fb")[0] == 204
    status, _, _ = call(u, "HEAD", f"{P}/namespaces/a%1Fc")
    assert status == 404
    status, body, _ = call(u, "GET", f"{P}/namespaces/nope")
    assert_error(status, body, 404, "NoSuchNamespaceException", "nope")
    assert call(u, "GET", f"{P}/namespaces/a")[1] == {"namespace": ["a"], "properties": {"owner": "me"}}
    # the embedded catalog of the same warehouse sees the same namespaces
    assert SqlCatalog.open(str(tmp_path / "wh")).list_namespaces("a") == ("a.b",)


def test_namespace_properties_and_drop(server: RestServer) -> None:
    u = server.url
    call(u, "POST", f"{P}/namespaces", {"namespace": ["n"], "properties": {"k1": "v1", "k2": "v2"}})
    status, body, _ = call(
        u, "POST", f"{P}/namespaces/n/properties", {"updates": {"k3": "v3"}, "removals": ["k1", "gone"]}
    )
    assert status == 200
    assert body == {"updated": ["k3"], "removed": ["k1"], "missing": ["gone"]}
    assert call(u, "GET", f"{P}/namespaces/n")[1]["properties"] == {"k2": "v2", "k3": "v3"}
    status, body, _ = call(
        u, "POST", f"{P}/namespaces/n/properties", {"updates": {"a": "1"}, "removals": ["a"]}
    )
    assert_error(status, body, 422, "UnprocessableEntityException", "a")
    call(u, "POST", f"{P}/namespaces/n/tables", create_body("t"))
    status, body, _ = call(u, "DELETE", f"{P}/namespaces/n")
    assert_error(status, body, 409, "NamespaceNotEmptyException", "table t")
    assert call(u, "DELETE", f"{P}/namespaces/n/tables/t")[0] == 204
    assert call(u, "DELETE", f"{P}/namespaces/n")[0] == 204
    assert call(u, "GET", f"{P}/namespaces")[1] == {"namespaces": []}


def test_create_load_list_rename_drop(server: RestServer, tmp_path: Path) -> None:
    u = server.url
    call(u, "POST", f"{P}/namespaces", {"namespace": ["ns"]})
    spec = {"spec-id": 0, "fields": [{"source-id": 2, "transform": "day", "name": "d"}]}
    status, body, headers = call(
        u, "POST", f"{P}/namespaces/ns/tables",
        create_body("t", **{"partition-spec": spec, "properties": {"format-version": "3", "k": "v"}}),
    )  # fmt: skip
    assert status == 200, body
    location = body["metadata-location"]
    on_disk = read_table_metadata(Path(location).read_bytes(), path=location)
    assert on_disk.format_version == 3 and dict(on_disk.properties) == {"k": "v"}
    assert on_disk.default_spec.fields[0].field_id == 1000  # assigned: the client sent none
    assert location.startswith(str(tmp_path / "wh" / "ns" / "t" / "metadata"))
    assert headers.get("ETag")
    status, loaded, _ = call(u, "GET", f"{P}/namespaces/ns/tables/t")
    assert status == 200 and loaded["metadata-location"] == location
    assert loaded["metadata"] == json.loads(Path(location).read_text())
    assert call(u, "HEAD", f"{P}/namespaces/ns/tables/t")[0] == 204
    status, body, _ = call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))
    assert_error(status, body, 409, "AlreadyExistsException", "ns.t")
    status, body, _ = call(u, "POST", f"{P}/namespaces/nope/tables", create_body("t"))
    assert_error(status, body, 404, "NoSuchNamespaceException", "nope")
    assert call(u, "GET", f"{P}/namespaces/ns/tables")[1] == {
        "identifiers": [{"namespace": ["ns"], "name": "t"}]
    }
    rename = {
        "source": {"namespace": ["ns"], "name": "t"},
        "destination": {"namespace": ["ns"], "name": "t2"},
    }
    assert call(u, "POST", f"{P}/tables/rename", rename)[0] == 204
    status, body, _ = call(u, "GET", f"{P}/namespaces/ns/tables/t")
    assert_error(status, body, 404, "NoSuchTableException", "ns.t")
    assert SqlCatalog.open(str(tmp_path / "wh")).load_table("ns", "t2") == location
    # drop with purge removes the table's files too
    assert call(u, "DELETE", f"{P}/namespaces/ns/tables/t2?purgeRequested=true")[0] == 204
    assert not Path(location).exists()
    status, body, _ = call(u, "DELETE", f"{P}/namespaces/ns/tables/t2")
    assert_error(status, body, 404, "NoSuchTableException")


def test_bad_requests_are_json_errors(server: RestServer) -> None:
    u = server.url
    call(u, "POST", f"{P}/namespaces", {"namespace": ["ns"]})
    status, body, _ = call(u, "POST", f"{P}/namespaces", b"{not json")
    assert_error(status, body, 400, "BadRequestException", "JSON")
    status, body, _ = call(u, "POST", f"{P}/namespaces", {"namespace": ["a.b"]})
    assert_error(status, body, 400, "BadRequestException", "'.'")
    call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))
    commit = {"requirements": [], "updates": [{"action": "no-such-update"}]}
    status, body, _ = call(u, "POST", f"{P}/namespaces/ns/tables/t", commit)
    assert_error(status, body, 400, "BadRequestException", "no-such-update")
    status, body, _ = call(u, "GET", f"{P}/namespaces/ns/tables/t?snapshots=some")
    assert_error(status, body, 400, "BadRequestException", "snapshots")


def _commit_properties(
    url: str, table: str, props: dict[str, str], requirements: list[Any]
) -> tuple[int, Any]:
    body = {"requirements": requirements, "updates": [{"action": "set-properties", "updates": props}]}
    status, answer, _ = call(url, "POST", f"{P}/namespaces/ns/tables/{table}", body)
    return status, answer


def test_commit_checks_requirements_and_writes_a_new_file(server: RestServer, tmp_path: Path) -> None:
    u = server.url
    call(u, "POST", f"{P}/namespaces", {"namespace": ["ns"]})
    created = call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))[1]
    uuid_text = created["metadata"]["table-uuid"]
    status, body = _commit_properties(u, "t", {"a": "1"}, [{"type": "assert-table-uuid", "uuid": uuid_text}])
    assert status == 200, body
    first = body["metadata-location"]
    assert first != created["metadata-location"] and Path(first).exists()
    md = read_table_metadata(Path(first).read_bytes())
    assert md.properties["a"] == "1"
    assert [e.metadata_file for e in md.metadata_log] == [created["metadata-location"]]
    # a failing requirement: 409 naming it, and the table unchanged
    wrong = "00000000-0000-0000-0000-000000000001"
    status, body = _commit_properties(u, "t", {"a": "2"}, [{"type": "assert-table-uuid", "uuid": wrong}])
    assert_error(status, body, 409, "CommitFailedException", "assert-table-uuid")
    status, body = _commit_properties(
        u, "t", {"a": "2"}, [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 42}]
    )
    assert_error(status, body, 409, "CommitFailedException", "assert-ref-snapshot-id", "main")
    assert SqlCatalog.open(str(tmp_path / "wh")).load_table("ns", "t") == first
    status, body, _ = call(u, "POST", f"{P}/namespaces/ns/tables/nope", {"requirements": [], "updates": []})
    assert_error(status, body, 404, "NoSuchTableException", "ns.nope")


def test_stage_create_then_assert_create(server: RestServer) -> None:
    u = server.url
    call(u, "POST", f"{P}/namespaces", {"namespace": ["ns"]})
    status, staged, _ = call(
        u, "POST", f"{P}/namespaces/ns/tables", create_body("s", **{"stage-create": True})
    )
    assert status == 200 and staged["metadata-location"] is None
    assert call(u, "HEAD", f"{P}/namespaces/ns/tables/s")[0] == 404  # staged only
    md = staged["metadata"]
    updates = [
        {"action": "assign-uuid", "uuid": md["table-uuid"]},
        {"action": "upgrade-format-version", "format-version": 2},
        {"action": "add-schema", "schema": md["schemas"][0]},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-location", "location": md["location"]},
    ]
    commit = {"requirements": [{"type": "assert-create"}], "updates": updates}
    status, body, _ = call(u, "POST", f"{P}/namespaces/ns/tables/s", commit)
    assert status == 200, body
    assert Path(body["metadata-location"]).exists()
    assert body["metadata"]["table-uuid"] == md["table-uuid"]
    status, body, _ = call(u, "POST", f"{P}/namespaces/ns/tables/s", commit)
    assert_error(status, body, 409, "CommitFailedException", "assert-create")


def test_transaction_is_all_or_nothing(server: RestServer, tmp_path: Path) -> None:
    u = server.url
    call(u, "POST", f"{P}/namespaces", {"namespace": ["ns"]})
    a = call(u, "POST", f"{P}/namespaces/ns/tables", create_body("a"))[1]
    b = call(u, "POST", f"{P}/namespaces/ns/tables", create_body("b"))[1]

    def change(name: str, uuid_text: str, value: str) -> dict[str, Any]:
        return {
            "identifier": {"namespace": ["ns"], "name": name},
            "requirements": [{"type": "assert-table-uuid", "uuid": uuid_text}],
            "updates": [{"action": "set-properties", "updates": {"v": value}}],
        }

    good_a = change("a", a["metadata"]["table-uuid"], "1")
    bad_b = change("b", "00000000-0000-0000-0000-000000000002", "1")
    status, body, _ = call(u, "POST", f"{P}/transactions/commit", {"table-changes": [good_a, bad_b]})
    assert_error(status, body, 409, "CommitFailedException", "ns.b")
    catalog = SqlCatalog.open(str(tmp_path / "wh"))
    assert catalog.load_table("ns", "a") == a["metadata-location"]  # a did not move either
    metadata_files = sorted((tmp_path / "wh" / "ns" / "a" / "metadata").iterdir())
    assert len(metadata_files) == 1  # and the attempt's file was removed
    good_b = change("b", b["metadata"]["table-uuid"], "2")
    assert call(u, "POST", f"{P}/transactions/commit", {"table-changes": [good_a, good_b]})[0] == 204
    for name, value in (("a", "1"), ("b", "2")):
        location = catalog.load_table("ns", name)
        assert read_table_metadata(Path(location).read_bytes()).properties["v"] == value


def test_concurrent_commits_through_the_server_lose_nothing(server: RestServer, tmp_path: Path) -> None:
    """Many clients set one property each with no requirement; the embedded lake commits at once
    through the same SQLite file; every acknowledged change is in the final metadata."""
    u = server.url
    call(u, "POST", f"{P}/namespaces", {"namespace": ["ns"]})
    call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))
    acked: list[str] = []
    lock = threading.Lock()

    def rest_writer(i: int) -> None:
        status, _ = _commit_properties(u, "t", {f"rest{i}": "x"}, [])
        if status == 200:
            with lock:
                acked.append(f"rest{i}")

    def embedded_writer() -> None:
        lake = iceduck.connect(tmp_path / "wh")
        for i in range(5):
            lake.table("ns.t").set_properties({f"lake{i}": "x"})
            with lock:
                acked.append(f"lake{i}")

    threads = [threading.Thread(target=rest_writer, args=(i,)) for i in range(12)]
    threads.append(threading.Thread(target=embedded_writer))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(acked) == 17
    location = SqlCatalog.open(str(tmp_path / "wh")).load_table("ns", "t")
    props = read_table_metadata(Path(location).read_bytes()).properties
    assert set(acked) <= set(props)


def test_oauth2_client_credentials(tmp_path: Path) -> None:
    with serving(tmp_path / "wh", credentials=("me", "s3cret"), token_lifetime_s=3) as server:
        u = server.url
        status, body, _ = call(u, "GET", "/v1/config")
        assert_error(status, body, 401, "NotAuthorizedException", "token")
        form = {"grant_type": "client_credentials", "scope": "PRINCIPAL_ROLE:ALL"}
        status, body, _ = call(u, "POST", "/v1/oauth/tokens", form=form, headers=basic("me", "wrong"))
        assert status == 401 and body["error"] == "invalid_client"
        status, body, _ = call(u, "POST", "/v1/oauth/tokens", form=form, headers=basic("me", "s3cret"))
        assert status == 200 and body["token_type"] == "bearer" and body["expires_in"] == 3
        token = body["access_token"]
        status, body, _ = call(
            u, "POST", "/v1/oauth/tokens", form={**form, "client_id": "me", "client_secret": "s3cret"}
        )
        assert status == 200 and body["access_token"] != token  # credentials in the form work too
        bearer = {"Authorization": f"Bearer {token}"}
        assert call(u, "GET", "/v1/config", headers=bearer)[0] == 200
        assert call(u, "GET", "/v1/config", headers={"Authorization": "Bearer forged"})[0] == 401
        time.sleep(3.2)
        assert call(u, "GET", "/v1/config", headers=bearer)[0] == 401  # expired


def test_token_issue_stays_cheap_and_bounded(tmp_path: Path) -> None:
    """Asking for tokens again and again (anyone may, on a server without credentials) neither slows
    the token check every request takes nor grows the server's memory: 30,000 issues take
    seconds, not minutes (each rebuilt the whole token table), a server without credentials keeps
    none (it checks none), and one with credentials keeps at most `max_live`."""
    tokens = Tokens(max_live=1000)
    started = time.perf_counter()
    issued = [tokens.issue() for _ in range(30_000)]
    assert time.perf_counter() - started < 10
    assert len(tokens.issued) == 1000
    assert tokens.valid(issued[-1]) and not tokens.valid(issued[0])
    with serving(tmp_path / "wh") as server:
        form = {"grant_type": "client_credentials"}
        for _ in range(5):
            status, body, _ = call(server.url, "POST", "/v1/oauth/tokens", form=form)
            assert status == 200 and body["access_token"]
        assert server.router.tokens.issued == {}


def test_parse_credentials() -> None:
    assert parse_credentials("id:se:cret") == ("id", "se:cret")
    with pytest.raises(ValidationError, match="CLIENT_ID:CLIENT_SECRET"):
        parse_credentials("id-only")


def test_shutdown_lets_a_request_in_flight_finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = RestServer(str(tmp_path / "wh"), port=0).start()
    original = server.warehouse.list_namespaces
    started = threading.Event()

    def slow(parent: str | None) -> dict[str, Any]:
        started.set()
        time.sleep(0.5)
        return original(parent)

    monkeypatch.setattr(server.warehouse, "list_namespaces", slow)
    result: list[int] = []
    t = threading.Thread(target=lambda: result.append(call(server.url, "GET", f"{P}/namespaces")[0]))
    t.start()
    started.wait(5)
    server.stop()
    t.join()
    assert result == [200]


def test_serve_command_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*ICEDUCK, "serve", "--warehouse", str(tmp_path / "wh"), "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        assert "iceduck serve: warehouse" in banner and "no authentication" in banner, banner
        url = banner.split(" at ", 1)[1].split(" ", 1)[0]
        assert call(url, "POST", f"{P}/namespaces", {"namespace": ["cli"]})[0] == 200
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert "POST /v1/iceduck/namespaces 200" in rest and "iceduck serve: stopped" in rest
    assert SqlCatalog.open(str(tmp_path / "wh")).list_namespaces() == ("cli",)


def test_serve_refuses_an_open_address_without_credentials(tmp_path: Path) -> None:
    done = subprocess.run(
        [*ICEDUCK, "serve", "--warehouse", str(tmp_path / "wh"), "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "without authentication" in done.stderr and "Traceback" not in done.stderr


def test_unregister_keeps_the_files_and_register_brings_the_table_back(server: RestServer) -> None:
    u = server.url
    call(u, "POST", f"{P}/namespaces", {"namespace": ["ns"]})
    created = call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))[1]
    status, body, _ = call(u, "POST", f"{P}/namespaces/ns/tables/t/unregister")
    assert status == 200 and body["metadata-location"] == created["metadata-location"]
    assert call(u, "HEAD", f"{P}/namespaces/ns/tables/t")[0] == 404
    assert Path(created["metadata-location"]).exists()
    register = {"name": "back", "metadata-location": created["metadata-location"]}
    status, body, _ = call(u, "POST", f"{P}/namespaces/ns/register", register)
    assert status == 200 and body["metadata"]["table-uuid"] == created["metadata"]["table-uuid"]
    assert call(u, "HEAD", f"{P}/namespaces/ns/tables/back")[0] == 204
    # what the catalog does not offer is answered with statuses the spec documents for the route
    assert call(u, "GET", f"{P}/namespaces/ns/views")[1] == {"identifiers": []}
    assert call(u, "GET", f"{P}/namespaces/ns/functions")[1] == {"identifiers": []}
    status, body, _ = call(u, "POST", f"{P}/namespaces/ns/tables/back/plan", {})
    assert_error(status, body, 400, "UnsupportedOperationException", "planning")
    status, body, _ = call(u, "GET", f"{P}/namespaces/ns/views/v")
    assert_error(status, body, 404, "NoSuchViewException", "ns.v")


def test_locations_stay_inside_the_warehouse(server: RestServer, tmp_path: Path) -> None:
    u = server.url
    call(u, "POST", f"{P}/namespaces", {"namespace": ["ns"]})
    for location in ("relative/t", "/tmp/elsewhere", str(tmp_path / "wh-sibling" / "t")):
        status, body, _ = call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t", location=location))
        assert_error(status, body, 400, "BadRequestException", "not inside the warehouse")
    status, body, _ = call(
        u, "POST", f"{P}/namespaces/ns/register", {"name": "r", "metadata-location": "/etc/passwd"}
    )
    assert_error(status, body, 400, "BadRequestException", "not inside the warehouse")
    call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))
    commit = {"requirements": [], "updates": [{"action": "set-location", "location": "/tmp/x"}]}
    status, body, _ = call(u, "POST", f"{P}/namespaces/ns/tables/t", commit)
    assert_error(status, body, 400, "BadRequestException", "not inside the warehouse")
    inside = str(tmp_path / "wh" / "custom" / "t2")
    status, _, _ = call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t2", location=inside))
    assert status == 200
