"""`iceduck serve` as an attacker probes it (issue 24): no request reads, writes or deletes a file
outside the warehouse, and a table's files stay inside its location.

Every probe goes through `RestServer`'s public face (its URL, raw HTTP requests) or a `Warehouse`
method, so it holds whatever carries the HTTP. Truth: the files on disk (a victim folder beside the
warehouse, written before and read after), boto3 listing the buckets, the catalog's own pointer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import iceduck
from iceduck.catalog.sql import SqlCatalog
from iceduck.serve.server import RestServer
from iceduck.serve.warehouse import Warehouse
from iceduck.spec import updates as upd
from tests.rest.test_rest_interop import rest_peer  # noqa: F401  (the peer with httpfs, a fixture)
from tests.support.peer import Peer
from tests.support.rest_helpers import assert_error, call, serving
from tests.support.s3_fixture import BUCKET, S3Server, s3_warehouse

P = "/v1/iceduck"
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}
BAD = ("BadRequestException",)


def create_body(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schema": SCHEMA, **extra}


def snapshot(snapshot_id: int, manifest_list: str, **extra: Any) -> dict[str, Any]:
    return {
        "snapshot-id": snapshot_id,
        "sequence-number": snapshot_id,
        "timestamp-ms": 1_700_000_000_000 + snapshot_id,
        "manifest-list": manifest_list,
        "summary": {"operation": "append"},
        "schema-id": 0,
        **extra,
    }


def statistics(snapshot_id: int, path: str) -> dict[str, Any]:
    return {
        "snapshot-id": snapshot_id,
        "statistics-path": path,
        "file-size-in-bytes": 10,
        "file-footer-size-in-bytes": 4,
        "blob-metadata": [],
    }


@pytest.fixture
def wh(tmp_path: Path) -> Path:
    return tmp_path / "wh"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A folder beside the warehouse with a file in it: nothing the server does may touch either."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "precious.txt").write_text("keep me")
    return folder


@pytest.fixture
def server(wh: Path) -> Iterator[RestServer]:
    with serving(wh) as s:
        call(s.url, "POST", f"{P}/namespaces", {"namespace": ["ns"]})
        yield s


def _untouched(victim: Path) -> None:
    assert sorted(p.name for p in victim.iterdir()) == ["precious.txt"]
    assert (victim / "precious.txt").read_text() == "keep me"


def _commit(u: str, table: str, *updates: dict[str, Any]) -> tuple[int, Any]:
    status, body, _ = call(
        u, "POST", f"{P}/namespaces/ns/tables/{table}", {"requirements": [], "updates": list(updates)}
    )
    return status, body


def _refused(status: int, body: Any, *words: str, sent: str = "") -> None:
    """A 400 in the spec's error model, naming `words`; apart from the path the client `sent`, no
    server file (the catalog database) in it."""
    assert_error(status, body, 400, BAD[0], *words)
    assert "catalog.db" not in body["error"]["message"].replace(repr(sent), "")


# -- probe 2: `..`, percent-encoding, symlinks in locations ---------------------------------------


def test_create_table_locations_that_climb_out_are_refused(
    server: RestServer, wh: Path, victim: Path
) -> None:
    (wh / "ns").mkdir(parents=True, exist_ok=True)
    (wh / "ns" / "door").symlink_to(victim)
    for location in (
        f"{wh}/../victim/t",
        f"{wh}/%2e%2e/victim/t",
        f"{wh}/ns/%252e%252e/%252e%252e/victim/t",
        f"file://{wh}/../victim/t",
        f"{wh}//ns/../../victim/t",
        f"{wh}/ns/door/t",  # a symlink inside the warehouse pointing out
        str(wh),  # the warehouse itself (it holds catalog.db): no table owns it
        f"{wh}/catalog.db",  # a file, not a folder
        "s3://lake/t",
    ):
        status, body, _ = call(
            server.url, "POST", f"{P}/namespaces/ns/tables", create_body("t", location=location)
        )
        _refused(status, body, "location", sent=location)
        assert str(wh) + "/" not in body["error"]["message"].replace(location, "")  # no server path of ours
    _untouched(victim)
    assert call(server.url, "HEAD", f"{P}/namespaces/ns/tables/t")[0] == 404
    # the same refusal for a staged create, which writes nothing but hands the location out
    status, body, _ = call(
        server.url,
        "POST",
        f"{P}/namespaces/ns/tables",
        create_body("s", location=f"{wh}/../victim/s", **{"stage-create": True}),
    )
    _refused(status, body, "location")
    _untouched(victim)


def test_set_location_out_of_the_warehouse_is_refused(server: RestServer, wh: Path, victim: Path) -> None:
    u = server.url
    assert call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))[0] == 200
    before = SqlCatalog.open(str(wh)).load_table("ns", "t")
    for location in (
        f"{wh}/../victim/moved",
        f"{wh}/ns/%2e%2e/%2e%2e/victim/moved",
        f"{wh}/ns/t/../../../victim",
    ):
        _refused(*_commit(u, "t", {"action": "set-location", "location": location}), "set-location")
    assert SqlCatalog.open(str(wh)).load_table("ns", "t") == before
    _untouched(victim)


def test_a_table_location_inside_another_tables_is_refused(server: RestServer, wh: Path) -> None:
    u = server.url
    assert call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))[0] == 200
    status, body, _ = call(
        u, "POST", f"{P}/namespaces/ns/tables", create_body("n", location=f"{wh}/ns/t/data/n")
    )
    _refused(status, body, "inside the location of", "ns.t")
    assert call(u, "POST", f"{P}/namespaces/ns/tables", create_body("m"))[0] == 200
    _refused(*_commit(u, "m", {"action": "set-location", "location": f"{wh}/ns/t"}), "is the location of")
    # in a transaction too (checked on each table's new metadata before any file is written)
    changes = [
        {
            "identifier": {"namespace": ["ns"], "name": "m"},
            "requirements": [],
            "updates": [{"action": "set-location", "location": f"{wh}/ns/t/data/m"}],
        },
        {
            "identifier": {"namespace": ["ns"], "name": "t"},
            "requirements": [],
            "updates": [{"action": "add-snapshot", "snapshot": snapshot(7, f"{wh}/ns/m/metadata/snap.avro")}],
        },
    ]
    before = sorted(p.name for p in (wh / "ns" / "t" / "metadata").iterdir())
    for change in (changes[:1], changes[1:]):
        status, body, _ = call(u, "POST", f"{P}/transactions/commit", {"table-changes": change})
        _refused(status, body, "ns.")
    assert sorted(p.name for p in (wh / "ns" / "t" / "metadata").iterdir()) == before


def test_register_outside_answers_alike_whether_or_not_the_file_exists(
    server: RestServer, wh: Path, victim: Path
) -> None:
    u = server.url
    created = call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))[1]
    # a valid metadata file outside the warehouse, one that is no metadata, and none at all
    (victim / "x.metadata.json").write_text(Path(created["metadata-location"]).read_text())
    depth = "/..".join("" for _ in range(len(wh.parts) + 2))
    answers = []
    for target in (f"{wh}/../victim/x.metadata.json", f"{wh}{depth}/etc/passwd", f"{wh}/../victim/none.json"):
        status, body, _ = call(
            u, "POST", f"{P}/namespaces/ns/register", {"name": "r", "metadata-location": target}
        )
        _refused(status, body, "metadata-location")
        answers.append(
            (status, body["error"]["type"], body["error"]["message"].replace(repr(target), "<path>"))
        )
    assert len(set(answers)) == 1, answers
    assert call(u, "HEAD", f"{P}/namespaces/ns/tables/r")[0] == 404
    # a link inside the warehouse to a file outside is outside
    (wh / "ns" / "link.metadata.json").symlink_to(victim / "x.metadata.json")
    target = f"{wh}/ns/link.metadata.json"
    status, body, _ = call(
        u, "POST", f"{P}/namespaces/ns/register", {"name": "r", "metadata-location": target}
    )
    _refused(status, body, "metadata-location")
    assert (
        status,
        body["error"]["type"],
        body["error"]["message"].replace(repr(target), "<path>"),
    ) == answers[0]
    (wh / "ns" / "link.metadata.json").unlink()
    (victim / "x.metadata.json").unlink()
    _untouched(victim)
    # inside the warehouse a missing file is a 404, a file that is no metadata a 400
    status, body, _ = call(
        u,
        "POST",
        f"{P}/namespaces/ns/register",
        {"name": "r", "metadata-location": f"{wh}/ns/t/metadata/no.metadata.json"},
    )
    assert_error(status, body, 404, "NoSuchTableException", "no.metadata.json")
    (wh / "ns" / "junk.metadata.json").write_text("{not json")
    status, body, _ = call(
        u,
        "POST",
        f"{P}/namespaces/ns/register",
        {"name": "r", "metadata-location": f"{wh}/ns/junk.metadata.json"},
    )
    assert status == 400


def test_namespace_locations_stay_inside_the_warehouse(server: RestServer, wh: Path, victim: Path) -> None:
    u = server.url
    for location in (str(victim), f"{wh}/../victim"):
        status, body, _ = call(
            u, "POST", f"{P}/namespaces", {"namespace": ["n"], "properties": {"location": location}}
        )
        _refused(status, body, "location")
        status, body, _ = call(
            u, "POST", f"{P}/namespaces/ns/properties", {"updates": {"location": location}}
        )
        _refused(status, body, "location")
    assert (
        call(u, "POST", f"{P}/namespaces/ns/properties", {"updates": {"location": f"{wh}/custom"}})[0] == 200
    )
    created = call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))[1]
    assert created["metadata"]["location"] == f"{wh}/custom/t"
    _untouched(victim)


# -- probe 3: write.*.path properties ------------------------------------------------------------


WRITE_PATHS = (
    "write.metadata.path",
    "write.data.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)


@pytest.mark.parametrize("key", WRITE_PATHS)
def test_write_path_properties_stay_inside_the_table(
    server: RestServer, wh: Path, victim: Path, key: str
) -> None:
    u = server.url
    for outside in (str(victim), f"{wh}/../victim", f"{wh}/elsewhere"):
        status, body, _ = call(
            u, "POST", f"{P}/namespaces/ns/tables", create_body("t", properties={key: outside})
        )
        _refused(status, body, key)
    assert call(u, "HEAD", f"{P}/namespaces/ns/tables/t")[0] == 404
    assert (
        call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t", properties={key: f"{wh}/ns/t/files"}))[
            0
        ]
        == 200
    )
    for outside in (str(victim), f"{wh}/ns/t/../../../victim"):
        _refused(*_commit(u, "t", {"action": "set-properties", "updates": {key: outside}}), key)
    assert _commit(u, "t", {"action": "set-properties", "updates": {key: f"{wh}/ns/t/other"}})[0] == 200
    _untouched(victim)


# -- probe 1: commits naming files outside, and purge --------------------------------------------


def test_commits_naming_files_outside_the_table_are_refused(
    server: RestServer, wh: Path, victim: Path
) -> None:
    u = server.url
    created = call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))[1]
    call(u, "POST", f"{P}/namespaces/ns/tables", create_body("other"))
    precious = str(victim / "precious.txt")
    others = f"{wh}/ns/other/metadata/x.avro"
    for target in (precious, f"{wh}/ns/t/../../../victim/precious.txt", others, f"{wh}/catalog.db"):
        status, body = _commit(u, "t", {"action": "add-snapshot", "snapshot": snapshot(1, target)})
        _refused(status, body, "manifest-list", sent=target)
    v1 = {k: v for k, v in snapshot(1, "").items() if k != "manifest-list"} | {"manifests": [precious]}
    _refused(*_commit(u, "t", {"action": "add-snapshot", "snapshot": v1}), "manifest")
    # a snapshot inside, then statistics naming files outside
    assert (
        _commit(
            u, "t", {"action": "add-snapshot", "snapshot": snapshot(1, f"{wh}/ns/t/metadata/snap-1.avro")}
        )[0]
        == 200
    )
    _refused(
        *_commit(
            u, "t", {"action": "set-statistics", "snapshot-id": 1, "statistics": statistics(1, precious)}
        ),
        "statistics-path",
    )
    part = {"snapshot-id": 1, "statistics-path": precious, "file-size-in-bytes": 10}
    _refused(
        *_commit(u, "t", {"action": "set-partition-statistics", "partition-statistics": part}),
        "statistics-path",
    )
    # a transaction is guarded the same way
    change = {
        "identifier": {"namespace": ["ns"], "name": "t"},
        "requirements": [],
        "updates": [{"action": "add-snapshot", "snapshot": snapshot(2, precious)}],
    }
    status, body, _ = call(u, "POST", f"{P}/transactions/commit", {"table-changes": [change]})
    _refused(status, body, "manifest-list")
    # then purge: the table's own files go, nothing outside its location does
    assert call(u, "DELETE", f"{P}/namespaces/ns/tables/t?purgeRequested=true")[0] == 204
    _untouched(victim)
    assert not Path(created["metadata-location"]).exists()
    assert (wh / "catalog.db").exists() and (wh / "ns" / "other" / "metadata").exists()


def test_purge_deletes_only_what_the_table_reaches_inside_its_location(wh: Path, victim: Path) -> None:
    """A table whose metadata names files outside (written by another tool, or before this guard):
    purge leaves them, and the files of another table too."""
    warehouse = Warehouse(str(wh))
    warehouse.create_namespace({"namespace": ["ns"]})
    warehouse.create_table("ns", create_body("t"))
    other = warehouse.create_table("ns", create_body("o")).body["metadata-location"]
    own = wh / "ns" / "t" / "metadata" / "stats.puffin"
    own.write_bytes(b"stats")
    precious = str(victim / "precious.txt")
    # committed around the server's guard, as another tool with the catalog's file could
    warehouse.catalog.commit_table(
        "ns",
        "t",
        [],
        upd.updates_from_json(
            [
                {"action": "add-snapshot", "snapshot": snapshot(1, precious)},
                {"action": "add-snapshot", "snapshot": snapshot(2, other)},
                {"action": "set-statistics", "snapshot-id": 1, "statistics": statistics(1, str(own))},
                {
                    "action": "set-statistics",
                    "snapshot-id": 2,
                    "statistics": statistics(2, f"{wh}/../victim/precious.txt"),
                },
            ]
        ),
    )
    warehouse.drop_table("ns", "t", purge=True)
    _untouched(victim)
    assert Path(other).exists()
    assert not own.exists() and not (wh / "ns" / "t").exists()


def test_purge_on_s3_leaves_other_buckets_and_other_prefixes(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    where = s3_warehouse(request, tmp_path)
    moto: S3Server = request.getfixturevalue("moto_s3")
    client: Any = moto.client()
    other_bucket = f"other-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=other_bucket)
    client.put_object(Bucket=other_bucket, Key="precious", Body=b"keep")
    outside_key = where.split(f"s3://{BUCKET}/", 1)[1].rsplit("/", 1)[0] + "/outside/precious"
    client.put_object(Bucket=BUCKET, Key=outside_key, Body=b"keep")
    with serving(where) as server:  # type: ignore[arg-type]
        u = server.url
        call(u, "POST", f"{P}/namespaces", {"namespace": ["ns"]})
        assert call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))[0] == 200
        for target in (
            f"s3://{other_bucket}/precious",
            f"s3a://{other_bucket}/precious",
            f"s3://{BUCKET}/{outside_key}",
            f"{where}/../outside/precious",
        ):
            _refused(
                *_commit(u, "t", {"action": "add-snapshot", "snapshot": snapshot(1, target)}), "manifest-list"
            )
        server.warehouse.catalog.commit_table(
            "ns",
            "t",
            [],
            upd.updates_from_json(
                [
                    {"action": "add-snapshot", "snapshot": snapshot(1, f"s3://{other_bucket}/precious")},
                    {"action": "add-snapshot", "snapshot": snapshot(2, f"s3a://{BUCKET}/{outside_key}")},
                ]
            ),
        )
        assert call(u, "DELETE", f"{P}/namespaces/ns/tables/t?purgeRequested=true")[0] == 204
    assert client.get_object(Bucket=other_bucket, Key="precious")["Body"].read() == b"keep"
    assert client.get_object(Bucket=BUCKET, Key=outside_key)["Body"].read() == b"keep"
    table_prefix = where.split(f"s3://{BUCKET}/", 1)[1] + "/ns/t/"
    assert client.list_objects_v2(Bucket=BUCKET, Prefix=table_prefix).get("KeyCount", 0) == 0


# -- probe 7: names --------------------------------------------------------------------------------


def test_names_with_slashes_control_characters_or_too_long_are_refused(server: RestServer, wh: Path) -> None:
    u = server.url
    for name in ("a/b", "..", "a\nb", "a\x7fb", "a\x00b", "a\rb", "a\x1bb", "a\x85b", "a\ud800b", "x" * 300):
        status, body, _ = call(u, "POST", f"{P}/namespaces/ns/tables", create_body(name))
        _refused(status, body, "table name")
        assert str(wh) not in body["error"]["message"]
    for level in ("a\x00b", "a\rb", "a\nb", "a\x1b[31mb", "a/b", "y" * 300):
        status, body, _ = call(u, "POST", f"{P}/namespaces", {"namespace": [level]})
        _refused(status, body, "namespace")
    assert call(u, "GET", f"{P}/namespaces")[1] == {"namespaces": [["ns"]]}
    assert call(u, "GET", f"{P}/namespaces/ns/tables")[1] == {"identifiers": []}
    call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))
    for name in ("a/b", "a\nb", "z" * 300):
        rename = {
            "source": {"namespace": ["ns"], "name": "t"},
            "destination": {"namespace": ["ns"], "name": name},
        }
        status, body, _ = call(u, "POST", f"{P}/tables/rename", rename)
        _refused(status, body, "table name")
    assert call(u, "GET", f"{P}/namespaces/ns/tables")[1]["identifiers"] == [
        {"namespace": ["ns"], "name": "t"}
    ]
    # a missing table's 404 names no server file either
    status, body, _ = call(u, "GET", f"{P}/namespaces/ns/tables/nope")
    assert status == 404 and str(wh) not in json.dumps(body) and "catalog.db" not in json.dumps(body)


# -- probe 5: vended credentials -----------------------------------------------------------------


def test_vending_is_off_without_auth_even_when_asked(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    where = s3_warehouse(request, tmp_path)
    moto: S3Server = request.getfixturevalue("moto_s3")
    delegation = {"X-Iceberg-Access-Delegation": "vended-credentials"}
    for kwargs in ({}, {"vend_credentials": True}):  # the default, and on but without --credentials
        with serving(where, **kwargs) as server:  # type: ignore[arg-type]
            u = server.url
            call(u, "POST", f"{P}/namespaces", {"namespace": [f"v{len(kwargs)}"]})
            status, body, _ = call(
                u, "POST", f"{P}/namespaces/v{len(kwargs)}/tables", create_body("t"), headers=delegation
            )
            assert status == 200 and moto.secret not in json.dumps(body)
            status, body, _ = call(
                u, "GET", f"{P}/namespaces/v{len(kwargs)}/tables/t/credentials", headers=delegation
            )
            assert status == 200 and body == {"storage-credentials": []}


def test_serve_refuses_to_vend_without_credentials(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "import sys; from iceduck.cli import main; sys.exit(main())"]
    done = subprocess.run(
        [*cmd, "serve", "--warehouse", str(tmp_path / "wh"), "--port", "0", "--vend-credentials"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert done.returncode == 2, done.stderr
    assert "--vend-credentials hands out" in done.stderr and "--credentials" in done.stderr
    assert "Traceback" not in done.stderr


# -- issue 25: a staged create hands out a location that is ready ---------------------------------


def test_staged_create_prepares_the_local_location(wh: Path) -> None:
    warehouse = Warehouse(str(wh))
    warehouse.create_namespace({"namespace": ["ns"]})
    reply = warehouse.create_table("ns", create_body("t", **{"stage-create": True}))
    location = reply.body["metadata"]["location"]
    assert reply.body["metadata-location"] is None
    assert Path(location, "metadata").is_dir() and Path(location, "data").is_dir()
    assert not warehouse.table_exists("ns", "t")
    # nothing else is written: the commit that completes the create writes the metadata
    assert list(Path(location, "metadata").iterdir()) == []


@pytest.mark.peer
def test_the_peer_creates_a_table_as_select_through_serve(
    wh: Path,
    rest_peer: Peer,  # noqa: F811
) -> None:
    """DuckDB's extension does CTAS as a staged create, then writes its manifest into the location's
    `metadata/` folder before the commit that creates the table: the server made that folder."""
    with serving(wh) as server:
        rest_peer.execute(
            f"ATTACH 'wh' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        try:
            rest_peer.execute("CREATE SCHEMA cat.demo")
            rest_peer.execute("CREATE TABLE cat.demo.t AS SELECT i, 'n' || i AS name FROM range(5) r(i)")
            assert sorted(rest_peer.query("SELECT * FROM cat.demo.t")) == [(i, f"n{i}") for i in range(5)]
        finally:
            rest_peer.execute("DETACH cat")
        lake = iceduck.connect(server.url, authorization_type="none")
        rows = lake.sql("SELECT * FROM lake.demo.t ORDER BY i")
        assert rows is not None and rows.fetchall() == [(i, f"n{i}") for i in range(5)]


# -- redteam: deletions a registered table's metadata, or maintenance over it, could cause ---------


def test_metadata_cleanup_of_a_registered_table_leaves_other_tables_metadata(
    server: RestServer, wh: Path, victim: Path
) -> None:
    """A registered metadata file may record another table's folder as its `location` and list that
    table's metadata files (and files outside) in its `metadata-log`; the clean-up after a commit
    (`write.metadata.delete-after-commit.enabled`, `previous-versions-max` 1) deletes none of them."""
    u = server.url
    other = call(u, "POST", f"{P}/namespaces/ns/tables", create_body("o"))[1]["metadata-location"]
    own = call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))[1]["metadata-location"]
    md = json.loads(Path(own).read_text())
    md["location"] = str(wh / "ns" / "o")
    md["metadata-log"] = [
        {"timestamp-ms": 1, "metadata-file": other},
        {"timestamp-ms": 2, "metadata-file": str(victim / "precious.txt")},
    ]
    md["properties"] = {
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": "1",
    }
    folder = wh / "ns" / "evil" / "metadata"
    folder.mkdir(parents=True)
    (folder / "00001-x.metadata.json").write_text(json.dumps(md))
    body = {"name": "evil", "metadata-location": str(folder / "00001-x.metadata.json")}
    assert call(u, "POST", f"{P}/namespaces/ns/register", body)[0] == 200
    for i in range(3):
        update = {"action": "set-properties", "updates": {"k": str(i)}}
        assert _commit(u, "evil", update)[0] == 200
    assert Path(other).exists()
    assert call(u, "GET", f"{P}/namespaces/ns/tables/o")[0] == 200
    _untouched(victim)


def test_expire_snapshots_deletes_nothing_outside_the_table(wh: Path, victim: Path) -> None:
    """Expiry over a table whose metadata names files outside its location (a statistics file, a
    manifest list: committed by another tool, or registered) deletes none of them."""
    import pyarrow as pa

    from iceduck.maintenance.actions import Maintainer

    lake = iceduck.connect(str(wh))
    lake.create_namespace("ns")
    t = lake.create_table("ns.t", pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1]}))
    first = t.current_snapshot()
    assert first is not None and first.manifest_list is not None
    (victim / "ml.avro").write_bytes(Path(first.manifest_list).read_bytes())
    t.append(pa.table({"id": [2]}))
    second = t.current_snapshot()
    assert second is not None
    outside = snapshot(77, str(victim / "ml.avro"), **{"first-row-id": 100, "added-rows": 0})
    outside["sequence-number"] = second.sequence_number + 1
    lake.catalog.commit_table(
        "ns",
        "t",
        [],
        upd.updates_from_json(
            [
                {"action": "add-snapshot", "snapshot": outside},
                {
                    "action": "set-statistics",
                    "snapshot-id": first.snapshot_id,
                    "statistics": statistics(first.snapshot_id, str(victim / "precious.txt")),
                },
            ]
        ),
    )
    m = Maintainer.for_lake(lake, "ns.t")
    result = m.expire_snapshots(retain_last=1, older_than=2**62, dry_run=False)
    assert result.summary["expired"] == 2, result.summary
    assert sorted(p.name for p in victim.iterdir()) == ["ml.avro", "precious.txt"]
    assert (victim / "precious.txt").read_text() == "keep me"
    # the table's own expired manifest list went
    assert not Path(first.manifest_list).exists()


def test_a_location_that_walks_out_and_back_in_creates_nothing_outside(
    server: RestServer, wh: Path, tmp_path: Path
) -> None:
    """`<wh>/../made/../wh/ns/t` ends inside the warehouse, but creating its folders made `made`
    beside it: refused before anything is created."""
    u = server.url
    before = sorted(p.name for p in tmp_path.iterdir())
    for i, location in enumerate(
        (
            f"{wh}/../made/../wh/ns/t",
            f"{wh}/ns/../../made2/x/../../wh/ns/t",
            f"file://{wh}/../made3/../wh/ns/t",
        )
    ):
        status, body, _ = call(
            u, "POST", f"{P}/namespaces/ns/tables", create_body(f"t{i}", location=location)
        )
        _refused(status, body, "location", sent=location)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_registered_write_metadata_path_into_another_table_is_refused(server: RestServer, wh: Path) -> None:
    """A registered metadata file's `write.metadata.path` naming another table's metadata folder
    (never checked: the commit did not change it) would have the server write this table's next
    metadata files among that table's: 400, nothing written there."""
    u = server.url
    call(u, "POST", f"{P}/namespaces/ns/tables", create_body("o"))
    own = call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))[1]["metadata-location"]
    md = json.loads(Path(own).read_text())
    md["location"] = str(wh / "ns" / "evil")
    md["properties"] = {"write.metadata.path": str(wh / "ns" / "o" / "metadata")}
    folder = wh / "ns" / "evil" / "metadata"
    folder.mkdir(parents=True)
    (folder / "00001-x.metadata.json").write_text(json.dumps(md))
    body = {"name": "evil", "metadata-location": str(folder / "00001-x.metadata.json")}
    assert call(u, "POST", f"{P}/namespaces/ns/register", body)[0] == 200
    before = sorted(os.listdir(wh / "ns" / "o" / "metadata"))
    status, answer = _commit(u, "evil", {"action": "set-properties", "updates": {"k": "v"}})
    _refused(status, answer, "metadata folder")
    assert sorted(os.listdir(wh / "ns" / "o" / "metadata")) == before


def test_requests_from_web_pages_are_refused(server: RestServer) -> None:
    """A loopback server without credentials is reachable from any web page its operator opens: a
    cross-site POST with `Content-Type: text/plain` needs no CORS preflight, and after DNS
    rebinding a page reads answers as its own. Browsers mark every such request (`Origin`,
    `Sec-Fetch-*`); no catalog client sends those. 403, and nothing changes."""
    u = server.url
    body = {"namespace": ["csrf"]}
    for headers in (
        {"Origin": "http://evil.example", "Content-Type": "text/plain"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"},
        {"Sec-Fetch-Site": "same-origin"},  # a rebound name: same origin to the browser
    ):
        status, answer, _ = call(u, "POST", f"{P}/namespaces", body, headers=headers)
        assert_error(status, answer, 403, "ForbiddenException", "browser")
        status, answer, _ = call(u, "GET", f"{P}/namespaces", headers=headers)
        assert status == 403, headers
    assert call(u, "GET", f"{P}/namespaces")[1] == {"namespaces": [["ns"]]}


def test_purge_of_a_table_whose_folder_became_a_link_out_deletes_nothing_there(
    server: RestServer, wh: Path, victim: Path
) -> None:
    """A table folder replaced, after it was checked, by a link to a folder outside (by anyone
    writing to the warehouse's disk): purge compares the table's files with the folder the link
    points to, so everything there looked inside. The purge is refused; nothing there goes."""
    u = server.url
    call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))
    table = wh / "ns" / "t"
    os.rename(table, victim / "t")
    table.symlink_to(victim / "t", target_is_directory=True)
    before = sorted(str(p) for p in victim.rglob("*"))
    status, body, _ = call(u, "DELETE", f"{P}/namespaces/ns/tables/t?purgeRequested=true")
    _refused(status, body, "not inside the warehouse")
    assert sorted(str(p) for p in victim.rglob("*")) == before


def test_the_servers_own_files_are_no_table_location(server: RestServer, wh: Path) -> None:
    """A table at `<wh>/catalog.db-journal` made SQLite's rollback journal a folder: every later
    write of the catalog failed ("disk I/O error"), for good. The catalog file, its SQLite
    companions and the metrics log are refused as locations (table and namespace), as register's
    file, and as any path below them."""
    u = server.url
    names = ("catalog.db", "catalog.db-journal", "catalog.db-wal", "catalog.db-shm")
    for i, name in enumerate((*names, "serve-metrics.jsonl", "serve-metrics.jsonl.1")):
        for location in (str(wh / name), f"{wh}/./{name}/t"):
            status, body, _ = call(
                u, "POST", f"{P}/namespaces/ns/tables", create_body(f"x{i}", location=location)
            )
            _refused(status, body, "catalog server", sent=location)
        body = {"namespace": [f"n{i}"], "properties": {"location": str(wh / name)}}
        _refused(*call(u, "POST", f"{P}/namespaces", body)[:2], "catalog server", sent=str(wh / name))
    body = {"name": "r", "metadata-location": str(wh / "catalog.db")}
    _refused(
        *call(u, "POST", f"{P}/namespaces/ns/register", body)[:2],
        "catalog server",
        sent=str(wh / "catalog.db"),
    )
    assert set(os.listdir(wh)) <= {"catalog.db", "ns"}
    assert call(u, "POST", f"{P}/namespaces", {"namespace": ["after"]})[0] == 200
    assert call(u, "POST", f"{P}/namespaces/ns/tables", create_body("t"))[0] == 200
