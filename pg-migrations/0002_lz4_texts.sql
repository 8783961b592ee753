-- piidx team store, schema 2: `texts.text` and `texts.tsv` compressed with
-- lz4 instead of pglz where the server has it (PostgreSQL 14+ built with
-- lz4, as Debian's and the official images are). A search reads the
-- `tsvector` of every match (to check phrases and prefixes, and to rank)
-- and `ts_headline` reads the text of each hit; lz4 gives them back in
-- about a third less time. Rows written before keep their compression
-- until they are written again. A server without lz4 keeps pglz.
DO $$
BEGIN
  ALTER TABLE texts ALTER COLUMN text SET COMPRESSION lz4,
                    ALTER COLUMN tsv SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR syntax_error OR invalid_parameter_value THEN
  RAISE NOTICE 'piidx: this server has no lz4; texts stay compressed with pglz';
END
$$;
