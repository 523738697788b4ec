//! Test support for more than one `countersign-mcp` process: Redis and
//! PostgreSQL servers the tests start themselves on free loopback ports
//! (never the shared instances on 6379 and 5432), the binary as a child
//! process, a raw Streamable HTTP client and the approver's side of the
//! approval pages.
//!
//! Without `redis-server` or `initdb` a test says `SKIPPED` and passes,
//! unless it runs under `cargo xtask` (which installs both and sets
//! `COUNTERSIGN_MCP_PYTHON`) or `COUNTERSIGN_MCP_STORES` is set: then a
//! missing server fails.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// The npm package at `dir` (under this crate) when `npm ci` has
/// installed `module` in it; `None`, saying `SKIPPED` and naming `what`,
/// when it has not. With `COUNTERSIGN_MCP_NODE` set (`cargo xtask ci`
/// sets it) a missing package fails instead.
pub fn npm_package(dir: &str, module: &str, what: &str) -> Option<std::path::PathBuf> {
    let package = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir);
    let installed = package.join(module).exists();
    if std::env::var_os("COUNTERSIGN_MCP_NODE").is_some() {
        assert!(
            installed,
            "COUNTERSIGN_MCP_NODE is set but `npm ci` did not fill `{}`",
            package.display()
        );
    }
    if !installed {
        eprintln!(
            "SKIPPED: no {what}; `cargo xtask ci` runs `npm ci` in `{}`",
            package.display()
        );
        return None;
    }
    Some(package)
}

/// Stops a `countersign-mcp` child as a service manager would: `SIGTERM`,
/// so that it closes the Chromium it launched, then, if it has not exited
/// within 10 s, `SIGKILL`.
pub fn stop_gracefully(child: &mut std::process::Child) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    for _ in 0..200 {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

use countersign_backend_chromium::running_as_root;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};

pub const CLIENT_TOKEN: &str = "shared-client-token-0123456789";
pub const APPROVER_TOKEN: &str = "shared-approver-token-0123456789";
pub const ACTOR: &str = "agent";
pub const RUN: &str = "run-1";

static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

/// Whether a missing store server fails the test instead of skipping it.
fn servers_required() -> bool {
    std::env::var_os("COUNTERSIGN_MCP_STORES").is_some()
        || std::env::var_os("COUNTERSIGN_MCP_PYTHON").is_some()
}

/// Skips (prints `SKIPPED`, answers `None`) or fails, as
/// [`servers_required`] says.
fn missing(what: &str, install: &str) -> Option<std::convert::Infallible> {
    assert!(
        !servers_required(),
        "{what} is required here (COUNTERSIGN_MCP_STORES or COUNTERSIGN_MCP_PYTHON is set) but was not found: {install}"
    );
    eprintln!("SKIPPED: {what} was not found; {install}");
    None
}

/// A port nobody listens on right now, never 5432 or 6379.
pub fn free_port() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if port != 5432 && port != 6379 {
            return port;
        }
    }
}

fn fresh_dir(tag: &str) -> PathBuf {
    let n = NEXT_DIR.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!(
        "countersign-mcp-test-{}-{tag}-{n}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn runs(program: &Path, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One redis-server of this test, killed (by its pid) on drop.
pub struct RedisServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// A fresh durable server, or `None` (skipped) when
    /// `redis-server` is not installed.
    pub fn start() -> Option<RedisServer> {
        if !runs(Path::new("redis-server"), "--version") {
            missing(
                "redis-server",
                "install it (Debian: `apt-get install redis-server`)",
            )?;
        }
        let dir = fresh_dir("redis");
        for _ in 0..5 {
            let port = free_port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                // The store refuses a server that could roll back a
                // consumed grant: append-only, synced on every write.
                .args([
                    "--save",
                    "",
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                ])
                .args(["--daemonize", "no"])
                .arg("--dir")
                .arg(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut server = RedisServer {
                child,
                port,
                dir: dir.clone(),
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if server.child.try_wait().unwrap().is_some() {
                    break;
                }
                if server.ping() {
                    return Some(server);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = server.child.kill();
            let _ = server.child.wait();
            std::mem::forget(server);
        }
        panic!("could not start redis-server after 5 tries");
    }

    fn ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        if stream.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut answer = [0u8; 7];
        stream.read_exact(&mut answer).is_ok() && &answer == b"+PONG\r\n"
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The user that runs PostgreSQL when the tests run as root.
const PG_USER: &str = "postgres";

/// Where the PostgreSQL binaries are: `$PG_BIN`, else the newest
/// `/usr/lib/postgresql/<n>/bin`, else the `PATH` (as the store's tests).
fn pg_bin(name: &str) -> PathBuf {
    if let Ok(dir) = std::env::var("PG_BIN") {
        return Path::new(&dir).join(name);
    }
    if let Ok(entries) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<(u32, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                Some((v, e.path().join("bin").join(name)))
            })
            .filter(|(_, p)| p.exists())
            .collect();
        versions.sort();
        if let Some((_, path)) = versions.pop() {
            return path;
        }
    }
    PathBuf::from(name)
}

fn pg_command(program: &str) -> Command {
    if running_as_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", PG_USER, "--"]).arg(pg_bin(program));
        command
    } else {
        Command::new(pg_bin(program))
    }
}

fn succeed(command: &mut Command, what: &str) {
    let output = command.stdin(Stdio::null()).output().unwrap();
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// One PostgreSQL cluster of this test (initdb, pg_ctl), stopped and its
/// directory removed on drop.
pub struct PgServer {
    dir: PathBuf,
    port: u16,
}

impl PgServer {
    /// A fresh cluster, or `None` (skipped) when `initdb` is not installed.
    pub fn start() -> Option<PgServer> {
        if !runs(&pg_bin("initdb"), "--version") {
            missing(
                "initdb (the PostgreSQL server)",
                "install it (Debian: `apt-get install postgresql`) or set PG_BIN",
            )?;
        }
        let dir = fresh_dir("pg");
        if running_as_root() {
            succeed(
                Command::new("chown").arg(format!("{PG_USER}:")).arg(&dir),
                "chown of the test directory",
            );
        }
        succeed(
            pg_command("initdb").arg("-D").arg(dir.join("data")).args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-locale",
            ]),
            "initdb",
        );
        let conf = dir.join("data").join("postgresql.auto.conf");
        let mut text = std::fs::read_to_string(&conf).unwrap_or_default();
        text.push_str(
            "listen_addresses = '127.0.0.1'\nmax_connections = 100\nlogging_collector = off\n",
        );
        std::fs::write(&conf, text).unwrap();
        let mut server = PgServer { dir, port: 0 };
        for _ in 0..5 {
            server.port = free_port();
            let started = pg_command("pg_ctl")
                .arg("-D")
                .arg(server.dir.join("data"))
                .arg("-l")
                .arg(server.dir.join("server.log"))
                .args(["-w", "-t", "60", "start", "-o"])
                .arg(format!("-p {} -k {}", server.port, server.dir.display()))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if started {
                return Some(server);
            }
        }
        panic!(
            "could not start postgres after 5 tries: {}",
            std::fs::read_to_string(server.dir.join("server.log")).unwrap_or_default()
        );
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = pg_command("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "stop"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One `countersign-mcp` process serving HTTP, killed (by its pid) on drop.
pub struct Process {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub origin: String,
    /// The MCP endpoint.
    pub mcp: String,
    /// Everything it wrote to stderr, for failure messages.
    pub stderr: Arc<Mutex<String>>,
    _config: tempfile::NamedTempFile,
}

impl Process {
    /// The binary with the test's configuration on `store_url`.
    pub fn start(store_url: &str) -> Process {
        Process::start_with(store_url, "")
    }

    /// The binary with the test's configuration on `store_url`, and
    /// `http_extra` added to its `[http]` table.
    pub fn start_with(store_url: &str, http_extra: &str) -> Process {
        let text = format!(
            r#"
[policy]
allow_hosts = ["127.0.0.2"]
schemes = ["http"]
special_use = ["127.0.0.2/32"]

[store]
url = "{store_url}"

[http]
listen = "127.0.0.1:0"
{http_extra}

[[tokens]]
token = "{CLIENT_TOKEN}"
actor = "{ACTOR}"
run = "{RUN}"

[[approvers]]
name = "alice"
token = "{APPROVER_TOKEN}"
"#
        );
        let config = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(config.path(), text).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_countersign-mcp"))
            .arg("--config")
            .arg(config.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut mcp = None;
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            stderr.lock().unwrap().push_str(&format!("{line}\n"));
            if let Some(url) = line.strip_prefix("MCP endpoint (Streamable HTTP): ") {
                mcp = Some(url.to_owned());
                break;
            }
        }
        let Some(mcp) = mcp else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "countersign-mcp printed no MCP endpoint:\n{}",
                stderr.lock().unwrap()
            );
        };
        // Keep reading, so the process never blocks on a full pipe.
        let rest = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                rest.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        let origin = mcp.strip_suffix("/mcp").unwrap().to_owned();
        Process {
            child,
            origin,
            mcp,
            stderr,
            _config: config,
        }
    }

    /// How many actions this process's fake backend performed.
    pub async fn fake_actions(&self) -> u64 {
        let answer = http()
            .get(format!("{}/fake-backend/actions", self.origin))
            .bearer_auth(APPROVER_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        let body = json_of(answer).await;
        body["actions"].as_u64().unwrap()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        stop_gracefully(&mut self.child);
    }
}

/// A client that follows no redirect (the pages answer `303`) and uses
/// no proxy.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .unwrap()
}

/// A JSON body, read without reqwest's `json` feature.
pub async fn json_of(response: reqwest::Response) -> Value {
    let text = response.text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The JSON-RPC message answering `id` in a JSON or SSE body.
pub fn answer_to(body: &str, id: u64) -> Value {
    let messages: Vec<Value> = if body.trim_start().starts_with('{') {
        vec![serde_json::from_str(body).unwrap()]
    } else {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    };
    messages
        .into_iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer to request {id} in {body:?}"))
}

/// A 2026-07-28 request to a mounted Router: no session, no initialize,
/// the metadata on the request, bearing `token` when given.
pub fn stateless_request(
    method: &str,
    params: Value,
    token: Option<&str>,
) -> axum::http::Request<axum::body::Body> {
    stateless_request_declaring(method, params, token, serde_json::json!({}))
}

/// [`stateless_request`] from a client declaring `capabilities`.
pub fn stateless_request_declaring(
    method: &str,
    params: Value,
    token: Option<&str>,
    capabilities: Value,
) -> axum::http::Request<axum::body::Body> {
    use axum::http::header;
    let mut params = params;
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    });
    let mut builder = axum::http::Request::post(countersign_mcp::http::MCP_PATH)
        .header(header::HOST, "127.0.0.1")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        builder = builder.header("mcp-name", name);
    }
    if let Some(token) = token {
        builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    builder
        .body(axum::body::Body::from(body.to_string()))
        .unwrap()
}

/// An MCP session (protocol 2025-11-25, `Mcp-Session-Id`) over raw HTTP.
pub struct Session {
    http: reqwest::Client,
    url: String,
    token: String,
    pub id: String,
    next: u64,
}

impl Session {
    fn headers(token: &str, session: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert(
            "accept",
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
        );
        if let Some(session) = session {
            headers.insert("mcp-session-id", HeaderValue::from_str(session).unwrap());
            headers.insert(
                "mcp-protocol-version",
                HeaderValue::from_static("2025-11-25"),
            );
        }
        headers
    }

    /// `initialize`, then `notifications/initialized`, as the client of
    /// [`CLIENT_TOKEN`].
    pub async fn open(url: &str) -> Session {
        Self::open_with_token(url, CLIENT_TOKEN).await
    }

    /// The same, with the bearer token `token`.
    pub async fn open_with_token(url: &str, token: &str) -> Session {
        let http = http();
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "shared-store-test", "version": "1"}}});
        let answer = http
            .post(url)
            .headers(Self::headers(token, None))
            .body(init.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        let id = answer
            .headers()
            .get("mcp-session-id")
            .expect("no Mcp-Session-Id")
            .to_str()
            .unwrap()
            .to_owned();
        let body = answer.text().await.unwrap();
        assert_eq!(
            answer_to(&body, 0)["result"]["protocolVersion"],
            "2025-11-25"
        );
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let answer = http
            .post(url)
            .headers(Self::headers(token, Some(&id)))
            .body(initialized.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::ACCEPTED);
        Session {
            http,
            url: url.to_owned(),
            token: token.to_owned(),
            id,
            next: 1,
        }
    }

    /// One request with this session's id sent to `url` (another
    /// process's endpoint, to see what it says): the status and body.
    pub async fn send_to(
        &mut self,
        url: &str,
        method: &str,
        params: Value,
    ) -> (StatusCode, String) {
        let id = self.next;
        self.next += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let answer = self
            .http
            .post(url)
            .headers(Self::headers(&self.token, Some(&self.id)))
            .body(request.to_string())
            .send()
            .await
            .unwrap();
        let status = answer.status();
        (status, answer.text().await.unwrap())
    }

    /// `tools/call`: the tool result's JSON (`structuredContent`), checked
    /// against its text and its `isError` flag.
    pub async fn call(&mut self, name: &str, arguments: Value) -> Value {
        let id = self.next;
        let url = self.url.clone();
        let (status, body) = self
            .send_to(
                &url,
                "tools/call",
                json!({"name": name, "arguments": arguments}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let result = answer_to(&body, id)["result"].clone();
        let structured = result["structuredContent"].clone();
        let text: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, structured);
        assert_eq!(
            result["isError"] == true,
            structured["status"] == "error",
            "{result}"
        );
        structured
    }

    /// The error code of a refused call, or `ok`.
    pub async fn outcome(&mut self, name: &str, arguments: Value) -> String {
        let result = self.call(name, arguments).await;
        match result["status"].as_str().unwrap() {
            "error" => result["error"]["code"].as_str().unwrap().to_owned(),
            other => other.to_owned(),
        }
    }
}

/// The value of the first `name="token"` input after `marker` in `html`.
fn token_after(html: &str, marker: &str) -> String {
    let at = html
        .find(marker)
        .unwrap_or_else(|| panic!("no `{marker}` in the page:\n{html}"));
    let rest = &html[at..];
    let value = rest.split("name=\"token\" value=\"").nth(1).unwrap();
    value[..value.find('"').unwrap()].to_owned()
}

/// The `action` of the first form after `marker` (`&amp;` decoded).
fn action_of(html: &str, marker: &str) -> String {
    let at = html.find(marker).unwrap();
    let before = &html[..at];
    let form = before.rfind("<form").unwrap();
    let tag = &html[form..];
    let action = tag.split("action=\"").nth(1).unwrap();
    action[..action.find('"').unwrap()].replace("&amp;", "&")
}

/// A form the approval pages rendered: where it posts, and its token.
pub struct PageForm {
    pub action: String,
    pub token: String,
}

/// The approve form of the proposal's page on `origin`.
pub async fn approve_form(origin: &str, proposal_id: &str) -> PageForm {
    let page = http()
        .get(format!("{origin}/approvals/proposals/{proposal_id}"))
        .bearer_auth(APPROVER_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.unwrap();
    PageForm {
        action: action_of(&html, "class=\"approve\">"),
        token: token_after(&html, "class=\"approve\">"),
    }
}

/// The stop form of the run's page on `origin`.
pub async fn stop_form(origin: &str) -> PageForm {
    let page = http()
        .get(format!("{origin}/approvals/runs/{ACTOR}/{RUN}"))
        .bearer_auth(APPROVER_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.unwrap();
    let marker = "/stop\"";
    PageForm {
        action: action_of(&html, marker),
        token: token_after(&html, marker),
    }
}

/// Posts `form` (as a same-origin browser would) to `origin`: the status
/// and the `Location` it redirects to.
pub async fn post_form(origin: &str, form: &PageForm) -> (StatusCode, String) {
    let answer = http()
        .post(format!("{origin}{}", form.action))
        .bearer_auth(APPROVER_TOKEN)
        .header("sec-fetch-site", "same-origin")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}&note=", form.token))
        .send()
        .await
        .unwrap();
    let location = answer
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (answer.status(), location)
}

/// The Python of the test venv (`COUNTERSIGN_MCP_PYTHON`, or
/// `target/mcp-venv`), or `None` (the test says SKIPPED) without one.
pub fn python() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("COUNTERSIGN_MCP_PYTHON") {
        let path = PathBuf::from(path);
        assert!(
            path.exists(),
            "COUNTERSIGN_MCP_PYTHON names `{}`, which does not exist",
            path.display()
        );
        return Some(path);
    }
    let default =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp-venv/bin/python");
    if default.exists() {
        return Some(default);
    }
    eprintln!(
        "SKIPPED: no Python MCP SDK at `{}`; `cargo xtask ci` creates it (python3 -m venv target/mcp-venv && target/mcp-venv/bin/pip install mcp)",
        default.display()
    );
    None
}

/// The webhook receiver of countersign-notify's tests (the reference
/// Standard Webhooks library verifies each request), and its first line.
pub struct Receiver {
    child: Child,
    /// Each line the receiver printed after its first, as it comes.
    pub lines: std::sync::mpsc::Receiver<String>,
    /// The port it listens on.
    pub port: String,
}

impl Receiver {
    /// A receiver of a fixed secret, and the secret in a file for a
    /// `[[notify]]` table's `secret_file`; `None` (the test says SKIPPED)
    /// without the test venv or its `standardwebhooks`.
    pub fn with_secret_file() -> Option<(Receiver, tempfile::NamedTempFile)> {
        let python = python()?;
        let ready = Command::new(&python)
            .args(["-c", "import standardwebhooks"])
            .status()
            .is_ok_and(|s| s.success());
        if !ready {
            eprintln!(
                "SKIPPED: no `standardwebhooks` in the test venv; `cargo xtask ci` installs it"
            );
            return None;
        }
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let receiver = Receiver::start(&python, secret);
        let secret_file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(secret_file.path(), format!("{secret}\n")).unwrap();
        Some((receiver, secret_file))
    }

    /// Starts the receiver answering 204 to each request it verifies with
    /// `secret`.
    pub fn start(python: &PathBuf, secret: &str) -> Receiver {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../notify/tests/receiver.py");
        let mut child = Command::new(python)
            .arg(script)
            .args([secret, "204"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let port = first.strip_prefix("listening ").unwrap().to_owned();
        let (send, received) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Receiver {
            child,
            lines: received,
            port,
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
