//! JSON-RPC 2.0 as MCP uses it over stdio: one message per line, the error
//! codes, and the protocol revisions this server speaks.
//!
//! Two eras of MCP are served. The handshake era (2024-11-05 to 2025-11-25)
//! opens with `initialize`, where the server answers the client's revision
//! if it knows it and its own latest otherwise. The stateless era
//! (2026-07-28) has no handshake: every request carries its revision and
//! the client's capabilities in `params._meta`, and `server/discover` says
//! what the server supports. A connection keeps the era its first request
//! chose (as the official SDKs do), so a client never gets answers shaped
//! for the other one.

use serde_json::{Map, Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// 2026-07-28: the request's revision is not one the server speaks;
/// `data` lists those it does.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// Revisions negotiated by `initialize`, oldest first.
pub const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// Revisions carried per request in `_meta` (no handshake).
pub const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The newest revision `initialize` offers.
pub fn latest_handshake() -> &'static str {
    HANDSHAKE_VERSIONS[HANDSHAKE_VERSIONS.len() - 1]
}

/// Whether tool results carry `structuredContent` (added in 2025-06-18).
pub fn has_structured_content(version: &str) -> bool {
    !matches!(version, "2024-11-05" | "2025-03-26")
}

/// A JSON-RPC error object; `message` says what to do about it.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }

    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError::new(INTERNAL_ERROR, message)
    }

    /// `-32022` naming the revisions served for `requested`.
    pub fn unsupported_version(requested: &Value, supported: &[&str], message: String) -> RpcError {
        RpcError {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message,
            data: Some(json!({"supported": supported, "requested": requested})),
        }
    }

    fn to_json(&self) -> Value {
        let mut error = Map::new();
        error.insert("code".into(), self.code.into());
        error.insert("message".into(), self.message.clone().into());
        if let Some(data) = &self.data {
            error.insert("data".into(), data.clone());
        }
        Value::Object(error)
    }
}

/// One message from the client, checked against JSON-RPC 2.0.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
    },
    /// A response to a request of ours (this server sends none): ignored.
    Response,
}

/// An invalid message: the id to answer to (`null` when it has none that
/// can be read) and the error to answer with.
pub type Invalid = Box<(Value, RpcError)>;

/// Reads one message; an invalid one is the error to answer with.
pub fn parse(value: Value) -> Result<Message, Invalid> {
    let Value::Object(mut object) = value else {
        return Err(Box::new((
            Value::Null,
            RpcError::new(
                INVALID_REQUEST,
                "a JSON-RPC message is an object with \"jsonrpc\": \"2.0\" and a \"method\"",
            ),
        )));
    };
    let id = object.remove("id");
    let reply_to = match &id {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    let invalid = |message: &str| {
        Err(Box::new((
            reply_to.clone(),
            RpcError::new(INVALID_REQUEST, message),
        )))
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("\"jsonrpc\" must be \"2.0\"");
    }
    let method = match object.remove("method") {
        Some(Value::String(method)) => method,
        Some(_) => return invalid("\"method\" must be a string"),
        None if object.contains_key("result") || object.contains_key("error") => {
            return Ok(Message::Response);
        }
        None => return invalid("a request needs a \"method\""),
    };
    let params = object.remove("params");
    if let Some(params) = &params
        && !params.is_object()
        && !params.is_array()
    {
        return invalid("\"params\" must be an object");
    }
    match id {
        None => Ok(Message::Notification { method }),
        Some(Value::String(_) | Value::Number(_)) => Ok(Message::Request {
            id: reply_to,
            method,
            params,
        }),
        Some(_) => invalid("\"id\" must be a string or a number (MCP does not allow null)"),
    }
}

/// A successful response.
pub fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn error_response(id: &Value, error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()})
}

/// The revision a request's `_meta` envelope names (2026-07-28 era), if it
/// has one.
pub fn envelope(params: Option<&Value>) -> Option<&Map<String, Value>> {
    params
        .and_then(|params| params.get("_meta"))
        .and_then(Value::as_object)
        .filter(|meta| meta.contains_key(META_PROTOCOL_VERSION))
}

/// Checks a 2026-07-28 envelope: both required keys, a revision served.
pub fn check_envelope(meta: &Map<String, Value>) -> Result<(), RpcError> {
    if !meta.contains_key(META_CLIENT_CAPABILITIES) {
        return Err(RpcError::invalid_params(format!(
            "params._meta is missing {META_CLIENT_CAPABILITIES:?}; a 2026-07-28 request carries the client's capabilities (an empty object will do)"
        )));
    }
    let requested = &meta[META_PROTOCOL_VERSION];
    match requested.as_str() {
        Some(version) if MODERN_VERSIONS.contains(&version) => Ok(()),
        Some(_) => Err(RpcError::unsupported_version(
            requested,
            &MODERN_VERSIONS,
            format!(
                "unsupported protocol version {requested}; use {} in _meta, or the initialize handshake with one of {}",
                MODERN_VERSIONS.join(", "),
                HANDSHAKE_VERSIONS.join(", ")
            ),
        )),
        None => Err(RpcError::invalid_params(format!(
            "{META_PROTOCOL_VERSION:?} in params._meta must be a string such as \"{}\"",
            MODERN_VERSIONS[0]
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_checked() {
        let request = parse(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
        assert_eq!(
            request,
            Ok(Message::Request {
                id: json!(7),
                method: "ping".into(),
                params: None
            })
        );
        let note = parse(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert!(matches!(note, Ok(Message::Notification { .. })));
        let (id, error) = *parse(json!({"jsonrpc": "1.0", "id": "a", "method": "x"})).unwrap_err();
        assert_eq!((id, error.code), (json!("a"), INVALID_REQUEST));
        let (id, error) = *parse(json!({"jsonrpc": "2.0", "id": null, "method": "x"})).unwrap_err();
        assert_eq!((id, error.code), (Value::Null, INVALID_REQUEST));
        assert!(parse(json!([1])).is_err());
        assert_eq!(
            parse(json!({"jsonrpc": "2.0", "id": 1, "result": {}})),
            Ok(Message::Response)
        );
    }

    #[test]
    fn envelopes_name_a_served_revision() {
        let meta = |version: Value| json!({"_meta": {META_PROTOCOL_VERSION: version, META_CLIENT_CAPABILITIES: {}}});
        let ok = meta(json!("2026-07-28"));
        assert!(check_envelope(envelope(Some(&ok)).unwrap()).is_ok());
        let old = meta(json!("2099-01-01"));
        let error = check_envelope(envelope(Some(&old)).unwrap()).unwrap_err();
        assert_eq!(error.code, UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(error.data.unwrap()["supported"], json!(["2026-07-28"]));
        assert!(envelope(Some(&json!({"name": "x"}))).is_none());
    }
}
