-- Health of every table in the warehouse's catalog, worst first (metadata only: no data file is read).
--   iceduck -f sql/health_dashboard.sql

-- one iceberg_health call per table of the catalog (the lake database), in one query
SET VARIABLE health_sql = (
    SELECT coalesce(
        string_agg(format('SELECT * FROM iceberg_health({})', quote_literal), ' UNION ALL '),
        'SELECT * FROM iceberg_health(NULL) LIMIT 0')
    FROM (SELECT '''' || replace(table_schema || '.' || table_name, '''', '''''') || '''' AS quote_literal
          FROM information_schema.tables WHERE table_catalog = 'lake' ORDER BY ALL)
);

SELECT table_name, state, data_files, snapshots, expirable_snapshots,
       list_transform(reasons, lambda r: r.message) AS reasons,
       list_transform(recommended_actions, lambda a: a.action) AS actions
FROM query(getvariable('health_sql'))
ORDER BY CASE state WHEN 'AT_RISK' THEN 0 WHEN 'MAINTENANCE_BLOCKED' THEN 1 WHEN 'MAINTENANCE_DUE' THEN 2
                    WHEN 'DEBT_GROWING' THEN 3 ELSE 4 END, table_name;
