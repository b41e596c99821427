"""Permission denied, as a user who may read a table but not write it (issue 15, faults).

The suite runs as root, whom permissions do not stop, so the client runs as `nobody` through
`setpriv` (or `runuser`); as a non-root user it runs directly. Skipped where neither is possible
(except under CI, where that fails).
A write refused by the file system is one line naming the path, with no traceback, and leaves the
table as it was; reads of what the user may read work; a file it may not read is named."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from iceduck.lake import connect
from tests.conftest import ROOT
from tests.support.write_helpers import new_lake, pyiceberg_rows

NOBODY = 65534
CLIENT = """
import json, sys
sys.path.insert(0, {root!r})
import iceduck
out = {{"iceduck": iceduck.__file__}}
try:
    lake = iceduck.connect({warehouse!r})
    out["rows"] = sorted(r[0] for r in lake.sql("SELECT id FROM lake.ns.t").fetchall())
    try:
        lake.sql({statement!r})
        out["write"] = "ok"
    except Exception as e:
        out["write"] = f"{{type(e).__module__}}.{{type(e).__name__}}: {{e}}"
except Exception as e:
    out["error"] = f"{{type(e).__module__}}.{{type(e).__name__}}: {{e}}"
print(json.dumps(out))
"""


def _as_other_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv"):
        return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    if shutil.which("runuser"):
        return ["runuser", "-u", "nobody", "--"]
    if os.environ.get("CI"):  # CI must run this test, not skip it
        pytest.fail("running as root without setpriv or runuser: cannot test as a non-root user")
    pytest.skip("running as root without setpriv or runuser: cannot test as a non-root user")


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder others may enter (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="iceduck-perm-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _client(warehouse: Path, statement: str, home: Path) -> dict[str, str]:
    code = CLIENT.format(root=str(ROOT), warehouse=str(warehouse), statement=statement)
    env = {**os.environ, "HOME": str(home), "ICEDUCK_CACHE_DIR": str(home / "cache")}
    proc = subprocess.run(
        [*_as_other_user(), sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(home),
        timeout=120,
    )  # fmt: skip
    if proc.returncode != 0 and not proc.stdout.strip():
        pytest.fail(f"the client did not run as another user: {proc.stderr[-800:]}")
    out: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    # the other user imports this tree (not an installed copy it can read while this one it cannot)
    assert out["iceduck"].startswith(str(ROOT)), out["iceduck"]
    return out


def _one_clear_line(message: str, names: str) -> None:
    text = message.split(": ", 1)[1]
    assert "\n" not in text.strip() and "Traceback" not in text and 'File "' not in text, message
    assert names in text, message
    assert "PermissionError" not in message.split(": ", 1)[0], f"a bare built-in exception: {message}"


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO lake.ns.t VALUES (100, 'x')",
        "DELETE FROM lake.ns.t WHERE id = 1",
        "CREATE TABLE lake.ns.u (a INTEGER)",
    ],
)
def test_a_write_the_file_system_refuses_is_one_line_and_changes_nothing(shared: Path, statement: str) -> None:
    warehouse = shared / "wh"
    lake = new_lake(warehouse)
    t = lake.create_table("ns.t", [("id", "BIGINT"), ("s", "VARCHAR")])
    t.append(pa.table({"id": pa.array(range(5), pa.int64()), "s": [f"s{i}" for i in range(5)]}))
    before = t.load().metadata_location
    lake.close()
    home = shared / "home"
    home.mkdir()
    if os.geteuid() == 0:
        os.chown(home, NOBODY, NOBODY)

    out = _client(warehouse, statement, home)
    assert out.get("rows") == [0, 1, 2, 3, 4], out  # reading needs no write permission
    assert out["write"] != "ok", out
    _one_clear_line(out["write"], str(warehouse))
    assert "ermission denied" in out["write"] or "read-only" in out["write"], out
    # iceduck's own error, naming a file or folder of the table (an INSERT was DuckDB's IOException
    # naming the temporary staging folder COPY could not create)
    assert out["write"].startswith("iceduck.errors.StorageAccessDeniedError: "), out
    assert "staging" not in out["write"] and ".tmp" not in out["write"], out

    lake = connect(warehouse)
    after = lake.table("ns.t").load().metadata_location
    assert after == before
    assert sorted(r["id"] for r in pyiceberg_rows(after)) == [0, 1, 2, 3, 4]
    lake.close()


def test_a_data_file_the_user_may_not_read_is_named(shared: Path) -> None:
    warehouse = shared / "wh"
    lake = new_lake(warehouse)
    t = lake.create_table("ns.t", [("id", "BIGINT"), ("s", "VARCHAR")])
    t.append(pa.table({"id": pa.array(range(5), pa.int64()), "s": [f"s{i}" for i in range(5)]}))
    (data,) = (p for p in Path(t.location).rglob("*.parquet"))
    lake.close()
    data.chmod(0o600)
    home = shared / "home"
    home.mkdir()
    if os.geteuid() == 0:
        os.chown(home, NOBODY, NOBODY)
    out = _client(warehouse, "SELECT 1", home)
    message = out.get("error") or out.get("write", "")
    assert "rows" not in out, out
    _one_clear_line(message, data.name)
