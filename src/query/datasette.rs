//! What Datasette needs to know about an index, as its metadata file
//! (`piidx datasette` writes it): text search on `v_message_text` through
//! `message_fts` (Datasette finds an FTS table of a view only when told),
//! default sort orders, and canned queries for the common questions, with
//! snippets for search. The SQL runs in Datasette, on SQLite 3.37 or later;
//! `escape_fts` is Datasette's own function (a user's words as FTS5 terms).

use serde_json::{Value, json};

/// Search with snippets, best first.
const SEARCH: &str = "SELECT m.time, m.role, s.name AS session_name,
       snippet(message_fts, 0, '«', '»', '…', 24) AS snippet,
       m.session_id, m.entry_id, s.file_path
  FROM message_fts
  JOIN v_message_text m ON m.entry_rowid = message_fts.rowid
  JOIN v_sessions s ON s.file_id = m.file_id
 WHERE message_fts MATCH escape_fts(:q)
 ORDER BY rank
 LIMIT 100";

const RECENT_SESSIONS: &str =
    "SELECT last_activity, name, project_dir, message_count, first_message, session_id, file_path
  FROM v_sessions
 ORDER BY last_activity DESC
 LIMIT 100";

const USAGE_BY_DAY: &str = "SELECT day, sum(records) AS records, sum(total_tokens) AS total_tokens,
       round(sum(cost_total), 4) AS cost, sum(unpriced_tokens) AS unpriced_tokens
  FROM v_usage_daily
 GROUP BY day
 ORDER BY day DESC";

const TRANSCRIPT: &str = "SELECT coalesce(timestamp,
                strftime('%Y-%m-%dT%H:%M:%fZ', timestamp_ms / 1000.0, 'unixepoch')) AS time,
       role, tool_name, text, entry_id
  FROM messages_full
 WHERE session_id = :session_id
 ORDER BY file_id, entry_rowid";

/// The metadata for the index Datasette serves as database `database` (its
/// file name without the extension, as Datasette names it).
pub fn metadata(database: &str) -> Value {
    json!({
        "title": "piidx: Pi coding-agent sessions",
        "description": "Search: the search box of v_message_text, or the search query (with snippets). The schema: docs/schema.md in piidx.",
        "databases": {
            database: {
                "tables": {
                    "v_message_text": {
                        "description": "User and assistant messages; the search box searches their text (message_fts).",
                        "fts_table": "message_fts",
                        "fts_pk": "entry_rowid",
                        "sort_desc": "time"
                    },
                    "v_sessions": {
                        "description": "Sessions, with their times as dates.",
                        "sort_desc": "last_activity"
                    }
                },
                "queries": {
                    "search": {
                        "title": "Search messages",
                        "description": "User and assistant messages matching the words, best first, with a snippet.",
                        "sql": SEARCH
                    },
                    "recent_sessions": {
                        "title": "Recent sessions",
                        "sql": RECENT_SESSIONS
                    },
                    "usage_by_day": {
                        "title": "Usage by day (UTC)",
                        "description": "Tokens and cost per day, each API response counted once across forks.",
                        "sql": USAGE_BY_DAY
                    },
                    "transcript": {
                        "title": "A session's transcript",
                        "description": "Every message of a session (by its id), in file order.",
                        "sql": TRANSCRIPT
                    }
                }
            }
        }
    })
}
