//! `/api/…`: the JSON answers, byte for byte what the CLI's `--json`
//! prints for the same options (docs/json.md is their contract;
//! docs/serve.md maps the URLs to the commands). Each handler turns the
//! parameters into the same `query` options as the CLI's flags, asks
//! `query`, and shapes the answer with the same `render` functions.

use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::http::Answer;
use super::local::Local;
use super::params::{BadParam, Params};
use crate::query::request::SearchRequest;
use crate::query::requests::{
    BranchRequest, SessionsRequest, SubagentsRequest, ToolsRequest, UsageRequest,
};
use crate::query::search::{Hit, SearchError, SearchOptions};
use crate::query::sessions::SessionInfo;
use crate::query::subagents;
use crate::query::tools;
use crate::query::tree::{self, SessionTree, ViewError};
use crate::query::usage::{self, GroupBy};
use crate::query::{Class, QueryError};
use crate::render;
use crate::store::Stop;
use crate::store::StoreError;

/// Why a request got no answer, as an HTTP status and a message.
#[derive(Debug)]
pub struct Failure {
    pub status: u16,
    pub message: String,
}

impl Failure {
    pub fn new(status: u16, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
        }
    }
}

impl From<BadParam> for Failure {
    fn from(err: BadParam) -> Failure {
        Failure::new(400, err.0)
    }
}

impl From<QueryError> for Failure {
    /// One mapping for every question: the error's class is the status.
    fn from(err: QueryError) -> Failure {
        let status = match err.class() {
            Class::Caller => 400,
            Class::NotFound => 404,
            Class::Unavailable => 503,
            Class::Internal => 500,
        };
        Failure::new(status, crate::error_chain(&err))
    }
}

/// The query layer's errors, each through `QueryError`'s classes.
macro_rules! through_query_error {
    ($($error:ty),*) => {$(
        impl From<$error> for Failure {
            fn from(err: $error) -> Failure {
                QueryError::from(err).into()
            }
        }
    )*};
}
through_query_error!(
    StoreError,
    ViewError,
    SearchError,
    usage::UsageError,
    rusqlite::Error
);

/// The answer as the CLI prints it: pretty JSON and a newline.
pub fn json(value: &impl Serialize) -> Answer {
    let mut body = serde_json::to_vec_pretty(value).unwrap_or_default();
    body.push(b'\n');
    Answer::new(200, "application/json", body)
}

/// `{"error": …}` with the status.
pub fn error(failure: &Failure) -> Answer {
    let mut answer = json(&serde_json::json!({ "error": failure.message }));
    answer.status = failure.status;
    answer
}

/// How long one search may keep a worker unless `serve --search-timeout`
/// says otherwise: every worker is one of a few, and a page that asks for a
/// search (any web page can, with an `<img>`) must not hold one for long.
pub const SEARCH_BUDGET: std::time::Duration = std::time::Duration::from_secs(3);

/// The search options `search`'s flags make, from the parameters (the
/// same `SearchRequest`; the query is `q`).
pub fn search_options(params: &Params, local: &Local) -> Result<SearchOptions, Failure> {
    let request: SearchRequest = params.request(&[("query", "q")])?;
    let stop = local.search_budget().map_or_else(Stop::never, Stop::after);
    Ok(request.options(stop, "")?)
}

/// What a search holds while it runs: a place among the searches (else a
/// 503 telling to retry), and the watch that stops it when its client goes
/// away.
fn start_search(
    local: &Local,
    stop: &Stop,
) -> Result<(super::local::SearchSlot, super::client::ClientWatch), Failure> {
    let slot = local.search_slot().ok_or_else(|| {
        Failure::new(
            503,
            "piidx serve is busy with other searches (one worker stays free for pages); try again in a moment",
        )
    })?;
    Ok((slot, super::client::watch(local.client, stop)))
}

/// The hits of a search (`search --json`'s values before the marks are
/// replaced), and the time it took.
pub fn run_search(local: &mut Local, options: &SearchOptions) -> Result<(Vec<Hit>, f64), Failure> {
    let start = Instant::now();
    let _running = start_search(local, &options.stop)?;
    let (source, head) = local.parts()?;
    let hits = source.search(head, options)?;
    Ok((hits, start.elapsed().as_secs_f64() * 1000.0))
}

/// `GET /api/search`: `search --json` (with `sessions=1`: `search -l --json`).
pub fn search(local: &mut Local, params: &Params) -> Result<Answer, Failure> {
    let options = search_options(params, local)?;
    if params.request::<SearchRequest>(&[("query", "q")])?.sessions {
        let start = Instant::now();
        let _running = start_search(local, &options.stop)?;
        let (source, head) = local.parts()?;
        let found = source.search_sessions(std::mem::take(head), &options, options.limit)?;
        let mut answer = json(&found);
        answer.timing = Some(start.elapsed().as_secs_f64() * 1000.0);
        return Ok(answer);
    }
    let (hits, ms) = run_search(local, &options)?;
    let mut answer = json(&render::hits::with_marks(hits));
    answer.timing = Some(ms);
    Ok(answer)
}

/// The sessions `sessions`' flags select.
pub fn session_list(local: &mut Local, params: &Params) -> Result<Vec<SessionInfo>, Failure> {
    let query = params.request::<SessionsRequest>(&[])?.query("")?;
    Ok(local.source()?.sessions(&query)?)
}

/// `GET /api/sessions`: `sessions --json`.
pub fn sessions(local: &mut Local, params: &Params) -> Result<Answer, Failure> {
    let list = session_list(local, params)?;
    let values: Vec<Value> = list.iter().map(SessionInfo::to_pi_json).collect();
    Ok(json(&values))
}

/// The tree of the session `arg` names, read in one snapshot.
pub fn load_tree(local: &mut Local, arg: &str) -> Result<SessionTree, Failure> {
    Ok(SessionTree::named(local.index()?, arg)?)
}

/// `GET /api/sessions/<id>`: `show <id> --json` (`branch=LEAF`: `--branch`).
pub fn show(local: &mut Local, id: &str, params: &Params) -> Result<Answer, Failure> {
    let request: BranchRequest = params.and("session", id).request(&[])?;
    let tree = load_tree(local, &request.session)?;
    let path = request.path(&tree)?;
    Ok(json(&tree.entries_json(&path)))
}

/// `GET /api/sessions/<id>/tree`: `tree <id> --json`.
pub fn tree(local: &mut Local, id: &str) -> Result<Answer, Failure> {
    let tree = load_tree(local, id)?;
    Ok(json(&tree::outline(&tree)))
}

pub fn subagent_runs(
    local: &mut Local,
    params: &Params,
) -> Result<Vec<subagents::SubagentRun>, Failure> {
    let query = params.request::<SubagentsRequest>(&[])?.query("")?;
    Ok(local.source()?.subagents(&query)?)
}

/// `GET /api/subagents`: `subagents --json`.
pub fn subagents(local: &mut Local, params: &Params) -> Result<Answer, Failure> {
    Ok(json(&subagent_runs(local, params)?))
}

/// The usage report `usage`'s flags ask for (`by` given apart, so a page
/// can ask for several groupings).
pub fn usage_report(
    local: &mut Local,
    params: &Params,
    by: GroupBy,
) -> Result<usage::UsageReport, Failure> {
    let request = UsageRequest {
        by,
        ..params.request(&[])?
    };
    Ok(local.source()?.usage(&request.options("")?)?)
}

/// `GET /api/usage`: `usage --json` (`by=day|week|month|model|provider|project|session`).
pub fn usage(local: &mut Local, params: &Params) -> Result<Answer, Failure> {
    let by = params.request::<UsageRequest>(&[])?.by;
    let report = usage_report(local, params, by)?;
    Ok(json(&render::usage::objects(&report)))
}

pub fn tool_stats(local: &mut Local, params: &Params) -> Result<Vec<tools::ToolStats>, Failure> {
    let query = params.request::<ToolsRequest>(&[])?.query("")?;
    Ok(local.source()?.tools(&query)?)
}

/// `GET /api/tools`: `tools --json` (`by=name|session|project`).
pub fn tools(local: &mut Local, params: &Params) -> Result<Answer, Failure> {
    Ok(json(&tool_stats(local, params)?))
}
