//! The allow-list and the address checks of every URL and every resolved
//! name (checks 1 to 3 of the module docs share this one [`Guard`]).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use url::{Host, Url};

use super::HttpPolicy;
use super::ranges::{blocked_range, is_loopback};
use crate::ToolError;

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
        let e = e.strip_prefix("http://").or_else(|| e.strip_prefix("https://")).unwrap_or(&e).trim_end_matches('/');
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
            Some((h, p)) if !h.contains(':') => Some(HostRule { host: h.trim_end_matches('.').to_string(), port: Some(p.parse().ok()?) }),
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
pub(super) fn host_key(host: &Host<&str>) -> String {
    match host {
        Host::Domain(d) => d.trim_end_matches('.').to_ascii_lowercase(),
        Host::Ipv4(ip) => ip.to_string(),
        Host::Ipv6(ip) => ip.to_string(),
    }
}

pub(super) struct Guard {
    rules: Option<Vec<HostRule>>,
    allow_loopback: bool,
}

impl Guard {
    pub(super) fn new(policy: &HttpPolicy) -> Result<Guard, ToolError> {
        let rules = match &policy.allowed_hosts {
            None => None,
            Some(list) => Some(
                list.iter()
                    .map(|e| {
                        HostRule::parse(e)
                            .ok_or_else(|| ToolError::InvalidArguments { tool: "http".into(), message: format!("allow-list entry `{e}` is not host[:port]") })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        Ok(Guard { rules, allow_loopback: policy.allow_loopback })
    }

    /// Does an allow-list entry name this host (and port, if given)?
    fn listed(&self, host: &str, port: Option<u16>) -> bool {
        self.rules.as_ref().is_some_and(|rules| rules.iter().any(|r| r.matches_host(host) && (r.port.is_none() || port.is_none() || r.port == port)))
    }

    /// Is there an exact loopback entry for this host (and port, if given)?
    fn loopback_listed(&self, host: &str, port: Option<u16>) -> bool {
        self.rules
            .as_ref()
            .is_some_and(|rules| rules.iter().any(|r| r.is_loopback_entry() && r.host == host && (r.port.is_none() || port.is_none() || r.port == port)))
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
    pub(super) fn check_url(&self, url: &Url) -> Result<(), ToolError> {
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
pub(super) struct GuardedResolver {
    pub(super) guard: Arc<Guard>,
    pub(super) refused: Arc<Mutex<Option<ToolError>>>,
    pub(super) lookup: Lookup,
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

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

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
