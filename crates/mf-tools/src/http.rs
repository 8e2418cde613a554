//! `http`: GET/POST to APIs, guarded against SSRF.
//!
//! Three checks, because each alone has a hole:
//! 1. **Before sending**, the URL is parsed by the `url` crate (which turns
//!    `2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1` into `127.0.0.1`) and an IP
//!    literal is checked against the blocked ranges. A resolver-only guard
//!    never sees IP literals (reqwest connects to them directly).
//! 2. **Names** are resolved through [`GuardedResolver`], which refuses the
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

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use url::{Host, Url};

use crate::ToolError;

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

/// Is this address in a blocked range? Returns the range's name.
///
/// Blocked: unspecified, "this network", private (RFC 1918), CGNAT, loopback,
/// link-local (cloud metadata 169.254.169.254), IETF protocol assignments,
/// documentation, benchmarking, 6to4 relay, multicast, reserved, broadcast;
/// IPv6 unspecified, loopback, IPv4-mapped/-compatible/NAT64/6to4 embedding a
/// blocked IPv4, Teredo, discard, documentation, unique-local (`fd00:ec2::254`),
/// link-local, site-local, multicast.
pub fn blocked_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => blocked_v6(v6),
    }
}

fn blocked_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    let n = u32::from(ip);
    let within = |net: u32, bits: u32| (n ^ net) >> (32 - bits) == 0;
    Some(match () {
        _ if n == u32::MAX => "broadcast",
        _ if o[0] == 0 => "unspecified / this-network",
        _ if o[0] == 127 => "loopback",
        _ if o[0] == 10 => "private",
        _ if within(0xAC10_0000, 12) => "private",
        _ if within(0xC0A8_0000, 16) => "private",
        _ if within(0x6440_0000, 10) => "shared (CGNAT)",
        _ if within(0xA9FE_0000, 16) => "link-local (cloud metadata)",
        _ if within(0xC000_0000, 24) => "IETF protocol assignment",
        _ if within(0xC000_0200, 24) => "documentation",
        _ if within(0xC633_6400, 24) => "documentation",
        _ if within(0xCB00_7100, 24) => "documentation",
        _ if within(0xC058_6300, 24) => "6to4 relay",
        _ if within(0xC612_0000, 15) => "benchmarking",
        _ if o[0] >= 224 && o[0] < 240 => "multicast",
        _ if o[0] >= 240 => "reserved",
        _ => return None,
    })
}

fn blocked_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let embedded_v4 = |hi: u16, lo: u16| Ipv4Addr::from(((hi as u32) << 16) | lo as u32);
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    // ::ffff:a.b.c.d (mapped) carries an IPv4 whose range decides.
    if s[..6] == [0, 0, 0, 0, 0, 0xffff] {
        return blocked_v4(embedded_v4(s[6], s[7]));
    }
    // ::a.b.c.d (deprecated IPv4-compatible form): never a real destination.
    if s[..6] == [0, 0, 0, 0, 0, 0] {
        return Some(blocked_v4(embedded_v4(s[6], s[7])).unwrap_or("IPv4-compatible"));
    }
    // NAT64 well-known prefix 64:ff9b::/96 embeds an IPv4.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return blocked_v4(embedded_v4(s[6], s[7]));
    }
    Some(match s[0] {
        0x64 if s[1] == 0xff9b && s[2] == 1 => "local-use NAT64",
        0x100 if s[1..4] == [0, 0, 0] => "discard",
        0x2001 if s[1] == 0 => "Teredo",
        0x2001 if s[1] == 0xdb8 => "documentation",
        0x2002 => return blocked_v4(embedded_v4(s[1], s[2])),
        x if x & 0xfff0 == 0x3ff0 => "documentation",
        x if x & 0xfe00 == 0xfc00 => "unique-local",
        x if x & 0xffc0 == 0xfe80 => "link-local",
        x if x & 0xffc0 == 0xfec0 => "site-local",
        x if x & 0xff00 == 0xff00 => "multicast",
        _ => return None,
    })
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// One parsed allow-list entry.
#[derive(Debug, Clone, PartialEq)]
struct HostRule {
    /// Lower-case host (no brackets for IPv6); a leading `*.` means subdomains.
    host: String,
    port: Option<u16>,
}

impl HostRule {
    fn parse(entry: &str) -> Option<HostRule> {
        let e = entry.trim().to_ascii_lowercase();
        let e = e
            .strip_prefix("http://")
            .or_else(|| e.strip_prefix("https://"))
            .unwrap_or(&e)
            .trim_end_matches('/');
        if let Some(rest) = e.strip_prefix('[') {
            let (host, after) = rest.split_once(']')?;
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p.parse().ok()?),
                None if after.is_empty() => None,
                None => return None,
            };
            return Some(HostRule { host: host.to_string(), port });
        }
        match e.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => Some(HostRule {
                host: h.trim_end_matches('.').to_string(),
                port: Some(p.parse().ok()?),
            }),
            Some(_) => Some(HostRule { host: e.to_string(), port: None }), // bare IPv6
            None => Some(HostRule { host: e.trim_end_matches('.').to_string(), port: None }),
        }
    }

    /// An exact entry that names loopback itself: a loopback address or `localhost`.
    fn is_loopback_entry(&self) -> bool {
        self.host == "localhost" || self.host.parse::<IpAddr>().is_ok_and(is_loopback)
    }

    fn matches_host(&self, host: &str) -> bool {
        match self.host.strip_prefix("*.") {
            Some(domain) => host.len() > domain.len() + 1 && host.ends_with(&format!(".{domain}")),
            None => self.host == host,
        }
    }
}

/// Normalised host string used for allow-list matching (lower case, no
/// trailing dot, IPv6 without brackets).
fn host_key(host: &Host<&str>) -> String {
    match host {
        Host::Domain(d) => d.trim_end_matches('.').to_ascii_lowercase(),
        Host::Ipv4(ip) => ip.to_string(),
        Host::Ipv6(ip) => ip.to_string(),
    }
}

struct Guard {
    rules: Option<Vec<HostRule>>,
    allow_loopback: bool,
}

impl Guard {
    fn new(policy: &HttpPolicy) -> Result<Guard, ToolError> {
        let rules = match &policy.allowed_hosts {
            None => None,
            Some(list) => Some(
                list.iter()
                    .map(|e| {
                        HostRule::parse(e).ok_or_else(|| ToolError::InvalidArguments {
                            tool: "http".into(),
                            message: format!("allow-list entry `{e}` is not host[:port]"),
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        Ok(Guard { rules, allow_loopback: policy.allow_loopback })
    }

    /// Does an allow-list entry name this host (and port, if given)?
    fn listed(&self, host: &str, port: Option<u16>) -> bool {
        self.rules.as_ref().is_some_and(|rules| {
            rules
                .iter()
                .any(|r| r.matches_host(host) && (r.port.is_none() || port.is_none() || r.port == port))
        })
    }

    /// Is there an exact loopback entry for this host (and port, if given)?
    fn loopback_listed(&self, host: &str, port: Option<u16>) -> bool {
        self.rules.as_ref().is_some_and(|rules| {
            rules.iter().any(|r| {
                r.is_loopback_entry() && r.host == host && (r.port.is_none() || port.is_none() || r.port == port)
            })
        })
    }

    /// May a connection go to `ip` for `host`? Blocked ranges are refused
    /// whatever the allow-list says; loopback passes only when allowed on its
    /// own (`allow_loopback`, or `loopback_listed` for this host).
    fn check_ip(&self, host: &str, ip: IpAddr, loopback_listed: bool) -> Result<(), ToolError> {
        let Some(range) = blocked_range(ip) else { return Ok(()) };
        if is_loopback(ip) && (self.allow_loopback || loopback_listed) {
            return Ok(());
        }
        Err(ToolError::AddressBlocked { host: host.to_string(), addr: ip.to_string(), range: range.to_string() })
    }

    /// Check one URL before it is requested (the first and every redirect).
    fn check_url(&self, url: &Url) -> Result<(), ToolError> {
        match url.scheme() {
            "http" | "https" => {}
            other => return Err(ToolError::SchemeNotAllowed(other.to_string())),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ToolError::InvalidUrl("credentials in URLs are not allowed; use a header".into()));
        }
        let host = url.host().ok_or_else(|| ToolError::InvalidUrl(format!("`{url}` has no host")))?;
        let key = host_key(&host);
        let port = url.port_or_known_default();
        let listed = self.listed(&key, port);
        if self.rules.is_some() && !listed {
            let shown = match port {
                Some(p) => format!("{}:{p}", url.host_str().unwrap_or(&key)),
                None => key.clone(),
            };
            return Err(ToolError::HostNotAllowed(shown));
        }
        let loopback_listed = self.loopback_listed(&key, port);
        match host {
            Host::Ipv4(ip) => self.check_ip(&key, IpAddr::V4(ip), loopback_listed),
            Host::Ipv6(ip) => self.check_ip(&key, IpAddr::V6(ip), loopback_listed),
            Host::Domain(_) => Ok(()),
        }
    }
}

/// reqwest resolver that refuses answers in blocked ranges.
///
/// The whole answer is refused when any address is blocked, so a name cannot
/// mix a public and a private address and hope the private one is tried. The
/// refusal is kept in `refused` so the caller can report it as a typed
/// [`ToolError::AddressBlocked`] instead of reqwest's opaque connect error.
struct GuardedResolver {
    guard: Arc<Guard>,
    refused: Arc<Mutex<Option<ToolError>>>,
    lookup: Lookup,
}

/// Where host names are looked up: the system resolver, or (for tests, and
/// anyone who needs to pin names) a fixed table. Either way every answer
/// passes the same guard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Lookup {
    /// The system resolver (DNS, `/etc/hosts`).
    #[default]
    System,
    /// Names (lower case, no trailing dot) and their addresses; a name not in
    /// the table has no address.
    Fixed(BTreeMap<String, Vec<IpAddr>>),
}

impl Lookup {
    async fn addrs(&self, host: &str) -> std::io::Result<Vec<SocketAddr>> {
        match self {
            Lookup::System => Ok(tokio::net::lookup_host((host, 0)).await?.collect()),
            Lookup::Fixed(table) => Ok(table.get(host).into_iter().flatten().map(|ip| SocketAddr::new(*ip, 0)).collect()),
        }
    }
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.guard.clone();
        let refused = self.refused.clone();
        let host = name.as_str().trim_end_matches('.').to_ascii_lowercase();
        let lookup = self.lookup.clone();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = lookup.addrs(&host).await?;
            let loopback_listed = guard.loopback_listed(&host, None);
            for a in &addrs {
                if let Err(e) = guard.check_ip(&host, a.ip(), loopback_listed) {
                    let msg = e.to_string();
                    if let Ok(mut slot) = refused.lock() {
                        *slot = Some(e);
                    }
                    return Err(msg.into());
                }
            }
            if addrs.is_empty() {
                return Err(format!("`{host}` has no addresses").into());
            }
            let it: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(it)
        })
    }
}

/// Headers the tool manages itself or that could smuggle requests.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer",
    "keep-alive", "proxy-authorization", "proxy-connection", "expect",
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
            if status == reqwest::StatusCode::SEE_OTHER
                || (method == reqwest::Method::POST && (status.as_u16() == 301 || status.as_u16() == 302))
            {
                method = reqwest::Method::GET;
                body = None;
            }
            if next.origin() != url.origin() {
                headers.remove(reqwest::header::AUTHORIZATION);
                headers.remove(reqwest::header::COOKIE);
            }
            redirects.push(next.to_string());
            url = next;
            continue;
        }
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
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


#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ranges() {
        for s in [
            "0.0.0.0", "10.1.2.3", "100.64.0.1", "127.0.0.1", "127.255.0.9", "169.254.169.254",
            "172.16.0.1", "172.31.255.255", "192.0.0.170", "192.0.2.1", "192.168.1.1", "198.18.0.1",
            "198.51.100.7", "203.0.113.9", "224.0.0.1", "239.255.255.250", "240.0.0.1",
            "255.255.255.255", "100.100.100.200", "::", "::1", "::ffff:127.0.0.1",
            "::ffff:169.254.169.254", "::127.0.0.1", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1",
            "2001::1", "2001:db8::1", "fd00:ec2::254", "fc00::1", "fe80::1", "fec0::1", "ff02::1",
        ] {
            assert!(blocked_range(ip(s)).is_some(), "{s} should be blocked");
        }
        for s in ["1.1.1.1", "93.184.216.34", "172.32.0.1", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"] {
            assert_eq!(blocked_range(ip(s)), None, "{s} should be allowed");
        }
    }

    #[test]
    fn host_rules() {
        let r = HostRule::parse("127.0.0.1:8080").unwrap();
        assert_eq!(r, HostRule { host: "127.0.0.1".into(), port: Some(8080) });
        let r = HostRule::parse("[::1]:9").unwrap();
        assert_eq!(r, HostRule { host: "::1".into(), port: Some(9) });
        let r = HostRule::parse("API.Example.com.").unwrap();
        assert_eq!(r.host, "api.example.com");
        assert!(HostRule::parse("*.example.com").unwrap().matches_host("a.example.com"));
        assert!(!HostRule::parse("*.example.com").unwrap().matches_host("example.com"));
        assert!(!HostRule::parse("*.example.com").unwrap().matches_host("badexample.com"));
        assert!(HostRule::parse("host:notaport").is_none());
    }

    #[test]
    fn url_crate_normalises_numeric_hosts() {
        for s in ["http://2130706433/", "http://0x7f.1/", "http://0177.0.0.1/", "http://127.1/"] {
            let u = Url::parse(s).unwrap();
            assert_eq!(u.host(), Some(Host::Ipv4(Ipv4Addr::LOCALHOST)), "{s}");
        }
    }
}
