//! `http`: GET/POST to APIs, guarded against SSRF.
//!
//! Three checks, because each alone has a hole:
//! 1. **Before sending**, the URL is parsed by the `url` crate (which turns
//!    `2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1` into `127.0.0.1`) and an IP
//!    literal is checked against the blocked ranges. A resolver-only guard
//!    never sees IP literals (reqwest connects to them directly).
//! 2. **Names** are resolved through [`guard::GuardedResolver`], which refuses the
//!    whole answer if any address is blocked (`localhost`, a name in
//!    `/etc/hosts` pointing at 127.0.0.1, DNS rebinding to 10.x).
//! 3. **Redirects** are not followed by reqwest; each hop is re-checked by the
//!    same code before it is requested, at most [`HttpLimits::max_redirects`].
//!
//! Proxies from the environment are ignored (a proxy would resolve the name
//! for us, bypassing check 2). The body is read chunk by chunk after
//! decompression and cut at [`HttpLimits::max_bytes`]; the whole exchange,
//! redirects included, runs under one [`HttpLimits::timeout`].
//!
//! Private, link-local (cloud metadata) and the other blocked ranges are
//! never reachable, whatever the allow-list says: an entry only narrows which
//! public hosts may be reached, so `*.example.com` does not open a subdomain
//! that resolves to 10.x or 127.0.0.1. Loopback is the one exception, and
//! only when it is allowed on its own: `allow_loopback: true` opens loopback
//! (127/8, `::1`) and names resolving to it, and an exact entry that *is*
//! loopback (`127.0.0.1:8080`, `[::1]:9`, `localhost:8080`) opens that
//! address (never a wildcard entry, never another name).
//!
//! Where each part lives: `ranges` (the blocked ranges), `guard` (the
//! allow-list and the checks of URLs and resolved names), `outgoing` (what a
//! request would send, read before it is sent), `supplied` (what the user
//! and approved pages supplied, so which of a request's host, path, query,
//! headers and body is data: see [`Supplied`]).

mod guard;
mod outgoing;
mod ranges;
mod supplied;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use url::Url;

use crate::ToolError;
pub use guard::Lookup;
use guard::{Guard, GuardedResolver};
pub use outgoing::{Outgoing, host_key_of, outgoing, outgoing_given};
pub use ranges::blocked_range;
pub use supplied::{Channel, MAX_PAGE_BYTES, MAX_USER_BYTES, Supplied};

/// Limits of one HTTP call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HttpLimits {
    /// Most bytes of response body kept, counted after decompression. Default 1 MiB.
    pub max_bytes: usize,
    /// Total time for the call, redirects and body included. Default 30 s.
    #[serde(with = "duration_millis")]
    pub timeout: Duration,
    /// Time to establish one connection. Default 10 s.
    #[serde(with = "duration_millis")]
    pub connect_timeout: Duration,
    /// Most redirects followed (each re-checked). Default 5.
    pub max_redirects: usize,
    /// Largest request body accepted from the model. Default 256 KiB.
    pub max_request_bytes: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_bytes: 1 << 20,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_redirects: 5,
            max_request_bytes: 256 << 10,
        }
    }
}

/// Which hosts the `http` tool may reach (from the user's settings).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HttpPolicy {
    /// `None`: any public host. `Some(list)`: only these. Entries are `host`,
    /// `host:port`, `*.domain` (subdomains), `1.2.3.4:80` or `[::1]:80`.
    /// Listing a host does not open private or link-local addresses; an exact
    /// loopback entry (`127.0.0.1:8080`, `localhost:8080`) opens loopback for
    /// that entry only.
    pub allowed_hosts: Option<Vec<String>>,
    /// Let loopback addresses (127.0.0.0/8, ::1) and names resolving to them
    /// through. Off by default.
    pub allow_loopback: bool,
    /// Limits.
    pub limits: HttpLimits,
}

/// HTTP method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum HttpMethod {
    /// GET (read-only; approved automatically by default).
    #[default]
    #[serde(rename = "GET", alias = "get", alias = "Get")]
    Get,
    /// POST (has side effects; asks by default).
    #[serde(rename = "POST", alias = "post", alias = "Post")]
    Post,
}

/// Arguments of `http`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpArgs {
    /// GET (default) or POST.
    #[serde(default)]
    pub method: HttpMethod,
    /// Absolute http(s) URL.
    pub url: String,
    /// Extra request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Request body: a string is sent as-is, any other JSON value as JSON.
    #[serde(default)]
    pub body: Option<serde_json::Value>,
}

/// Result of `http`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpResponse {
    /// Status code of the final response.
    pub status: u16,
    /// URL of the final response.
    pub url: String,
    /// Each redirect target followed, in order.
    pub redirects: Vec<String>,
    /// `content-type` of the final response.
    pub content_type: Option<String>,
    /// Body (decompressed, lossy UTF-8), at most `max_bytes`.
    pub body: String,
    /// Bytes of body kept.
    pub body_bytes: usize,
    /// True when the body was cut at `max_bytes`.
    pub truncated: bool,
}

/// Headers the tool manages itself or that could smuggle requests.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "expect",
];

/// Run one `http` call under `policy`.
///
/// # Errors
/// A refusal ([`ToolError::is_refusal`]) when the URL, a redirect hop, a
/// resolved address or a header is not allowed; [`ToolError::Timeout`] or
/// [`ToolError::Transport`] when the exchange fails.
pub async fn run(args: &HttpArgs, policy: &HttpPolicy) -> Result<HttpResponse, ToolError> {
    run_with_lookup(args, policy, Lookup::System).await
}

/// [`run`] with names looked up through `lookup`.
///
/// # Errors
/// As [`run`].
pub async fn run_with_lookup(args: &HttpArgs, policy: &HttpPolicy, lookup: Lookup) -> Result<HttpResponse, ToolError> {
    let limits = &policy.limits;
    let guard = Arc::new(Guard::new(policy)?);
    let url = Url::parse(&args.url).map_err(|e| ToolError::InvalidUrl(format!("`{}`: {e}", args.url)))?;
    guard.check_url(&url)?;

    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in &args.headers {
        if FORBIDDEN_HEADERS.contains(&k.to_ascii_lowercase().as_str()) {
            return Err(ToolError::HeaderNotAllowed(k.clone()));
        }
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|e| invalid(format!("header `{k}`: {e}")))?;
        let value = reqwest::header::HeaderValue::from_str(v).map_err(|e| invalid(format!("header `{k}`: {e}")))?;
        headers.insert(name, value);
    }
    let body = request_body(args)?;
    if let Some((b, _)) = &body
        && b.len() > limits.max_request_bytes
    {
        return Err(ToolError::ArgumentsTooLarge { len: b.len(), max: limits.max_request_bytes });
    }

    let refused = Arc::new(Mutex::new(None));
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver { guard: guard.clone(), refused: refused.clone(), lookup }))
        .connect_timeout(limits.connect_timeout)
        .timeout(limits.timeout)
        .user_agent(concat!("measured-forgetting/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ToolError::Transport(e.to_string()))?;

    let exchange = exchange(&client, &guard, url, args.method, headers, body, limits);
    let result = match tokio::time::timeout(limits.timeout, exchange).await {
        Ok(r) => r,
        Err(_) => Err(ToolError::Timeout(limits.timeout.as_millis() as u64)),
    };
    // A resolver refusal surfaces from reqwest as a connect error: report the typed one.
    match (result, refused.lock().ok().and_then(|mut s| s.take())) {
        (Err(_), Some(refusal)) => Err(refusal),
        (r, _) => r,
    }
}

/// The body as it is sent, with its default content type: a string as-is,
/// any other JSON value as JSON.
fn request_body(args: &HttpArgs) -> Result<Option<(Vec<u8>, &'static str)>, ToolError> {
    Ok(match &args.body {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => Some((s.clone().into_bytes(), "text/plain; charset=utf-8")),
        Some(v) => Some((serde_json::to_vec(v).map_err(|e| invalid(e.to_string()))?, "application/json")),
    })
}

fn invalid(message: String) -> ToolError {
    ToolError::InvalidArguments { tool: "http".into(), message }
}

async fn exchange(
    client: &reqwest::Client,
    guard: &Guard,
    mut url: Url,
    method: HttpMethod,
    mut headers: reqwest::header::HeaderMap,
    mut body: Option<(Vec<u8>, &str)>,
    limits: &HttpLimits,
) -> Result<HttpResponse, ToolError> {
    let mut method = match method {
        HttpMethod::Get => reqwest::Method::GET,
        HttpMethod::Post => reqwest::Method::POST,
    };
    let mut redirects = Vec::new();
    loop {
        guard.check_url(&url)?;
        let mut req = client.request(method.clone(), url.clone()).headers(headers.clone());
        if let Some((b, ct)) = &body {
            if !headers.contains_key(reqwest::header::CONTENT_TYPE) {
                req = req.header(reqwest::header::CONTENT_TYPE, *ct);
            }
            req = req.body(b.clone());
        }
        let mut resp = req.send().await.map_err(|e| transport(e, limits))?;
        let status = resp.status();
        if status.is_redirection()
            && let Some(loc) = resp.headers().get(reqwest::header::LOCATION)
        {
            if redirects.len() >= limits.max_redirects {
                return Err(ToolError::TooManyRedirects(limits.max_redirects));
            }
            let loc = loc.to_str().map_err(|_| ToolError::InvalidUrl("redirect location is not text".into()))?;
            let next = url.join(loc).map_err(|e| ToolError::InvalidUrl(format!("redirect to `{loc}`: {e}")))?;
            // 303, and 301/302 after POST, become GET without a body (as browsers do).
            if status == reqwest::StatusCode::SEE_OTHER || (method == reqwest::Method::POST && (status.as_u16() == 301 || status.as_u16() == 302)) {
                method = reqwest::Method::GET;
                body = None;
            }
            // A 307/308 re-sends the body: only to the origin the call was
            // approved for. Elsewhere the redirect itself is the answer (the
            // model may call the new URL, which asks again, naming its host).
            if body.is_some() && next.origin() != url.origin() {
                return Ok(HttpResponse {
                    status: status.as_u16(),
                    url: url.to_string(),
                    redirects,
                    content_type: None,
                    body_bytes: 0,
                    body: format!("redirect to {next} not followed: it would re-send the request body to another host"),
                    truncated: false,
                });
            }
            if next.origin() != url.origin() {
                headers.remove(reqwest::header::AUTHORIZATION);
                headers.remove(reqwest::header::COOKIE);
            }
            redirects.push(next.to_string());
            url = next;
            continue;
        }
        let content_type = resp.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
        let mut buf: Vec<u8> = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = resp.chunk().await.map_err(|e| transport(e, limits))? {
            let room = limits.max_bytes - buf.len();
            if chunk.len() > room {
                buf.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            buf.extend_from_slice(&chunk);
        }
        return Ok(HttpResponse {
            status: status.as_u16(),
            url: url.to_string(),
            redirects,
            content_type,
            body_bytes: buf.len(),
            body: String::from_utf8_lossy(&buf).into_owned(),
            truncated,
        });
    }
}

fn transport(e: reqwest::Error, limits: &HttpLimits) -> ToolError {
    if e.is_timeout() {
        // Report the limit that was hit (reqwest's own timer may fire in the
        // same tick as the total one).
        let limit = if e.is_connect() { limits.connect_timeout } else { limits.timeout };
        return ToolError::Timeout(limit.as_millis() as u64);
    }
    // Walk the source chain: reqwest's top-level message hides the cause.
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    ToolError::Transport(msg)
}

pub(crate) mod duration_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}
