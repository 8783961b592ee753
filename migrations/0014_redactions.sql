-- piidx schema 14: secrets redacted at sync time (`sync --redact`).
--
-- With redaction on, every secret piidx's detector finds (src/secrets) is
-- replaced by `[REDACTED:<kind>]` in `entries.raw` and the full-text index
-- before it is stored. This table says where each one was. Redaction is on
-- when `meta` holds `redact_key` (the key of `hash`); `redact_pending` is
-- there until the sync that turned it on has re-read every file.
CREATE TABLE redactions(
  entry_rowid INTEGER NOT NULL,  -- the entry that held it
  file_id     INTEGER NOT NULL,
  json_path   TEXT NOT NULL,     -- the string in the entry
  kind        TEXT NOT NULL,     -- the rule that found it (github-pat, private-key, ...)
  hash        TEXT NOT NULL,     -- HMAC-SHA256 of the secret under meta.redact_key, hex
  preview     TEXT NOT NULL      -- its first four characters and length
);
CREATE INDEX redactions_entry ON redactions(entry_rowid);
CREATE INDEX redactions_file ON redactions(file_id);
CREATE INDEX redactions_hash ON redactions(hash);
