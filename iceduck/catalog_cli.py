"""`iceduck migrate-catalog WAREHOUSE`: move an S3 / GCS / Azure warehouse's tables from this
machine's SQLite catalog (the local cache folder) to the catalog on the bucket
(`iceduck.catalog.migrate`), so every machine opening the warehouse shares them.

Prints one line per namespace and table (registered, already, skipped, conflict) and a summary.
When every table is in the bucket catalog, the SQLite file is renamed `catalog.db.migrated` (kept;
`--keep-local` leaves it in place), and `iceduck.connect(warehouse)` opens the bucket catalog
from then on. Running it again changes nothing and says so. Exit code 1 when a table was skipped
or conflicts (the SQLite file then stays, so nothing is lost).
"""

from __future__ import annotations

import argparse
import os
import sys

from iceduck.catalog.bucket import BucketCatalog
from iceduck.catalog.migrate import (
    CONFLICT,
    MIGRATED_SUFFIX,
    REGISTERED,
    SKIPPED,
    local_catalog_file,
    migrate_to_bucket,
    retire_local_catalog,
)
from iceduck.catalog.sql import SqlCatalog
from iceduck.commands import Command, register_command
from iceduck.io.paths import normalize_path
from iceduck.io.storage import connection_io, is_remote


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        nargs="?",
        metavar="WAREHOUSE",
        help="the warehouse on S3, GCS or Azure (s3://bucket/wh, gs://..., az://...; default: --warehouse)",
    )
    parser.add_argument(
        "--keep-local",
        action="store_true",
        help="leave this machine's SQLite catalog file in place (default: renamed catalog.db.migrated)",
    )


def run_migrate(args: argparse.Namespace) -> int:
    warehouse = str(args.target or args.warehouse)
    if not is_remote(warehouse) or warehouse.startswith(("http://", "https://")):
        print(
            f"Error: {warehouse}: migrate-catalog moves an object-store warehouse (s3://, gs://, az://) "
            "to the catalog on its bucket; a local warehouse's catalog.db is already next to its tables",
            file=sys.stderr,
        )
        return 1
    warehouse = normalize_path(warehouse).rstrip("/")
    database = local_catalog_file(warehouse)
    retired = database + MIGRATED_SUFFIX
    if os.path.exists(database):
        source_file = database
    elif os.path.exists(retired):
        source_file = retired  # migrated before: check again, change nothing
    else:
        print(
            f"{warehouse}: this machine has no SQLite catalog for it ({database}): nothing to migrate; "
            "iceduck.connect() opens its catalog on the bucket"
        )
        return 0
    io = connection_io()
    source = SqlCatalog(source_file, warehouse=warehouse, io=io)
    target = BucketCatalog(warehouse, io=io)
    outcomes = migrate_to_bucket(source, target, io)
    for outcome in outcomes:
        print(outcome.line())
    tables = [o for o in outcomes if o.what == "table"]
    counts = {k: sum(o.outcome == k for o in tables) for k in (REGISTERED, "already", SKIPPED, CONFLICT)}
    print(
        f"{warehouse}: {len(tables)} tables: {counts[REGISTERED]} registered in the bucket catalog, "
        f"{counts['already']} already there, {counts[SKIPPED]} skipped, {counts[CONFLICT]} conflicts"
    )
    if counts[SKIPPED] or counts[CONFLICT]:
        print(f"this machine's SQLite catalog stays in place ({source_file})", file=sys.stderr)
        return 1
    if source_file == database and not args.keep_local:
        print(f"this machine's SQLite catalog is kept as {retire_local_catalog(database)}")
    return 0


register_command(
    Command(
        "migrate-catalog",
        "Move an object-store warehouse's tables from this machine's SQLite catalog to the catalog on its bucket",
        _configure,
        run_migrate,
    )
)
