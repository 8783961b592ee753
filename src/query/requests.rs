//! The questions a front-end asks (`sessions`, `usage`, `tools`,
//! `subagents`, a session's branch), defined once like `request::SearchRequest`: each type is what the
//! command's flags (clap), serve's query parameters and MCP's tool
//! arguments (serde) fill, and MCP's schema is generated from it
//! (schemars). A new option is one field here and one line in the type's
//! `query`/`options`, which check the texts once for every front-end.
//!
//! Doc comments are the CLI's `--help`; `#[schemars(description)]` gives
//! MCP's wording where it differs.

use clap::Args;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::QueryError;
use super::scope::{ScopeText, now_ms};
use super::sessions::SessionsQuery;
use super::subagents::SubagentsQuery;
use super::tools::{ToolsBy, ToolsQuery};
use super::tree::{SessionTree, ViewError};
use super::usage::{GroupBy, UsageOptions};

// `piidx sessions`, `/api/sessions`, MCP's `list_sessions`.
#[derive(Debug, Clone, Default, Args, Serialize, Deserialize, JsonSchema)]
pub struct SessionsRequest {
    /// Sessions whose modified time is in --since/--until
    #[command(flatten)]
    #[serde(flatten)]
    pub scope: ScopeText,
    /// Also list files Pi's listAll() does not see (nested child sessions, flat root files); marked * in the table
    #[arg(long)]
    #[serde(default)]
    #[schemars(
        description = "Also sessions Pi's listAll() does not see (nested child sessions, flat root files)"
    )]
    pub all: bool,
    /// At most N rows
    #[arg(long, value_name = "N")]
    #[serde(default)]
    #[schemars(description = "At most this many sessions")]
    pub limit: Option<usize>,
}

impl SessionsRequest {
    /// The query, its scope checked (a field's name in errors is
    /// `prefix` + its name).
    pub fn query(&self, prefix: &str) -> Result<SessionsQuery, QueryError> {
        Ok(SessionsQuery {
            scope: self.scope.scope(now_ms(), prefix)?,
            limit: self.limit,
            all: self.all,
        })
    }
}

// `piidx usage`, `/api/usage`, MCP's `usage` (`--prices`, a file, is the
// CLI's alone).
#[derive(Debug, Clone, Default, Args, Serialize, Deserialize, JsonSchema)]
pub struct UsageRequest {
    /// Group rows by
    #[arg(long, value_enum, default_value_t = GroupBy::Day)]
    #[serde(default)]
    pub by: GroupBy,
    /// Only models whose id contains M
    #[arg(long, value_name = "M")]
    #[serde(default)]
    #[schemars(description = "Only models whose id contains this")]
    pub model: Option<String>,
    /// Usage recorded in --since/--until by these sessions
    #[command(flatten)]
    #[serde(flatten)]
    pub scope: ScopeText,
    /// At most N rows
    #[arg(long, value_name = "N")]
    #[serde(default)]
    #[schemars(description = "At most this many rows: the latest periods, or the costliest keys")]
    pub limit: Option<usize>,
}

impl UsageRequest {
    /// The options, its scope checked; no prices file.
    pub fn options(&self, prefix: &str) -> Result<UsageOptions, QueryError> {
        Ok(UsageOptions {
            by: self.by,
            scope: self.scope.scope(now_ms(), prefix)?,
            model: self.model.clone(),
            prices: None,
            limit: self.limit,
        })
    }
}

// `piidx tools`, `/api/tools`.
#[derive(Debug, Clone, Default, Args, Serialize, Deserialize, JsonSchema)]
pub struct ToolsRequest {
    /// Group rows by
    #[arg(long, value_enum, default_value_t = ToolsBy::Name)]
    #[serde(default)]
    pub by: ToolsBy,
    /// Calls made in --since/--until by these sessions
    #[command(flatten)]
    #[serde(flatten)]
    pub scope: ScopeText,
    /// At most N rows
    #[arg(long, value_name = "N")]
    #[serde(default)]
    pub limit: Option<usize>,
}

impl ToolsRequest {
    /// The query, its scope checked.
    pub fn query(&self, prefix: &str) -> Result<ToolsQuery, QueryError> {
        Ok(ToolsQuery {
            by: self.by,
            scope: self.scope.scope(now_ms(), prefix)?,
            limit: self.limit,
        })
    }
}

// `piidx subagents`, `/api/subagents`, MCP's `subagent_runs`. The
// subagent's name is `subagent` (the CLI's `--agent`, as it always was);
// the scope's `agent` is the coding agent, as in every question.
#[derive(Debug, Clone, Default, Args, Serialize, Deserialize, JsonSchema)]
pub struct SubagentsRequest {
    /// Only runs of this agent (e.g. worker, reviewer, scout)
    #[arg(long = "agent", id = "subagent", value_name = "NAME")]
    #[serde(default)]
    #[schemars(
        description = "Only runs of this subagent (e.g. worker, reviewer, scout); `agent` is the coding agent, as in every tool's scope"
    )]
    pub subagent: Option<String>,
    /// Only failed runs (non-zero exit code, or an error stop reason)
    #[arg(long)]
    #[serde(default)]
    #[schemars(description = "Only failed runs")]
    pub failed: bool,
    /// Runs delegated by these sessions, started in --since/--until
    #[command(flatten)]
    #[serde(flatten)]
    pub scope: ScopeText,
    /// At most N rows
    #[arg(long, value_name = "N")]
    #[serde(default)]
    #[schemars(description = "At most this many runs")]
    pub limit: Option<usize>,
}

impl SubagentsRequest {
    /// The query, its scope checked.
    pub fn query(&self, prefix: &str) -> Result<SubagentsQuery, QueryError> {
        Ok(SubagentsQuery {
            scope: self.scope.scope(now_ms(), prefix)?,
            agent: self.subagent.clone(),
            failed: self.failed,
            limit: self.limit,
        })
    }
}

// A session and one branch of it: `piidx show`, `/api/sessions/<id>`,
// MCP's `get_session`.
#[derive(Debug, Clone, Args, Serialize, Deserialize, JsonSchema)]
pub struct BranchRequest {
    /// Session id, unique id prefix, or session file path
    pub session: String,
    /// Show the branch ending at this entry id (or unique prefix) instead of the last entry
    #[arg(long, value_name = "LEAF")]
    #[serde(default)]
    #[schemars(
        description = "With view branch: the branch ending at this entry id (or unique prefix) instead of the last entry"
    )]
    pub branch: Option<String>,
}

impl BranchRequest {
    /// The session `session` names, on its current branch.
    pub fn of(session: String) -> BranchRequest {
        BranchRequest {
            session,
            branch: None,
        }
    }

    /// The branch's last entry in `tree` (the session's own tree): the
    /// entry `branch` names, else the session's leaf; none in an empty
    /// session.
    pub fn leaf(&self, tree: &SessionTree) -> Result<Option<usize>, ViewError> {
        match &self.branch {
            Some(id) => tree.find(id).map(Some),
            None => Ok(tree.leaf()),
        }
    }

    /// The branch's entries, root to leaf.
    pub fn path(&self, tree: &SessionTree) -> Result<Vec<usize>, ViewError> {
        Ok(self
            .leaf(tree)?
            .map(|leaf| tree.path_to(leaf))
            .unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::request::argument_schema;

    #[test]
    fn usage_fills_from_json_and_its_schema_lists_the_groupings() {
        let request: UsageRequest =
            serde_json::from_value(serde_json::json!({"by": "week", "limit": 3})).unwrap();
        assert_eq!(request.by, GroupBy::Week);
        assert_eq!(request.limit, Some(3));
        let (properties, _) = argument_schema::<UsageRequest>();
        assert_eq!(
            properties["by"]["enum"],
            serde_json::json!(GroupBy::NAMES.to_vec())
        );
        assert_eq!(properties["by"]["default"], "day");
        assert_eq!(properties["limit"]["type"], "integer");
    }
}
