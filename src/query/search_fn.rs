//! `search()` inside `piidx sql`: the ranked search of `piidx search` as a
//! table-valued function, so that its hits join with every table and view:
//!
//! ```sql
//! SELECT s.name, h.snippet FROM search('serde') h JOIN sessions s ON s.file_id = h.file_id;
//! SELECT * FROM search('lexer OR parser', 50, 'myproj', '7d');
//! ```
//!
//! The arguments fill the hidden columns in order: `query`, `n` (hits,
//! default 20), `project`, `since`, `until`, `role` (NULL: no filter); they
//! can also be given as `WHERE project = '...'`. Each call runs
//! `query::search::search` on a connection of its own (the statement's own
//! connection is busy stepping), with the same ranking, filters and
//! snippets as `piidx search`, and yields its hits best first.

use std::borrow::Cow;
use std::ffi::{CStr, c_int};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use rusqlite::vtab::{
    Context, Filters, IndexConstraintOp, IndexInfo, Module, VTab, VTabConfig, VTabConnection,
    VTabCursor,
};
use rusqlite::{Connection, OptionalExtension, ffi};

use super::scope::{Scope, When, now_ms};
use super::search::{self, HeadStart, MARK_CLOSE, MARK_OPEN, SearchOptions};
use super::tz::Tz;
use crate::store::Index;

const MODULE_NAME: &CStr = c"search";

/// Hits when `n` is not given: as `piidx search`.
const DEFAULT_HITS: usize = 20;

/// The visible columns, then the hidden argument columns (in argument
/// order, from `ARGS`).
const SCHEMA: &CStr = c"CREATE TABLE x(
    session_id, entry_id, kind, rank, snippet, file_id, entry_rowid, chunk_id, timestamp,
    session_name, session_path,
    query HIDDEN, n HIDDEN, project HIDDEN, since HIDDEN, until HIDDEN, role HIDDEN)";
const ARGS: c_int = 11;
const ARG_COUNT: usize = 6;

/// Registers `search` on `conn` for the index at `db`.
pub fn register(conn: &Connection, db: &Path) -> rusqlite::Result<()> {
    const MODULE: Module<SearchTab> = Module::eponymous_only_module();
    conn.create_module(MODULE_NAME, &MODULE, Some(db.to_path_buf()))
}

#[repr(C)]
struct SearchTab {
    base: ffi::sqlite3_vtab,
    db: PathBuf,
}

unsafe impl<'vtab> VTab<'vtab> for SearchTab {
    type Aux = PathBuf;
    type Cursor = SearchCursor<'vtab>;

    fn connect(
        conn: &mut VTabConnection,
        aux: Option<&PathBuf>,
        _module_name: &[u8],
        _database_name: &[u8],
        _table_name: &[u8],
        _args: &[&[u8]],
    ) -> rusqlite::Result<(Cow<'static, CStr>, Self)> {
        conn.config(VTabConfig::DirectOnly)?;
        let db = aux
            .cloned()
            .ok_or_else(|| rusqlite::Error::ModuleError("search(): no index".into()))?;
        Ok((
            Cow::Borrowed(SCHEMA),
            SearchTab {
                base: ffi::sqlite3_vtab::default(),
                db,
            },
        ))
    }

    /// Equality constraints on the argument columns become the filter's
    /// arguments; `idx_num` has bit k set when argument k is given. Without
    /// a query the plan is refused.
    fn best_index(&self, info: &mut IndexInfo) -> rusqlite::Result<bool> {
        let mut given: [Option<usize>; ARG_COUNT] = [None; ARG_COUNT];
        let mut unusable = 0;
        for (i, constraint) in info.constraints().enumerate() {
            let column = constraint.column();
            if column < ARGS {
                continue;
            }
            let arg = (column - ARGS) as usize;
            if arg >= ARG_COUNT {
                continue;
            }
            if !constraint.is_usable() {
                unusable |= 1 << arg;
            } else if constraint.operator() == IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_EQ {
                given[arg] = Some(i);
            }
        }
        let mut idx_num = 0;
        let mut argv = 0;
        for (arg, constraint) in given.iter().enumerate() {
            if let Some(i) = constraint {
                argv += 1;
                idx_num |= 1 << arg;
                let mut usage = info.constraint_usage(*i);
                usage.set_argv_index(argv);
                usage.set_omit(true);
            }
        }
        if given[0].is_none() {
            // Another order (the query bound later) may give it; if none
            // does, SQLite says the function has no query.
            if unusable & 1 != 0 {
                return Ok(false);
            }
            info.set_estimated_cost(1e12);
        } else {
            info.set_estimated_cost(1000.0);
            info.set_estimated_rows(DEFAULT_HITS as i64);
        }
        info.set_idx_num(idx_num);
        Ok(true)
    }

    fn open(&'vtab mut self) -> rusqlite::Result<SearchCursor<'vtab>> {
        Ok(SearchCursor {
            base: ffi::sqlite3_vtab_cursor::default(),
            db: self.db.clone(),
            rows: Vec::new(),
            args: Default::default(),
            at: 0,
            phantom: PhantomData,
        })
    }
}

/// One hit as the function yields it.
struct Row {
    session_id: String,
    entry_id: String,
    kind: String,
    rank: f64,
    snippet: String,
    file_id: Option<i64>,
    entry_rowid: Option<i64>,
    chunk_id: i64,
    timestamp: Option<String>,
    session_name: Option<String>,
    session_path: String,
}

#[repr(C)]
struct SearchCursor<'vtab> {
    base: ffi::sqlite3_vtab_cursor,
    db: PathBuf,
    rows: Vec<Row>,
    /// The arguments of the current call, as given (hidden columns read
    /// them back).
    args: [Option<rusqlite::types::Value>; ARG_COUNT],
    at: usize,
    phantom: PhantomData<&'vtab SearchTab>,
}

unsafe impl VTabCursor for SearchCursor<'_> {
    fn filter(
        &mut self,
        idx_num: c_int,
        _idx_str: Option<&str>,
        args: &Filters<'_>,
    ) -> rusqlite::Result<()> {
        let mut next = 0;
        for (arg, slot) in self.args.iter_mut().enumerate() {
            *slot = None;
            if idx_num & (1 << arg) != 0 {
                *slot = args.get::<Option<rusqlite::types::Value>>(next)?;
                next += 1;
            }
        }
        self.at = 0;
        self.rows = run(&self.db, &self.args).map_err(rusqlite::Error::ModuleError)?;
        Ok(())
    }

    fn next(&mut self) -> rusqlite::Result<()> {
        self.at += 1;
        Ok(())
    }

    fn eof(&self) -> bool {
        self.at >= self.rows.len()
    }

    fn column(&self, ctx: &mut Context, i: c_int) -> rusqlite::Result<()> {
        if i >= ARGS {
            let arg = self.args.get((i - ARGS) as usize).cloned().flatten();
            return ctx.set_result(&arg);
        }
        let Some(row) = self.rows.get(self.at) else {
            return ctx.set_result(rusqlite::types::Null);
        };
        match i {
            0 => ctx.set_result(&row.session_id),
            1 => ctx.set_result(&row.entry_id),
            2 => ctx.set_result(&row.kind),
            3 => ctx.set_result(row.rank),
            4 => ctx.set_result(&row.snippet),
            5 => ctx.set_result(row.file_id),
            6 => ctx.set_result(row.entry_rowid),
            7 => ctx.set_result(row.chunk_id),
            8 => ctx.set_result(&row.timestamp),
            9 => ctx.set_result(&row.session_name),
            _ => ctx.set_result(&row.session_path),
        }
    }

    fn rowid(&self) -> rusqlite::Result<i64> {
        Ok(self.at as i64 + 1)
    }
}

/// A text argument (numbers are read as their digits).
fn text(value: &Option<rusqlite::types::Value>) -> Option<String> {
    use rusqlite::types::Value;
    match value {
        Some(Value::Text(text)) => Some(text.clone()),
        Some(Value::Integer(n)) => Some(n.to_string()),
        Some(Value::Real(n)) => Some(n.to_string()),
        _ => None,
    }
}

/// Runs the search the arguments ask for; errors as the message SQLite
/// shows.
fn run(db: &Path, args: &[Option<rusqlite::types::Value>; ARG_COUNT]) -> Result<Vec<Row>, String> {
    let [query, n, project, since, until, role] = args;
    let query = text(query).ok_or_else(|| {
        "search() needs a query: search('words'), or WHERE query = 'words'".to_owned()
    })?;
    let limit = match n {
        None | Some(rusqlite::types::Value::Null) => DEFAULT_HITS,
        Some(rusqlite::types::Value::Integer(n)) => usize::try_from(*n).unwrap_or(0),
        Some(_) => return Err("search(): n (the number of hits) must be an integer".into()),
    };
    let tz = Tz::choose(None).map_err(|err| format!("search(): {err}"))?;
    let now = now_ms();
    let date = |name: &str, value: &Option<rusqlite::types::Value>| {
        text(value)
            .map(|text| {
                When::parse(&text, now, &tz).map_err(|err| format!("search() {name}: {err}"))
            })
            .transpose()
    };
    let options = SearchOptions {
        query,
        scope: Scope {
            project: text(project),
            since: date("since", since)?,
            until: date("until", until)?,
            tz: tz.clone(),
            ..Scope::default()
        },
        roles: text(role).into_iter().collect(),
        limit,
        ..SearchOptions::default()
    };
    if limit == 0 {
        return Ok(Vec::new());
    }
    let failed = |err: &dyn std::fmt::Display| format!("search(): {err}");
    let index = Index::open(db).map_err(|err| failed(&crate::error_chain(&err)))?;
    let hits = search::search(&index, HeadStart::default(), &options)
        .map_err(|err| failed(&crate::error_chain(&err)))?;
    let mut keys = index
        .connection()
        .prepare("SELECT file_id, entry_rowid FROM chunks WHERE chunk_id = ?1")
        .map_err(|err| failed(&err))?;
    let mut rows = Vec::with_capacity(hits.len());
    for hit in hits {
        let key: Option<(i64, i64)> = keys
            .query_row([hit.chunk_id], |row| Ok((row.get(0)?, row.get(1)?)))
            .optional()
            .map_err(|err| failed(&err))?;
        rows.push(Row {
            session_id: hit.session_id,
            entry_id: hit.entry_id,
            kind: hit.role,
            rank: hit.score,
            snippet: hit.snippet.replace(MARK_OPEN, "«").replace(MARK_CLOSE, "»"),
            file_id: key.map(|k| k.0),
            entry_rowid: key.map(|k| k.1),
            chunk_id: hit.chunk_id,
            timestamp: hit.timestamp,
            session_name: hit.session_name,
            session_path: hit.session_path,
        });
    }
    Ok(rows)
}
