-- Why does a query read too many files? Compare what planning keeps with what it skips, and why.
--   iceduck -c "SET VARIABLE tbl = 'demo.services'" -c "SET VARIABLE filter = 'delay_min > 25'" -c ".read sql/too_many_files.sql"
-- (filter: the query's WHERE condition, as SQL text on the table's columns)

-- 1. files kept and skipped, by the level that skipped them (manifest, partition, column bounds)
SELECT kept, coalesce(skipped_at, '(read)') AS skipped_at, count(*) AS files, sum(record_count) AS records,
       sum(file_size_in_bytes) AS bytes
FROM iceberg_scan_plan(getvariable('tbl'), filter := getvariable('filter')) GROUP BY ALL ORDER BY kept DESC, skipped_at;

-- 2. the files read anyway, with the delete files each one needs
SELECT file_path, partition, record_count, len(delete_files) AS delete_files
FROM iceberg_scan_plan(getvariable('tbl'), filter := getvariable('filter')) WHERE kept ORDER BY record_count DESC LIMIT 20;

-- 3. the filter columns' bounds in the files that were read: wide bounds mean the data is not
--    clustered on the filter column (sort or partition the table by it)
SELECT s.file_path, s.column_name, s.lower_bound, s.upper_bound, s.null_value_count
FROM iceberg_column_stats(getvariable('tbl')) s
JOIN iceberg_scan_plan(getvariable('tbl'), filter := getvariable('filter')) p ON p.file_path = s.file_path
WHERE p.kept AND contains(getvariable('filter'), s.column_name) ORDER BY s.file_path, s.column_name LIMIT 40;
