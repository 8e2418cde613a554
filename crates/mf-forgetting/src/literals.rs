//! Deterministic literal preservation.
//!
//! Model summaries keep few of the exact strings an investigation needs
//! (paths, commands, numbers with units, error strings, identifiers). So every
//! compaction extracts them from the compressed messages with fixed regular
//! expressions and appends them verbatim next to the summary: bounded, in a
//! fixed priority order, deduplicated, in the order they first appeared.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// What kind of literal a string is; the order is the keep priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LiteralKind {
    /// An error string: `ConnectionError: timed out`, `ECONNREFUSED`, `HTTP 503`.
    Error,
    /// A number with a unit: `30 s`, `4.2 GB`, `12%`, `$1,200`.
    Quantity,
    /// A date or time: `2026-03-14`, `14:02 UTC`.
    DateTime,
    /// A version: `v2.3.1`, `1.95.0`.
    Version,
    /// A ticket or build reference: `#4817`, `OPS-112`.
    Reference,
    /// A hexadecimal id, a UUID.
    HexId,
    /// An IP address, optionally with a port.
    Ip,
    /// A file path.
    Path,
    /// A URL.
    Url,
    /// A command (backticked, or a `$ ` line).
    Command,
    /// A number of three or more digits, or a decimal.
    Number,
    /// An identifier: snake_case, SCREAMING_CASE, camelCase, PascalCase, host-01.
    Identifier,
}

/// One preserved literal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Literal {
    /// Kind (and priority).
    pub kind: LiteralKind,
    /// The exact text.
    pub text: String,
    /// Index of the first message it was found in.
    pub message_index: usize,
}

/// Bounds of the literal list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiteralLimits {
    /// At most this many literals.
    pub max_count: usize,
    /// At most this many characters in all.
    pub max_chars: usize,
}

impl Default for LiteralLimits {
    fn default() -> Self {
        LiteralLimits { max_count: 48, max_chars: 1200 }
    }
}

/// Compiles one of this module's constant patterns.
///
/// Every pattern is a literal in this file and is compiled by the unit tests,
/// so a failure here is a programming error caught before release.
#[allow(clippy::expect_used)]
fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("constant regex compiles")
}

/// (kind, regex, capture group holding the literal).
static PATTERNS: LazyLock<Vec<(LiteralKind, Regex, usize)>> = LazyLock::new(|| {
    use LiteralKind::*;
    vec![
        (Url, re(r#"\bhttps?://[^\s"'<>()\[\]{}`]+"#), 0),
        (Error, re(r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Fault)\b(?::[^\n]{1,100})?"), 0),
        (Error, re(r"(?m)^\s*((?:error|fatal|ERROR|FATAL|panic)(?:\[[A-Za-z0-9]+\])?: [^\n]{3,100})"), 1),
        (Error, re(r"\bE[A-Z]{4,}\b"), 0),
        (Error, re(r"\b(?:HTTP|[Ss]tatus(?: code)?)[ :=/]*(?:1\.[01] )?[1-5]\d\d\b"), 0),
        (DateTime, re(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"), 0),
        (DateTime, re(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s?(?:UTC|GMT|Z|am|pm|AM|PM)\b)?"), 0),
        (DateTime, re(r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.? \d{1,2}(?:, \d{4})?\b"), 0),
        (Quantity, re(r"[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?[kKmM]\b)?"), 0),
        (Quantity, re(r"\b\d[\d,]*(?:\.\d+)?\s?%"), 0),
        (
            Quantity,
            re(
                r"\b\d[\d,]*(?:\.\d+)?\s?(?:ms|µs|us|ns|s|sec|secs|seconds?|min|mins|minutes?|h|hrs?|hours?|days?|weeks?|KB|MB|GB|TB|KiB|MiB|GiB|TiB|kB|B|bytes?|tok/s|tokens?|req/s|rps|qps|°C|°F|x|USD|EUR|GBP|rows?|requests?|errors?|users?|items?|orders?|retries|attempts?)\b",
            ),
            0,
        ),
        (Version, re(r"\bv?\d+\.\d+\.\d+(?:[-+][A-Za-z0-9.]+)?\b"), 0),
        (Version, re(r"\bv\d+(?:\.\d+)?\b"), 0),
        (Reference, re(r"#\d+\b"), 0),
        (Reference, re(r"\b[A-Z]{2,10}-\d+\b"), 0),
        (HexId, re(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), 0),
        (HexId, re(r"\b0x[0-9a-fA-F]+\b"), 0),
        (HexId, re(r"\b[0-9a-f]{7,40}\b"), 0),
        (Ip, re(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b"), 0),
        (Path, re(r#"(?:^|[\s"'`(=,\[])((?:~|\.{1,2})?/[A-Za-z0-9._\-]+(?:/[A-Za-z0-9._\-]+)+/?|(?:~|\.{1,2})/[A-Za-z0-9._\-]+)"#), 1),
        (Path, re(r"\b[A-Za-z0-9_\-]+(?:/[A-Za-z0-9._\-]+)+\.[A-Za-z][A-Za-z0-9]{0,5}\b"), 0),
        (Command, re(r"`([^`\n]{2,120})`"), 1),
        (Command, re(r"(?m)^\s*\$ ([^\n]{2,160})$"), 1),
        (Number, re(r"\b\d+\.\d+\b"), 0),
        (Number, re(r"\b\d{3,}(?:,\d{3})*\b"), 0),
        (Identifier, re(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b"), 0),
        (Identifier, re(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"), 0),
        (Identifier, re(r"\b[a-z]+(?:[A-Z][a-z0-9]+)+\b"), 0),
        (Identifier, re(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b"), 0),
        (Identifier, re(r"\b[a-z][a-z0-9]*(?:-[a-z0-9]+)*-\d+[a-z0-9]*\b"), 0),
    ]
});

#[derive(Debug)]
struct Candidate {
    kind: LiteralKind,
    start: usize,
    end: usize,
}

fn trim_literal(kind: LiteralKind, s: &str) -> &str {
    let s = s.trim();
    match kind {
        LiteralKind::Url | LiteralKind::Error | LiteralKind::Path => s.trim_end_matches(['.', ',', ';', ':', '"', '\'', ')']),
        _ => s,
    }
}

/// Every literal candidate of one text, longest-first where spans overlap,
/// in text order.
pub fn extract_from_text(text: &str) -> Vec<(LiteralKind, String)> {
    let mut cands: Vec<Candidate> = Vec::new();
    for (kind, regex, group) in PATTERNS.iter() {
        for caps in regex.captures_iter(text) {
            if let Some(m) = caps.get(*group) {
                if *kind == LiteralKind::HexId && m.as_str().len() < 10 && !m.as_str().starts_with("0x") {
                    // A short all-hex word needs a digit and a letter to be an id.
                    let s = m.as_str();
                    if !(s.bytes().any(|b| b.is_ascii_digit()) && s.bytes().any(|b| b.is_ascii_alphabetic())) {
                        continue;
                    }
                }
                if *kind == LiteralKind::HexId && !m.as_str().starts_with("0x") && !m.as_str().bytes().any(|b| b.is_ascii_digit()) {
                    continue;
                }
                cands.push(Candidate { kind: *kind, start: m.start(), end: m.end() });
            }
        }
    }
    // Longest span first; at equal span the higher-priority kind. Then drop
    // any candidate that overlaps an accepted one.
    cands.sort_by(|a, b| (b.end - b.start).cmp(&(a.end - a.start)).then(a.kind.cmp(&b.kind)).then(a.start.cmp(&b.start)));
    let mut accepted: Vec<Candidate> = Vec::new();
    for c in cands {
        if accepted.iter().all(|a| c.end <= a.start || c.start >= a.end) {
            accepted.push(c);
        }
    }
    accepted.sort_by_key(|c| c.start);
    accepted
        .into_iter()
        .filter_map(|c| {
            let t = trim_literal(c.kind, &text[c.start..c.end]);
            (t.chars().count() >= 2).then(|| (c.kind, t.to_owned()))
        })
        .collect()
}

/// Extracts the literals of `(message_index, text)` pairs, deduplicated and
/// bounded by `limits`, returned in order of first appearance.
///
/// When there are more than the limits allow, the higher-priority kinds
/// ([`LiteralKind`]'s order) are kept first, then earlier ones.
pub fn extract<'a>(texts: impl IntoIterator<Item = (usize, &'a str)>, limits: LiteralLimits) -> Vec<Literal> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut all: Vec<Literal> = Vec::new();
    for (index, text) in texts {
        for (kind, t) in extract_from_text(text) {
            if seen.insert(t.clone()) {
                all.push(Literal { kind, text: t, message_index: index });
            }
        }
    }
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by_key(|&i| (all[i].kind, i));
    let mut keep = vec![false; all.len()];
    let (mut n, mut chars) = (0usize, 0usize);
    for i in order {
        let len = all[i].text.chars().count() + 3;
        if n >= limits.max_count {
            break;
        }
        if chars + len > limits.max_chars {
            continue;
        }
        keep[i] = true;
        n += 1;
        chars += len;
    }
    all.into_iter().zip(keep).filter_map(|(l, k)| k.then_some(l)).collect()
}

/// The line appended after a summary.
pub fn render(literals: &[Literal]) -> String {
    let items: Vec<&str> = literals.iter().map(|l| l.text.as_str()).collect();
    format!("Exact values from the compacted messages: {}", items.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(LiteralKind, String)> {
        extract_from_text(text)
    }

    fn has(text: &str, kind: LiteralKind, lit: &str) {
        let got = kinds(text);
        assert!(got.iter().any(|(k, t)| *k == kind && t == lit), "{lit:?} as {kind:?} not in {got:?}");
    }

    #[test]
    fn all_patterns_compile() {
        assert!(PATTERNS.len() > 20);
    }

    #[test]
    fn finds_each_kind() {
        has("see https://api.local/deploys?limit=5.", LiteralKind::Url, "https://api.local/deploys?limit=5");
        has("read /var/log/app/error.log now", LiteralKind::Path, "/var/log/app/error.log");
        has("edit src/main.rs please", LiteralKind::Path, "src/main.rs");
        has("run `cargo test -p mf` again", LiteralKind::Command, "cargo test -p mf");
        has("$ systemctl restart nginx", LiteralKind::Command, "systemctl restart nginx");
        has("ConnectionError: timed out after 30 s", LiteralKind::Error, "ConnectionError: timed out after 30 s");
        has("got ECONNREFUSED", LiteralKind::Error, "ECONNREFUSED");
        has("HTTP 503 from upstream", LiteralKind::Error, "HTTP 503");
        has("p99 was 840 ms", LiteralKind::Quantity, "840 ms");
        has("disk 93% full", LiteralKind::Quantity, "93%");
        has("cost $1,200 total", LiteralKind::Quantity, "$1,200");
        has("at 2026-03-14T14:02:00Z it broke", LiteralKind::DateTime, "2026-03-14T14:02:00Z");
        has("at 14:02 UTC it broke", LiteralKind::DateTime, "14:02 UTC");
        has("upgraded to v2.3.1", LiteralKind::Version, "v2.3.1");
        has("build #4817 failed", LiteralKind::Reference, "#4817");
        has("ticket OPS-112", LiteralKind::Reference, "OPS-112");
        has("commit 9f3a2c1d", LiteralKind::HexId, "9f3a2c1d");
        has("host 10.0.3.7:5432", LiteralKind::Ip, "10.0.3.7:5432");
        has("column max_pool_size", LiteralKind::Identifier, "max_pool_size");
        has("class PaymentGateway", LiteralKind::Identifier, "PaymentGateway");
        has("node web-03 down", LiteralKind::Identifier, "web-03");
        has("order 48213 shipped", LiteralKind::Number, "48213");
    }

    #[test]
    fn overlapping_spans_keep_the_longest() {
        let got = kinds("GET https://h.local/v1/items/2026-01-02");
        assert_eq!(got, vec![(LiteralKind::Url, "https://h.local/v1/items/2026-01-02".to_owned())]);
        // Plain words are not literals.
        assert!(kinds("the quick brown fox").is_empty());
        assert!(kinds("deadbeef cafe").is_empty(), "hex-looking words need a digit");
    }

    #[test]
    fn extract_dedups_bounds_and_keeps_priority() {
        let texts = [(3, "ConnectionError: x; 30 s; 30 s; order 48213"), (4, "48213 again, 71234")];
        let all = extract(texts, LiteralLimits::default());
        let t: Vec<&str> = all.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(t, vec!["ConnectionError: x; 30 s; 30 s; order 48213", "48213", "71234"]);
        let few = extract([(0, "id 11111, 22222, 9 ms, ValueError")], LiteralLimits { max_count: 2, max_chars: 1000 });
        let t: Vec<&str> = few.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(t, vec!["9 ms", "ValueError"], "errors and quantities outrank numbers, order kept");
        let tiny = extract([(0, "11111 22222 33333")], LiteralLimits { max_count: 10, max_chars: 16 });
        assert_eq!(tiny.len(), 2);
    }
}
