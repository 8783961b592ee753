//! Credentials in session text: API keys an agent printed with `env`,
//! private keys it read with `cat`, tokens pasted into a prompt. Pure: a
//! string in, the places of what looks like a secret out.
//!
//! The rules are those of gitleaks, `config/gitleaks.toml` at v8.30.1 (MIT
//! License, Copyright (c) 2019 Zachary Rice),
//! the maintained rule set most secret scanners start from: each rule's
//! id, regular expression, keywords (a cheap first test on the lowercased
//! text) and minimum Shannon entropy of the secret are copied as they are
//! there, for the kinds a coding agent's sessions hold: LLM providers,
//! GitHub, GitLab, Slack, AWS, GCP, Azure, Stripe, JWTs, PEM private keys
//! and generic `key = value` assignments. They are compiled as Go compiles
//! them: `\w`, `\d` and `\s` are ASCII classes (Rust's `regex` would make
//! them Unicode, and `\w{82}` too large to compile), so they run on bytes.

use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use regex::bytes::{Regex, RegexBuilder};
use serde::Serialize;

/// One rule of the rule set.
struct Rule {
    /// The gitleaks rule id, also the kind piidx reports.
    id: &'static str,
    regex: &'static str,
    /// Lowercase; the text must contain one of them (none: always tried).
    keywords: &'static [&'static str],
    /// Minimum Shannon entropy (bits per byte) of the secret.
    entropy: Option<f64>,
}

/// Where the secret is in the match: the first capture group when the rule
/// has one, as gitleaks takes it, else the whole match.
const RULES: &[Rule] = &[
    Rule {
        id: "anthropic-api-key",
        regex: r#"\b(sk-ant-api03-[a-zA-Z0-9_\-]{93}AA)(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &["sk-ant-api03"],
        entropy: None,
    },
    Rule {
        id: "anthropic-admin-api-key",
        regex: r#"\b(sk-ant-admin01-[a-zA-Z0-9_\-]{93}AA)(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &["sk-ant-admin01"],
        entropy: None,
    },
    Rule {
        id: "openai-api-key",
        regex: r#"\b(sk-(?:proj|svcacct|admin)-(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})T3BlbkFJ(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})\b|sk-[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20})(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &["t3blbkfj"],
        entropy: Some(3.0),
    },
    Rule {
        id: "huggingface-access-token",
        regex: r#"\b(hf_(?i:[a-z]{34}))(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &["hf_"],
        entropy: Some(2.0),
    },
    Rule {
        id: "perplexity-api-key",
        regex: r#"\b(pplx-[a-zA-Z0-9]{48})(?:[\x60'"\s;]|\\[nr]|$|\b)"#,
        keywords: &["pplx-"],
        entropy: Some(4.0),
    },
    Rule {
        id: "github-pat",
        regex: r"ghp_[0-9a-zA-Z]{36}",
        keywords: &["ghp_"],
        entropy: Some(3.0),
    },
    Rule {
        id: "github-fine-grained-pat",
        regex: r"github_pat_\w{82}",
        keywords: &["github_pat_"],
        entropy: Some(3.0),
    },
    Rule {
        id: "github-oauth",
        regex: r"gho_[0-9a-zA-Z]{36}",
        keywords: &["gho_"],
        entropy: Some(3.0),
    },
    Rule {
        id: "github-app-token",
        regex: r"(?:ghu|ghs)_[0-9a-zA-Z]{36}",
        keywords: &["ghu_", "ghs_"],
        entropy: Some(3.0),
    },
    Rule {
        id: "github-refresh-token",
        regex: r"ghr_[0-9a-zA-Z]{36}",
        keywords: &["ghr_"],
        entropy: Some(3.0),
    },
    Rule {
        id: "gitlab-pat",
        regex: r"glpat-[\w-]{20}",
        keywords: &["glpat-"],
        entropy: Some(3.0),
    },
    Rule {
        id: "slack-bot-token",
        regex: r"xoxb-[0-9]{10,13}-[0-9]{10,13}[a-zA-Z0-9-]*",
        keywords: &["xoxb"],
        entropy: Some(3.0),
    },
    Rule {
        id: "slack-user-token",
        regex: r"xox[pe](?:-[0-9]{10,13}){3}-[a-zA-Z0-9-]{28,34}",
        keywords: &["xoxp-", "xoxe-"],
        entropy: Some(2.0),
    },
    Rule {
        id: "slack-app-token",
        regex: r"(?i)xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+",
        keywords: &["xapp"],
        entropy: Some(2.0),
    },
    Rule {
        id: "slack-webhook-url",
        regex: r"(?:https?://)?hooks.slack.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}",
        keywords: &["hooks.slack.com"],
        entropy: None,
    },
    Rule {
        id: "aws-access-token",
        regex: r"\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b",
        keywords: &["a3t", "akia", "asia", "abia", "acca"],
        entropy: Some(3.0),
    },
    Rule {
        id: "gcp-api-key",
        regex: r#"\b(AIza[\w-]{35})(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &["aiza"],
        entropy: Some(4.0),
    },
    Rule {
        id: "azure-ad-client-secret",
        regex: r#"(?:^|[\\'"\x60\s>=:(,)])([a-zA-Z0-9_~.]{3}\dQ~[a-zA-Z0-9_~.-]{31,34})(?:$|[\\'"\x60\s<),])"#,
        keywords: &["q~"],
        entropy: Some(3.0),
    },
    Rule {
        id: "stripe-access-token",
        regex: r#"\b((?:sk|rk)_(?:test|live|prod)_[a-zA-Z0-9]{10,99})(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &[
            "sk_test", "sk_live", "sk_prod", "rk_test", "rk_live", "rk_prod",
        ],
        entropy: Some(2.0),
    },
    Rule {
        id: "jwt",
        regex: r#"\b(ey[a-zA-Z0-9]{17,}\.ey[a-zA-Z0-9\/\\_-]{17,}\.(?:[a-zA-Z0-9\/\\_-]{10,}={0,2})?)(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &["ey"],
        entropy: Some(3.0),
    },
    Rule {
        id: "private-key",
        regex: r"(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S-]{64,}?KEY(?: BLOCK)?-----",
        keywords: &["-----begin"],
        entropy: None,
    },
    Rule {
        id: "generic-api-key",
        regex: r#"(?i)[\w.-]{0,50}?(?:access|auth|(?-i:[Aa]pi|API)|credential|creds|key|passw(?:or)?d|secret|token)(?:[ \t\w.-]{0,20})[\s'"]{0,3}(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)[\x60'"\s=]{0,5}([\w.=-]{10,150}|[a-z0-9][a-z0-9+/]{11,}={0,3})(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &[
            "access",
            "api",
            "auth",
            "key",
            "credential",
            "creds",
            "passwd",
            "password",
            "secret",
            "token",
        ],
        entropy: Some(3.5),
    },
];

/// gitleaks' global allowlist: a secret matching one of these is a placeholder
/// (with `{` escaped where Go reads it as a literal and Rust would not).
const GLOBAL_ALLOW: &[&str] = &[
    r#"(?i)^true|false|null$"#,
    r#"^(?i:a+|b+|c+|d+|e+|f+|g+|h+|i+|j+|k+|l+|m+|n+|o+|p+|q+|r+|s+|t+|u+|v+|w+|x+|y+|z+|\*+|\.+)$"#,
    r#"^\$(?:\d+|\{\d+\})$"#,
    r#"^\$(?:[A-Z_]+|[a-z_]+)$"#,
    r#"^\$\{(?:[A-Z_]+|[a-z_]+)\}$"#,
    r#"^\{\{[ \t]*[\w ().|]+[ \t]*}}$"#,
    r#"^\$\{\{[ \t]*(?:(?:env|github|secrets|vars)(?:\.[A-Za-z]\w+)+[\w "'&./=|]*)[ \t]*}}$"#,
    r#"^%(?:[A-Z_]+|[a-z_]+)%$"#,
    r#"^%[+\-# 0]?[bcdeEfFgGoOpqstTUvxX]$"#,
    r#"^\{\d{0,2}}$"#,
    r#"^@(?:[A-Z_]+|[a-z_]+)@$"#,
    r#"^/Users/(?i)[a-z0-9]+/[\w .-/]+$"#,
    r#"^/(?:bin|etc|home|opt|tmp|usr|var)/[\w ./-]+$"#,
];

/// `generic-api-key`'s allowlist over the whole match (names that only look like keys).
const GENERIC_ALLOW_MATCH: &str = r#"(?i)(?:access(?:ibility|or)|access[_.-]?id|random[_.-]?access|api[_.-]?(?:id|name|version)|rapid|capital|[a-z0-9-]*?api[a-z0-9-]*?:jar:|author|X-MS-Exchange-Organization-Auth|Authentication-Results|(?:credentials?[_.-]?id|withCredentials)|(?:bucket|foreign|hot|idx|natural|primary|pub(?:lic)?|schema|sequence)[_.-]?key|(?:turkey)|key[_.-]?(?:alias|board|code|frame|id|length|mesh|name|pair|press(?:ed)?|ring|selector|signature|size|stone|storetype|word|up|down|left|right)|key[_.-]?vault[_.-]?(?:id|name)|keyVaultToStoreSecrets|key(?:store|tab)[_.-]?(?:file|path)|issuerkeyhash|(?-i:[DdMm]onkey|[DM]ONKEY)|keying|(?:secret)[_.-]?(?:length|name|size)|UserSecretsId|(?:csrf)[_.-]?token|(?:io\.jsonwebtoken[ \t]?:[ \t]?[\w-]+)|(?:api|credentials|token)[_.-]?(?:endpoint|ur[il])|public[_.-]?token|(?:key|token)[_.-]?file|(?-i:(?:[A-Z_]+=\n[A-Z_]+=|[a-z_]+=\n[a-z_]+=)(?:\n|\z))|(?-i:(?:[A-Z.]+=\n[A-Z.]+=|[a-z.]+=\n[a-z.]+=)(?:\n|\z)))"#;

/// gitleaks' global stopwords: a secret containing one is an example.
const GLOBAL_STOPWORDS: &[&str] = &[
    "014df517-39d1-4453-b7b3-9930c563627c",
    "abcdefghijklmnopqrstuvwxyz",
];

/// `generic-api-key`'s stopwords (one per line, lowercase): a secret
/// containing one is a word, not a key.
const GENERIC_STOPWORDS: &str = include_str!("generic-stopwords.txt");

/// Where this rule set comes from, for `piidx secrets --rules` and the docs.
pub const RULE_SOURCE: &str = "gitleaks v8.30.1, config/gitleaks.toml (MIT)";

/// A secret found in a text: the rule that found it and its byte range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    pub rule: &'static str,
    pub start: usize,
    pub end: usize,
}

/// The rules are constants: failing to build them is a bug in this file
/// (a test builds them all), never the user's input.
#[derive(Debug, thiserror::Error)]
enum RulesError {
    #[error("a secret rule does not compile")]
    Regex(#[from] regex::Error),
    #[error("the secret rules' keywords do not build")]
    Keywords(#[from] aho_corasick::BuildError),
}

/// The compiled rule set.
pub struct Detector {
    rules: Vec<(&'static Rule, Regex)>,
    /// Every rule's keywords in one automaton (ASCII case folded), so a
    /// text is scanned once to know which rules to try.
    keywords: AhoCorasick,
    /// The rule of each keyword pattern.
    keyword_rule: Vec<usize>,
    /// Secrets that are placeholders, for every rule.
    global_allow: Vec<Regex>,
    /// For `generic-api-key`: a secret of letters, `_`, `.` and `-` only
    /// (an identifier), and matches that only look like assignments of keys.
    generic_identifier: Regex,
    generic_allow_match: Regex,
    generic_stopwords: Vec<&'static str>,
}

/// The lazy DFA's cache per regex and thread. `generic-api-key`'s leading
/// `[\w.-]{0,50}?` and its alternations make many states: under the
/// crate's 2 MiB default the cache filled and was rebuilt over and over on
/// session text, and determinizing was a third of all scanning. A rule that
/// needs fewer states never grows its cache this far.
const DFA_CACHE_BYTES: usize = 8 << 20;

fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .unicode(false)
        .dfa_size_limit(DFA_CACHE_BYTES)
        .build()
}

/// The rule set, compiled on first use (a few milliseconds that a sync
/// which reads nothing does not pay), once per process.
pub fn detector() -> &'static Detector {
    static DETECTOR: LazyLock<Detector> = LazyLock::new(|| {
        Detector::build().unwrap_or_else(|err| {
            unreachable!("the secret rules are constants and a test builds them: {err}")
        })
    });
    &DETECTOR
}

impl Detector {
    /// Compiles every rule.
    fn build() -> Result<Detector, RulesError> {
        let rules = RULES
            .iter()
            .map(|rule| Ok((rule, compile(rule.regex)?)))
            .collect::<Result<_, regex::Error>>()?;
        let (keyword_rule, keywords): (Vec<usize>, Vec<&str>) = RULES
            .iter()
            .enumerate()
            .flat_map(|(index, rule)| rule.keywords.iter().map(move |k| (index, *k)))
            .unzip();
        let keywords = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(keywords)?;
        Ok(Detector {
            rules,
            keywords,
            keyword_rule,
            global_allow: GLOBAL_ALLOW
                .iter()
                .map(|pattern| compile(pattern))
                .collect::<Result<_, _>>()?,
            generic_identifier: compile("^[a-zA-Z_.-]+$")?,
            generic_allow_match: compile(GENERIC_ALLOW_MATCH)?,
            generic_stopwords: GENERIC_STOPWORDS
                .lines()
                .filter(|w| !w.is_empty())
                .collect(),
        })
    }

    /// Every secret in `text`, in order of position; where two rules find
    /// overlapping text, the first rule in the list (the most specific)
    /// wins.
    pub fn find(&self, text: &str) -> Vec<Found> {
        let mut wanted = vec![false; self.rules.len()];
        for keyword in self.keywords.find_overlapping_iter(text) {
            wanted[self.keyword_rule[keyword.pattern().as_usize()]] = true;
        }
        let mut found: Vec<Found> = Vec::new();
        for ((rule, regex), wanted) in self.rules.iter().zip(wanted) {
            if !wanted && !rule.keywords.is_empty() {
                continue;
            }
            for captures in regex.captures_iter(text.as_bytes()) {
                let Some(secret) = captures.get(1).or_else(|| captures.get(0)) else {
                    continue;
                };
                if rule
                    .entropy
                    .is_some_and(|least| entropy(secret.as_bytes()) < least)
                    || self.allowed(
                        rule,
                        captures.get(0).map_or(&[][..], |m| m.as_bytes()),
                        secret.as_bytes(),
                    )
                {
                    continue;
                }
                let overlaps = found
                    .iter()
                    .any(|f| f.start < secret.end() && secret.start() < f.end);
                if !overlaps {
                    found.push(Found {
                        rule: rule.id,
                        start: secret.start(),
                        end: secret.end(),
                    });
                }
            }
        }
        found.sort_by_key(|f| f.start);
        found
    }

    /// gitleaks' allowlists: placeholders and, for the generic rule,
    /// identifiers and words.
    fn allowed(&self, rule: &Rule, whole: &[u8], secret: &[u8]) -> bool {
        let lower = secret.to_ascii_lowercase();
        let contains = |word: &str| memchr::memmem::find(&lower, word.as_bytes()).is_some();
        if self.global_allow.iter().any(|allow| allow.is_match(secret))
            || GLOBAL_STOPWORDS.iter().any(|w| contains(w))
        {
            return true;
        }
        rule.id == "generic-api-key"
            && (self.generic_identifier.is_match(secret)
                || self.generic_allow_match.is_match(whole)
                || self.generic_stopwords.iter().any(|w| contains(w)))
    }

    /// The rule ids, in the order they are tried.
    pub fn rule_ids() -> impl Iterator<Item = &'static str> {
        RULES.iter().map(|rule| rule.id)
    }
}

/// What `sync --redact` stores in place of a secret.
pub fn redaction_mark(kind: &str) -> String {
    format!("[REDACTED:{kind}]")
}

/// One secret taken out of a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    pub kind: &'static str,
    /// `Redactor::hash` of the secret: the same value gives the same hash
    /// in one index, so `secrets --find VALUE` can name where it was.
    pub hash: String,
    pub preview: String,
}

/// HMAC-SHA256 of `value` under an index's redaction key, in hex. Keyed,
/// so the hashes of one index say nothing to someone comparing them with a
/// list of known keys' hashes; only the index (which holds the key) can
/// answer "where was this value". Needs no rules: `secrets --find` hashes
/// without compiling them.
pub fn keyed_hash(key: &[u8; 32], value: &str) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = <Hmac<sha2::Sha256> as hmac::digest::KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    mac.update(value.as_bytes());
    hex(&mac.finalize().into_bytes())
}

/// Bytes as lowercase hex (hashes, and the key as `meta` keeps it).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Redacts with `detector()` under the index's redaction key.
pub struct Redactor {
    key: [u8; 32],
}

impl Redactor {
    pub fn new(key: [u8; 32]) -> Redactor {
        Redactor { key }
    }

    /// `keyed_hash` of `value` under this index's key.
    pub fn hash(&self, value: &str) -> String {
        keyed_hash(&self.key, value)
    }

    /// `text` with every secret replaced by `redaction_mark`, and what was
    /// taken out; `None` when it holds none.
    pub fn redact(&self, text: &str) -> Option<(String, Vec<Redacted>)> {
        let found = detector().find(text);
        if found.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut taken = Vec::with_capacity(found.len());
        let mut at = 0;
        for secret in found {
            // Ranges are bytes of ASCII-class matches; one that would cut a
            // character is widened to the characters it touches.
            let start = floor_char(text, secret.start).max(at);
            let end = ceil_char(text, secret.end).max(start);
            let value = &text[start..end];
            out.push_str(&text[at..start]);
            out.push_str(&redaction_mark(secret.rule));
            taken.push(Redacted {
                kind: secret.rule,
                hash: self.hash(value),
                preview: mask(value),
            });
            at = end;
        }
        out.push_str(&text[at..]);
        Some((out, taken))
    }
}

fn floor_char(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_char(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// Shannon entropy in bits per byte, as gitleaks computes it.
fn entropy(text: &[u8]) -> f64 {
    let mut counts = [0usize; 256];
    for &b in text {
        counts[b as usize] += 1;
    }
    let n = text.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}

/// What may be shown of a secret: its first four characters and its
/// length, enough to tell which key to rotate, not enough to use it.
pub fn mask(secret: &str) -> String {
    let head: String = secret.chars().take(4).collect();
    format!("{head}…({} chars)", secret.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` characters cycling through `alphabet`: random-looking enough for
    /// the entropy thresholds, and obviously not a real credential.
    fn filler(alphabet: &str, n: usize) -> String {
        alphabet.chars().cycle().take(n).collect()
    }

    const MIXED: &str = "aZ3kQ9xW2mP7vB4nL8cR5tY1hJ6gD0fS";

    fn rules_found(text: &str) -> Vec<&'static str> {
        let detector = detector();
        detector.find(text).into_iter().map(|f| f.rule).collect()
    }

    #[test]
    fn every_rule_compiles() {
        Detector::build().expect("rules compile");
        assert_eq!(Detector::rule_ids().count(), RULES.len());
    }

    #[test]
    fn each_rule_finds_its_kind_of_secret() {
        let cases: Vec<(&str, String)> = vec![
            (
                "anthropic-api-key",
                format!(
                    "export ANTHROPIC_API_KEY=sk-ant-api03-{}AA\n",
                    filler(MIXED, 93)
                ),
            ),
            (
                "anthropic-admin-api-key",
                format!("key: sk-ant-admin01-{}AA ", filler(MIXED, 93)),
            ),
            (
                "openai-api-key",
                format!(
                    "OPENAI=sk-proj-{}T3BlbkFJ{} ",
                    filler(MIXED, 74),
                    filler(MIXED, 74)
                ),
            ),
            (
                "huggingface-access-token",
                format!("hf_{} ", filler("qwertyuiopasdfghjklzxcvbnm", 34)),
            ),
            ("perplexity-api-key", format!("pplx-{} ", filler(MIXED, 48))),
            ("github-pat", format!("token ghp_{}", filler(MIXED, 36))),
            (
                "github-fine-grained-pat",
                format!("github_pat_{}", filler(MIXED, 82)),
            ),
            ("github-oauth", format!("gho_{}", filler(MIXED, 36))),
            ("github-app-token", format!("ghs_{}", filler(MIXED, 36))),
            ("github-refresh-token", format!("ghr_{}", filler(MIXED, 36))),
            ("gitlab-pat", format!("glpat-{}", filler(MIXED, 20))),
            (
                "slack-bot-token",
                format!("xoxb-1234567890123-1234567890123-{}", filler(MIXED, 24)),
            ),
            (
                "slack-user-token",
                format!(
                    "xoxp-1234567890-1234567890-1234567890-{}",
                    filler(MIXED, 32)
                ),
            ),
            (
                "slack-app-token",
                "xapp-1-A0B1C2D3E4F-1234567890123-abc123def456abc".to_owned(),
            ),
            (
                "slack-webhook-url",
                format!("https://hooks.slack.com/services/{}", filler(MIXED, 44)),
            ),
            (
                "aws-access-token",
                "aws_access_key_id AKIAQ2WXE3RT4YU5IOPA".to_owned(),
            ),
            ("gcp-api-key", format!("key=AIza{} ", filler(MIXED, 35))),
            (
                "azure-ad-client-secret",
                format!(" abc8Q~{} ", filler(MIXED, 32)),
            ),
            (
                "stripe-access-token",
                format!("sk_live_{} ", filler(MIXED, 24)),
            ),
            (
                "jwt",
                format!(
                    "Bearer eyJ{}.eyJ{}.{} ",
                    filler(MIXED, 20),
                    filler(MIXED, 30),
                    filler(MIXED, 20)
                ),
            ),
            (
                "private-key",
                format!(
                    "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
                    filler(MIXED, 120)
                ),
            ),
            (
                "generic-api-key",
                "password = \"Zq7#xW2mP7vB4nL8cR\"".replace('#', "_"),
            ),
        ];
        for (rule, text) in &cases {
            assert_eq!(rules_found(text), vec![*rule], "{rule}: {text}");
        }
        assert_eq!(cases.len(), RULES.len(), "a case per rule");
    }

    #[test]
    fn near_misses_are_not_secrets() {
        for text in [
            // Too short, or the wrong alphabet or prefix.
            "ghp_short".to_owned(),
            format!("ghx_{}", filler(MIXED, 36)),
            format!("sk-ant-api03-{}", filler(MIXED, 40)),
            "AKIA1234".to_owned(),
            "AKIAIOSFODNN7EXAMPLEX1".to_owned(),
            // Low entropy: a placeholder, not a key.
            format!("ghp_{}", "a".repeat(36)),
            "password = \"xxxxxxxxxxxxxxxx\"".to_owned(),
            "api_key = \"your-api-key-here\"".to_owned(),
            // A public key, and prose about keys.
            "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqh\n-----END PUBLIC KEY-----".to_owned(),
            "The token was rotated yesterday; the password policy needs 12 characters.".to_owned(),
            "sk_live_".to_owned(),
            // gitleaks' allowlists: placeholders, identifiers, words.
            "token = ${GITHUB_TOKEN}".to_owned(),
            "api_key: self.settings.api_key_value".to_owned(),
            "secret_name = production_database_password".to_owned(),
            "hf_abcdefghijklmnopqrstuvwxyzabcdefgh ".to_owned(),
            "eyJhbGciOiJIUzI1NiJ9 alone is only a header".to_owned(),
        ] {
            assert_eq!(rules_found(&text), Vec::<&str>::new(), "{text}");
        }
    }

    #[test]
    fn overlapping_rules_report_the_specific_one_once() {
        let text = format!("GITHUB_TOKEN=ghp_{}\n", filler(MIXED, 36));
        assert_eq!(rules_found(&text), vec!["github-pat"]);
    }

    #[test]
    fn redaction_replaces_each_secret_and_hashes_it_under_the_key() {
        let redactor = Redactor::new([7; 32]);
        let token = format!("ghp_{}", filler(MIXED, 36));
        let text = format!("é {token} and AKIAQ2WXE3RT4YU5IOPA é");
        let (redacted, taken) = redactor.redact(&text).expect("found");
        assert_eq!(
            redacted,
            "é [REDACTED:github-pat] and [REDACTED:aws-access-token] é"
        );
        assert_eq!(taken[0].hash, redactor.hash(&token));
        assert_ne!(
            taken[0].hash,
            Redactor::new([8; 32]).hash(&token),
            "another index, another hash"
        );
        assert_eq!(taken[1].preview, "AKIA…(20 chars)");
        assert!(redactor.redact("nothing secret here").is_none());
    }

    #[test]
    fn masks_keep_four_characters_and_the_length() {
        assert_eq!(mask("ghp_abcdefgh"), "ghp_…(12 chars)");
    }
}
