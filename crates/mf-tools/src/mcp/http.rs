//! A remote MCP server over streamable HTTP (rmcp's transport on reqwest 0.13).
//!
//! reqwest 0.13 is built without a crypto provider (its default would bring
//! aws-lc-rs, a second C build next to llama.cpp), so the TLS configuration is
//! made here with ring and the webpki roots, the same trust store as the
//! `http` tool's. The URL is the user's own configuration: it is not put
//! through the `http` tool's SSRF guard (a server on loopback is normal).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest_mcp::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

fn tls() -> Result<rustls::ClientConfig, String> {
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up failed: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

/// The transport to `url`, with `headers` on every request.
///
/// # Errors
/// A message when the TLS or HTTP client cannot be built or a header is invalid
/// (the configuration has already checked them).
pub fn transport(
    url: &url::Url,
    headers: &BTreeMap<String, String>,
    connect_timeout: Duration,
) -> Result<StreamableHttpClientTransport<reqwest_mcp::Client>, String> {
    let mut map = HeaderMap::new();
    let mut bearer = None;
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header `{k}`: {e}"))?;
        // rmcp sets Authorization itself from a bearer token; other schemes go as plain headers.
        if name == AUTHORIZATION
            && let Some(token) = v.strip_prefix("Bearer ")
        {
            bearer = Some(token.trim().to_owned());
            continue;
        }
        let value = HeaderValue::from_str(v).map_err(|e| format!("header `{k}`: {e}"))?;
        map.insert(name, value);
    }
    let client = reqwest_mcp::Client::builder()
        .tls_backend_preconfigured(tls()?)
        .connect_timeout(connect_timeout)
        .default_headers(map)
        .build()
        .map_err(|e| format!("the HTTP client could not be built: {e}"))?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
    if let Some(t) = bearer {
        config = config.auth_header(t);
    }
    Ok(StreamableHttpClientTransport::with_client(client, config))
}
