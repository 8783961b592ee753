//! `piidx search --pg`: the team store's `texts` (every chunk of text the
//! index's full-text shards hold: messages, thinking, tool calls and
//! results, bash output, summaries…) matched with their `tsvector` (GIN),
//! ranked with `ts_rank_cd`, the best chunk of each entry kept, and cut into
//! snippets with `ts_headline`, as the index's `Hit`s. As in the index, only
//! the newest `RANK_WINDOW` matching chunks are ranked: finding the matches
//! reads the GIN index and small heap rows, while ranking reads each
//! match's whole `tsvector`, and a common word has tens of thousands.
//!
//! The query language is piidx's (words AND-ed, "phrases", prefix*, OR,
//! NOT, parentheses), translated here into a `tsquery`; `--raw` passes a
//! `tsquery` through. The filters are the index's: `--role` reads the same
//! conditions (`search::role_condition`) on the same column names.
//! `--substring` has no word index to use in the store and is refused.

use super::{Params, Pg, PgError, clause, conditions};
use crate::query::scope::Columns;
use crate::query::search::{
    Hit, MARK_CLOSE, MARK_OPEN, RANK_WINDOW, SearchError, SearchOptions, Sort, role_condition,
};
use crate::time::format_iso_ms;

#[derive(Debug, thiserror::Error)]
pub enum PgSearchError {
    #[error(
        "the query {0:?} has no searchable words (only punctuation or operators); put a word or a \"quoted phrase\" in it"
    )]
    Empty(String),
    #[error("{0} is not available with --pg: the team store has a word index only")]
    Unsupported(&'static str),
    #[error(transparent)]
    Filter(#[from] SearchError),
    #[error(transparent)]
    Pg(#[from] PgError),
}

/// A lexeme for `to_tsquery`, quoted.
fn lexeme(word: &str, prefix: bool) -> String {
    let quoted = word.replace('\\', "\\\\").replace('\'', "''");
    if prefix {
        format!("'{quoted}':*")
    } else {
        format!("'{quoted}'")
    }
}

/// One operand: the text quoted whole, so that PostgreSQL's parser splits
/// it as it split the indexed text (`Cargo.toml` stays one token, a
/// phrase's words are joined with `<->`); `None` when it has no letter or
/// digit.
fn operand(text: &str, prefix: bool) -> Option<String> {
    let text = text.trim_matches(|c: char| !c.is_alphanumeric());
    text.chars()
        .any(char::is_alphanumeric)
        .then(|| lexeme(text, prefix))
}

/// piidx's query language as a `tsquery` text; `None` when it has no word.
pub fn to_tsquery(query: &str) -> Option<String> {
    enum Tok {
        Open,
        Close,
        Or,
        Not,
        Term(String),
    }
    let mut toks = Vec::new();
    let mut chars = query.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '(' {
            chars.next();
            toks.push(Tok::Open);
        } else if c == ')' {
            chars.next();
            toks.push(Tok::Close);
        } else if c == '"' {
            chars.next();
            let phrase: String = chars.by_ref().take_while(|&c| c != '"').collect();
            let prefix = chars.peek() == Some(&'*');
            if prefix {
                chars.next();
            }
            if let Some(op) = operand(&phrase, prefix) {
                toks.push(Tok::Term(op));
            }
        } else {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || c == '(' || c == ')' || c == '"' {
                    break;
                }
                word.push(c);
                chars.next();
            }
            match word.as_str() {
                "OR" => toks.push(Tok::Or),
                "AND" => {}
                "NOT" => toks.push(Tok::Not),
                _ => {
                    let (word, negated) = match word.strip_prefix('-') {
                        Some(rest) if !rest.is_empty() => (rest, true),
                        _ => (word.as_str(), false),
                    };
                    let (word, prefix) = match word.strip_suffix('*') {
                        Some(rest) => (rest, true),
                        None => (word, false),
                    };
                    if let Some(op) = operand(word, prefix) {
                        if negated {
                            toks.push(Tok::Not);
                        }
                        toks.push(Tok::Term(op));
                    }
                }
            }
        }
    }
    // Operands next to each other are AND-ed; NOT binds to what follows.
    let mut out = String::new();
    let mut words = 0;
    let mut need_op = false;
    let mut depth = 0i32;
    for tok in toks {
        match tok {
            Tok::Or => {
                if need_op {
                    out.push_str(" | ");
                    need_op = false;
                }
            }
            Tok::Not | Tok::Open | Tok::Term(_) => {
                if need_op {
                    out.push_str(" & ");
                }
                match tok {
                    Tok::Not => {
                        out.push('!');
                        need_op = false;
                    }
                    Tok::Open => {
                        out.push('(');
                        depth += 1;
                        need_op = false;
                    }
                    Tok::Term(term) => {
                        out.push_str(&term);
                        words += 1;
                        need_op = true;
                    }
                    _ => {}
                }
            }
            Tok::Close => {
                if depth > 0 {
                    // `()` or a dangling operator before `)` is dropped.
                    let trimmed = out.trim_end_matches([' ', '&', '|', '!']).len();
                    out.truncate(trimmed);
                    if out.ends_with('(') {
                        out.pop();
                        need_op = !out.is_empty() && !out.ends_with(['&', '|', '!', '(', ' ']);
                    } else {
                        out.push(')');
                        need_op = true;
                    }
                    depth -= 1;
                }
            }
        }
    }
    let trimmed = out.trim_end_matches([' ', '&', '|', '!', '(']).len();
    out.truncate(trimmed);
    for _ in 0..depth {
        out.push(')');
    }
    // Balance what was cut: count again.
    let opens = out.matches('(').count();
    let closes = out.matches(')').count();
    for _ in closes..opens {
        out.push(')');
    }
    (words > 0).then_some(out)
}

/// The hits for `options` from the team store; `machine` keeps one
/// machine's sessions.
pub fn search(
    pg: &mut Pg,
    options: &SearchOptions,
    machine: Option<&str>,
) -> Result<Vec<Hit>, PgSearchError> {
    if options.substring {
        return Err(PgSearchError::Unsupported("--substring"));
    }
    crate::query::search::check(options)?;
    pg.check_readable()?;
    // The same time budget as the index's search, as the server's own
    // limit (0: none).
    let budget = options
        .stop
        .bounded(crate::query::search::SEARCH_BUDGET)
        .budget();
    let timeout_ms = budget
        .filter(|b| *b != std::time::Duration::MAX)
        .map_or(0, |b| b.as_millis());
    pg.client
        .batch_execute(&format!("SET statement_timeout = {timeout_ms}"))
        .map_err(pg.err())?;
    let tsquery = if options.raw {
        options.query.clone()
    } else {
        to_tsquery(&options.query).ok_or_else(|| PgSearchError::Empty(options.query.clone()))?
    };
    let mut params = Params::default();
    params.add(tsquery);
    params.add(options.limit as i64);
    let mut conds = conditions(
        &options.scope,
        machine,
        &Columns::sessions("c.timestamp_ms"),
        "s.machine",
        &mut params,
    );
    conds.extend(filters(options, &mut params)?);
    let order = match options.sort {
        Sort::Rank => "rank DESC, timestamp_ms DESC NULLS LAST, src, chunk_id",
        Sort::Recent => "timestamp_ms DESC NULLS LAST, rank DESC, src, chunk_id",
    };
    let sql = format!(
        "WITH q AS (SELECT to_tsquery('simple', $1) AS q),
         matches AS (
           SELECT c.src, c.chunk_id, c.entry_rowid, c.timestamp_ms
             FROM texts c CROSS JOIN q
             JOIN sessions s ON s.src = c.src AND s.file_id = c.file_id
            WHERE c.tsv @@ q.q{}
            ORDER BY c.timestamp_ms DESC NULLS LAST, c.chunk_id DESC LIMIT {RANK_WINDOW}),
         ranked AS (
           SELECT DISTINCT ON (m.src, m.entry_rowid)
                  m.src, m.chunk_id, m.timestamp_ms, ts_rank_cd(c.tsv, q.q) AS rank
             FROM matches m CROSS JOIN q
             JOIN texts c ON c.src = m.src AND c.chunk_id = m.chunk_id
            ORDER BY m.src, m.entry_rowid, rank DESC, m.chunk_id),
         best AS (SELECT * FROM ranked ORDER BY {order} LIMIT $2)
         SELECT s.session_id, s.file_path, s.name, s.first_message, s.cwd, c.entry_id, c.kind,
                c.entry_type, c.timestamp_ms, c.line_no, b.rank::float8,
                ts_headline('simple', c.text, q.q,
                            'StartSel={MARK_OPEN}, StopSel={MARK_CLOSE}, MaxWords=30, MinWords=12, MaxFragments=1'),
                c.tool_name, c.json_path, c.chunk_id
           FROM best b CROSS JOIN q
           JOIN texts c ON c.src = b.src AND c.chunk_id = b.chunk_id
           JOIN sessions s ON s.src = c.src AND s.file_id = c.file_id
          ORDER BY {}",
        clause(&conds),
        order
            .split(", ")
            .map(|term| format!("b.{term}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let rows = pg.client.query(&sql, &params.refs()).map_err(pg.err())?;
    Ok(rows
        .iter()
        .map(|row| {
            let rank: f64 = row.get(10);
            let snippet: String = row.get(11);
            Hit {
                session_id: row.get::<_, Option<String>>(0).unwrap_or_default(),
                session_path: row.get::<_, Option<String>>(1).unwrap_or_default(),
                session_name: row.get(2),
                first_message: row.get(3),
                cwd: row.get::<_, Option<String>>(4).unwrap_or_default(),
                entry_id: row.get::<_, Option<String>>(5).unwrap_or_default(),
                role: row.get(6),
                entry_type: row.get::<_, Option<String>>(7).unwrap_or_default(),
                timestamp: row.get::<_, Option<i64>>(8).map(format_iso_ms),
                snippet: snippet
                    .chars()
                    .map(|c| {
                        if c.is_control() && c != MARK_OPEN && c != MARK_CLOSE {
                            ' '
                        } else {
                            c
                        }
                    })
                    .collect(),
                // Lower is better, as the index's scores.
                score: -rank,
                tool_name: row.get(12),
                json_path: row.get(13),
                line_no: row.get::<_, Option<i64>>(9).unwrap_or(0),
                run: None,
                full_output: None,
                chunk_id: row.get(14),
            }
        })
        .collect())
}

/// `--role`, `--type`, `--tool` and `--model` as conditions on `texts c`.
/// The roles are the index's own conditions: they name `c.kind`, `e.type`
/// and `mm.role`, which `texts` holds as `kind`, `entry_type` and
/// `message_role`.
fn filters(options: &SearchOptions, params: &mut Params) -> Result<Vec<String>, SearchError> {
    let mut conds = Vec::new();
    let mut roles = Vec::new();
    for role in &options.roles {
        for part in role.split(',').filter(|p| !p.trim().is_empty()) {
            roles.push(
                role_condition(part)?
                    .replace("e.type", "c.entry_type")
                    .replace("mm.role", "c.message_role"),
            );
        }
    }
    if !roles.is_empty() {
        conds.push(format!("({})", roles.join(" OR ")));
    }
    if !options.entry_types.is_empty() {
        let types: Vec<String> = options
            .entry_types
            .iter()
            .map(|t| t.trim().to_owned())
            .collect();
        let n = params.add(types);
        conds.push(format!("c.entry_type = ANY(${n})"));
    }
    if let Some(tool) = &options.tool {
        let n = params.add(tool.to_lowercase());
        conds.push(format!("lower(c.tool_name) = ${n}"));
    }
    if let Some(model) = &options.model {
        let n = params.add(model.to_lowercase());
        conds.push(format!("strpos(lower(c.model), ${n}) > 0"));
    }
    Ok(conds)
}

#[cfg(test)]
mod tests {
    use super::to_tsquery;

    #[test]
    fn the_query_language_becomes_a_tsquery() {
        assert_eq!(to_tsquery("foo bar").as_deref(), Some("'foo' & 'bar'"));
        assert_eq!(
            to_tsquery("pars* OR lexer").as_deref(),
            Some("'pars':* | 'lexer'")
        );
        assert_eq!(
            to_tsquery("\"exact phrase\" NOT x").as_deref(),
            Some("'exact phrase' & !'x'")
        );
        assert_eq!(
            to_tsquery("SessionManager.listAll").as_deref(),
            Some("'SessionManager.listAll'")
        );
        assert_eq!(
            to_tsquery("(a OR b) c").as_deref(),
            Some("('a' | 'b') & 'c'")
        );
        assert_eq!(to_tsquery("it's").as_deref(), Some("'it''s'"));
        assert_eq!(to_tsquery("-- ()"), None);
    }
}
