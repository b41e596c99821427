"""Hand mutations that the suite must catch: each breaks one rule, and the named tests must fail.

    .venv/bin/python -m tests.mutations            # every mutation (a few minutes)
    .venv/bin/python -m tests.mutations M3 M5      # some
    .venv/bin/python -m tests.mutations --control  # also check the tests pass unmutated first

Each mutation is applied to a fresh copy of the checked-out tree (the working tree is never
touched), then its tests run there; a mutation whose tests still pass is reported and the run
exits non-zero. `tests/MUTATIONS.md` explains each rule. Run it before a release.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, slots=True)
class Mutation:
    key: str
    rule: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


R = "tests/maintenance/test_maintenance_rules.py::"
N = "tests/maintenance/test_maintenance_nested.py"
D = "tests/transaction/test_durability.py"
C = "tests/duckdb/test_maintenance_interrupt.py::test_a_maintenance_statement_interrupted_by_ctrl_c_commits_nothing"
MUTATIONS = (
    Mutation(
        "M1", "the reader takes a stored _last_updated_sequence_number (rows moved by a compaction)",
        "iceduck/read/sql.py",
        'stored_seq = "CAST(NULL AS BIGINT)" if mapped else "d.__lusn"', 'stored_seq = "CAST(NULL AS BIGINT)"',
        (R + "test_compaction_keeps_the_last_updated_sequence_numbers_the_reader_reports",),
    ),
    Mutation(
        "M2", "orphan removal stops on a listed file the metadata names with another scheme or bucket",
        "iceduck/maintenance/orphans.py", "        if twin is not None:\n", "        if False:\n",
        (R + "test_orphans_a_file_referenced_under_another_scheme_or_bucket_stops_the_run",),
    ),
    Mutation(
        "M3", "orphan removal stops when the listing lacks the current metadata file",
        "iceduck/maintenance/orphans.py", 'if current.startswith(root + "/") and not seen_current:',
        "if False:", (R + "test_orphans_a_listing_without_the_current_metadata_file_stops_the_run",),
    ),
    Mutation(
        "M4", "execution re-check: a candidate referenced since planning stops the run",
        "iceduck/maintenance/orphans.py", "        if _reach_key(c.path) in reach:\n", "        if False:\n",
        (R + "test_orphans_a_candidate_referenced_after_planning_is_not_deleted",),
    ),
    Mutation(
        "M5", "execution re-check: a candidate modified since planning stops the run",
        "iceduck/maintenance/orphans.py", "        if c.path not in still:\n", "        if False:\n",
        (R + "test_orphans_a_candidate_rewritten_after_planning_is_not_deleted",),
    ),
    Mutation(
        "M6", "expiry keeps snapshots no ref reaches while they are newer than the cut-off",
        "iceduck/maintenance/expire.py",
        "if snap.snapshot_id not in reachable and snap.timestamp_ms >= default_cutoff:", "if False:",
        (R + "test_expiry_keeps_unreferenced_snapshots_newer_than_the_cutoff",),
    ),
    Mutation(
        "M7", "maintenance leaves the files of the catalog's other tables alone",
        "iceduck/maintenance/actions.py", "known_tables(self.catalog, table.io)", "()", (N,),
    ),
    Mutation(
        "M8", "orphan removal stops on the metadata of a table the catalog does not know",
        "iceduck/maintenance/orphans.py", "foreign = _foreign_metadata(table, path)", "foreign = None",
        (N + "::test_item_1_unregistered_nested_table_stops_the_run",),
    ),
    Mutation(
        "M9", "CREATE TABLE refuses a location overlapping another table's",
        "iceduck/transaction/create.py", "check_location_free(catalog, identifier, table_location, io)",
        "pass", (N + "::test_item_1_create_inside_another_table_is_refused",),
    ),
    Mutation(
        "M11", "live-row bit strings are sized by the data file's own row count, checked against record_count",
        "iceduck/read/deletes.py", "    rows = checked_rows(f, io)\n    value = _live_bits(f, rows, allow_bare, matcher, io, reads)",
        "    rows = f.rows\n    value = _live_bits(f, rows, allow_bare, matcher, io, reads)",
        ("tests/read/test_untrusted_counts.py::test_a_lying_record_count_with_a_deletion_vector_is_one_clear_error",),
    ),
    Mutation(
        "M12", "a DV is applied only if its Puffin blob's cardinality property agrees",
        "iceduck/read/deletes.py", "    if blob.cardinality != cardinality:", "    if False:",
        ("tests/read/test_untrusted_counts.py::test_a_dv_whose_puffin_blob_disagrees_is_not_applied",),
    ),
    Mutation(
        "M13", "a DV is applied only if its cardinality is the manifest's record_count",
        "iceduck/read/deletes.py", "    if record_count >= 0 and cardinality != record_count:", "    if False:",
        ("tests/read/test_untrusted_counts.py::test_a_dv_whose_manifest_record_count_disagrees_is_not_applied",),
    ),
    Mutation(
        "M14", "filter := accepts columns, constants and built-in scalar functions only",
        "iceduck/duckdb/scan.py", "        check_filter(filter_text)", "        pass",
        ("tests/duckdb/test_filter_safety.py",),
    ),
    Mutation(
        "M15", "a data file is fsync'ed before the catalog pointer moves to metadata naming it",
        "iceduck/io/fileio.py", "            _fsync_file(local)\n            os.rename(local, target)",
        "            os.rename(local, target)", (D,),
    ),
    Mutation(
        "M16", "metadata, manifests and lists are fsync'ed before the pointer moves",
        "iceduck/io/fileio.py", "        os.fsync(fd)\n    except BaseException:", "        pass\n    except BaseException:",
        (D,),
    ),
    Mutation(
        "M17", "the folder entry of a new metadata file or manifest is fsync'ed before the pointer moves",
        "iceduck/io/fileio.py",
        "            os.unlink(tmp)  # gone already after a rename\n    _fsync_dir(folder)\n",
        "            os.unlink(tmp)  # gone already after a rename\n", (D,),
    ),
    Mutation(
        "M18", "a write the file system refuses is one line naming the path (not a bare PermissionError)",
        "iceduck/io/fileio.py", "    if not isinstance(e, PermissionError) and e.errno != errno.EROFS:\n        return None",
        "    if True:\n        return None", ("tests/io/test_permissions.py",),
    ),
    Mutation(
        "M22", "an INSERT the file system refuses names the table's data folder (not DuckDB's staging folder)",
        "iceduck/write/parquet.py", '            denied = access_denied(e, data_path, "writing")',
        "            denied = None", ("tests/io/test_permissions.py",),
    ),
    Mutation(
        "M19", "an expiry interrupted (Ctrl-C) before its commit commits nothing",
        "iceduck/maintenance/expire.py", '        progress(0, 1, "expiring snapshots")', "        pass",
        (C + "[expire]",),
    ),
    Mutation(
        "M20", "an orphan removal interrupted (Ctrl-C) before its first deletion deletes nothing",
        "iceduck/maintenance/orphans.py", '        progress(0, total, "deleting orphan files")', "        pass",
        (C + "[orphans]",),
    ),
    Mutation(
        "M21", "a DELETE committing after a concurrent UPDATE moved its rows is planned again (not merged)",
        "iceduck/transaction/changes.py", "                if overlap and added_since:", "                if False:",
        ("tests/transaction/test_commit_conflicts.py::test_delete_follows_rows_a_concurrent_update_moved",),
    ),
    Mutation(
        "M10", "CI fails when the conformance corpus is missing", "tests/conftest.py",
        "if required and conformance_dir() is None:", "if False:",
        ("tests/test_ci_guards.py",),
    ),
)  # fmt: skip


def _copy_tree(into: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    for rel in files:
        src = ROOT / rel
        if src.is_file():
            dst = into / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


def _pytest(copy: Path, tests: tuple[str, ...]) -> int:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    check = subprocess.run(
        [sys.executable, "-c", "import iceduck; print(iceduck.__file__)"], cwd=copy, env=env,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    if not check.stdout.strip().startswith(str(copy)):
        raise SystemExit(f"the copy in {copy} does not import its own iceduck ({check.stdout.strip()})")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
        cwd=copy, env=env, capture_output=True, text=True,
    )  # fmt: skip
    return proc.returncode


def run(m: Mutation, *, control: bool = False) -> bool:
    """True if the mutation was caught (its tests failed); with `control`, the unmutated copy
    must pass the same tests first."""
    with tempfile.TemporaryDirectory(prefix=f"iceduck-{m.key}-") as folder:
        copy = Path(folder)
        # readable by others: tests/io/test_permissions.py runs its client as `nobody`, which must
        # import the copy (else it imports the installed tree and no mutation can be seen there)
        copy.chmod(0o755)
        _copy_tree(copy)
        target = copy / m.path
        text = target.read_text()
        if text.count(m.old) != 1:
            raise SystemExit(
                f"{m.key}: {m.path} no longer contains the mutated text once: update tests/mutations.py"
            )
        if control and _pytest(copy, m.tests) != 0:
            raise SystemExit(f"{m.key}: the tests fail without the mutation: {' '.join(m.tests)}")
        target.write_text(text.replace(m.old, m.new))
        return _pytest(copy, m.tests) == 1


def main(argv: list[str]) -> int:
    control = "--control" in argv
    keys = [a for a in argv if a != "--control"]
    chosen = [m for m in MUTATIONS if not keys or m.key in keys]
    survived = []
    for m in chosen:
        caught = run(m, control=control)
        print(f"{m.key} {'caught  ' if caught else 'SURVIVED'} {m.rule}", flush=True)
        if not caught:
            survived.append(m.key)
    if survived:
        print(f"mutations the tests did not catch: {', '.join(survived)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
