-- Record the health of every table of the catalog in the health log (run it on a schedule, e.g. cron:
--   0 * * * *  cd /srv/lake && iceduck -f sql/record_health.sql
-- ); trends in the log turn a table DEBT_GROWING before it needs maintenance.

SET VARIABLE record_sql = (
    SELECT coalesce(
        string_agg(format('SELECT * FROM iceberg_health({}, record := true)', quote_literal), ' UNION ALL '),
        'SELECT * FROM iceberg_health(NULL) LIMIT 0')
    FROM (SELECT '''' || replace(table_schema || '.' || table_name, '''', '''''') || '''' AS quote_literal
          FROM information_schema.tables WHERE table_catalog = 'lake' ORDER BY ALL)
);

-- the snapshots just recorded
SELECT table_name, computed_at, state FROM query(getvariable('record_sql')) ORDER BY table_name;
