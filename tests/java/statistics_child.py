"""Run by the Java reference's Python (pyspark) for tests/java/test_java_statistics.py: one Spark
session that (1) runs the given statements (a Spark table, `compute_table_stats`, exact counts),
(2) reads iceduck's statistics with Java Iceberg (TableMetadataParser, Puffin) and Java
DataSketches, and (3) plans a query over iceduck's table with the cost-based optimizer on.
Prints one JSON object on its last stdout line."""

import json
import sys

sys.path.insert(0, sys.argv[2])
from spark_ref import spark_session

args = json.loads(sys.argv[1])
spark = spark_session(
    warehouse=args["warehouse"],
    extra={"spark.sql.cbo.enabled": "true", "spark.sql.cbo.planStats.enabled": "true"},
)
out = {}
rows = None
for statement in args["statements"]:
    rows = spark.sql(statement).collect()
out["last_rows"] = [list(r) for r in rows or []]
jvm = spark._jvm
io = jvm.org.apache.iceberg.hadoop.HadoopFileIO(spark._jsc.hadoopConfiguration())
md = jvm.org.apache.iceberg.TableMetadataParser.read(io, args["iceduck_metadata"])
lists = jvm.org.apache.iceberg.relocated.com.google.common.collect.Lists
sketches = jvm.org.apache.iceberg.shaded.org.apache.datasketches
blobs_out = []
for sf in lists.newArrayList(md.statisticsFiles()):
    props = {}
    for bm in lists.newArrayList(sf.blobMetadata()):
        props[int(bm.fields().get(0))] = bm.properties().get("ndv")
    reader = jvm.org.apache.iceberg.puffin.Puffin.read(io.newInputFile(sf.path())).build()
    for pair in lists.newArrayList(reader.readAll(reader.fileMetadata().blobs())):
        bm, buf = pair.first(), pair.second()
        data = jvm.org.apache.iceberg.util.ByteBuffers.toByteArray(buf)
        sketch = sketches.theta.CompactSketch.wrap(sketches.memory.Memory.wrap(data))
        field = int(bm.inputFields().get(0))
        blobs_out.append(
            {
                "snapshot_id": int(sf.snapshotId()),
                "type": bm.type(),
                "field": field,
                "ndv": props.get(field),
                "java_estimate": float(sketch.getEstimate()),
            }
        )
    reader.close()
out["java_blobs"] = blobs_out
out["current_snapshot_id"] = int(md.currentSnapshot().snapshotId())
df = spark.read.format("iceberg").load(args["iceduck_metadata"])
df.createOrReplaceTempView("iceduck_t")
q = spark.sql(args["query"])
out["query_rows"] = [list(r) for r in q.collect()]
out["plan_stats"] = q._jdf.queryExecution().optimizedPlan().stats().attributeStats().toString()
print(json.dumps(out, default=str))
