-- Debug deletes: deletion vectors and position/equality delete files, and whether they are sound.
--   iceduck -c "SET VARIABLE tbl = 'demo.services'" -c ".read sql/deletes.sql"

-- 1. delete files per kind, and the data files they point at
SELECT content, file_format, count(*) AS files, sum(record_count) AS deleted_rows,
       count(DISTINCT referenced_data_file) AS data_files_referenced
FROM iceberg_files(getvariable('tbl'), content := 'delete') GROUP BY ALL ORDER BY content;

-- 2. every deletion vector checked: manifest, blob and bitmap cardinalities agree, CRC ok
SELECT ok, count(*) AS deletion_vectors, sum(decoded_cardinality) AS deleted_positions,
       string_agg(DISTINCT problems, '; ') AS problems
FROM iceberg_dv_check(getvariable('tbl')) GROUP BY ok;

-- 3. delete files whose referenced paths match no live data file (a writer spelled paths differently)
SELECT delete_file_path, kind, referenced_paths, exact, normalized, unmatched, unmatched_example, error
FROM iceberg_delete_check(getvariable('tbl')) WHERE unmatched > 0 OR error IS NOT NULL;

-- 4. the share of each data file's rows that is deleted (high shares: rewrite those files)
SELECT file_path, record_count, deleted, round(deleted / record_count, 3) AS share
FROM (
    SELECT f.file_path, f.record_count, count(d.pos) AS deleted
    FROM iceberg_files(getvariable('tbl'), content := 'data') f
    LEFT JOIN iceberg_position_deletes(getvariable('tbl')) d ON d.referenced_data_file = f.file_path
    GROUP BY f.file_path, f.record_count
)
ORDER BY share DESC, file_path LIMIT 20;
