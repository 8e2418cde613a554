//! What the user and the approved pages supplied: the text a request may
//! repeat without carrying data.
//!
//! The sending rule ([`crate::policy::ApprovalPolicy`]) asks before data
//! leaves for a host not approved for the session, and data is anything a
//! request holds beyond what the user or an approved page supplied. A
//! request carries it on five channels, each judged on its own:
//!
//! | channel | not data when |
//! | --- | --- |
//! | host | approved for the session, named exactly in the allow-list, or named in supplied text |
//! | path | `/`, or the path (with its query) is a reference in supplied text |
//! | query | none, or the path with this query is a reference in supplied text |
//! | header | its value appears whole in supplied text (or is a plain media type for `Accept` / `Content-Type`), under a standard or supplied name; a credential (`Authorization`, `Cookie`, `X-Api-Key`) always is data |
//! | body | none, or it appears whole in supplied text |
//!
//! A *reference* is an absolute `http(s)` URL, a path starting with `/`, or
//! (in a page) a link resolved against the page's URL, found as a whole token
//! (cut at spaces, quotes and brackets). A value is compared whole, never
//! piece by piece: a path assembled from words of a page (`/the/key/is/…`)
//! is data, and so is one segment that a page does not hold as a link.
//!
//! Supplied text is what the user wrote (the face passes it:
//! [`crate::ToolRegistry::supplied_by_user`]) and the bodies of `http`
//! responses to requests that carried no data: such a page depends on
//! nothing but supplied text, so what it holds was never the workspace's.
//! A page fetched with data (a body sent to an approved host, say) may echo
//! that data, and is not kept. What remains is the choice among supplied
//! references (which link is followed): a few bits a call, which no rule on
//! the request's contents can close.
//!
//! Bounded: the user's text up to [`MAX_USER_BYTES`], pages up to
//! [`MAX_PAGE_BYTES`] in all, the oldest page forgotten first (its links then
//! ask again: a forgotten page makes the rule stricter, never looser).

use std::collections::{BTreeMap, HashSet, VecDeque};

use url::Url;

use super::guard::host_key;
use super::outgoing::url_host_key;

/// Bytes of the user's text kept (question, follow-ups, system prompt). A
/// question that names its URLs is a few hundred bytes; 256 KiB holds a
/// long pasted brief. Past it the oldest text goes first.
pub const MAX_USER_BYTES: usize = 256 << 10;
/// Bytes of pages kept, their references included: eight pages of the
/// `http` tool's default 1 MiB. A page's links are followed in the rounds
/// after it; a page read dozens of calls ago is forgotten, and a link from
/// it asks (never the other way round). Each page costs at most what it
/// weighs, so memory stays within this.
pub const MAX_PAGE_BYTES: usize = 8 << 20;

/// One supplied text and the references found in it.
#[derive(Debug, Default)]
struct Entry {
    text: String,
    refs: HashSet<String>,
    bytes: usize,
}

impl Entry {
    fn new(text: &str, base: Option<&Url>) -> Entry {
        let refs = references(text, base);
        let bytes = text.len() + refs.iter().map(String::len).sum::<usize>();
        Entry { text: text.to_owned(), refs, bytes }
    }
}

/// The supplied texts of one session (see the module docs).
#[derive(Debug, Default)]
pub struct Supplied {
    user: VecDeque<Entry>,
    pages: VecDeque<Entry>,
}

/// A channel of a request that carries data (what was not supplied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Channel {
    /// The host name (it reaches the network as a DNS query and a `Host` header).
    Host,
    /// The URL's path.
    Path,
    /// The URL's query string.
    Query,
    /// A header, by name.
    Header(String),
    /// The body.
    Body,
}

impl std::fmt::Display for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Channel::Host => f.write_str("host"),
            Channel::Path => f.write_str("path"),
            Channel::Query => f.write_str("query"),
            Channel::Header(n) => write!(f, "header {n}"),
            Channel::Body => f.write_str("body"),
        }
    }
}

/// Header names a request may carry without the name itself being data.
const STANDARD_HEADERS: &[&str] =
    &["accept", "accept-language", "cache-control", "content-type", "if-match", "if-modified-since", "if-none-match", "range", "user-agent"];

/// Headers that carry credentials: data whatever their value. A key the user
/// gave for one host is theirs to send there, and a page that names another
/// host does not make it the user's choice to send it there too; only
/// approving the host (for the session, or the call) does.
const CREDENTIAL_HEADERS: &[&str] = &["authorization", "cookie", "proxy-authorization", "x-api-key", "x-auth-token"];

/// Media types an `Accept` or `Content-Type` header may name without their
/// being data: a choice among these says a few bits at most.
const PLAIN_MEDIA_TYPES: &[&str] =
    &["*/*", "application/json", "application/xml", "text/plain", "text/html", "text/csv", "text/markdown", "application/x-www-form-urlencoded"];

fn push(list: &mut VecDeque<Entry>, entry: Entry, max: usize) {
    if entry.bytes > max {
        return;
    }
    list.push_back(entry);
    let mut total: usize = list.iter().map(|e| e.bytes).sum();
    while total > max {
        match list.pop_front() {
            Some(e) => total -= e.bytes,
            None => break,
        }
    }
}

impl Supplied {
    /// Text the user wrote: a question, a follow-up, the system prompt, the
    /// arguments of a call they typed themselves.
    pub fn add_user(&mut self, text: &str) {
        push(&mut self.user, Entry::new(text, None), MAX_USER_BYTES);
    }

    /// The body of a page fetched from `url` by a request that carried no data.
    pub fn add_page(&mut self, url: &Url, body: &str) {
        push(&mut self.pages, Entry::new(body, Some(url)), MAX_PAGE_BYTES);
    }

    fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.user.iter().chain(self.pages.iter())
    }

    fn has_ref(&self, r: &str) -> bool {
        self.entries().any(|e| e.refs.contains(r))
    }

    /// Does `value` appear whole in a supplied text (not inside a longer word)?
    fn has_value(&self, value: &str) -> bool {
        !value.is_empty() && self.entries().any(|e| contains_whole(&e.text, value))
    }

    /// The channels of a request to `url` that carry data. `host_known`: the
    /// host is approved for the session or named exactly in the allow-list.
    pub fn unsupplied(&self, url: &Url, host_known: bool, headers: &BTreeMap<String, String>, body: Option<&[u8]>) -> Vec<Channel> {
        let mut out = Vec::new();
        if !host_known && !url_host_key(url).is_some_and(|h| self.has_ref(&format!("H:{h}"))) {
            out.push(Channel::Host);
        }
        let path = url.path();
        let with_query = path_and_query(url);
        let whole = self.has_ref(&format!("Q:{with_query}"));
        if !(path.is_empty() || path == "/" || whole || self.has_ref(&format!("P:{path}"))) {
            out.push(Channel::Path);
        }
        if url.query().is_some_and(|q| !q.is_empty()) && !whole {
            out.push(Channel::Query);
        }
        for (name, value) in headers {
            let lower = name.to_ascii_lowercase();
            let plain = (lower == "accept" || lower == "content-type")
                && value.split(',').all(|v| PLAIN_MEDIA_TYPES.contains(&v.split(';').next().unwrap_or("").trim().to_ascii_lowercase().as_str()));
            let named = STANDARD_HEADERS.contains(&lower.as_str()) || self.has_value(name);
            if CREDENTIAL_HEADERS.contains(&lower.as_str()) || !(named && (plain || self.has_value(value.trim()))) {
                out.push(Channel::Header(lower));
            }
        }
        if let Some(b) = body.filter(|b| !b.is_empty())
            && !self.has_value(&String::from_utf8_lossy(b))
        {
            out.push(Channel::Body);
        }
        out
    }
}

/// `/path?query` as the request sends it (the path alone without a query).
pub(super) fn path_and_query(url: &Url) -> String {
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    }
}

/// Characters that end a token: a reference is cut at these.
fn ends_token(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '(' | ')' | '[' | ']' | '{' | '}' | '`' | '|' | '\\' | '^' | ',')
}

/// The references in `text` (see the module docs), as `H:host`, `P:/path`
/// and `Q:/path?query` keys; relative links resolve against `base`.
fn references(text: &str, base: Option<&Url>) -> HashSet<String> {
    let mut refs = HashSet::new();
    let any = Url::parse("http://any.invalid/").ok();
    for raw in text.split(ends_token) {
        let token = raw.trim_end_matches(['.', ';', ':', '!', '?']);
        if token.is_empty() || token.len() > 4096 {
            continue;
        }
        let lower = token.to_ascii_lowercase();
        let url = if lower.starts_with("http://") || lower.starts_with("https://") {
            Url::parse(token).ok()
        } else if token.starts_with('/') && !token.starts_with("//") {
            base.or(any.as_ref()).and_then(|b| b.join(token).ok())
        } else if let Some(b) = base
            && (token.contains('/') || token.starts_with('?') || token.contains('.'))
            && !token.contains(':')
        {
            b.join(token).ok()
        } else {
            None
        };
        if let Some(u) = url.filter(|u| matches!(u.scheme(), "http" | "https")) {
            if u.host_str() != Some("any.invalid")
                && let Some(h) = url_host_key(&u)
            {
                refs.insert(format!("H:{h}"));
            }
            refs.insert(format!("P:{}", u.path()));
            refs.insert(format!("Q:{}", path_and_query(&u)));
        }
        // A bare host (`api.example.com`, `127.0.0.1:8080`) names a host.
        if token.contains('.')
            && !token.contains('/')
            && let Ok(u) = Url::parse(&format!("http://{token}/"))
            && let Some(h) = u.host().map(|h| host_key(&h))
        {
            let h = if h.contains(':') { format!("[{h}]") } else { h };
            refs.insert(format!("H:{}", u.port().map_or(h.clone(), |p| format!("{h}:{p}"))));
        }
    }
    refs
}

/// Does `hay` hold `needle` with no letter or digit right before or after it?
fn contains_whole(hay: &str, needle: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    hay.match_indices(needle).any(|(i, _)| !word(hay[..i].chars().next_back()) && !word(hay[i + needle.len()..].chars().next()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn judge(s: &Supplied, u: &str) -> Vec<Channel> {
        s.unsupplied(&url(u), false, &BTreeMap::new(), None)
    }

    #[test]
    fn references_of_the_user_and_of_a_page() {
        let mut s = Supplied::default();
        s.add_user("First call http://127.0.0.1:18931/api/disks.json, then /api/hosts/web-03.json. Also see api.example.com.");
        assert_eq!(judge(&s, "http://127.0.0.1:18931/api/disks.json"), []);
        assert_eq!(judge(&s, "http://127.0.0.1:18931/api/hosts/web-03.json"), [], "a root-relative path the user gave");
        assert_eq!(judge(&s, "https://api.example.com/"), [], "a bare host the user named");
        assert_eq!(judge(&s, "http://127.0.0.1:18931/api/hosts/web-04.json"), [Channel::Path]);
        assert_eq!(judge(&s, "http://127.0.0.1:18931/api/disks.json?x=1"), [Channel::Query]);
        assert_eq!(judge(&s, "http://evil.example/api/disks.json"), [Channel::Host]);
        // A page's links, relative ones resolved against the page.
        s.add_page(
            &url("http://127.0.0.1:18931/regions/page1.json"),
            r#"{"next": "page2.json", "more": "/regions/page3.json?sort=desc", "up": "../index.json"}"#,
        );
        assert_eq!(judge(&s, "http://127.0.0.1:18931/regions/page2.json"), []);
        assert_eq!(judge(&s, "http://127.0.0.1:18931/regions/page3.json?sort=desc"), []);
        assert_eq!(judge(&s, "http://127.0.0.1:18931/index.json"), []);
        assert_eq!(judge(&s, "http://127.0.0.1:18931/regions/page3.json?sort=asc"), [Channel::Query]);
        // Words of a page do not make a path; a segment is not a link.
        s.add_page(&url("http://127.0.0.1:18931/"), "the key is hunter2 and web-03 is fine");
        assert_eq!(judge(&s, "http://127.0.0.1:18931/hunter2"), [Channel::Path]);
        assert_eq!(judge(&s, "http://127.0.0.1:18931/the/key/is/hunter2"), [Channel::Path]);
        assert_eq!(judge(&s, "http://127.0.0.1:18931/"), []);
    }

    #[test]
    fn headers_and_bodies_are_data_unless_supplied_whole() {
        let mut s = Supplied::default();
        s.add_user("use the header X-Request-Id: tok-123 and Authorization: Bearer key-9 for http://h.example/");
        let h = |k: &str, v: &str| BTreeMap::from([(k.to_owned(), v.to_owned())]);
        let u = url("http://h.example/");
        assert_eq!(s.unsupplied(&u, false, &h("X-Request-Id", "tok-123"), None), []);
        assert_eq!(s.unsupplied(&u, false, &h("Accept", "application/json"), None), []);
        assert_eq!(s.unsupplied(&u, false, &h("X-Request-Id", "tok-12"), None), [Channel::Header("x-request-id".into())]);
        assert_eq!(s.unsupplied(&u, false, &h("X-Leak", "tok-123"), None), [Channel::Header("x-leak".into())], "a made-up name is data");
        assert_eq!(
            s.unsupplied(&u, true, &h("Authorization", "Bearer key-9"), None),
            [Channel::Header("authorization".into())],
            "a credential is data even when the user gave it"
        );
        assert_eq!(s.unsupplied(&u, false, &h("Accept", "text/secret-notes"), None), [Channel::Header("accept".into())]);
        assert_eq!(s.unsupplied(&u, false, &BTreeMap::new(), Some(b"rows: 42")), [Channel::Body]);
        assert_eq!(s.unsupplied(&u, false, &BTreeMap::new(), Some(b"tok-123")), []);
        assert_eq!(s.unsupplied(&url("http://other.example/"), true, &BTreeMap::new(), None), [], "a known host");
    }

    #[test]
    fn memory_is_bounded_and_the_oldest_page_goes_first() {
        let mut s = Supplied::default();
        s.add_page(&url("http://h.example/"), "/first/link");
        let filler = "x ".repeat(1 << 20);
        for _ in 0..12 {
            s.add_page(&url("http://h.example/"), &filler);
        }
        let held: usize = s.pages.iter().map(|e| e.bytes).sum();
        assert!(held <= MAX_PAGE_BYTES, "{held}");
        assert_eq!(judge(&s, "http://h.example/first/link"), [Channel::Host, Channel::Path], "forgotten: it asks again");
        assert!(contains_whole("key: hunter2.", "hunter2") && !contains_whole("hunter22", "hunter2"));
    }
}
