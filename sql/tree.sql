-- Walk a table's tree: metadata file -> snapshots -> manifest list -> manifests -> data and delete files.
--   iceduck -c "SET VARIABLE tbl = 'demo.services'" -c ".read sql/tree.sql"
-- (tbl: ns.table in the warehouse's catalog, a table folder, or a metadata.json path)

-- 1. the metadata files, oldest first (the last one is current)
SELECT timestamp, is_current, file FROM iceberg_metadata_log(getvariable('tbl')) ORDER BY timestamp;

-- 2. every snapshot: what it did and how many rows it added or removed
SELECT sequence_number, snapshot_id, parent_id, operation, committed_at,
       summary['added-records'] AS added_records, summary['deleted-records'] AS deleted_records, is_current
FROM iceberg_snapshots(getvariable('tbl')) ORDER BY sequence_number;

-- 3. the current snapshot's manifests (its manifest list)
SELECT content, added_files_count + existing_files_count AS live_files, deleted_files_count,
       added_rows_count + existing_rows_count AS live_rows, sequence_number, path
FROM iceberg_manifests(getvariable('tbl')) ORDER BY content, sequence_number;

-- 4. the live files under them, per manifest and kind
SELECT manifest_path, content, count(*) AS files, sum(record_count) AS records, sum(file_size_in_bytes) AS bytes
FROM iceberg_files(getvariable('tbl')) GROUP BY ALL ORDER BY manifest_path, content;
