-- piidx schema 6: the word index moves out of this file into shard files.
--
-- One SQLite writer indexes about 30 MB/s of JSONL on a 2-core machine, and
-- FTS5 is most of a cold sync; separate database files have separate
-- writers, so the word index is now split over N files next to this one
-- (`<db>.fts0`, `<db>.fts1`, ...), each written by its own thread. A chunk
-- is indexed in shard `chunk_id % shards`. The shards are contentless
-- (`contentless_delete=1`): the text is stored once, in `entries.raw`.
-- docs/schema.md ("Full-text shards") says how to query them from SQL;
-- docs/performance.md has the measurements.
--
-- This database stays the record: a shard only ever indexes chunks
-- committed here, and remembers the highest chunk id it has caught up to.
-- Chunk ids are never reused, so a sync that finds a shard behind (a crash
-- between the two commits) indexes the chunks above its mark, and replays
-- the deletions still listed in `fts_deletes`.

DROP TABLE fts;

-- One row, written by the first sync after this migration.
CREATE TABLE fts_shards(
  shards        INTEGER NOT NULL, -- number of shard files
  db_id         TEXT NOT NULL,    -- pairs the shard files with this database
  last_chunk_id INTEGER NOT NULL  -- highest chunk_id ever assigned
);

-- Chunks deleted here whose shard rows may not be deleted yet.
CREATE TABLE fts_deletes(chunk_id INTEGER PRIMARY KEY);

-- The trigram index (CJK & co., migration 0005) gets all of a commit's rows
-- at once; with FTS5's default 1 MB buffer a commit wrote dozens of small
-- segments and merged them (trigram text makes one token per character).
INSERT INTO fts_trigram(fts_trigram, rank) VALUES ('hashsize', 16777216);
