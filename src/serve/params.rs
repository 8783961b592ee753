//! A request's query parameters (`application/x-www-form-urlencoded`, the
//! form_urlencoded crate), and turning them into the library's options the
//! way the CLI's flags are: the same names (`role`, `type`, `project`,
//! `since`, …), a repeated name for a list.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::query::request::argument_schema;
use crate::query::scope::{Scope, ScopeText, now_ms};

/// The parameters in order; a name may repeat.
#[derive(Debug, Clone, Default)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

/// A parameter the caller got wrong: the text says which and what to send.
#[derive(Debug, Clone)]
pub struct BadParam(pub String);

impl Params {
    pub fn parse(query: &str) -> Params {
        Params {
            pairs: form_urlencoded::parse(query.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        }
    }

    /// The first value of `name`, empty values counting as absent (an
    /// empty form field).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }

    pub fn string(&self, name: &str) -> Option<String> {
        self.get(name).map(str::to_owned)
    }

    /// Every non-empty value of `name`; a value may also list several,
    /// comma-separated (`role=user,assistant`).
    pub fn all(&self, name: &str) -> Vec<String> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == name)
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// A flag: present as `1`, `true`, `on` or `yes` (a checkbox sends `on`).
    pub fn flag(&self, name: &str) -> Result<bool, BadParam> {
        match self.get(name) {
            None => Ok(false),
            Some("1" | "true" | "on" | "yes") => Ok(true),
            Some("0" | "false" | "off" | "no") => Ok(false),
            Some(other) => Err(BadParam(format!(
                "{name}={other:?} is not a flag; send {name}=1 or {name}=0"
            ))),
        }
    }

    pub fn count(&self, name: &str) -> Result<Option<usize>, BadParam> {
        self.get(name)
            .map(|text| {
                text.parse().map_err(|_| {
                    BadParam(format!(
                        "{name}={text:?} is not a count; send a whole number such as {name}=20"
                    ))
                })
            })
            .transpose()
    }

    /// These parameters and `name=value`: a path segment that fills a
    /// request's field (`/api/sessions/<id>` names the `session`).
    pub fn and(&self, name: &str, value: &str) -> Params {
        let mut pairs = self.pairs.clone();
        pairs.retain(|(k, _)| k != name);
        pairs.push((name.to_owned(), value.to_owned()));
        Params { pairs }
    }

    /// One of `choices`, else the first.
    pub fn choice<'a>(&self, name: &str, choices: &[&'a str]) -> Result<&'a str, BadParam> {
        match self.get(name) {
            None => Ok(choices[0]),
            Some(given) => choices
                .iter()
                .find(|c| **c == given)
                .copied()
                .ok_or_else(|| {
                    BadParam(format!(
                        "{name}={given:?} is not known; send one of {}",
                        choices.join(", ")
                    ))
                }),
        }
    }

    /// The scope parameters, read as the CLI's scope flags are.
    pub fn scope(&self) -> Result<Scope, BadParam> {
        let text: ScopeText = self.request(&[])?;
        text.scope(now_ms(), "")
            .map_err(|err| BadParam(crate::error_chain(&err)))
    }

    /// A request type of `query` (`SearchRequest`, `ScopeText`) filled from
    /// the parameters its schema names, each read by its type there: a
    /// flag, a count, a list (repeated or comma-separated), or a text. `renames` gives a field another parameter name
    /// (`("query", "q")`).
    pub fn request<T: DeserializeOwned + JsonSchema>(
        &self,
        renames: &[(&str, &str)],
    ) -> Result<T, BadParam> {
        let (properties, required) = argument_schema::<T>();
        let mut object = Map::new();
        for (field, schema) in &properties {
            let name = renames
                .iter()
                .find(|(from, _)| from == field)
                .map_or(field.as_str(), |(_, to)| to);
            if let Some(value) = self.value(name, schema)? {
                object.insert(field.clone(), value);
            }
        }
        if let Some(field) = required.iter().find(|field| !object.contains_key(*field)) {
            let name = renames
                .iter()
                .find(|(from, _)| from == field)
                .map_or(field.as_str(), |(_, to)| to);
            return Err(BadParam(format!("{name} is missing: send {name}=…")));
        }
        serde_json::from_value(Value::Object(object))
            .map_err(|err| BadParam(format!("a parameter is not one its field takes: {err}")))
    }

    /// The value of parameter `name` as its schema types it; `None` when
    /// it is absent.
    fn value(&self, name: &str, schema: &Value) -> Result<Option<Value>, BadParam> {
        if schema.get("anyOf").is_some() || schema["type"] == "array" {
            let all = self.all(name);
            return Ok((!all.is_empty()).then(|| all.into()));
        }
        if self.get(name).is_none() {
            return Ok(None);
        }
        Ok(Some(match schema["type"].as_str() {
            Some("boolean") => self.flag(name)?.into(),
            Some("integer") => self.count(name)?.into(),
            // A text, an `enum`'s too: the type it fills says what it
            // takes (`agent` takes more names than its schema lists).
            _ => self.get(name).unwrap_or_default().into(),
        }))
    }

    /// The parameters again as a query string, with `set` replacing (or
    /// adding) those names and `drop` left out: links that change one thing.
    pub fn with(&self, set: &[(&str, &str)], drop: &[&str]) -> String {
        let mut out = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &self.pairs {
            if v.is_empty() || drop.contains(&k.as_str()) || set.iter().any(|(s, _)| s == k) {
                continue;
            }
            out.append_pair(k, v);
        }
        for (k, v) in set {
            if !v.is_empty() {
                out.append_pair(k, v);
            }
        }
        out.finish()
    }
}

/// `text` for a URL path segment or a query value.
pub fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A path segment back to text (`%2F` and `+` included).
pub fn decode(segment: &str) -> String {
    form_urlencoded::parse(format!("x={segment}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_flags() {
        let p = Params::parse("q=a+b&role=user&role=assistant,thinking&raw=1&limit=&x=%3Cs%3E");
        assert_eq!(p.get("q"), Some("a b"));
        assert_eq!(p.all("role"), ["user", "assistant", "thinking"]);
        assert!(p.flag("raw").unwrap());
        assert_eq!(p.count("limit").unwrap(), None);
        assert_eq!(p.get("x"), Some("<s>"));
        assert_eq!(decode(&encode("/a b/c+d")), "/a b/c+d");
    }
}
