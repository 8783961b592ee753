-- piidx team store, schema 4: the word index is made and packed by the
-- pushing client (`src/store/pg/words.rs`) instead of a GIN index over a
-- `tsvector` column. The GIN index was most of the server's work in a push
-- (and `tsv` most of the rest), which held a first push under 13 MB/s;
-- `search --pg` read it for every match of a common word.
--
-- Each push transaction (a "batch") adds the posting lists of the words of
-- the texts it sends: its words sorted bytewise and packed into rows of
-- about 32 KB (`words`). A list is varints (docs/postgres.md, "The word
-- index"): per chunk, the chunk id minus the previous one, the batch that
-- wrote the chunk counted back from the row's, the number of positions;
-- the positions (each minus the previous) are apart. A row holds its lists
-- end to end in `lists`, `lexemes[i]`'s ending at `list_ends[i]`, and
-- their positions the same way; both uncompressed, so that reading one
-- list reads only its pages. A posting holds only while `texts` has its
-- chunk with that `batch`: deleted and re-sent texts leave postings behind
-- that no longer count. Small batches are merged (LSM-style) by later
-- pushes.
CREATE SEQUENCE word_batch_ids;

CREATE TABLE word_batches(
  src    integer NOT NULL REFERENCES machines,
  batch  bigint NOT NULL,
  chunks bigint NOT NULL,   -- texts the batch indexed
  tokens bigint NOT NULL,   -- their word tokens (bm25's average length)
  bytes  bigint NOT NULL,   -- size of its posting lists
  PRIMARY KEY (src, batch)
);

CREATE TABLE words(
  src           integer NOT NULL,
  batch         bigint NOT NULL,
  first         text COLLATE "C" NOT NULL,   -- lexemes[1]
  lexemes       text[] COLLATE "C" NOT NULL, -- sorted bytewise
  list_ends     integer[] NOT NULL,
  lists         bytea NOT NULL,
  position_ends integer[] NOT NULL,
  positions     bytea NOT NULL,
  PRIMARY KEY (src, batch, first)
);
-- Varints do not compress, and a slice of an uncompressed value is read
-- alone.
ALTER TABLE words ALTER COLUMN lists SET STORAGE EXTERNAL,
                  ALTER COLUMN positions SET STORAGE EXTERNAL;

ALTER TABLE texts ADD COLUMN batch bigint, ADD COLUMN words integer;
DROP INDEX texts_tsv;
ALTER TABLE texts DROP COLUMN tsv;
-- A search checks its candidates by key, for what the key's index now
-- carries (the batch, the entry, the time, the kind, the length, and what
-- --role and --tool read): an index-only scan once autovacuum has seen the
-- rows.
ALTER TABLE texts DROP CONSTRAINT texts_pkey,
  ADD PRIMARY KEY (src, chunk_id)
      INCLUDE (batch, entry_rowid, timestamp_ms, kind, words, entry_type, message_role, tool_name);

-- Lexeme `i`'s list, or its positions, from a row's bytes and ends.
CREATE FUNCTION piidx_slice(bytes bytea, ends integer[], i integer)
RETURNS bytea LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT substring($1 FROM coalesce($2[$3 - 1], 0) + 1 FOR $2[$3] - coalesce($2[$3 - 1], 0))
$$;

-- Every varint of `bytes`, in order.
CREATE FUNCTION piidx_varints(bytes bytea)
RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  out bigint[] := '{}';
  v bigint := 0;
  shift integer := 0;
  b integer;
BEGIN
  FOR at IN 0..length(bytes) - 1 LOOP
    b := get_byte(bytes, at);
    v := v | ((b & 127)::bigint << shift);
    IF b < 128 THEN
      out := out || v;
      v := 0;
      shift := 0;
    ELSE
      shift := shift + 7;
    END IF;
  END LOOP;
  RETURN out;
END
$$;

-- A list decoded: (chunk id, batch, positions) per posting, from lexeme
-- `i` of a `words` row: `piidx_slice(lists, list_ends, i)`,
-- `piidx_slice(positions, position_ends, i)` and the row's `batch`.
CREATE FUNCTION piidx_postings(list bytea, list_positions bytea, row_batch bigint)
RETURNS TABLE(chunk_id bigint, batch bigint, positions integer[])
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  fields bigint[] := piidx_varints(list);      -- chunk delta, batch back, count
  deltas bigint[] := piidx_varints(list_positions);
  at_pos integer := 1;
  chunk bigint := 0;
  pos bigint;
BEGIN
  FOR at IN 1..coalesce(array_length(fields, 1), 0) BY 3 LOOP
    chunk := chunk + fields[at];
    chunk_id := chunk;
    batch := row_batch - fields[at + 1];
    positions := '{}';
    pos := 0;
    FOR i IN 1..fields[at + 2] LOOP
      pos := pos + deltas[at_pos];
      at_pos := at_pos + 1;
      positions := positions || pos::integer;
    END LOOP;
    RETURN NEXT;
  END LOOP;
END
$$;

-- The texts that hold a lexeme, as piidx's tokenizer writes it (lower
-- case, no accents; `prefix`: every lexeme that starts with it), with the
-- number of times: what `tsv @@ 'word'` answered before schema 4. In each
-- batch, the row that may hold the lexeme is the last one whose first
-- lexeme is not after it (and, for a prefix, the rows after it that start
-- with it): a few b-tree reads per batch.
CREATE FUNCTION piidx_matches(lexeme text, prefix boolean DEFAULT false)
RETURNS TABLE(src integer, chunk_id bigint, hits integer)
LANGUAGE sql STABLE STRICT PARALLEL SAFE AS $$
  SELECT t.src, t.chunk_id, sum(cardinality(p.positions))::integer
    FROM word_batches b
    CROSS JOIN LATERAL (
      SELECT w.* FROM words w
       WHERE w.src = b.src AND w.batch = b.batch
         AND w.first >= coalesce((SELECT o.first FROM words o
                                   WHERE o.src = b.src AND o.batch = b.batch
                                     AND o.first <= $1 COLLATE "C"
                                   ORDER BY o.first DESC LIMIT 1), '')
         AND w.first <= CASE WHEN $2 THEN $1 || chr(1114111) ELSE $1 END COLLATE "C"
      OFFSET 0) w
    CROSS JOIN LATERAL unnest(w.lexemes) WITH ORDINALITY AS u(word, i)
    CROSS JOIN LATERAL piidx_postings(piidx_slice(w.lists, w.list_ends, u.i::integer),
                                      piidx_slice(w.positions, w.position_ends, u.i::integer),
                                      w.batch) AS p
    JOIN texts t ON t.src = w.src AND t.chunk_id = p.chunk_id AND t.batch = p.batch
   WHERE u.word = $1 OR ($2 AND starts_with(u.word, $1))
   GROUP BY t.src, t.chunk_id
$$;

-- Every machine sends its files again with the new word index.
UPDATE push_files SET sig = '', base = '';
