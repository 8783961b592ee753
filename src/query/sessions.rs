//! `piidx sessions`: the session list Pi's `/resume` shows, from the index.
//!
//! Same fields and meaning as Pi's `SessionInfo` (`buildSessionInfo` in
//! `dist/core/session-manager.js`, 0.73.1 and 1.5.2): the writer keeps `message_count`,
//! `first_message`, `name` and `modified_ms` with Pi's rules; the header
//! fields are read back from `header_raw` so that `parentSessionPath` and
//! `cwd` are exactly what Pi reads (`parentSession` only, never
//! `branchedFrom`; pi_agent_rust's sessions: its `branchedFrom`, which it
//! reads first). `allMessagesText` is not produced; `agent` is added.

use serde::Serialize;
use serde_json::{Map, Value};

use super::QueryError;
use super::scope::{Columns, Scope};
use super::tree::{SessionRef, SessionTree};
use crate::store::Index;
use crate::time::format_iso_ms;

/// Filters for `piidx sessions`. The scope's time is the session's
/// `modified` time.
#[derive(Debug, Default, Clone)]
pub struct SessionsQuery {
    pub scope: Scope,
    pub limit: Option<usize>,
    /// Also list files Pi's `listAll()` does not see (nested child sessions, stray files).
    pub all: bool,
}

/// One session as Pi's `SessionInfo` describes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionInfo {
    pub path: String,
    pub id: String,
    pub cwd: String,
    pub name: Option<String>,
    /// `header.parentSession` as JSON; `None` when the key is absent.
    pub parent_session_path: Option<Value>,
    pub created_ms: Option<i64>,
    pub modified_ms: Option<i64>,
    pub message_count: i64,
    pub first_message: String,
    pub listed_by_pi: bool,
    /// The shortest prefix of `id` (at least `SHORT_ID` characters) that no
    /// other session of the index shares, as git abbreviates: what a table
    /// shows, and what `SESSION` arguments take back.
    pub short_id: String,
    /// The coding agent that wrote it: `pi`, `omp` or `pi_agent_rust`.
    pub agent: String,
    /// pi_agent_rust: the model and thinking level the port resumes the
    /// session with, and its header's `fallback*` fields as written.
    pub port_model: Option<PortModel>,
}

/// The model pi_agent_rust resumes a session with (its `session.rs`
/// `effective_model_for_current_path` and
/// `effective_thinking_level_for_current_path`): the last `model_change`
/// (`thinking_level_change`) on the current branch; else, when another
/// branch has one, the header's `fallbackProvider` + `fallbackModelId`
/// (`fallbackThinkingLevel`), which the port keeps for branches without a
/// change of their own; else the header's `provider` + `modelId`
/// (`thinkingLevel`). A header without `fallback*` fields has them filled
/// from its `provider`, `modelId` and `thinkingLevel` when the port opens
/// it (`materialize_branch_fallbacks`; its test
/// `test_open_materializes_header_fallback_for_historyless_branch_navigation`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PortModel {
    pub provider: Option<String>,
    pub model_id: Option<String>,
    pub thinking_level: Option<String>,
    /// The header's `fallbackProvider`, `fallbackModelId`,
    /// `fallbackThinkingLevel` as written (absent: `None`).
    pub fallback_provider: Option<String>,
    pub fallback_model_id: Option<String>,
    pub fallback_thinking_level: Option<String>,
}

/// `PortModel` of the pi_agent_rust session `session`, from its current
/// branch (`None` when its entries cannot be read back).
pub fn port_model(store: &Index, session: SessionRef) -> Option<PortModel> {
    let tree = SessionTree::load(store, session).ok()?;
    let header = &tree.header;
    let text = |key: &str| header.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut model = PortModel {
        fallback_provider: text("fallbackProvider"),
        fallback_model_id: text("fallbackModelId"),
        fallback_thinking_level: text("fallbackThinkingLevel"),
        ..PortModel::default()
    };
    let materialized = model.fallback_provider.is_none()
        && model.fallback_model_id.is_none()
        && model.fallback_thinking_level.is_none();
    let (fallback_provider, fallback_model, fallback_thinking) = if materialized {
        (text("provider"), text("modelId"), text("thinkingLevel"))
    } else {
        (
            model.fallback_provider.clone(),
            model.fallback_model_id.clone(),
            model.fallback_thinking_level.clone(),
        )
    };
    let branch = tree
        .leaf()
        .map(|leaf| tree.path_to(leaf))
        .unwrap_or_default();
    let last_on_branch = |kind: &str| {
        branch
            .iter()
            .rev()
            .map(|&index| &tree.nodes[index])
            .find(|node| node.kind == kind)
    };
    let anywhere = |kind: &str| tree.nodes.iter().any(|node| node.kind == kind);
    let field = |node: &crate::query::tree::Node, key: &str| {
        node.raw.get(key).and_then(Value::as_str).map(str::to_owned)
    };
    // Both halves or neither, as the port's `zip` does.
    let pair = |provider: Option<String>, id: Option<String>| match (provider, id) {
        (Some(provider), Some(id)) => (Some(provider), Some(id)),
        _ => (None, None),
    };
    (model.provider, model.model_id) = match last_on_branch("model_change") {
        Some(change) => pair(field(change, "provider"), field(change, "modelId")),
        None if anywhere("model_change") => pair(fallback_provider, fallback_model),
        None => pair(text("provider"), text("modelId")),
    };
    model.thinking_level = match last_on_branch("thinking_level_change") {
        Some(change) => field(change, "thinkingLevel"),
        None if anywhere("thinking_level_change") => fallback_thinking,
        None => text("thinkingLevel"),
    };
    Some(model)
}

/// What a session is called, as Pi's `/resume` shows it: its name, else
/// its first message. The one title rule: the session list, search hits,
/// the picker and a session's page all call it.
pub fn title<'a>(name: Option<&'a str>, first_message: Option<&'a str>) -> Option<&'a str> {
    name.or(first_message)
}

impl SessionInfo {
    /// The session's `title`.
    pub fn title(&self) -> &str {
        title(self.name.as_deref(), Some(&self.first_message)).unwrap_or_default()
    }
}

/// The fewest characters of a session id a table shows.
pub const SHORT_ID: usize = 8;

/// The shortest prefix of `id`, at least `SHORT_ID` characters, that no
/// other id of `sorted` (every session id, sorted) starts with.
pub fn short_id(sorted: &[String], id: &str) -> String {
    let shared = |other: &String| {
        other
            .chars()
            .zip(id.chars())
            .take_while(|(a, b)| a == b)
            .count()
    };
    let at = sorted.partition_point(|other| other.as_str() < id);
    let before = at.checked_sub(1).and_then(|i| sorted.get(i));
    let after = sorted[at..].iter().find(|other| other.as_str() != id);
    let needed = before
        .into_iter()
        .chain(after)
        .map(|other| shared(other) + 1)
        .max()
        .unwrap_or(0)
        .max(SHORT_ID);
    id.chars().take(needed).collect()
}

/// Every session id of the index, sorted (for `short_id`).
fn all_ids(store: &Index) -> rusqlite::Result<Vec<String>> {
    let mut stmt = store
        .connection()
        .prepare("SELECT DISTINCT session_id FROM sessions ORDER BY session_id")?;
    let ids = stmt.query_map([], |row| row.get(0))?;
    ids.collect()
}

/// The coding agent that wrote the session file `file_id` (`pi` when the
/// index does not say).
pub fn agent_of(store: &Index, file_id: i64) -> Result<String, QueryError> {
    store
        .connection()
        .query_row(
            "SELECT agent FROM sessions WHERE file_id = ?1",
            [file_id],
            |row| row.get::<_, String>(0),
        )
        .or_else(|err| match err {
            rusqlite::Error::QueryReturnedNoRows => Ok(crate::normalize::agent::PI.to_owned()),
            err => Err(err.into()),
        })
}

/// The program that resumes a session of `agent`, with the same flags as
/// Pi's (`--session <file>`, `--fork <file>`): `omp` for oh-my-pi (its
/// `cli/flag-tables.ts`), `pi` for Pi and pi_agent_rust (whose binary is
/// `pi` too).
pub fn program_of(agent: &str) -> &'static str {
    if agent == crate::normalize::agent::OMP {
        "omp"
    } else {
        "pi"
    }
}

/// The header's `cwd` as Pi reads it (a string, else none), of the session
/// file `file_id`.
pub fn header_cwd(store: &Index, file_id: i64) -> Result<Option<String>, QueryError> {
    Ok(store.connection().query_row(
        "SELECT CASE WHEN json_type(header_raw, '$.cwd') = 'text'
                     THEN json_extract(header_raw, '$.cwd') END
           FROM sessions WHERE file_id = ?1",
        [file_id],
        |row| row.get(0),
    )?)
}

/// Sessions newest first (by `modified`) in the order of Pi 1.5.2's
/// `SessionManager.listAll()`: ties keep the order Pi read the files in, by
/// mtime (newest first; not in a flat session directory, which Pi reads by
/// name only), then file name, descending (`pi_name_order`).
pub fn list(store: &Index, query: &SessionsQuery) -> Result<Vec<SessionInfo>, QueryError> {
    let mut sql = String::from(
        "SELECT s.file_path, s.session_id,
                CASE WHEN json_type(s.header_raw, '$.cwd') = 'text'
                     THEN json_extract(s.header_raw, '$.cwd') ELSE '' END,
                s.name,
                CASE WHEN s.agent = 'pi_agent_rust' AND s.header_raw -> '$.branchedFrom' IS NOT NULL
                     THEN s.header_raw -> '$.branchedFrom'
                     ELSE s.header_raw -> '$.parentSession' END,
                s.created_ms,
                coalesce(s.modified_ms, f.mtime_ns / 1000000),
                s.message_count, s.first_message, s.listed_by_pi,
                CASE WHEN r.layout = 'flat' THEN 0 ELSE f.mtime_ns END,
                s.agent
         FROM sessions s JOIN files f ON f.file_id = s.file_id
         LEFT JOIN roots r ON r.path = f.root
         WHERE f.status <> 'deleted'",
    );
    if !query.all {
        sql.push_str(" AND s.listed_by_pi = 1");
    }
    let conditions = query.scope.conditions(
        &Columns::sessions("coalesce(s.modified_ms, f.mtime_ns / 1000000)"),
        1,
    );
    sql.push_str(&conditions.clause());
    let params = conditions.params;
    let conn = store.connection();
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(params), |row| {
        let parent: Option<String> = row.get(4)?;
        let read_order: Option<i64> = row.get(10)?;
        Ok((
            read_order.unwrap_or(0),
            SessionInfo {
                path: row.get(0)?,
                id: row.get(1)?,
                cwd: row.get(2)?,
                name: row.get(3)?,
                parent_session_path: parent.and_then(|text| serde_json::from_str(&text).ok()),
                created_ms: row.get(5)?,
                modified_ms: row.get(6)?,
                message_count: row.get(7)?,
                first_message: row
                    .get::<_, Option<String>>(8)?
                    .unwrap_or_else(|| "(no messages)".to_owned()),
                listed_by_pi: row.get(9)?,
                short_id: String::new(),
                agent: row.get(11)?,
                port_model: None,
            },
        ))
    })?;
    let sessions = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    let mut sessions = order(sessions, query.limit);
    let ids = all_ids(store)?;
    for info in &mut sessions {
        info.short_id = short_id(&ids, &info.id);
        if info.agent == crate::normalize::agent::PI_AGENT_RUST {
            let file_id = store.connection().query_row(
                "SELECT file_id FROM sessions WHERE file_path = ?1",
                [&info.path],
                |row| row.get(0),
            )?;
            info.port_model = port_model(
                store,
                SessionRef {
                    file_id,
                    session_id: info.id.clone(),
                    path: info.path.clone(),
                },
            );
        }
    }
    Ok(sessions)
}

/// Pi's order of sessions given with their read order (file mtime, or 0 in
/// a flat root), at most `limit` of them: for the index and the team store.
pub(crate) fn order(
    mut sessions: Vec<(i64, SessionInfo)>,
    limit: Option<usize>,
) -> Vec<SessionInfo> {
    sessions.sort_by(|(a_mtime, a), (b_mtime, b)| {
        b.modified_ms
            .cmp(&a.modified_ms)
            .then(b_mtime.cmp(a_mtime))
            .then_with(|| pi_name_order(file_name(&b.path), file_name(&a.path)))
    });
    let mut sessions: Vec<SessionInfo> = sessions.into_iter().map(|(_, info)| info).collect();
    if let Some(limit) = limit {
        sessions.truncate(limit);
    }
    sessions
}

/// Another session, as a link from a session's page: its id, file and
/// title (name, else first user message).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionLink {
    pub id: String,
    pub path: String,
    pub title: String,
}

/// The sessions around one: the one its header names as `parentSession`,
/// those whose header names it (forks), and the session that delegated the
/// subagent run whose child session it is.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Related {
    pub parent: Option<SessionLink>,
    pub forks: Vec<SessionLink>,
    pub delegated_by: Option<SessionLink>,
}

/// `Related` for the session `session_id` kept in the file `path`.
pub fn related(store: &Index, session_id: &str, path: &str) -> Result<Related, QueryError> {
    let conn = store.connection();
    let link = |row: &rusqlite::Row<'_>| {
        let (name, first): (Option<String>, Option<String>) = (row.get(2)?, row.get(3)?);
        Ok(SessionLink {
            id: row.get(0)?,
            path: row.get(1)?,
            title: title(name.as_deref(), first.as_deref())
                .unwrap_or_default()
                .to_owned(),
        })
    };
    let parent = conn
        .prepare_cached(
            "SELECT p.session_id, p.file_path, p.name, p.first_message
               FROM sessions s JOIN sessions p
                 ON p.file_path = s.parent_session
              WHERE s.file_path = ?1 LIMIT 1",
        )?
        .query_map([path], link)?
        .next()
        .transpose()?;
    let forks = conn
        .prepare_cached(
            "SELECT s.session_id, s.file_path, s.name, s.first_message
               FROM sessions s JOIN files f ON f.file_id = s.file_id
              WHERE f.status <> 'deleted' AND s.parent_session = ?1
              ORDER BY s.created_ms, s.file_path",
        )?
        .query_map([path], link)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let delegated_by = conn
        .prepare_cached(
            "SELECT s.session_id, s.file_path, s.name, s.first_message
               FROM subagent_runs r JOIN sessions s ON s.file_id = r.file_id
              WHERE r.child_session_id = ?1 LIMIT 1",
        )?
        .query_map([session_id], link)?
        .next()
        .transpose()?;
    Ok(Related {
        parent,
        forks,
        delegated_by,
    })
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// File names in the order of JavaScript's `localeCompare` (ICU's root
/// collation), which Pi sorts them with: punctuation first (in the order
/// below), then digits, then letters without regard to case; among equals,
/// lower case before upper case; then by code point. Other characters
/// sort after letters, by code point: Pi's file names are ASCII.
pub fn pi_name_order(a: &str, b: &str) -> std::cmp::Ordering {
    const PUNCTUATION: &str = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";
    fn primary(c: char) -> (u8, u32) {
        if let Some(at) = PUNCTUATION.find(c) {
            (1, at as u32)
        } else if c.is_ascii_digit() {
            (2, c as u32)
        } else if c.is_ascii_alphabetic() {
            (3, c.to_ascii_lowercase() as u32)
        } else if c.is_whitespace() {
            (0, c as u32)
        } else {
            (4, c as u32)
        }
    }
    let keys = |text: &str| text.chars().map(primary).collect::<Vec<_>>();
    let tertiary = |text: &str| {
        text.chars()
            .map(|c| u8::from(c.is_ascii_uppercase()))
            .collect::<Vec<_>>()
    };
    keys(a)
        .cmp(&keys(b))
        .then_with(|| tertiary(a).cmp(&tertiary(b)))
        .then_with(|| a.cmp(b))
}

impl SessionInfo {
    /// The object `JSON.stringify` prints for Pi's `SessionInfo` (without
    /// `allMessagesText`): undefined fields omitted, invalid dates `null`.
    pub fn to_pi_json(&self) -> Value {
        let date = |ms: Option<i64>| ms.map_or(Value::Null, |ms| Value::from(format_iso_ms(ms)));
        let mut map = Map::new();
        map.insert("path".into(), self.path.clone().into());
        map.insert("id".into(), self.id.clone().into());
        map.insert("cwd".into(), self.cwd.clone().into());
        if let Some(name) = &self.name {
            map.insert("name".into(), name.clone().into());
        }
        if let Some(parent) = &self.parent_session_path {
            map.insert("parentSessionPath".into(), parent.clone());
        }
        map.insert("created".into(), date(self.created_ms));
        map.insert("modified".into(), date(self.modified_ms));
        map.insert("messageCount".into(), self.message_count.into());
        map.insert("firstMessage".into(), self.first_message.clone().into());
        map.insert("agent".into(), self.agent.clone().into());
        if let Some(port) = &self.port_model {
            if let (Some(provider), Some(id)) = (&port.provider, &port.model_id) {
                map.insert(
                    "model".into(),
                    serde_json::json!({"provider": provider, "id": id}),
                );
            }
            let written = [
                ("thinkingLevel", &port.thinking_level),
                ("fallbackProvider", &port.fallback_provider),
                ("fallbackModelId", &port.fallback_model_id),
                ("fallbackThinkingLevel", &port.fallback_thinking_level),
            ];
            for (key, value) in written {
                if let Some(value) = value {
                    map.insert(key.into(), value.clone().into());
                }
            }
        }
        Value::Object(map)
    }
}

#[cfg(test)]
mod tests {
    use super::pi_name_order;
    use std::cmp::Ordering::{Greater, Less};

    #[test]
    fn names_sort_as_local_compare_does() {
        // node -e 'console.log("tie-a".localeCompare("tie_a"))' prints 1.
        assert_eq!(pi_name_order("tie-a", "tie_a"), Greater);
        assert_eq!(pi_name_order("Tie-b", "tie-a"), Greater);
        assert_eq!(pi_name_order("a", "A"), Less);
        assert_eq!(pi_name_order("x.y_z-9", "x.y_z-10"), Greater);
        assert_eq!(pi_name_order("2026-01", "2026_01"), Greater);
    }
}
