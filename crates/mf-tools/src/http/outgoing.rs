//! What a request would send out, read before it is sent: for the approval
//! prompt and the policy on data leaving for a host.

use serde::{Deserialize, Serialize};
use url::Url;

use super::guard::host_key;
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
    /// Bytes of data the request carries: the body as sent, or else the
    /// query string (without the `?`). 0 when it carries none.
    pub data_bytes: usize,
    /// The body, or else the query string (with its `?`), as text; empty when none.
    pub data: String,
}

impl Outgoing {
    /// Does the request carry data (a body, or a query string)?
    pub fn carries_data(&self) -> bool {
        self.data_bytes > 0
    }
}

/// What `args` would send, without sending it. A URL that does not parse
/// gives `host: None` (the call is refused when it runs).
pub fn outgoing(args: &HttpArgs) -> Outgoing {
    let method = match args.method {
        HttpMethod::Get => "GET",
        HttpMethod::Post => "POST",
    };
    let url = Url::parse(&args.url).ok();
    let host = url.as_ref().and_then(url_host_key);
    let body = request_body(args).ok().flatten();
    let (data_bytes, data) = match (body, url.as_ref().and_then(Url::query)) {
        (Some((b, _)), _) => (b.len(), String::from_utf8_lossy(&b).into_owned()),
        (None, Some(q)) if !q.is_empty() => (q.len(), format!("?{q}")),
        (None, _) => (0, String::new()),
    };
    Outgoing { method: method.into(), host, data_bytes, data }
}

fn url_host_key(url: &Url) -> Option<String> {
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
