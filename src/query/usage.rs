//! `piidx usage`: tokens and dollars per day, week, month, model, provider,
//! project or session, from the deduplicated `v_usage_records` view (see
//! docs/schema.md "Usage and tool analytics").
//!
//! SQL sums per (bucket, model, priced?) group; time buckets are quarter
//! hours so that any real UTC offset maps each one to a single local day.
//! Rust then folds groups into the requested key, reprices unpriced groups
//! from `--prices`, and adds subagent runs as separate columns.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, params_from_iter, types::Value as SqlValue};
use serde::{Deserialize, Serialize};

use super::scope::{Columns, Scope};
use crate::query::tz::{self, Tz};
use crate::store::Index;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    // `value(help)`, not doc comments: a variant's doc comment would make
    // its schema a `oneOf` of descriptions instead of a plain `enum`.
    #[default]
    Day,
    #[value(help = "ISO weeks (Monday to Sunday), keyed `YYYY-Www`")]
    Week,
    Month,
    Model,
    Provider,
    #[value(help = "The session's cwd")]
    Project,
    Session,
}

impl GroupBy {
    /// The groupings by the names `usage --by`, the MCP tool and the web
    /// API take; the first is the default.
    pub const NAMES: [&'static str; 7] = [
        "day", "week", "month", "model", "provider", "project", "session",
    ];

    /// The grouping one of `NAMES` names.
    pub fn named(name: &str) -> Option<GroupBy> {
        Some(match name {
            "day" => GroupBy::Day,
            "week" => GroupBy::Week,
            "month" => GroupBy::Month,
            "model" => GroupBy::Model,
            "provider" => GroupBy::Provider,
            "project" => GroupBy::Project,
            "session" => GroupBy::Session,
            _ => return None,
        })
    }

    pub fn is_time(self) -> bool {
        matches!(self, GroupBy::Day | GroupBy::Week | GroupBy::Month)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error("cannot read prices file {path}: {reason}")]
    Prices { path: PathBuf, reason: String },
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
}

/// Dollars per million tokens for one model.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Price {
    #[serde(default)]
    pub input: f64,
    #[serde(default)]
    pub output: f64,
    #[serde(default)]
    pub cache_read: f64,
    #[serde(default)]
    pub cache_write: f64,
}

/// `{ "model-id": {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75} }`;
/// keys are a model id or `provider/model-id` (the latter wins).
pub type Prices = HashMap<String, Price>;

pub fn load_prices(path: &Path) -> Result<Prices, UsageError> {
    let bad = |reason: String| UsageError::Prices {
        path: path.to_owned(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| {
        bad(format!(
            "{e}; expected {{\"model-id\": {{\"input\": 3.0, \"output\": 15.0, \"cacheRead\": 0.3, \"cacheWrite\": 3.75}}}} (dollars per million tokens)"
        ))
    })
}

#[derive(Debug, Clone)]
pub struct UsageOptions {
    pub by: GroupBy,
    /// The sessions, and the time of the records; days, weeks and months
    /// are those of its time zone.
    pub scope: Scope,
    /// Only models whose id contains this.
    pub model: Option<String>,
    pub prices: Option<Prices>,
    /// At most this many rows: the latest periods, or the costliest keys.
    /// The total is that of the rows kept.
    pub limit: Option<usize>,
}

/// One output row (or the total). `repriced_tokens` is only printed when
/// `--prices` is given, the `subagent_` columns only when the index has
/// subagent runs (`render::usage`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UsageRow {
    pub key: String,
    pub records: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub total_tokens: i64,
    /// Dollars as recorded by Pi plus any `--prices` repricing.
    pub cost: f64,
    /// Tokens of records with no price (cost 0 or missing) and no `--prices` entry.
    pub unpriced_tokens: i64,
    /// Tokens that `--prices` priced (their dollars are in `cost`).
    pub repriced_tokens: i64,
    pub subagent_runs: i64,
    pub subagent_tokens: i64,
    pub subagent_cost: f64,
}

impl UsageRow {
    fn add(&mut self, other: &UsageRow) {
        self.records += other.records;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.total_tokens += other.total_tokens;
        self.cost += other.cost;
        self.unpriced_tokens += other.unpriced_tokens;
        self.repriced_tokens += other.repriced_tokens;
        self.subagent_runs += other.subagent_runs;
        self.subagent_tokens += other.subagent_tokens;
        self.subagent_cost += other.subagent_cost;
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct UsageReport {
    /// What the rows' keys are.
    pub by: GroupBy,
    pub rows: Vec<UsageRow>,
    pub total: UsageRow,
    /// `provider/model` of every model with unpriced tokens left.
    pub unpriced_models: Vec<String>,
    /// Whether the index has subagent runs (table `subagent_runs`).
    pub subagents: bool,
    /// Whether `--prices` was given (rows then say what it priced).
    pub repriced: bool,
    pub warnings: Vec<String>,
}

const NONE_KEY: &str = "(none)";

pub fn run(store: &Index, options: &UsageOptions) -> Result<UsageReport, UsageError> {
    let conn = store.connection();
    let mut report = UsageReport {
        by: options.by,
        repriced: options.prices.is_some(),
        ..UsageReport::default()
    };
    // Subagent runs (migration 0005, another branch) when present and shaped
    // as expected; otherwise the subagent columns are left out.
    if has_table(conn, "subagent_runs")? {
        match conn.prepare(SUBAGENT_PROBE) {
            Ok(_) => report.subagents = true,
            Err(err) => report.warnings.push(format!(
                "subagent runs left out: subagent_runs is not in the expected shape ({err})"
            )),
        }
    }
    let mut fold = Fold::new(options);

    let key_sql = key_sql(options.by, "u");
    let mut filters = vec!["1 = 1".to_owned()];
    if report.subagents {
        // A child session's own records are its run's usage: counted once,
        // in the subagent columns. oh-my-pi's are the exception: its runs
        // count nothing of their own (`add_subagents`), its transcripts'
        // records are the spend, each under the transcript's session.
        filters.push(
            "u.file_id NOT IN (SELECT r.child_file_id FROM subagent_runs r
                                WHERE r.child_file_id IS NOT NULL
                                  AND NOT EXISTS (SELECT 1 FROM sessions o
                                                   WHERE o.file_id = r.file_id AND o.agent = 'omp'))"
                .to_owned(),
        );
    }
    let columns = Columns {
        cwd: "u.cwd",
        project_dir: "u.project_dir",
        session_id: "u.session_id",
        file_path: "(SELECT f.path FROM files f WHERE f.file_id = u.file_id)",
        time_ms: "u.timestamp_ms",
    };
    let args = push_filters(&mut filters, options, &columns, "u");
    let sql = format!(
        "SELECT {key_sql} AS k, u.provider, u.model, u.unpriced, count(*),
                sum(u.input_tokens), sum(u.output_tokens), sum(u.cache_read_tokens),
                sum(u.cache_write_tokens), sum(u.total_tokens), coalesce(sum(u.cost_total), 0)
           FROM v_usage_records u
          WHERE {}
          GROUP BY k, u.provider, u.model, u.unpriced",
        filters.join(" AND ")
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut result = stmt.query(params_from_iter(args.iter()))?;
    while let Some(row) = result.next()? {
        let part = UsageRow {
            records: row.get(4)?,
            input_tokens: row.get(5)?,
            output_tokens: row.get(6)?,
            cache_read_tokens: row.get(7)?,
            cache_write_tokens: row.get(8)?,
            total_tokens: row.get(9)?,
            cost: row.get(10)?,
            ..UsageRow::default()
        };
        fold.group(row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, part);
    }
    drop(result);
    drop(stmt);

    if report.subagents {
        add_subagents(conn, options, &mut fold)?;
    }
    Ok(fold.finish(report))
}

/// Folds the SQL's groups into the rows asked for: the index's and the team
/// store's queries feed the same one.
pub(crate) struct Fold<'a> {
    options: &'a UsageOptions,
    groups: BTreeMap<String, UsageRow>,
    unpriced_models: std::collections::BTreeSet<String>,
}

impl<'a> Fold<'a> {
    pub(crate) fn new(options: &'a UsageOptions) -> Fold<'a> {
        Fold {
            options,
            groups: BTreeMap::new(),
            unpriced_models: Default::default(),
        }
    }

    /// One (key, provider, model, priced?) group of records; `raw_key` as
    /// `key_sql` computes it (quarter hours for time keys).
    pub(crate) fn group(
        &mut self,
        raw_key: Option<SqlValue>,
        provider: Option<String>,
        model: Option<String>,
        unpriced: i64,
        mut part: UsageRow,
    ) {
        let options = self.options;
        if unpriced == 1 {
            match options
                .prices
                .as_ref()
                .and_then(|p| find_price(p, provider.as_deref(), model.as_deref()))
            {
                Some(price) => {
                    part.cost += price_of(&price, &part);
                    part.repriced_tokens = part.total_tokens;
                }
                None => {
                    part.unpriced_tokens = part.total_tokens;
                    self.unpriced_models
                        .insert(model_label(provider.as_deref(), model.as_deref()));
                }
            }
        }
        self.add(raw_key, &part);
    }

    /// Adds `part` to the row of `raw_key` (subagent runs' columns).
    pub(crate) fn add(&mut self, raw_key: Option<SqlValue>, part: &UsageRow) {
        let key = render_key(self.options.by, &self.options.scope.tz, raw_key);
        self.groups.entry(key).or_default().add(part);
    }

    pub(crate) fn finish(self, mut report: UsageReport) -> UsageReport {
        let options = self.options;
        for (key, mut row) in self.groups {
            row.key = key;
            report.rows.push(row);
        }
        if options.by.is_time() {
            // The latest periods.
            if let Some(limit) = options.limit {
                let cut = report.rows.len().saturating_sub(limit);
                report.rows.drain(..cut);
            }
        } else {
            report.rows.sort_by(|a, b| {
                (b.cost + b.subagent_cost)
                    .total_cmp(&(a.cost + a.subagent_cost))
                    .then(b.total_tokens.cmp(&a.total_tokens))
                    .then(a.key.cmp(&b.key))
            });
            if let Some(limit) = options.limit {
                report.rows.truncate(limit);
            }
        }
        for row in &report.rows {
            report.total.add(row);
        }
        report.total.key = "TOTAL".to_owned();
        report.unpriced_models = self.unpriced_models.into_iter().collect();
        report
    }
}

/// The SQL grouping expression for `by` over alias `a`.
pub(crate) fn key_sql(by: GroupBy, a: &str) -> String {
    match by {
        // Quarter hours: every real UTC offset is a multiple of 15 minutes.
        GroupBy::Day | GroupBy::Week | GroupBy::Month => format!("{a}.timestamp_ms / 900000"),
        GroupBy::Model => format!("{a}.model"),
        GroupBy::Provider => format!("{a}.provider"),
        GroupBy::Project => format!("{a}.cwd"),
        GroupBy::Session => format!("{a}.session_id"),
    }
}

/// Adds the scope's and `--model`'s conditions; returns their parameters.
fn push_filters(
    filters: &mut Vec<String>,
    options: &UsageOptions,
    columns: &Columns<'_>,
    a: &str,
) -> Vec<SqlValue> {
    let scope = options.scope.conditions(columns, 1);
    filters.extend(scope.sql);
    let mut args = scope.params;
    if let Some(model) = &options.model {
        filters.push(format!("instr({a}.model, ?{}) > 0", args.len() + 1));
        args.push(SqlValue::Text(model.clone()));
    }
    args
}

fn render_key(by: GroupBy, tz: &Tz, raw: Option<SqlValue>) -> String {
    let text = match raw {
        None | Some(SqlValue::Null) => return NONE_KEY.to_owned(),
        Some(SqlValue::Integer(quarter)) if by.is_time() => {
            let day = tz.local_day(quarter * 900_000);
            return match by {
                GroupBy::Day => tz::format_day(day),
                GroupBy::Week => tz::format_iso_week(day),
                _ => tz::format_month(day),
            };
        }
        Some(SqlValue::Integer(i)) => i.to_string(),
        Some(SqlValue::Real(f)) => f.to_string(),
        Some(SqlValue::Text(t)) => t,
        Some(SqlValue::Blob(_)) => return NONE_KEY.to_owned(),
    };
    if text.is_empty() {
        NONE_KEY.to_owned()
    } else {
        text
    }
}

fn model_label(provider: Option<&str>, model: Option<&str>) -> String {
    match (provider, model) {
        (Some(p), Some(m)) => format!("{p}/{m}"),
        (None, Some(m)) => m.to_owned(),
        (Some(p), None) => format!("{p}/{NONE_KEY}"),
        (None, None) => NONE_KEY.to_owned(),
    }
}

fn find_price(prices: &Prices, provider: Option<&str>, model: Option<&str>) -> Option<Price> {
    let model = model?;
    provider
        .and_then(|p| prices.get(&format!("{p}/{model}")))
        .or_else(|| prices.get(model))
        .copied()
}

fn price_of(price: &Price, row: &UsageRow) -> f64 {
    (row.input_tokens as f64 * price.input
        + row.output_tokens as f64 * price.output
        + row.cache_read_tokens as f64 * price.cache_read
        + row.cache_write_tokens as f64 * price.cache_write)
        / 1e6
}

pub fn has_table(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?1",
        [name],
        |row| row.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

const SUBAGENT_PROBE: &str =
    "SELECT file_id, entry_id, session_id, tool_call_id, position, timestamp_ms,
        model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost,
        child_file_id FROM subagent_runs LIMIT 0";

/// Subagent runs, attributed to the parent session and counted once across
/// fork copies of the parent. A run's tokens and cost are those its parent
/// recorded; when it recorded none, those of its indexed child session.
/// When the tool result carries `usage` (the runs' spend, which Pi counts
/// in its totals), the runs add no tokens or cost here: the main columns
/// hold them already.
fn add_subagents(
    conn: &Connection,
    options: &UsageOptions,
    fold: &mut Fold<'_>,
) -> rusqlite::Result<()> {
    let key_sql = key_sql(options.by, "r");
    let mut filters = vec!["r.copy_no = 1".to_owned()];
    let columns = Columns {
        cwd: "r.cwd",
        project_dir: "r.project_dir",
        session_id: "r.session_id",
        file_path: "r.file_path",
        time_ms: "r.timestamp_ms",
    };
    let args = push_filters(&mut filters, options, &columns, "r");
    let sql = format!(
        "WITH runs AS (
           -- `counted`: the tool result carries the runs' spend as its own
           -- `usage` (Pi's extension contract), which the main columns count.
           -- oh-my-pi keeps every run's transcript as a session file of its
           -- own, whose records the main columns count.
           SELECT sr.*, (EXISTS (SELECT 1 FROM usage_records u
                                  WHERE u.entry_rowid = sr.entry_rowid
                                    AND u.source = 'tool_result')
                         OR EXISTS (SELECT 1 FROM sessions o
                                     WHERE o.file_id = sr.file_id AND o.agent = 'omp')) AS counted
             FROM subagent_runs sr),
         r AS (
           SELECT sr.timestamp_ms, sr.model, NULL AS provider, sr.session_id,
                  s.project_dir, s.cwd, f.path AS file_path,
                  CASE WHEN sr.counted THEN 0
                       WHEN coalesce(sr.input_tokens, sr.output_tokens, sr.cache_read_tokens,
                                     sr.cache_write_tokens) IS NOT NULL
                       THEN coalesce(sr.input_tokens, 0) + coalesce(sr.output_tokens, 0)
                            + coalesce(sr.cache_read_tokens, 0) + coalesce(sr.cache_write_tokens, 0)
                       ELSE (SELECT sum(c.total_tokens) FROM usage_records c
                              WHERE c.file_id = sr.child_file_id) END AS tokens,
                  CASE WHEN sr.counted THEN 0
                       ELSE coalesce(sr.cost, (SELECT sum(c.cost_total) FROM usage_records c
                                                WHERE c.file_id = sr.child_file_id), 0) END AS cost,
                  row_number() OVER (
                    PARTITION BY coalesce(sr.tool_call_id, sr.file_id || '|' || sr.entry_id),
                                 sr.position, sr.timestamp_ms
                    ORDER BY s.created_ms IS NULL, s.created_ms, f.path) AS copy_no
             FROM runs sr JOIN files f ON f.file_id = sr.file_id
             LEFT JOIN sessions s ON s.file_id = sr.file_id)
         SELECT {key_sql} AS k, count(*), sum(r.tokens), sum(r.cost)
           FROM r WHERE {} GROUP BY k",
        filters.join(" AND ")
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut result = stmt.query(params_from_iter(args.iter()))?;
    while let Some(row) = result.next()? {
        let part = UsageRow {
            subagent_runs: row.get(1)?,
            subagent_tokens: row.get::<_, Option<i64>>(2)?.unwrap_or(0),
            subagent_cost: row.get::<_, Option<f64>>(3)?.unwrap_or(0.0),
            ..UsageRow::default()
        };
        fold.add(row.get(0)?, &part);
    }
    Ok(())
}
