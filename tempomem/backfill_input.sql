-- tempomem: a backfill's input as the view `_bf_src`, its columns plus `__row`, the row's
-- 0-based position in the input (tempomem.backfill.source).
--
-- Named parts, each starting at a line `-- @part <name>` (connection.sql_parts), each one
-- whole statement over `_bf_file` (the files read by DuckDB) or `_bf_arrow` (a caller's
-- frame), made by the caller.

-- @part one_parquet
-- One Parquet file, read with its row numbers: its row number is the input position (no join
-- with the offsets).
CREATE TEMP VIEW _bf_src AS
SELECT CAST(file_row_number AS BIGINT) AS __row, * EXCLUDE (file_row_number) FROM _bf_file;

-- @part parquet_offsets
-- Several Parquet files ($files, in input order): the rows of the files before each.
CREATE TEMP TABLE _bf_offsets AS
SELECT file_name, sum(num_rows) OVER (ORDER BY idx) - num_rows AS offset_rows
FROM (SELECT file_name, num_rows, list_position($files, file_name) AS idx
      FROM parquet_file_metadata($files));

-- @part many_parquet
-- Several Parquet files, read with their names and row numbers: file_row_number restarts in
-- every file, so the rows of the files before it are added (parquet_offsets).
CREATE TEMP VIEW _bf_src AS
SELECT CAST(o.offset_rows + f.file_row_number AS BIGINT) AS __row,
       f.* EXCLUDE (file_row_number, filename)
FROM _bf_file f JOIN _bf_offsets o ON o.file_name = f.filename;

-- @part text_files
-- CSV or JSON Lines files, read in order: row_number over the scan is the input position.
CREATE TEMP TABLE _bf_src AS
SELECT CAST(row_number() OVER () - 1 AS BIGINT) AS __row, * FROM _bf_file;

-- @part csv_errors
-- The first record of the CSV files that DuckDB could not read (kept aside by store_rejects in
-- `_bf_csv_errors`; `line` counts records, the header first), with the count of such records:
-- a load refuses them all rather than skip rows and shift every later row's position.
SELECT s.file_path, e.line, e.error_message, count(*) OVER () AS lines
FROM _bf_csv_errors AS e JOIN _bf_csv_scans AS s USING (scan_id, file_id)
ORDER BY s.file_id, e.line
LIMIT 1;

-- @part frame
-- A caller's frame, relation or rows (as Arrow, with `__row`).
CREATE TEMP VIEW _bf_src AS SELECT * FROM _bf_arrow;
