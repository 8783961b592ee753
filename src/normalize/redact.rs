//! `sync --redact`: every string of an entry with its secrets replaced by
//! `[REDACTED:<kind>]` before anything is stored or indexed, so the secret
//! reaches neither `raw` nor the full-text index; what was taken out is
//! recorded (where, which kind, a keyed hash, a masked preview).

use serde_json::Value;

use super::text::child_path;
use crate::secrets::Redactor;

/// One secret taken out of the entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedactionRow {
    /// The string that held it.
    pub json_path: String,
    pub kind: String,
    pub hash: String,
    pub preview: String,
}

/// Redacts every string leaf under `value` (at `path`).
pub(super) fn redact(
    value: &mut Value,
    path: &str,
    redactor: &Redactor,
    out: &mut Vec<RedactionRow>,
) {
    match value {
        Value::String(text) => {
            if let Some((redacted, taken)) = redactor.redact(text) {
                *text = redacted;
                out.extend(taken.into_iter().map(|secret| RedactionRow {
                    json_path: path.to_owned(),
                    kind: secret.kind.to_owned(),
                    hash: secret.hash,
                    preview: secret.preview,
                }));
            }
        }
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                // A key no JSON path can name (quotes, control characters):
                // its value is still redacted, recorded under the object.
                let child_path = child_path(path, key).unwrap_or_else(|| path.to_owned());
                redact(child, &child_path, redactor, out);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                redact(item, &format!("{path}[{index}]"), redactor, out);
            }
        }
        _ => {}
    }
}
