-- piidx schema 22: a push's file signatures read indexes alone.
--
-- Every `piidx push` signs each indexed file (src/store/push_source.rs,
-- SIGNATURES) to find the ones the store does not hold yet. The signature
-- sums `copies` of the file's usage records and `copies` and `block_index`
-- of its tool calls, which the `file_id` indexes did not carry: each row
-- was looked up in its table, a random read per row, and a push with
-- nothing to send spent most of its time there (about 50 ms of 70 on a
-- 1 GB corpus). The same indexes, now covering what the signature reads;
-- their leading columns, and every lookup by them, are unchanged.
DROP INDEX usage_records_file;
CREATE INDEX usage_records_file ON usage_records(file_id, copies);
DROP INDEX tool_call_meta_call;
CREATE INDEX tool_call_meta_call ON tool_call_meta(file_id, call_id, copies, block_index);
