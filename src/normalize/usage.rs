//! Token counts and costs, wherever Pi records them.

use serde_json::Value;

use super::{Entry, Usage, UsageRow, as_int};

pub(super) fn parse_usage(value: &Value) -> Option<Usage> {
    let object = value.as_object()?;
    let int = |key: &str| object.get(key).and_then(as_int).unwrap_or(0);
    let (input, output, cache_read, cache_write) = (
        int("input"),
        int("output"),
        int("cacheRead"),
        int("cacheWrite"),
    );
    let total = object
        .get("totalTokens")
        .and_then(as_int)
        .unwrap_or(input + output + cache_read + cache_write);
    let mut usage = Usage {
        input,
        output,
        cache_read,
        cache_write,
        total,
        reasoning: object.get("reasoning").and_then(as_int),
        cache_write_1h: object.get("cacheWrite1h").and_then(as_int),
        ..Usage::default()
    };
    match object.get("cost") {
        Some(Value::Object(cost)) => {
            let money = |key: &str| cost.get(key).and_then(Value::as_f64);
            usage.cost_input = money("input");
            usage.cost_output = money("output");
            usage.cost_cache_read = money("cacheRead");
            usage.cost_cache_write = money("cacheWrite");
            usage.cost_total = money("total");
            usage.cost_from_provider = cost.get("totalFromProvider").and_then(Value::as_bool);
        }
        // The official subagent example reports cost as one number.
        Some(Value::Number(total)) => usage.cost_total = total.as_f64(),
        _ => {}
    }
    Some(usage)
}

pub(super) fn push_usage(
    out: &mut Entry,
    value: Option<&Value>,
    source: &'static str,
    provider: Option<String>,
    model: Option<String>,
) {
    if let Some(usage) = value.and_then(parse_usage) {
        out.usage.push(UsageRow {
            source,
            provider,
            model,
            response_id: None,
            usage,
        });
    }
}
