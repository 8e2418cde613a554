//! `http` against loopback servers started by each test. Loopback is
//! reachable only where a test opts in (allow-list entry or
//! `allow_loopback`); every refusal also asserts that the target server
//! received nothing.

use std::io::Write;
use std::time::{Duration, Instant};

use mf_tools::ToolError;
use mf_tools::http::{self, HttpArgs, HttpMethod, HttpPolicy};

use super::support::{Server, Step, json_ok, redirect, reply};

async fn get(url: &str, p: &HttpPolicy) -> Result<http::HttpResponse, ToolError> {
    http::run(&HttpArgs { method: HttpMethod::Get, url: url.into(), headers: Default::default(), body: None }, p).await
}

fn only(s: &Server) -> HttpPolicy {
    HttpPolicy { allowed_hosts: Some(vec![format!("127.0.0.1:{}", s.port)]), ..Default::default() }
}

#[tokio::test]
async fn http_allowed_loopback_api_works_and_request_is_captured() {
    let s = Server::start(|_, _| json_ok()).await;
    let args = HttpArgs {
        method: HttpMethod::Post,
        url: s.url("/api/items?q=1"),
        headers: [("x-test".to_string(), "yes".to_string())].into(),
        body: Some(serde_json::json!({"a": 1})),
    };
    let r = http::run(&args, &only(&s)).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, r#"{"items":[1,2]}"#);
    assert_eq!(r.content_type.as_deref(), Some("application/json"));
    let req = s.requests()[0].clone();
    assert!(req.starts_with("POST /api/items?q=1 HTTP/1.1"), "{req}");
    assert!(req.contains("x-test: yes") && req.ends_with(r#"{"a":1}"#), "{req}");
}

#[tokio::test]
async fn http_ssrf_refused_before_any_request() {
    let s = Server::start(|_, _| json_ok()).await;
    let port = s.port;
    let p = HttpPolicy::default();
    for url in [
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://2852039166/".into(),               // decimal
        "http://0xA9FEA9FE/".into(),               // hex
        "http://0xa9.0xfe.0xa9.0xfe/".into(),      // dotted hex
        "http://0251.0376.0251.0376/".into(),      // octal
        "http://169.254.43518/".into(),            // short form
        "http://[::ffff:169.254.169.254]/".into(), // IPv6-mapped
        "http://[::ffff:a9fe:a9fe]/".into(),
        "http://[fd00:ec2::254]/".into(), // AWS IPv6 metadata
        "http://10.0.0.1/".into(),
        "http://0.0.0.0/".into(),
        format!("http://127.0.0.1:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0x7f.1:{port}/"),
        format!("http://0177.0.0.1:{port}/"),
        format!("http://127.1:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://[::1]:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://LOCALHOST.:{port}/"),
    ] {
        let e = get(&url, &p).await.unwrap_err();
        assert_eq!(e.code(), "address_blocked", "{url}: {e}");
        assert!(e.is_refusal());
    }
    for url in ["file:///etc/passwd", "ftp://example.com/", "gopher://127.0.0.1/", "data:text/plain,hi"] {
        assert_eq!(get(url, &p).await.unwrap_err().code(), "scheme_not_allowed", "{url}");
    }
    // With an allow-list, an unlisted loopback port is refused even though loopback is named.
    let e = get(&format!("http://127.0.0.1:{}/", port.wrapping_add(1)), &only(&s)).await.unwrap_err();
    assert_eq!(e.code(), "host_not_allowed", "{e}");
    assert!(s.requests().is_empty());
}

#[tokio::test]
async fn http_redirect_to_metadata_or_file_refused() {
    for (location, want) in [("http://169.254.169.254/latest/meta-data/", "host_not_allowed"), ("file:///etc/passwd", "scheme_not_allowed")] {
        let s = Server::start(move |_, _| redirect("302 Found", location)).await;
        let e = get(&s.url("/"), &only(&s)).await.unwrap_err();
        assert_eq!(e.code(), want, "{location}: {e}");
        assert_eq!(s.requests().len(), 1);
    }
    // Without an allow-list but with loopback allowed, the hop is refused by address.
    let p = HttpPolicy { allow_loopback: true, ..Default::default() };
    for location in ["http://169.254.169.254/latest/meta-data/", "http://[::ffff:a9fe:a9fe]/", "http://10.1.2.3/", "http://0x0a000001/"] {
        let s = Server::start(move |_, _| redirect("301 Moved Permanently", location)).await;
        let e = get(&s.url("/"), &p).await.unwrap_err();
        assert_eq!(e.code(), "address_blocked", "{location}: {e}");
    }
}

#[tokio::test]
async fn http_redirect_to_another_loopback_port_refused() {
    let other = Server::start(|_, _| reply("200 OK", &[], b"INTERNAL-ADMIN-SECRET")).await;
    let op = other.port;
    for location in [
        format!("http://127.0.0.1:{op}/admin"),
        format!("http://localhost:{op}/admin"),
        format!("http://2130706433:{op}/admin"),
        format!("http://[::ffff:127.0.0.1]:{op}/admin"),
        format!("//127.0.0.1:{op}/admin"),
    ] {
        let loc = location.clone();
        let s = Server::start(move |_, _| redirect("307 Temporary Redirect", &loc)).await;
        let e = get(&s.url("/start"), &only(&s)).await.unwrap_err();
        assert_eq!(e.code(), "host_not_allowed", "{location}: {e}");
        assert!(!e.to_string().contains("SECRET"));
        assert_eq!(s.requests().len(), 1);
    }
    assert!(other.requests().is_empty(), "the other loopback port was reached");
}

/// A POST approved for one host is not re-sent (307/308 keep the body) to
/// another: the redirect comes back as the answer. To its own origin it is
/// followed with the body.
#[tokio::test]
async fn http_post_body_is_not_resent_to_another_host_by_a_redirect() {
    let other = Server::start(|_, _| json_ok()).await;
    let both =
        |s: &Server| HttpPolicy { allowed_hosts: Some(vec![format!("127.0.0.1:{}", s.port), format!("127.0.0.1:{}", other.port)]), ..Default::default() };
    let post =
        |url: String| HttpArgs { method: HttpMethod::Post, url, headers: Default::default(), body: Some(serde_json::json!({"report": "secret findings"})) };
    for code in ["307 Temporary Redirect", "308 Permanent Redirect"] {
        let loc = other.url("/collect");
        let s = Server::start(move |_, _| redirect(code, &loc)).await;
        let r = http::run(&post(s.url("/submit")), &both(&s)).await.unwrap();
        assert_eq!(r.status, code[..3].parse::<u16>().unwrap(), "{code}");
        assert!(r.body.contains("not followed") && r.body.contains(&other.url("/collect")), "{}", r.body);
        assert!(r.redirects.is_empty());
    }
    assert!(other.requests().is_empty(), "the body reached the other host: {:?}", other.requests());
    // Same origin: followed, body and all.
    let s = Server::start(|_, i| if i == 0 { redirect("307 Temporary Redirect", "/v2/submit") } else { json_ok() }).await;
    let r = http::run(&post(s.url("/submit")), &only(&s)).await.unwrap();
    assert_eq!(r.status, 200);
    let reqs = s.requests();
    assert!(reqs[1].starts_with("POST /v2/submit") && reqs[1].ends_with(r#"{"report":"secret findings"}"#), "{reqs:?}");
}

#[tokio::test]
async fn http_redirect_loop_stops_after_five() {
    let s = Server::start(|_, i| redirect("302 Found", &format!("/hop{}", i + 1))).await;
    let e = get(&s.url("/hop0"), &only(&s)).await.unwrap_err();
    assert_eq!(e, ToolError::TooManyRedirects(5));
    // The first request and five redirects, never a sixth hop.
    let paths: Vec<String> = s.requests().iter().map(|r| r.split(' ').nth(1).unwrap_or("").to_string()).collect();
    assert_eq!(paths, ["/hop0", "/hop1", "/hop2", "/hop3", "/hop4", "/hop5"]);
    // A self-loop to the same URL is stopped the same way.
    let s = Server::start(|_, _| redirect("308 Permanent Redirect", "/same")).await;
    assert_eq!(get(&s.url("/same"), &only(&s)).await.unwrap_err(), ToolError::TooManyRedirects(5));
    assert_eq!(s.requests().len(), 6);
}

#[tokio::test]
async fn http_five_redirects_are_followed() {
    let s = Server::start(|_, i| if i < 5 { redirect("302 Found", &format!("/hop{}", i + 1)) } else { json_ok() }).await;
    let r = get(&s.url("/hop0"), &only(&s)).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.redirects.len(), 5);
    assert!(r.url.ends_with("/hop5"), "{}", r.url);
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[tokio::test]
async fn http_gzip_body_capped_after_decompression() {
    // 64 MiB of text that compresses to a few dozen KiB: a cap counted on the
    // wire would let all of it through.
    let big = vec![b'A'; 64 << 20];
    let z = gzip(&big);
    let cap = 1 << 20;
    assert!(z.len() < cap, "the compressed body must be under the cap for this test to mean anything");
    let s = Server::start(move |_, _| reply("200 OK", &[("content-encoding", "gzip"), ("content-type", "text/plain")], &z)).await;
    let mut p = only(&s);
    p.limits.max_bytes = cap;
    let started = Instant::now();
    let r = get(&s.url("/bomb"), &p).await.unwrap();
    assert!(r.truncated);
    assert_eq!(r.body_bytes, cap);
    assert_eq!(r.body.len(), cap);
    assert!(r.body.bytes().all(|b| b == b'A'), "the body was not decompressed");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(s.requests()[0].to_ascii_lowercase().contains("accept-encoding: gzip"));

    // Under the cap, the whole decompressed body comes back.
    let small = gzip(b"hello, compressed world");
    let s = Server::start(move |_, _| reply("200 OK", &[("content-encoding", "gzip")], &small)).await;
    let r = get(&s.url("/"), &only(&s)).await.unwrap();
    assert_eq!((r.body.as_str(), r.truncated), ("hello, compressed world", false));
}

fn drip() -> Vec<Step> {
    // Headers at once, then one byte every 100 ms for ~100 s.
    let mut v = vec![Step::Send(b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\nconnection: close\r\n\r\n".to_vec())];
    for _ in 0..1000 {
        v.push(Step::Sleep(Duration::from_millis(100)));
        v.push(Step::Send(b"x".to_vec()));
    }
    v
}

#[tokio::test]
async fn http_total_timeout_covers_slow_body_silence_and_redirect_chains() {
    let slow_body = Server::start(|_, _| drip()).await;
    let silent = Server::start(|_, _| vec![Step::Sleep(Duration::from_secs(120))]).await;
    // Each hop answers in 400 ms, well under the limit; five of them are not.
    let slow_hops = Server::start(|_, i| {
        let mut v = vec![Step::Sleep(Duration::from_millis(400))];
        v.extend(redirect("302 Found", &format!("/hop{}", i + 1)));
        v
    })
    .await;
    for s in [&slow_body, &silent, &slow_hops] {
        let mut p = only(s);
        p.limits.timeout = Duration::from_millis(1000);
        let started = Instant::now();
        let e = get(&s.url("/hop0"), &p).await.unwrap_err();
        let took = started.elapsed();
        assert_eq!(e, ToolError::Timeout(1000), "port {}", s.port);
        assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(4), "{took:?}");
    }
    assert!(slow_hops.requests().len() <= 3, "{:?}", slow_hops.requests().len());
}

#[tokio::test]
async fn http_allow_loopback_lets_localhost_through_and_caps_body() {
    let s = Server::start(|_, _| json_ok()).await;
    let mut p = HttpPolicy { allow_loopback: true, ..Default::default() };
    p.limits.max_bytes = 5;
    let r = get(&format!("http://localhost:{}/x", s.port), &p).await.unwrap();
    assert_eq!(r.body, r#"{"ite"#);
    assert!(r.truncated);
    assert_eq!(s.requests().len(), 1);
}

#[tokio::test]
async fn http_forbidden_headers_and_credentials_refused() {
    let s = Server::start(|_, _| json_ok()).await;
    for h in ["Host", "transfer-encoding", "Content-Length", "proxy-authorization"] {
        let args = HttpArgs { method: HttpMethod::Get, url: s.url("/"), headers: [(h.to_string(), "x".to_string())].into(), body: None };
        assert_eq!(http::run(&args, &only(&s)).await.unwrap_err().code(), "header_not_allowed", "{h}");
    }
    let e = get(&format!("http://user:pw@127.0.0.1:{}/", s.port), &only(&s)).await.unwrap_err();
    assert_eq!(e.code(), "invalid_url");
    assert!(s.requests().is_empty());
}

/// Names that resolve to blocked addresses, through the real system
/// resolver: this thread gets its own mount namespace in which a test
/// `/etc/hosts` is bind-mounted (the host's file is untouched), and its own
/// tokio runtime, whose resolver threads inherit the namespace.
#[test]
fn http_names_resolving_to_blocked_addresses_refused() {
    std::thread::spawn(|| {
        let dir = tempfile::tempdir().unwrap();
        let hosts = dir.path().join("hosts");
        std::fs::write(
            &hosts,
            "127.0.0.1 localhost\n127.0.0.1 loopback-alias.test\n169.254.169.254 metadata-alias.test\n\
             10.1.2.3 private-alias.test\n::1 v6-loopback.test\n93.184.216.34 mixed.test\n127.0.0.1 mixed.test\n",
        )
        .unwrap();
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        // SAFETY: unshare/mount on this thread only; "/" is made private first so
        // the bind mount never propagates to the host's namespace.
        unsafe {
            assert_eq!(libc::unshare(libc::CLONE_NEWNS | libc::CLONE_FS), 0, "{}", std::io::Error::last_os_error());
            let none = c("none");
            assert_eq!(libc::mount(none.as_ptr(), c("/").as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()), 0);
            let src = c(hosts.to_str().unwrap());
            assert_eq!(libc::mount(src.as_ptr(), c("/etc/hosts").as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()), 0);
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let s = Server::start(|_, _| json_ok()).await;
            let port = s.port;
            let p = HttpPolicy::default();
            for name in ["loopback-alias.test", "metadata-alias.test", "private-alias.test", "v6-loopback.test", "mixed.test"] {
                let e = get(&format!("http://{name}:{port}/"), &p).await.unwrap_err();
                assert_eq!(e.code(), "address_blocked", "{name}: {e}");
            }
            assert!(s.requests().is_empty());
            // The same name does resolve to the test server once loopback is allowed,
            // so the refusals above came from the guard, not from a failed lookup.
            let p = HttpPolicy { allow_loopback: true, ..Default::default() };
            let r = get(&format!("http://loopback-alias.test:{port}/ok"), &p).await.unwrap();
            assert_eq!(r.status, 200);
            assert_eq!(s.requests().len(), 1);
            // Loopback allowed still does not open metadata or private names.
            for name in ["metadata-alias.test", "private-alias.test"] {
                let e = get(&format!("http://{name}:{port}/"), &p).await.unwrap_err();
                assert_eq!(e.code(), "address_blocked", "{name}: {e}");
            }
        });
    })
    .join()
    .unwrap();
    // This thread's (and the host's) /etc/hosts was never changed.
    assert!(!std::fs::read_to_string("/etc/hosts").unwrap().contains("alias.test"));
}

/// Allow-list entries narrow, they never open a blocked range: a wildcard
/// entry whose subdomains resolve (through a fixed lookup table, no DNS or
/// /etc/hosts involved) to loopback, private or metadata addresses is
/// refused, and so is an exact entry naming a private address. Loopback
/// opens only when allowed on its own: `allow_loopback`, or an exact entry
/// that is loopback itself.
#[tokio::test]
async fn http_allow_list_never_opens_private_or_loopback_addresses() {
    use std::net::IpAddr;
    let s = Server::start(|_, _| json_ok()).await;
    let port = s.port;
    let ip = |a: &str| -> Vec<IpAddr> { vec![a.parse().unwrap()] };
    let table: std::collections::BTreeMap<String, Vec<IpAddr>> = [
        ("api.example.test", ip("127.0.0.1")),
        ("v6.example.test", ip("::1")),
        ("intranet.example.test", ip("10.1.2.3")),
        ("metadata.example.test", ip("169.254.169.254")),
        ("mixed.example.test", vec!["93.184.216.34".parse().unwrap(), "127.0.0.1".parse().unwrap()]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let lookup = http::Lookup::Fixed(table);
    let get = |url: String, p: HttpPolicy| {
        let lookup = lookup.clone();
        async move {
            let args = HttpArgs { method: HttpMethod::Get, url, headers: Default::default(), body: None };
            http::run_with_lookup(&args, &p, lookup).await
        }
    };
    let listed = |entries: &[String]| HttpPolicy { allowed_hosts: Some(entries.to_vec()), ..Default::default() };
    let names = ["api.example.test", "v6.example.test", "intranet.example.test", "metadata.example.test", "mixed.example.test"];
    // A wildcard entry, alone or beside an exact loopback entry for the same port.
    for p in [
        listed(&["*.example.test".into()]),
        listed(&[format!("*.example.test:{port}")]),
        listed(&["*.example.test".into(), format!("127.0.0.1:{port}")]),
        listed(&names.iter().map(|n| format!("{n}:{port}")).collect::<Vec<_>>()), // each by name
    ] {
        for name in names {
            let e = get(format!("http://{name}:{port}/"), p.clone()).await.unwrap_err();
            assert_eq!(e.code(), "address_blocked", "{name} under {:?}: {e}", p.allowed_hosts);
        }
    }
    // An exact entry naming a private or metadata address does not open it either.
    for addr in ["10.1.2.3", "169.254.169.254", "[fd00:ec2::254]"] {
        let e = get(format!("http://{addr}/"), listed(&[addr.into()])).await.unwrap_err();
        assert_eq!(e.code(), "address_blocked", "{addr}: {e}");
    }
    assert!(s.requests().is_empty(), "a refused request reached the server");

    // Loopback allowed on its own: the exact loopback entry reaches the server...
    let r = get(s.url("/exact"), listed(&[format!("127.0.0.1:{port}")])).await.unwrap();
    assert_eq!(r.status, 200);
    // ...and with allow_loopback the wildcard name does too (so the refusals
    // above came from the guard, not from a failed lookup), but never 10.x or metadata.
    let mut p = listed(&["*.example.test".into()]);
    p.allow_loopback = true;
    let r = get(format!("http://api.example.test:{port}/wild"), p.clone()).await.unwrap();
    assert_eq!(r.status, 200);
    for name in ["intranet.example.test", "metadata.example.test"] {
        let e = get(format!("http://{name}:{port}/"), p.clone()).await.unwrap_err();
        assert_eq!(e.code(), "address_blocked", "{name}: {e}");
    }
    let paths: Vec<String> = s.requests().iter().map(|r| r.split(' ').nth(1).unwrap_or("").to_string()).collect();
    assert_eq!(paths, ["/exact", "/wild"]);
}
