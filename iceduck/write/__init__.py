"""Writing data and delete files: Parquet through DuckDB with Iceberg field ids and metrics, partition
fan-out, deletion vectors and position deletes, and finding the rows a predicate touches."""
