"""Following the README in order works (issue 12, item 8): the demo, then the command it suggests,
then the "Writing tables" example as written, in one fresh folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _python_block(after_heading: str) -> str:
    text = README.read_text()
    section = text[text.index(after_heading) :]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m is not None, after_heading
    return m.group(1)


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ICEDUCK_WAREHOUSE"}
    return subprocess.run(
        [sys.executable, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_readme_in_order(tmp_path: Path) -> None:
    cli = "import sys; from iceduck.cli import main; sys.exit(main(sys.argv[1:]))"
    demo = _run(tmp_path, "-c", cli, "demo")
    assert (demo.returncode, demo.stderr) == (0, "")
    suggested = re.search(
        r'iceduck -c "(SELECT \* FROM iceberg_snapshots\(\'demo.services\'\))"', demo.stdout
    )
    assert suggested is not None
    snapshots = _run(tmp_path, "-c", cli, "--mode", "csv", "-c", suggested.group(1))
    assert snapshots.returncode == 0 and snapshots.stderr == ""
    assert snapshots.stdout.startswith("committed_at,snapshot_id,parent_id,sequence_number,operation,")
    # the "Writing tables" example, as written; its last line appends the caller's rows
    example = _python_block("## Writing tables")
    example = example.replace(
        "arrow_table_or_duckdb_relation", 'lake.sql("SELECT * FROM lake.rail.services LIMIT 2")'
    )
    example += '\nprint(sorted(lake.list_tables("rail")), sorted(lake.list_tables("demo")))\n'
    ran = _run(tmp_path, "-c", example)
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr
    assert ran.stdout == "['services'] ['services']\n"
