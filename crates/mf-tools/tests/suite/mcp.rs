//! MCP tools against real servers: `@modelcontextprotocol/server-everything`
//! and `@modelcontextprotocol/server-filesystem` (installed by
//! scripts/setup.sh, run without the network), plus a deliberately broken
//! server (tests/fixtures/fake_mcp_server.py) for hangs and garbage.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mf_tools::mcp::{McpConfig, McpServerState, McpSettings};
use mf_tools::policy::Mode;
use mf_tools::{Requirement, ToolError, ToolOutput, ToolRegistry, ToolSettings};
use serde_json::json;

/// Where set-up installed the test servers.
fn servers_dir() -> PathBuf {
    match std::env::var_os("MF_MCP_SERVERS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/measured-forgetting/mcp"),
    }
}

/// A test server's program; a clear failure when set-up has not installed it.
fn server_bin(name: &str) -> String {
    let p = servers_dir().join("node_modules/.bin").join(name);
    assert!(p.exists(), "the MCP test server `{name}` is missing at {}: run scripts/setup.sh (it installs the MCP test servers)", p.display());
    p.display().to_string()
}

fn fake() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_mcp_server.py").display().to_string()
}

async fn registry(config: serde_json::Value, tweak: impl FnOnce(&mut McpSettings)) -> ToolRegistry {
    let mut mcp = McpSettings { config: McpConfig::from_value(&config).unwrap(), ..McpSettings::default() };
    tweak(&mut mcp);
    ToolRegistry::new(ToolSettings { mcp, ..ToolSettings::default() }).await.unwrap()
}

fn everything() -> serde_json::Value {
    json!({"command": server_bin("mcp-server-everything"), "args": ["stdio"]})
}

fn mcp_text(out: ToolOutput) -> String {
    match out {
        ToolOutput::Mcp(m) => m.text,
        other => panic!("expected an MCP output, got {other:?}"),
    }
}

async fn approved(reg: &ToolRegistry, id: &str, name: &str, args: &str) -> Result<ToolOutput, ToolError> {
    match reg.requirement(id, name, args)? {
        Requirement::Auto => reg.run(id, name, args, None).await,
        Requirement::Ask(req) => reg.run(id, name, args, Some(&req.approve())).await,
    }
}

#[tokio::test]
async fn servers_start_on_the_first_list_and_offer_namespaced_tools_with_their_schemas() {
    let root = tempfile::tempdir().unwrap();
    let reg = registry(
        json!({"mcpServers": {
            "everything": everything(),
            "files": {"command": server_bin("mcp-server-filesystem"), "args": [root.path()]},
            "off": {"command": "/nonexistent", "disabled": true}
        }}),
        |_| {},
    )
    .await;
    // Nothing started by building the registry.
    let before = reg.mcp_status();
    assert_eq!(before.len(), 2, "a disabled server is not part of the session: {before:?}");
    assert!(before.iter().all(|s| s.state == McpServerState::NotStarted), "{before:?}");
    assert!(reg.descriptors().iter().all(|d| !d.name.contains("__")));

    let status = reg.connect_mcp().await;
    for s in &status {
        assert!(matches!(s.state, McpServerState::Running { pid: Some(_) }), "{s:?}");
    }
    let d = reg.descriptors();
    let echo = d.iter().find(|t| t.name == "everything__echo").expect("everything__echo offered");
    assert_eq!(echo.parameters["properties"]["message"]["type"], "string");
    assert!(echo.parameters.get("$schema").is_none());
    assert!(echo.description.contains("everything"), "{}", echo.description);
    assert!(echo.read_only, "echo says readOnlyHint");
    let write = d.iter().find(|t| t.name == "files__write_file").expect("files__write_file offered");
    assert!(!write.read_only);
    assert_eq!(reg.mcp_tool("files__write_file").map(|t| (t.server, t.tool)), Some(("files".into(), "write_file".into())));
    assert_eq!(reg.mcp_tool("http"), None);
}

#[tokio::test]
async fn calls_route_to_the_server_ask_by_default_and_results_are_cut_to_the_limit() {
    let reg = registry(json!({"mcpServers": {"everything": everything()}}), |m| m.max_result_bytes = 40).await;
    // A call before any list starts the server (and the registry still knows no tool).
    assert!(matches!(reg.requirement("c0", "everything__get-sum", "{}"), Err(ToolError::UnknownTool(_))));
    reg.connect_mcp().await;

    let args = r#"{"a": 2, "b": 40}"#;
    let Requirement::Ask(req) = reg.requirement("c1", "everything__get-sum", args).unwrap() else { panic!("an MCP tool asks by default") };
    assert_eq!(req.tool, "everything__get-sum", "the request names server and tool");
    let origin = req.mcp.clone().expect("an MCP call's request carries its server and tool");
    assert_eq!((origin.server.as_str(), origin.tool.as_str()), ("everything", "get-sum"));
    assert!(req.summary.starts_with("MCP server everything · tool get-sum · {\"a\":2"), "{}", req.summary);
    assert_eq!(req.arguments, r#"{"a":2,"b":40}"#);
    assert!(matches!(reg.run("c1", "everything__get-sum", args, None).await, Err(ToolError::ApprovalRequired { .. })));
    let text = mcp_text(reg.run("c1", "everything__get-sum", args, Some(&req.approve())).await.unwrap());
    assert!(text.contains("42"), "{text}");

    let long = "x".repeat(500);
    let out = approved(&reg, "c2", "everything__echo", &json!({"message": long}).to_string()).await.unwrap();
    let note = out.truncation_note().expect("cut");
    let ToolOutput::Mcp(m) = out else { panic!() };
    assert!(m.truncated && m.text.len() == 40 && m.bytes > 500, "{m:?} {note}");

    // A server-side protocol error (invalid arguments) is typed.
    let e = approved(&reg, "c3", "everything__get-sum", r#"{"a": "two"}"#).await.unwrap_err();
    assert!(matches!(e, ToolError::McpRemote { .. } | ToolError::McpToolFailed { .. }), "{e:?}");
    assert!(e.to_string().contains("everything"), "{e}");
    assert!(matches!(reg.requirement("c4", "everything__echo", "[1]"), Err(ToolError::InvalidArguments { .. })));
}

#[tokio::test]
async fn a_denied_call_never_reaches_the_server_and_answers_are_remembered_per_server_and_tool() {
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let reg = registry(json!({"mcpServers": {"files": {"command": server_bin("mcp-server-filesystem"), "args": [&root_path]}}}), |_| {}).await;
    reg.connect_mcp().await;
    let write = |name: &str| json!({"path": root_path.join(name), "content": "written by the model"}).to_string();

    // Denied by the user: refused, and the file was never written.
    let args = write("denied.txt");
    let Requirement::Ask(req) = reg.requirement("w1", "files__write_file", &args).unwrap() else { panic!("asks") };
    assert!(matches!(reg.run("w1", "files__write_file", &args, Some(&req.deny())).await, Err(ToolError::ApprovalDenied(_))));
    // An approval of other arguments does not carry over.
    let other = write("other.txt");
    assert!(matches!(reg.run("w1", "files__write_file", &other, Some(&req.approve())).await, Err(ToolError::ApprovalMismatch(_))));
    // No answer is a denial.
    assert!(matches!(reg.run("w1", "files__write_file", &args, None).await, Err(ToolError::ApprovalRequired { .. })));
    assert!(!root_path.join("denied.txt").exists() && !root_path.join("other.txt").exists(), "a refused call reached the server");

    // Approved: written.
    approved(&reg, "w2", "files__write_file", &write("approved.txt")).await.unwrap();
    assert_eq!(std::fs::read_to_string(root_path.join("approved.txt")).unwrap(), "written by the model");

    // Remembered deny: refused without asking, never reaches the server.
    reg.remember_mcp("files", "write_file", Mode::Deny);
    assert!(matches!(reg.requirement("w3", "files__write_file", &write("remembered.txt")), Err(ToolError::DeniedByPolicy(_))));
    assert!(matches!(reg.run("w3", "files__write_file", &write("remembered.txt"), None).await, Err(ToolError::DeniedByPolicy(_))));
    assert!(!root_path.join("remembered.txt").exists());
    // Per tool: reading still asks.
    assert!(matches!(reg.requirement("r1", "files__list_directory", &json!({"path": &root_path}).to_string()), Ok(Requirement::Ask(_))));
    // Remembered approve: runs without asking.
    reg.remember_mcp("files", "write_file", Mode::Auto);
    assert_eq!(reg.requirement("w4", "files__write_file", &write("auto.txt")).unwrap(), Requirement::Auto);
    reg.run("w4", "files__write_file", &write("auto.txt"), None).await.unwrap();
    assert!(root_path.join("auto.txt").exists());
    assert_eq!(serde_json::to_value(reg.mcp_remembered()).unwrap(), json!({"files": {"write_file": "auto"}}));

    // The settings' remembered answers and default mode apply from the start.
    let reg2 = registry(json!({"mcpServers": {"files": {"command": server_bin("mcp-server-filesystem"), "args": [&root_path]}}}), |m| {
        m.default_mode = Mode::Deny;
        m.remembered.set("files", "list_directory", Mode::Auto);
    })
    .await;
    reg2.connect_mcp().await;
    assert!(matches!(reg2.requirement("w5", "files__write_file", &write("x.txt")), Err(ToolError::DeniedByPolicy(_))));
    let listing = mcp_text(reg2.run("l1", "files__list_directory", &json!({"path": &root_path}).to_string(), None).await.unwrap());
    assert!(listing.contains("approved.txt") && !listing.contains("denied.txt"), "{listing}");
}

fn pid_of(reg: &ToolRegistry, server: &str) -> u32 {
    match reg.mcp_status().into_iter().find(|s| s.name == server).map(|s| s.state) {
        Some(McpServerState::Running { pid: Some(p) }) => p,
        other => panic!("{server} is not running: {other:?}"),
    }
}

fn alive(pid: u32) -> bool {
    // A killed child may linger as a zombie until it is reaped: that is not alive.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| !s.split(") ").nth(1).unwrap_or("").starts_with('Z')).unwrap_or(false)
}

#[tokio::test]
async fn a_server_killed_mid_call_is_a_typed_failure_and_the_next_call_starts_it_again() {
    let reg = registry(json!({"mcpServers": {"everything": everything()}}), |m| m.default_mode = Mode::Auto).await;
    reg.connect_mcp().await;
    let pid = pid_of(&reg, "everything");
    let started = Instant::now();
    let call = reg.run("k1", "everything__trigger-long-running-operation", r#"{"duration": 20, "steps": 20}"#, None);
    let kill = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // SAFETY: a plain signal to the server this test started.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    };
    let (r, ()) = tokio::join!(call, kill);
    let e = r.unwrap_err();
    assert!(matches!(e, ToolError::McpCrashed { .. }), "{e:?}");
    assert_eq!(e.code(), "mcp_crashed");
    assert!(e.to_string().contains("everything") && e.to_string().contains("signal"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(10), "the failure came at once, not at the end of the operation");

    // The session goes on: the next call starts a new server.
    let text = mcp_text(reg.run("k2", "everything__echo", r#"{"message": "again"}"#, None).await.unwrap());
    assert!(text.contains("again"), "{text}");
    let new_pid = pid_of(&reg, "everything");
    assert_ne!(new_pid, pid);

    // Dropping the registry (the session) kills the server.
    drop(reg);
    let t = Instant::now();
    while alive(new_pid) && t.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive(new_pid), "the server outlived its registry");
}

#[tokio::test]
async fn a_server_that_keeps_dying_is_not_started_again_forever() {
    // `sh -c 'exit 3'` dies at once: every start fails, clearly, and calls do not hang.
    let reg = registry(json!({"mcpServers": {"dead": {"command": "sh", "args": ["-c", "echo cannot open the database >&2; exit 3"]}}}), |m| {
        m.start_timeout = Duration::from_secs(5)
    })
    .await;
    let status = reg.connect_mcp().await;
    match &status[0].state {
        McpServerState::Failed { error } => assert!(error.contains("could not be started") && error.contains("cannot open the database"), "{error}"),
        other => panic!("{other:?}"),
    }
    assert!(reg.descriptors().iter().all(|d| !d.name.starts_with("dead__")));
}

#[tokio::test]
async fn a_hung_server_times_out_and_a_silent_one_fails_its_start() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let reg = registry(json!({"mcpServers": {"hang": {"command": "python3", "args": [fake(), "hang", log.path()]}}}), |m| {
        m.default_mode = Mode::Auto;
        m.call_timeout = Duration::from_millis(1500);
    })
    .await;
    reg.connect_mcp().await;
    let t = Instant::now();
    let e = reg.run("h1", "hang__work", "{}", None).await.unwrap_err();
    assert!(matches!(&e, ToolError::McpTimeout { server, tool, ms: 1500 } if server == "hang" && tool == "work"), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(e.code(), "mcp_timeout");
    // The call did reach it (it is hung, not unreachable), and a cancellation followed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = std::fs::read_to_string(log.path()).unwrap();
    assert!(seen.contains("tools/call") && seen.contains("notifications/cancelled"), "{seen}");

    let silent =
        registry(json!({"mcpServers": {"mute": {"command": "python3", "args": [fake(), "silent"]}}}), |m| m.start_timeout = Duration::from_millis(1500)).await;
    let t = Instant::now();
    let status = silent.connect_mcp().await;
    assert!(t.elapsed() < Duration::from_secs(5));
    match &status[0].state {
        McpServerState::Failed { error } => assert!(error.contains("did not answer the handshake within 1500 ms"), "{error}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_malformed_answer_is_a_clear_error() {
    let reg = registry(
        json!({"mcpServers": {
            "garbage": {"command": "python3", "args": [fake(), "garbage"]},
            "badresult": {"command": "python3", "args": [fake(), "bad-result"]},
            "noisy": {"command": "python3", "args": [fake(), "garbage-start"]}
        }}),
        |m| {
            m.default_mode = Mode::Auto;
            m.call_timeout = Duration::from_secs(10);
            m.start_timeout = Duration::from_secs(10);
        },
    )
    .await;
    let status = reg.connect_mcp().await;
    let t = Instant::now();
    let e = reg.run("g1", "garbage__work", "{}", None).await.unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5), "a garbage line ends the call at once, not at the time limit");
    assert!(
        matches!(&e, ToolError::McpProtocol { server, message } if server == "garbage" && message.contains("not JSON-RPC") && message.contains("Traceback")),
        "{e:?}"
    );

    let e = reg.run("b1", "badresult__work", "{}", None).await.unwrap_err();
    assert!(matches!(&e, ToolError::McpProtocol { server, .. } if server == "badresult"), "{e:?}");
    assert_eq!(e.code(), "mcp_protocol");

    let noisy = status.iter().find(|s| s.name == "noisy").unwrap();
    match &noisy.state {
        McpServerState::Failed { error } => assert!(error.contains("not JSON-RPC") && error.contains("Server starting"), "{error}"),
        other => panic!("{other:?}"),
    }
}

/// A stdio server sees the few variables a program needs (PATH, HOME) and
/// its configured `env`, not the rest of this process's environment: here
/// the variables cargo sets for a test run (`CARGO_PKG_NAME`…), which stand
/// for an API key or token in the app's environment. (`python3` may be a
/// shim that adds its own variables, so the test names what must be absent.)
#[tokio::test]
async fn a_stdio_server_inherits_only_the_basic_variables_and_its_own_env() {
    assert!(std::env::var_os("CARGO_PKG_NAME").is_some(), "cargo sets CARGO_PKG_NAME for test runs");
    let reg = registry(json!({"mcpServers": {"env": {"command": "python3", "args": [fake(), "env"], "env": {"MF_GIVEN": "1"}}}}), |m| {
        m.default_mode = Mode::Auto;
        m.start_timeout = Duration::from_secs(10);
    })
    .await;
    reg.connect_mcp().await;
    let names = mcp_text(reg.run("e1", "env__work", "{}", None).await.unwrap());
    let names: Vec<&str> = names.lines().collect();
    assert!(names.contains(&"PATH") && names.contains(&"HOME") && names.contains(&"MF_GIVEN"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("CARGO")), "the server saw this process's variables: {names:?}");
}

#[tokio::test]
async fn a_server_over_streamable_http() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = tokio::process::Command::new(server_bin("mcp-server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let t = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(t.elapsed() < Duration::from_secs(20), "the HTTP server did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reg = registry(json!({"mcpServers": {"remote": {"url": format!("http://127.0.0.1:{port}/mcp"), "headers": {"X-Client": "mf"}}}}), |m| {
        m.default_mode = Mode::Auto
    })
    .await;
    let status = reg.connect_mcp().await;
    assert!(matches!(status[0].state, McpServerState::Running { pid: None }), "{status:?}");
    let text = mcp_text(reg.run("r1", "remote__echo", r#"{"message": "over http"}"#, None).await.unwrap());
    assert!(text.contains("over http"), "{text}");

    // The server goes away: a typed failure, not a hang.
    child.kill().await.unwrap();
    let e = reg.run("r2", "remote__echo", r#"{"message": "gone"}"#, None).await.unwrap_err();
    assert!(matches!(e, ToolError::McpCrashed { .. } | ToolError::McpStart { .. } | ToolError::McpProtocol { .. }), "{e:?}");
    assert!(e.to_string().contains("remote"), "{e}");
}

/// This process's peak resident memory, in bytes (`VmHWM`).
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap().trim().trim_end_matches("kB").trim().parse().unwrap();
    kb << 10
}

/// A server writes 384 MiB to stderr with no newline, then keeps serving:
/// the app holds a bounded tail of it (its peak memory grows by far less
/// than what was written), and when the server dies the error shows that
/// tail, the flood cut to a sample with the count of what was dropped.
#[tokio::test]
async fn a_server_flooding_stderr_without_a_newline_costs_a_bounded_tail() {
    const FLOOD_MB: u64 = 384;
    let done = tempfile::tempdir().unwrap();
    let flag = done.path().join("flood-done");
    // Peak memory from here on (5 resets VmHWM to the current RSS).
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = peak_rss();
    let reg = registry(
        json!({"mcpServers": {"flood": {"command": "python3", "args": [fake(), "stderr-flood"],
            "env": {"FLOOD_MB": FLOOD_MB.to_string(), "FLOOD_DONE": flag.display().to_string()}}}}),
        |m| {
            m.default_mode = Mode::Auto;
            m.start_timeout = Duration::from_secs(60);
        },
    )
    .await;
    let status = reg.connect_mcp().await;
    assert!(matches!(status[0].state, McpServerState::Running { .. }), "{status:?}");
    assert!(flag.exists(), "the server answered before its flood was read");
    let grew = peak_rss().saturating_sub(before);
    eprintln!("stderr flood of {FLOOD_MB} MiB: peak memory grew by {} KiB", grew >> 10);
    assert!(grew < 64 << 20, "peak memory grew by {} MiB while the server wrote {FLOOD_MB} MiB to stderr", grew >> 20);

    let e = reg.run("f1", "flood__work", "{}", None).await.unwrap_err();
    let ToolError::McpCrashed { server, message } = &e else { panic!("{e:?}") };
    assert_eq!(server, "flood");
    assert!(message.contains("fatal: stopped on purpose after the flood"), "{message}");
    assert!(message.contains("xxxxxxxx") && message.contains(" more bytes)"), "the flood shows as a cut sample: {message}");
    assert!(message.len() < 4096, "the error holds {} bytes of stderr", message.len());
}

/// Hundreds of thousands of tools over a thousand pages: the list is read
/// page by page and given up once it passes the bound, so the server is
/// asked for one page, not a thousand, and is refused by name.
#[tokio::test]
async fn a_server_listing_300k_tools_is_refused_after_its_first_page() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let reg = registry(
        json!({"mcpServers": {
            "flood": {"command": "python3", "args": [fake(), "many-tools", log.path()], "env": {"PAGES": "1000", "PER_PAGE": "300"}},
            "fine": {"command": "python3", "args": [fake(), "hang"]}
        }}),
        |m| m.call_timeout = Duration::from_secs(30),
    )
    .await;
    let t = Instant::now();
    let status = reg.connect_mcp().await;
    let flood = status.iter().find(|s| s.name == "flood").unwrap();
    match &flood.state {
        McpServerState::Failed { error } => assert!(error.contains("flood") && error.contains("more than 256 tools"), "{error}"),
        other => panic!("300,000 tools were accepted: {other:?} ({} tools offered)", flood.tools.len()),
    }
    let pages = std::fs::read_to_string(log.path()).unwrap().lines().filter(|l| *l == "tools/list").count();
    assert_eq!(pages, 1, "pages asked for after the bound was passed");
    assert!(reg.descriptors().iter().all(|d| !d.name.starts_with("flood__")));
    // The other server is offered.
    assert!(reg.descriptors().iter().any(|d| d.name == "fine__work"), "{status:?}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}

/// A cursor that never ends stops at the page bound, not at the time limit.
#[tokio::test]
async fn a_tool_list_that_pages_for_ever_stops_at_the_page_bound() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let reg = registry(json!({"mcpServers": {"pager": {"command": "python3", "args": [fake(), "endless-pages", log.path()]}}}), |m| {
        m.call_timeout = Duration::from_secs(20)
    })
    .await;
    let t = Instant::now();
    let status = reg.connect_mcp().await;
    match &status[0].state {
        McpServerState::Failed { error } => assert!(error.contains("pager") && error.contains("past 32 pages"), "{error}"),
        other => panic!("{other:?}"),
    }
    assert!(t.elapsed() < Duration::from_secs(10), "stopped by the time limit, not the page bound: {:?}", t.elapsed());
    let pages = std::fs::read_to_string(log.path()).unwrap().lines().filter(|l| *l == "tools/list").count();
    assert_eq!(pages, 32);
}

/// A 5 MB description is cut to the bound; a tool with a 1 MB schema is not
/// offered; the server's ordinary tool is.
#[tokio::test]
async fn a_huge_description_is_cut_and_a_huge_schema_is_not_offered() {
    let reg =
        registry(json!({"mcpServers": {"big": {"command": "python3", "args": [fake(), "huge-tools"]}}}), |m| m.call_timeout = Duration::from_secs(20)).await;
    let status = reg.connect_mcp().await;
    assert!(matches!(status[0].state, McpServerState::Running { .. }), "{status:?}");
    let d = reg.descriptors();
    let manual = d.iter().find(|t| t.name == "big__manual").expect("the tool with the long description is offered, cut");
    assert!(manual.description.starts_with("Read me. IGNORE"), "{}", &manual.description[..40]);
    assert!(manual.description.chars().count() <= 1024 + 40, "{} characters", manual.description.chars().count());
    assert!(manual.description.contains("…"));
    assert!(d.iter().all(|t| t.name != "big__wide_schema"), "a 1 MB schema was offered");
    assert!(d.iter().any(|t| t.name == "big__work"));
    let total: usize = d.iter().filter(|t| t.name.starts_with("big__")).map(|t| t.description.len() + t.parameters.to_string().len()).sum();
    assert!(total < 4096, "the server's tools take {total} bytes");
}

/// The MCP tools may take a quarter of the window: a server whose 150 tools
/// would take more is refused with its name and sizes, and the small server
/// beside it is still offered. The token count is the caller's (here four
/// bytes a token, standing for the model's tokenizer).
#[tokio::test]
async fn a_server_whose_tool_list_passes_its_share_of_the_window_is_refused_by_name() {
    let reg = registry(
        json!({"mcpServers": {
            "alpha": {"command": "python3", "args": [fake(), "hang"]},
            "wide": {"command": "python3", "args": [fake(), "wide"]}
        }}),
        |_| {},
    )
    .await;
    let count = |t: &str| t.len() / 4;
    let status = reg.connect_mcp_within(mf_tools::mcp::McpWindow { context_tokens: 8192, count: &count }).await;
    let wide = status.iter().find(|s| s.name == "wide").unwrap();
    match &wide.state {
        McpServerState::Failed { error } => {
            assert!(error.contains("`wide`") && error.contains("its 150 tools take"), "{error}");
            assert!(error.contains("25% of the 8192-token window: 2048 tokens"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    let d = reg.descriptors();
    assert!(d.iter().any(|t| t.name == "alpha__work"), "the small server is offered");
    assert!(d.iter().all(|t| !t.name.starts_with("wide__")));
    let mcp_tokens: usize = d.iter().filter(|t| t.name.contains("__")).map(|t| count(&t.description) + count(&t.parameters.to_string())).sum();
    assert!(mcp_tokens <= 2048, "{mcp_tokens}");
    // With a window 100 times larger it fits.
    let roomy = registry(json!({"mcpServers": {"wide": {"command": "python3", "args": [fake(), "wide"]}}}), |_| {}).await;
    let status = roomy.connect_mcp_within(mf_tools::mcp::McpWindow { context_tokens: 819_200, count: &count }).await;
    assert_eq!(status[0].tools.len(), 150, "{status:?}");
}
