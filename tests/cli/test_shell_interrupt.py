"""Ctrl-C in the real shell (on a pseudo-terminal) stops a maintenance run before it commits.

Robust to a loaded machine: ^C is sent only once the shell's progress line shows the rewrite under
way and under 90% (a cancel requested after the run's last check, just before its one commit,
cannot stop that commit), and every wait is generous. The rewrite has many partitions, one group
each, so there are many groups still to write after ^C, each followed by a cancel check.
"""

from __future__ import annotations

from pathlib import Path

import iceduck
from tests.cli.test_cli import PROMPT, Terminal

PARTITIONS = 600


def test_ctrl_c_stops_a_maintenance_run_and_nothing_commits(tmp_path: Path) -> None:
    with iceduck.connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA m")
        lake.sql("CREATE TABLE m.t (k INTEGER, v BIGINT) PARTITIONED BY (k)")
        for i in range(4):  # four small files in each partition: one rewrite group each
            lake.sql(
                f"INSERT INTO m.t SELECT r % {PARTITIONS}, r FROM range({i * 1000}, {(i + 1) * 1000}) t(r)"
            )
        before = lake.table("m.t").current_snapshot()
    assert before is not None
    terminal = Terminal(tmp_path)
    try:
        terminal.expect(PROMPT, timeout=120)
        terminal.send(
            "SELECT status FROM iceberg_rewrite_data_files('m.t', dry_run := false, rewrite_all := true);\r"
        )
        terminal.wait_for_cooked_mode(timeout=120)
        progress = terminal.expect(r"running \d+ s, rewriting [^\n%]*? ([1-8]?\d)%", timeout=300)
        assert int(progress.group(1)) < 90
        terminal.send("\x03")
        terminal.expect(r"Error: [^\n]*[Ii]nterrupted", timeout=300)
        terminal.expect(PROMPT, timeout=120)
        terminal.send(".exit\r")
        assert terminal.close() == 0
    finally:
        if terminal.proc.poll() is None:
            terminal.proc.kill()
    with iceduck.connect(tmp_path / "wh") as lake:
        after = lake.table("m.t").current_snapshot()
        assert after is not None and after.snapshot_id == before.snapshot_id  # nothing committed
        assert lake.sql("SELECT count(*), sum(v) FROM lake.m.t").fetchall() == [(4000, sum(range(4000)))]
