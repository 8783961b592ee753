//! Subagent runs embedded in a parent session's `toolResult.details`.
//!
//! Two extensions write this shape (spec §10): the official pi-mono example
//! (`details.results[]` with the child's full `messages[]`, cost as a number)
//! and pi-subagents (`runId`, `progressSummary`, `artifactPaths`,
//! `sessionFile`); so does oh-my-pi's own `task` tool (`results[i].id`, whose
//! transcript is `<id>.jsonl` in the session's artifact folder, its
//! aggregated `usage`, `resolvedModel`). All become one `SubagentRun` per
//! `details.results[i]`.
//! omp runs a `task` spawn in the background by default (`async.enabled`):
//! its tool result then holds the spawn only in `details.progress[i]`
//! (`status` `pending`), which becomes a run too, and the outcome arrives
//! later in the same session as an `async-result` custom message
//! (`deliveries`), or in a `hub` tool result whose `wait` consumed it
//! (`hub_deliveries`), which `Store::link_subagents` applies to the run.
//! The child messages are normalized with the same code as top-level ones:
//! their searchable strings join the parent entry's text fields (their JSON
//! paths point inside `details.results[i].messages[j]`), and their metadata
//! becomes `SubagentMessage` / `SubagentToolCall` rows.
//!
//! Pure: no IO, no SQL, never fails; missing fields stay `None`.

use std::collections::HashMap;

use serde_json::Value;

use super::{Entry, MessageRow, as_int, describe_message, str_field};

/// One delegated run (`details.results[position]`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SubagentRun {
    pub position: i64,
    /// `details.mode` as written (`single`, `parallel`, `chain`, or anything newer).
    pub mode: Option<String>,
    /// pi-subagents `results[i].index` (parallel/chain slot).
    pub run_index: Option<i64>,
    /// Official example `results[i].step` (chain).
    pub step: Option<i64>,
    pub agent: Option<String>,
    pub agent_source: Option<String>,
    pub task: Option<String>,
    pub exit_code: Option<i64>,
    /// As the result says (`status`, Pi 1.5), else from its exit code:
    /// `completed`, `failed`, `aborted`, `running`, `pending`, `detached`,
    /// `unknown` (see `status`).
    pub status: String,
    /// The signal that ended the run (`terminationSignal`, Pi 1.5).
    pub termination_signal: Option<String>,
    pub error: Option<String>,
    pub stop_reason: Option<String>,
    pub model: Option<String>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cache_read_tokens: Option<i64>,
    pub cache_write_tokens: Option<i64>,
    pub cost: Option<f64>,
    pub turns: Option<i64>,
    pub context_tokens: Option<i64>,
    pub tool_count: Option<i64>,
    pub progress_tokens: Option<i64>,
    pub duration_ms: Option<i64>,
    pub session_file: Option<String>,
    pub artifact_input_path: Option<String>,
    pub artifact_output_path: Option<String>,
    pub artifact_jsonl_path: Option<String>,
    pub artifact_meta_path: Option<String>,
    pub artifact_transcript_path: Option<String>,
    /// The artifact file-name stem (`<runId>_<agent>[_<index>]`), from the
    /// artifact paths when present, else computed as pi-subagents does.
    pub artifact_base: Option<String>,
    /// `<runId>/run-<N>`: where pi-subagents puts the child session, below
    /// `<parent session file without .jsonl>/`.
    pub child_location: Option<String>,
    pub run_id: Option<String>,
    pub async_id: Option<String>,
    /// `$.message.details.results[i]`.
    pub json_path: String,
    pub messages: Vec<SubagentMessage>,
    pub tool_calls: Vec<SubagentToolCall>,
}

/// One message of a child transcript (`results[i].messages[j]`).
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentMessage {
    pub position: i64,
    pub json_path: String,
    pub row: MessageRow,
}

/// One toolCall block inside a child assistant message.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentToolCall {
    pub message_position: i64,
    pub block_index: i64,
    pub json_path: String,
    pub call_id: Option<String>,
    pub name: Option<String>,
}

/// True when a toolResult's `details` holds subagent runs: tool `subagent`,
/// or any tool whose `details.results` is a non-empty array of objects that
/// name an agent.
pub fn is_subagent_result(tool_name: Option<&str>, details: &Value) -> bool {
    let Some(results) = details.get("results").and_then(Value::as_array) else {
        return false;
    };
    if tool_name == Some("subagent") {
        return true;
    }
    !results.is_empty()
        && results
            .iter()
            .all(|result| result.get("agent").is_some_and(Value::is_string))
}

/// Reads the runs of a `toolResult` message at `path` (normally
/// `$.message`), adding the child transcripts' text fields to `out.texts`.
pub fn describe(message: &Value, path: &str, out: &mut Entry) -> Vec<SubagentRun> {
    if str_field(message, "role").as_deref() != Some("toolResult") {
        return Vec::new();
    }
    let Some(details) = message.get("details") else {
        return Vec::new();
    };
    let tool_name = message.get("toolName").and_then(Value::as_str);
    let mut runs = Vec::new();
    if is_subagent_result(tool_name, details)
        && let Some(results) = details.get("results").and_then(Value::as_array)
    {
        let mode = str_field(details, "mode");
        let run_id = str_field(details, "runId");
        let async_id = str_field(details, "asyncId");
        for (position, result) in results.iter().enumerate() {
            let json_path = format!("{path}.details.results[{position}]");
            let mut run = run_row(result, position as i64, json_path);
            run.mode = mode.clone();
            run.run_id = run_id.clone();
            run.async_id = async_id.clone();
            run.artifact_base = artifact_base(&run);
            run.child_location = child_location(&run).or_else(|| omp_transcript(tool_name, result));
            child_messages(result, &mut run, out);
            runs.push(run);
        }
    }
    if tool_name == Some("task") {
        omp_background_runs(details, path, &mut runs);
    }
    runs
}

/// omp's background spawns: the `details.progress[i]` of a `task` result
/// whose id no `details.results[j]` has (those ran in the foreground and
/// are read above). Their status is the spawn's (`pending`) until a
/// delivery (`deliveries`, `hub_deliveries`) says how they ended.
fn omp_background_runs(details: &Value, path: &str, runs: &mut Vec<SubagentRun>) {
    let Some(progress) = details.get("progress").and_then(Value::as_array) else {
        return;
    };
    let finished: Vec<&str> = details
        .get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|result| result.get("id").and_then(Value::as_str))
        .collect();
    for (slot, spawn) in progress.iter().enumerate() {
        let Some(id) = spawn.get("id").and_then(Value::as_str) else {
            continue;
        };
        if finished.contains(&id) || !spawn.get("agent").is_some_and(Value::is_string) {
            continue;
        }
        let json_path = format!("{path}.details.progress[{slot}]");
        let mut run = run_row(spawn, runs.len() as i64, json_path);
        run.mode = Some("background".to_owned());
        run.child_location = omp_transcript(Some("task"), spawn);
        runs.push(run);
    }
}

/// How one omp background job ended, as its `async-result` delivery or a
/// `hub` snapshot says.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// The spawn's id (`progress[i].id`; its transcript is `<id>.jsonl`).
    pub job_id: String,
    /// `completed`, `failed` or `aborted`: what omp's task tool sets the
    /// spawn's `progress.status` to when the job settles.
    pub status: &'static str,
    pub exit_code: Option<i64>,
    pub duration_ms: Option<i64>,
    /// The job's `resolvedModel`, which a `hub` snapshot gives.
    pub model: Option<String>,
}

/// The jobs an omp `async-result` custom message delivers
/// (`session/async-job-delivery.ts`): one per `details.jobs[i]`, its
/// outcome read from the `<task-result id=… status=…>` envelope the task
/// tool rendered for it (`task/result-summary.ts`). A job delivered
/// without one threw before a result existed: failed.
pub fn deliveries(object: &Value) -> Vec<Delivery> {
    if str_field(object, "customType").as_deref() != Some("async-result") {
        return Vec::new();
    }
    let text = delivery_text(object.get("content"));
    let envelopes = envelope_statuses(&text);
    task_jobs(object.get("details"))
        .filter_map(|job| {
            let job_id = str_field(job, "jobId")?;
            let envelope = envelopes.get(job_id.as_str()).copied().flatten();
            Some(settled(job, job_id, envelope, "failed"))
        })
        .collect()
}

/// The settled jobs an omp `hub` tool result reports (`tools/hub/jobs.ts`:
/// `wait`, `jobs` and `cancel` return `details.jobs[i]` snapshots). A
/// `wait` that sees a job settled consumes its outcome: no `async-result`
/// follows. Each snapshot's own text holds the envelope; without one, its
/// `status` (`completed`, `failed`, `cancelled`) says how it ended.
pub fn hub_deliveries(message: &Value) -> Vec<Delivery> {
    // Read for every message: compared in place, not copied out.
    if message.get("toolName").and_then(Value::as_str) != Some("hub")
        || message.get("role").and_then(Value::as_str) != Some("toolResult")
    {
        return Vec::new();
    }
    task_jobs(message.get("details"))
        .filter_map(|job| {
            let job_id = str_field(job, "id")?;
            let status = match job.get("status").and_then(Value::as_str)? {
                "completed" => "completed",
                "failed" => "failed",
                "cancelled" => "aborted",
                _ => return None,
            };
            let text = ["resultText", "errorText"]
                .into_iter()
                .filter_map(|key| job.get(key).and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n");
            let envelope = envelope_statuses(&text)
                .get(job_id.as_str())
                .copied()
                .flatten();
            Some(settled(job, job_id, envelope, status))
        })
        .collect()
}

/// How `job` ended: as its envelope's `status` says, else `without`.
fn settled(job: &Value, job_id: String, envelope: Option<&str>, without: &'static str) -> Delivery {
    let (status, exit_code) = outcome(envelope, without);
    Delivery {
        duration_ms: job.get("durationMs").and_then(as_int),
        model: str_field(job, "resolvedModel"),
        job_id,
        status,
        exit_code,
    }
}

/// `details.jobs[i]` that are task jobs (a job of another kind, a
/// background bash, has no run).
fn task_jobs(details: Option<&Value>) -> impl Iterator<Item = &Value> {
    details
        .and_then(|details| details.get("jobs"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|job| {
            job.get("type")
                .and_then(Value::as_str)
                .is_none_or(|kind| kind == "task")
        })
}

/// A run's status and exit code from its envelope's `status`
/// (`task/result-summary.ts`), else `without`.
fn outcome(envelope: Option<&str>, without: &'static str) -> (&'static str, Option<i64>) {
    match envelope {
        Some("completed") => ("completed", Some(0)),
        Some("cancelled") => ("aborted", None),
        Some("merge failed") => ("failed", Some(0)),
        Some(other) => (
            "failed",
            other
                .strip_prefix("failed (exit ")
                .and_then(|rest| rest.strip_suffix(')'))
                .and_then(|code| code.parse().ok()),
        ),
        None if without == "completed" => ("completed", Some(0)),
        None => (without, None),
    }
}

/// A custom message's text: a string, or its text blocks joined.
fn delivery_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The `status` attribute of each `<task-result id="<id>" …>` envelope in
/// `text`, by id (the first envelope of an id decides; one without a
/// status gives none). One pass: each envelope is looked for only up to
/// the next one, so a delivery of many jobs costs its length, not
/// jobs × length.
fn envelope_statuses(text: &str) -> HashMap<&str, Option<&str>> {
    let mut statuses = HashMap::new();
    for piece in text.split("<task-result id=\"").skip(1) {
        let Some((id, rest)) = piece.split_once("\" ") else {
            continue;
        };
        let status = rest
            .split_once('>')
            .and_then(|(tag, _)| tag.split_once("status=\""))
            .and_then(|(_, value)| value.split_once('"'))
            .map(|(status, _)| status);
        statuses.entry(id).or_insert(status);
    }
    statuses
}

fn run_row(result: &Value, position: i64, json_path: String) -> SubagentRun {
    let usage = result.get("usage").filter(|usage| usage.is_object());
    let usage_int = |key: &str| usage.and_then(|u| u.get(key)).and_then(as_int);
    let progress = result.get("progressSummary");
    let progress_int = |key: &str| progress.and_then(|p| p.get(key)).and_then(as_int);
    let artifacts = result.get("artifactPaths");
    let artifact = |key: &str| artifacts.and_then(|a| str_field(a, key));
    let cost = usage
        .and_then(|u| u.get("cost"))
        .and_then(|cost| match cost {
            Value::Object(map) => map.get("total").and_then(Value::as_f64),
            other => other.as_f64(),
        });
    let exit_code = result.get("exitCode").and_then(as_int);
    let stop_reason = str_field(result, "stopReason");
    let error = str_field(result, "error").or_else(|| str_field(result, "errorMessage"));
    // omp's `aborted: true` (task/types.ts `SingleResult`) ends a run as a signal does.
    let termination_signal = str_field(result, "terminationSignal");
    let aborted = result.get("aborted").and_then(Value::as_bool) == Some(true);
    let status = str_field(result, "status")
        .filter(|status| !status.is_empty())
        .unwrap_or_else(|| {
            derived_status(
                exit_code,
                stop_reason.as_deref(),
                error.is_some(),
                termination_signal.is_some() || aborted,
            )
            .to_owned()
        });
    SubagentRun {
        position,
        run_index: result.get("index").and_then(as_int),
        step: result.get("step").and_then(as_int),
        agent: str_field(result, "agent"),
        agent_source: str_field(result, "agentSource"),
        task: str_field(result, "task"),
        status,
        termination_signal,
        exit_code,
        error,
        stop_reason,
        // omp: `resolvedModel` (`provider/id[:level]`).
        model: str_field(result, "model").or_else(|| str_field(result, "resolvedModel")),
        input_tokens: usage_int("input"),
        output_tokens: usage_int("output"),
        cache_read_tokens: usage_int("cacheRead"),
        cache_write_tokens: usage_int("cacheWrite"),
        cost,
        turns: usage_int("turns"),
        context_tokens: usage_int("contextTokens")
            .or_else(|| result.get("contextTokens").and_then(as_int)),
        tool_count: progress_int("toolCount"),
        progress_tokens: progress_int("tokens"),
        duration_ms: progress_int("durationMs")
            .or_else(|| result.get("durationMs").and_then(as_int)),
        session_file: str_field(result, "sessionFile"),
        artifact_input_path: artifact("inputPath"),
        artifact_output_path: artifact("outputPath"),
        artifact_jsonl_path: artifact("jsonlPath"),
        artifact_meta_path: artifact("metadataPath"),
        artifact_transcript_path: artifact("transcriptPath")
            .or_else(|| str_field(result, "transcriptPath")),
        json_path,
        ..SubagentRun::default()
    }
}

/// A run's status when its result does not say (before Pi 1.5): `running`
/// (exit -1, the official example's placeholder), `detached` (-2,
/// pi-subagents async), `aborted` (a signal ended it, or its model stopped
/// with `aborted`), `failed` (non-zero exit, an error stop reason or an
/// error), `completed`, or `unknown`.
pub fn derived_status(
    exit_code: Option<i64>,
    stop_reason: Option<&str>,
    has_error: bool,
    signalled: bool,
) -> &'static str {
    match exit_code {
        Some(-1) => "running",
        Some(-2) => "detached",
        _ if signalled || stop_reason == Some("aborted") => "aborted",
        Some(0) if stop_reason == Some("error") => "failed",
        Some(0) => "completed",
        Some(_) => "failed",
        None if has_error => "failed",
        None => "unknown",
    }
}

/// The stem shared by a run's artifact files (`<runId>_<agent>[_<index>]`).
fn artifact_base(run: &SubagentRun) -> Option<String> {
    let from_path = [
        (&run.artifact_input_path, "_input.md"),
        (&run.artifact_output_path, "_output.md"),
        (&run.artifact_meta_path, "_meta.json"),
        (&run.artifact_transcript_path, "_transcript.jsonl"),
        (&run.artifact_jsonl_path, ".jsonl"),
    ]
    .into_iter()
    .find_map(|(path, suffix)| {
        let name = path.as_deref()?.rsplit(['/', '\\']).next()?;
        name.strip_suffix(suffix).map(str::to_owned)
    });
    if from_path.is_some() {
        return from_path;
    }
    let run_id = run.run_id.as_deref()?;
    let agent: String = run
        .agent
        .as_deref()?
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Some(match run.run_index {
        Some(index) => format!("{run_id}_{agent}_{index}"),
        None => format!("{run_id}_{agent}"),
    })
}

/// `<runId>/run-<N>`, with `N` read from `sessionFile` when it follows that
/// layout, else the run's index (or position).
fn child_location(run: &SubagentRun) -> Option<String> {
    let run_id = run.run_id.as_deref()?;
    if let Some(file) = run.session_file.as_deref() {
        let parts: Vec<&str> = file.split(['/', '\\']).collect();
        for pair in parts.windows(2) {
            if pair[0] == run_id && pair[1].starts_with("run-") {
                return Some(format!("{run_id}/{}", pair[1]));
            }
        }
    }
    Some(format!(
        "{run_id}/run-{}",
        run.run_index.unwrap_or(run.position)
    ))
}

/// oh-my-pi's task tool (`toolName` `task`) names each run by an output id
/// (`results[i].id`, nested runs `<parent id>.<child id>`) and writes its
/// transcript to `<artifacts folder>/<id>.jsonl` (omp 18 `task/executor.ts`);
/// the location is that file name, which `Store::link_subagents` resolves
/// against the parent's folder.
fn omp_transcript(tool_name: Option<&str>, result: &Value) -> Option<String> {
    if tool_name != Some("task") {
        return None;
    }
    let id = str_field(result, "id")?;
    let safe = !id.is_empty() && !id.contains(['/', '\\']) && id != "." && id != "..";
    safe.then(|| format!("{id}.jsonl"))
}

/// Normalizes `result.messages[]` like top-level messages.
fn child_messages(result: &Value, run: &mut SubagentRun, out: &mut Entry) {
    let Some(messages) = result.get("messages").and_then(Value::as_array) else {
        return;
    };
    for (position, message) in messages.iter().enumerate() {
        let json_path = format!("{}.messages[{position}]", run.json_path);
        let mut scratch = Entry {
            timestamp_ms: None,
            ..Entry::default()
        };
        describe_message(message, &json_path, &mut scratch);
        out.texts.append(&mut scratch.texts);
        for call in scratch.tool_calls {
            run.tool_calls.push(SubagentToolCall {
                message_position: position as i64,
                block_index: call.block_index,
                json_path: call.json_path,
                call_id: call.call_id,
                name: call.name,
            });
        }
        if let Some(row) = scratch.message {
            run.messages.push(SubagentMessage {
                position: position as i64,
                json_path,
                row,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn official_and_pi_subagents_shapes_become_runs() {
        let message = json!({"role":"toolResult","toolName":"subagent","toolCallId":"t1",
            "details":{"mode":"weird","runId":"abcd1234","results":[
                {"agent":"scout","task":"find","exitCode":0,"usage":{"input":5,"output":6,"cacheRead":7,"cacheWrite":8,"cost":0.5,"turns":2},
                 "messages":[{"role":"user","content":[{"type":"text","text":"find it"}]},
                             {"role":"assistant","content":[{"type":"toolCall","id":"c","name":"bash","arguments":{"command":"ls"}}],"model":"m"}]},
                {"index":1,"agent":"re viewer","exitCode":-2,"usage":{"cost":{"total":0.25}},
                 "progressSummary":{"toolCount":3,"durationMs":99},
                 "artifactPaths":{"outputPath":"/x/subagent-artifacts/abcd1234_re_viewer_1_output.md"}}]}});
        let mut entry = Entry::default();
        let runs = describe(&message, "$.message", &mut entry);
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].mode.as_deref(), Some("weird"));
        assert_eq!(runs[0].status, "completed");
        assert_eq!(runs[0].cost, Some(0.5));
        assert_eq!(runs[0].cache_write_tokens, Some(8));
        assert_eq!(runs[0].artifact_base.as_deref(), Some("abcd1234_scout"));
        assert_eq!(runs[0].messages.len(), 2);
        assert_eq!(runs[0].tool_calls[0].name.as_deref(), Some("bash"));
        assert_eq!(runs[1].status, "detached");
        assert_eq!(runs[1].cost, Some(0.25));
        assert_eq!(runs[1].tool_count, Some(3));
        assert_eq!(runs[1].duration_ms, Some(99));
        assert_eq!(
            runs[1].artifact_base.as_deref(),
            Some("abcd1234_re_viewer_1")
        );
        let paths: Vec<_> = entry
            .texts
            .iter()
            .map(|t| (t.json_path.as_str(), t.kind))
            .collect();
        assert_eq!(
            paths,
            [
                (
                    "$.message.details.results[0].messages[0].content[0].text",
                    "user"
                ),
                (
                    "$.message.details.results[0].messages[1].content[0].arguments.command",
                    "tool_call"
                ),
            ]
        );
    }

    #[test]
    fn omp_task_results_name_their_transcript() {
        let message = json!({"role":"toolResult","toolName":"task","toolCallId":"t",
            "details":{"results":[
                {"index":0,"id":"0-Explore.0-Grep","agent":"grep","exitCode":0,"resolvedModel":"anthropic/claude-haiku-4-5",
                 "contextTokens":210,"usage":{"input":200,"output":10,"cost":{"total":0.001}}},
                {"index":1,"id":"../x","agent":"grep","exitCode":1,"aborted":true}],
                "usage":{"input":200}}});
        let runs = describe(&message, "$.message", &mut Entry::default());
        assert_eq!(
            runs[0].child_location.as_deref(),
            Some("0-Explore.0-Grep.jsonl")
        );
        assert_eq!(runs[0].model.as_deref(), Some("anthropic/claude-haiku-4-5"));
        assert_eq!(runs[0].context_tokens, Some(210));
        assert_eq!(runs[0].cost, Some(0.001));
        assert_eq!(runs[1].child_location, None);
        assert_eq!(runs[1].status, "aborted");
        // Another tool with the same shape names no omp transcript.
        let other = json!({"role":"toolResult","toolName":"delegate",
            "details":{"results":[{"id":"a","agent":"x"}]}});
        let runs = describe(&other, "$.message", &mut Entry::default());
        assert_eq!(runs[0].child_location, None);
    }

    #[test]
    fn omp_background_spawns_are_runs_and_deliveries_end_them() {
        let message = json!({"role":"toolResult","toolName":"task","toolCallId":"t",
            "details":{"results":[{"id":"Fore","agent":"scout","exitCode":0}],
                "progress":[{"index":0,"id":"Fore","agent":"scout","status":"completed"},
                            {"index":1,"id":"Back","agent":"scout","agentSource":"bundled","status":"pending",
                             "task":"look","durationMs":0},
                            {"index":2,"agent":"scout","status":"pending"}],
                "async":{"state":"running","jobId":"Back","type":"task"}}});
        let runs = describe(&message, "$.message", &mut Entry::default());
        assert_eq!(runs.len(), 2, "{runs:#?}");
        assert_eq!(runs[1].json_path, "$.message.details.progress[1]");
        assert_eq!(runs[1].position, 1);
        assert_eq!(runs[1].status, "pending");
        assert_eq!(runs[1].mode.as_deref(), Some("background"));
        assert_eq!(runs[1].child_location.as_deref(), Some("Back.jsonl"));

        let envelope = |id: &str, status: &str| {
            format!(
                "<task-result id=\"{id}\" agent=\"scout\" status=\"{status}\" duration=\"9ms\">\n<output>\nx\n</output>\n</task-result>"
            )
        };
        let text = [
            envelope("A", "completed"),
            envelope("B", "failed (exit 3)"),
            envelope("C", "cancelled"),
            envelope("D", "merge failed"),
        ]
        .join("\n");
        let jobs = ["A", "B", "C", "D", "E"]
            .map(|id| json!({"jobId": id, "type": "task", "durationMs": 7}));
        let delivery = json!({"type":"custom_message","customType":"async-result",
            "content":[{"type":"text","text":text}],
            "details":{"jobs":[jobs[0], jobs[1], jobs[2], jobs[3], jobs[4],
                               {"jobId":"bash1","type":"bash"}]}});
        let ended: Vec<_> = deliveries(&delivery)
            .into_iter()
            .map(|d| (d.job_id, d.status, d.exit_code, d.duration_ms))
            .collect();
        let job = |id: &str, status, exit| (id.to_owned(), status, exit, Some(7));
        assert_eq!(
            ended,
            [
                job("A", "completed", Some(0)),
                job("B", "failed", Some(3)),
                job("C", "aborted", None),
                job("D", "failed", Some(0)),
                // Delivered without an envelope: the job threw.
                job("E", "failed", None),
            ]
        );
        let other = json!({"type":"custom_message","customType":"irc:incoming","details":{"jobs":[jobs[0]]}});
        assert!(deliveries(&other).is_empty());

        let hub = json!({"role":"toolResult","toolName":"hub","details":{"op":"wait","jobs":[
            {"id":"W","type":"task","status":"completed","durationMs":5,"resultText":envelope("W", "completed")},
            {"id":"F","type":"task","status":"failed","durationMs":6,"errorText":envelope("F", "cancelled")},
            {"id":"X","type":"task","status":"cancelled","durationMs":8,"resolvedModel":"p/m"},
            {"id":"R","type":"task","status":"running","durationMs":9},
            {"id":"b","type":"bash","status":"completed"}]}});
        let ended = hub_deliveries(&hub);
        assert_eq!(ended[2].model.as_deref(), Some("p/m"));
        let ended: Vec<_> = ended
            .into_iter()
            .map(|d| (d.job_id, d.status, d.exit_code, d.duration_ms))
            .collect();
        assert_eq!(
            ended,
            [
                ("W".to_owned(), "completed", Some(0), Some(5)),
                ("F".to_owned(), "aborted", None, Some(6)),
                ("X".to_owned(), "aborted", None, Some(8)),
            ]
        );
    }

    #[test]
    fn other_tools_need_the_shape() {
        assert!(!is_subagent_result(Some("bash"), &json!({"results":[1]})));
        assert!(is_subagent_result(
            Some("delegate"),
            &json!({"results":[{"agent":"a"}]})
        ));
        assert!(is_subagent_result(Some("subagent"), &json!({"results":[]})));
        assert_eq!(
            derived_status(Some(0), Some("error"), false, false),
            "failed"
        );
        assert_eq!(
            derived_status(Some(0), Some("aborted"), false, false),
            "aborted"
        );
        assert_eq!(derived_status(None, None, false, true), "aborted");
        assert_eq!(derived_status(Some(-1), None, false, false), "running");
        assert_eq!(derived_status(None, None, false, false), "unknown");
    }
}
