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
if args.get("partitioned"):
    # Java reads iceduck's partition statistics file with its own reader
    handler = jvm.org.apache.iceberg.PartitionStatsHandler
    obj = jvm.java.lang.Class.forName("java.lang.Object")

    def table_at(path):
        return jvm.org.apache.iceberg.BaseTable(jvm.org.apache.iceberg.StaticTableOperations(path, io), "p")

    def partition_rows(table, path):
        schema = handler.schema(jvm.org.apache.iceberg.Partitioning.partitionType(table), 3)
        rows_out = []
        for s in lists.newArrayList(handler.readPartitionStatsFile(schema, io.newInputFile(path))):
            part = s.partition()
            rows_out.append(
                {
                    "partition": [
                        None if part.get(i, obj) is None else str(part.get(i, obj))
                        for i in range(part.size())
                    ],
                    "spec_id": s.specId(),
                    "data_record_count": s.dataRecordCount(),
                    "data_file_count": s.dataFileCount(),
                    "total_data_file_size_in_bytes": s.totalDataFileSizeInBytes(),
                    "position_delete_record_count": s.positionDeleteRecordCount(),
                    "position_delete_file_count": s.positionDeleteFileCount(),
                    "equality_delete_record_count": s.equalityDeleteRecordCount(),
                    "equality_delete_file_count": s.equalityDeleteFileCount(),
                    "total_record_count": s.totalRecords(),
                    "last_updated_at": s.lastUpdatedAt(),
                    "last_updated_snapshot_id": s.lastUpdatedSnapshotId(),
                    "dv_count": s.dvCount(),
                }
            )
        return rows_out

    after = table_at(args["partitioned"]["after"])
    ours = lists.newArrayList(after.partitionStatisticsFiles())
    out["iceduck_partition_files"] = [[int(f.snapshotId()), f.path(), int(f.fileSizeInBytes())] for f in ours]
    out["iceduck_partition_rows"] = partition_rows(after, ours.get(0).path())
df = spark.read.format("iceberg").load(args["iceduck_metadata"])
df.createOrReplaceTempView("iceduck_t")
q = spark.sql(args["query"])
out["query_rows"] = [list(r) for r in q.collect()]
out["plan_stats"] = q._jdf.queryExecution().optimizedPlan().stats().attributeStats().toString()
print(json.dumps(out, default=str))
