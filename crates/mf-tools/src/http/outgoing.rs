//! What a request would send out, read before it is sent: for the approval
//! prompt and the policy on data leaving for a host (which of it is data is
//! `supplied`'s to say).

use serde::{Deserialize, Serialize};
use url::Url;

use super::guard::host_key;
use super::supplied::{Channel, Supplied, path_and_query};
use super::{HttpArgs, HttpMethod, request_body};

/// What a request would send out, for the approval prompt and the policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outgoing {
    /// `GET` or `POST`.
    pub method: String,
    /// The host the request goes to, as session approvals name it
    /// ([`host_key_of`]): `api.example.com`, or `127.0.0.1:8080` with a port
    /// that is not the scheme's default. `None` when the URL has no host.
    pub host: Option<String>,
    /// Bytes of data the request carries, on every channel that carries
    /// some (the body as sent, the path and query, header values, the host
    /// name). 0 when it carries none.
    pub data_bytes: usize,
    /// The data as text, what leaves first: the body, else the path and
    /// query, else the headers (`name: value`), else the host; empty when none.
    pub data: String,
    /// The channels that carry data: `host`, `path`, `query`, `header NAME`, `body`.
    #[serde(default)]
    pub channels: Vec<String>,
}

impl Outgoing {
    /// Does the request carry data (on any channel)?
    pub fn carries_data(&self) -> bool {
        !self.channels.is_empty()
    }
}

/// What `args` would send, without sending it, when nothing was supplied:
/// everything but the host is data (its path other than `/`, its query,
/// its headers, its body). A URL that does not parse gives `host: None`
/// (the call is refused when it runs).
pub fn outgoing(args: &HttpArgs) -> Outgoing {
    outgoing_given(args, &Supplied::default(), true)
}

/// What `args` would send, data being what `supplied` does not hold
/// (`host_known`: the host is approved for the session or named exactly in
/// the allow-list, so its name is not data).
pub fn outgoing_given(args: &HttpArgs, supplied: &Supplied, host_known: bool) -> Outgoing {
    let method = match args.method {
        HttpMethod::Get => "GET",
        HttpMethod::Post => "POST",
    };
    let url = Url::parse(&args.url).ok();
    let host = url.as_ref().and_then(url_host_key);
    let body = request_body(args).ok().flatten();
    let channels = match &url {
        Some(u) => supplied.unsupplied(u, host_known, &args.headers, body.as_ref().map(|(b, _)| b.as_slice())),
        // Unparsable: refused when it runs; shown as what it is.
        None => vec![Channel::Path],
    };
    let mut parts: Vec<String> = Vec::new();
    if channels.contains(&Channel::Body)
        && let Some((b, _)) = &body
    {
        parts.push(String::from_utf8_lossy(b).into_owned());
    }
    if channels.iter().any(|c| matches!(c, Channel::Path | Channel::Query)) {
        parts.push(url.as_ref().map_or_else(|| args.url.clone(), path_and_query));
    }
    for c in &channels {
        if let Channel::Header(name) = c
            && let Some(v) = args.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v)
        {
            parts.push(format!("{name}: {v}"));
        }
    }
    if channels.contains(&Channel::Host) {
        parts.push(host.clone().unwrap_or_default());
    }
    let data = parts.join(" · ");
    let data_bytes = parts.iter().map(String::len).sum();
    Outgoing { method: method.into(), host, data_bytes, data, channels: channels.iter().map(ToString::to_string).collect() }
}

pub(super) fn url_host_key(url: &Url) -> Option<String> {
    let key = host_key(&url.host()?);
    let key = if key.contains(':') { format!("[{key}]") } else { key };
    Some(match url.port() {
        Some(p) => format!("{key}:{p}"),
        None => key,
    })
}

/// The session-approval name of a host as a user or a UI gives it
/// (`api.example.com`, `API.example.com.`, `127.0.0.1:8080`,
/// `https://api.example.com/x`): the same form [`Outgoing::host`] has.
/// `None` when it is not a host.
pub fn host_key_of(entry: &str) -> Option<String> {
    let e = entry.trim();
    if e.is_empty() {
        return None;
    }
    let url = if e.contains("://") { Url::parse(e).ok()? } else { Url::parse(&format!("http://{e}/")).ok()? };
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    url_host_key(&url)
}
