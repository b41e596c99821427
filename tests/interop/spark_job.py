"""All the Spark work of one interop test module, in one child process (one JVM).

Run with the Java reference's Python: `$ICEBERG_JAVA_REF/bin/python spark_job.py JOB.json OUT.json`
(`run_job` below does that from the test's Python). JOB.json is a list of tasks, done in order:

* `{"kind": "sql", "id": ..., "statements": [...]}`: run the statements on catalog `local` (a Hadoop
  catalog on the job's warehouse); the rows of the last one are the result;
* `{"kind": "read_all", "id": ..., "path": <metadata.json or a table folder>, "lineage": bool}`: read every snapshot the
  metadata file lists, by snapshot id (`_row_id`, `_last_updated_sequence_number` too when `lineage`;
  read options from `options`);
  the result maps snapshot id (as text) to rows or to the error Spark raised.

`SparkChild` keeps one such child running for a whole module and hands it batches of tasks one
after the other (`run`), or starts a batch and lets the test work meanwhile (`start` / `wait`):
for tests that go back and forth between Spark and iceduck (maintenance by one side read by the
other, concurrent writers) without a JVM start per step. It can also attach catalog `rest` to an
`iceduck serve` (`rest_uri`), with Spark's table cache off so it sees iceduck's commits at once.

OUT.json maps each task id to `{"rows": ...}` or `{"error": "..."}`. Rows are lists of dicts made
plain by `plain()`, which the tests apply to iceduck's rows too, so both sides compare as JSON.

This file is also imported by the tests (for `plain` and `run_job`): nothing here imports pyspark
outside `main`.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import subprocess
import sys
import uuid
from decimal import Decimal
from typing import Any


def plain(v: Any) -> Any:
    """A value in a form both engines' rows agree on: decimals, dates, times and UUIDs as text,
    timestamps as naive UTC ISO text, bytes as hex, NaN as "NaN", maps as sorted [key, value] pairs."""
    if hasattr(v, "asDict") and hasattr(v, "__fields__"):  # a Spark Row
        return {k: plain(x) for k, x in zip(v.__fields__, tuple(v), strict=True)}
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else v
    if isinstance(v, Decimal):  # by value: Spark hands -1E-10 of a decimal(38, 10) as Decimal('-1.00E-10')
        return format(v.normalize(), "f")
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        return v.isoformat()
    if isinstance(v, dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v).hex()
    if isinstance(v, dict):
        if set(v) == {"key", "value"} and isinstance(v["key"], list):  # DuckDB's older map form
            v = dict(zip(v["key"], v["value"], strict=True))
        if v and not all(isinstance(k, str) for k in v):
            return sorted(([plain(k), plain(x)] for k, x in v.items()), key=json.dumps)
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [plain(x) for x in v]
    return v


def rows_key(rows: list[dict[str, Any]]) -> list[str]:
    """Rows as a sorted list of JSON texts: a multiset to compare."""
    return sorted(json.dumps(plain(r), sort_keys=True) for r in rows)


def run_job(reference: Any, tasks: list[dict[str, Any]], warehouse: str, timeout: float = 900) -> dict[str, Any]:
    """Run `tasks` in one Spark child with the reference venv's Python; their results by id."""
    job = os.path.join(warehouse, "spark-job.json")
    out = os.path.join(warehouse, "spark-out.json")
    os.makedirs(warehouse, exist_ok=True)
    with open(job, "w") as f:
        json.dump({"warehouse": warehouse, "tasks": tasks}, f)
    env = dict(os.environ, TZ="UTC", PYTHONPATH=reference.HERE)
    p = subprocess.run(
        [reference.REF_PYTHON, os.path.abspath(__file__), job, out],
        capture_output=True,
        timeout=timeout,
        env=env,
    )
    if p.returncode != 0:
        raise RuntimeError("the Spark child failed:\n" + p.stderr.decode(errors="replace")[-4000:])
    with open(out) as f:
        return json.load(f)  # type: ignore[no-any-return]


class SparkChild:
    """One Spark child (one JVM) that runs batches of tasks on request: `run(tasks)` returns their
    results by id; `start(tasks)` sends a batch and `wait()` collects it. Close it (or use `with`)."""

    def __init__(self, reference: Any, warehouse: str, rest_uri: str | None = None) -> None:
        os.makedirs(warehouse, exist_ok=True)
        self.warehouse = warehouse
        self._n = 0
        self._pending: str | None = None
        self._log = open(os.path.join(warehouse, "spark-child.log"), "wb")  # noqa: SIM115 - closed in close()
        config = {"warehouse": warehouse, "rest_uri": rest_uri}
        env = dict(os.environ, TZ="UTC", PYTHONPATH=reference.HERE)
        self._proc = subprocess.Popen(
            [reference.REF_PYTHON, os.path.abspath(__file__), "--serve", json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
        )

    def start(self, tasks: list[dict[str, Any]]) -> None:
        assert self._pending is None, "wait() for the batch running first"
        assert self._proc.stdin is not None
        self._n += 1
        out = os.path.join(self.warehouse, f"spark-out-{self._n}.json")
        self._proc.stdin.write((json.dumps({"tasks": tasks, "out": out}) + "\n").encode())
        self._proc.stdin.flush()
        self._pending = out

    def wait(self) -> dict[str, Any]:
        assert self._pending is not None and self._proc.stdout is not None
        out, self._pending = self._pending, None
        while True:  # the child says `done <out>` on its stdout when the batch's results are written
            line = self._proc.stdout.readline()
            if not line:
                with open(self._log.name, "rb") as f:
                    tail = f.read()[-4000:].decode(errors="replace")
                raise RuntimeError("the Spark child died:\n" + tail)
            if line.decode(errors="replace").strip() == f"done {out}":
                break
        with open(out) as f:
            return json.load(f)  # type: ignore[no-any-return]

    def run(self, tasks: list[dict[str, Any]]) -> dict[str, Any]:
        self.start(tasks)
        return self.wait()

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()

    def __enter__(self) -> SparkChild:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def current_metadata(path: str) -> str:
    """A metadata.json path as is; a Hadoop-catalog table folder: its current metadata file."""
    if os.path.isdir(path):
        with open(os.path.join(path, "metadata", "version-hint.text")) as f:
            return os.path.join(path, "metadata", f"v{f.read().strip()}.metadata.json")
    return path


def _error(e: BaseException) -> str:
    java = getattr(e, "java_exception", None)
    if java is not None:  # the Java exception and its root cause say what went wrong, py4j does not
        cause = java
        while cause.getCause() is not None:
            cause = cause.getCause()
        text = str(java.toString()) + ("" if cause is java else f" (cause: {cause.toString()})")
        return text[:800]
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:800]


def run_tasks(spark: Any, tasks: list[dict[str, Any]]) -> dict[str, Any]:  # pragma: no cover - reference venv
    results: dict[str, Any] = {}
    for task in tasks:
        try:
            if task["kind"] == "sql":
                rows: list[Any] = []
                for statement in task["statements"]:
                    rows = [r.asDict(recursive=False) for r in spark.sql(statement).collect()]
                results[task["id"]] = {"rows": [plain(r) for r in rows]}
            elif task["kind"] == "read_all":
                task["path"] = current_metadata(task["path"])
                with open(task["path"]) as f:
                    md = json.load(f)
                by_snapshot: dict[str, Any] = {}
                for snap in md.get("snapshots", []):
                    sid = snap["snapshot-id"]
                    try:
                        reader = spark.read.format("iceberg").option("snapshot-id", sid)
                        for k, v in task.get("options", {}).items():
                            reader = reader.option(k, v)
                        df = reader.load(task["path"])
                        if task.get("lineage"):
                            df = df.select("*", "_row_id", "_last_updated_sequence_number")
                        by_snapshot[str(sid)] = {"rows": [plain(r) for r in df.collect()]}
                    except Exception as e:
                        by_snapshot[str(sid)] = {"error": _error(e)}
                results[task["id"]] = {"rows": by_snapshot}
            else:
                results[task["id"]] = {"error": f"unknown task kind {task['kind']!r}"}
        except Exception as e:
            results[task["id"]] = {"error": _error(e)}
    return results


def main(job_path: str, out_path: str) -> None:  # pragma: no cover - runs in the reference venv
    from spark_ref import spark_session

    with open(job_path) as f:
        job = json.load(f)
    spark = spark_session(warehouse=job["warehouse"], app="iceduck-interop")
    results = run_tasks(spark, job["tasks"])
    spark.stop()
    with open(out_path, "w") as f:
        json.dump(results, f)


# Spark's REST catalog caches tables: off, so each statement sees the commits iceduck made meanwhile
_REST_NO_CACHE = {"spark.sql.catalog.rest.cache-enabled": "false"}


def serve(config: dict[str, Any]) -> None:  # pragma: no cover - runs in the reference venv
    from spark_ref import spark_session

    extra = _REST_NO_CACHE if config.get("rest_uri") else {}
    spark = spark_session(
        warehouse=config["warehouse"], rest_uri=config.get("rest_uri"), app="iceduck-interop", extra=extra
    )
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        results = run_tasks(spark, request["tasks"])
        with open(request["out"], "w") as f:
            json.dump(results, f)
        sys.stdout.write(f"done {request['out']}\n")
        sys.stdout.flush()
    spark.stop()


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(json.loads(sys.argv[2]))
    else:
        main(sys.argv[1], sys.argv[2])
