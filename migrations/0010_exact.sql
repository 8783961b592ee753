-- piidx schema 10: the index is an exact copy.
--
-- entries.raw now keeps every number as the file wrote it (serde_json
-- parsed them into floats and printed them back: 0.0024720000000000002
-- became 0.002472), and an image payload goes back to its place among its
-- object's keys, so `piidx export` gives back every line Pi wrote byte for
-- byte. The parser version shipped with this schema (3) makes the next sync
-- re-index every file, which also fills the new column.

-- Position of the payload key (`data`, or `content`) among the keys of its
-- image object; NULL for rows written before (the payload then goes last).
ALTER TABLE images ADD COLUMN payload_index INTEGER;
