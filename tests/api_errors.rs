//! Malformed requests to a real daemon: each gets the right 4xx with the
//! API's one error shape (`{"code", "message"}`, JSON, a message that says
//! what is wrong), never a 5xx or a hang; and the OpenAPI description the
//! daemon serves lists every route its router has.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{Daemon, Fixture};
use serde_json::Value;

struct Case {
    method: &'static str,
    /// Below /api/v1; `{id}` is replaced by a real campaign's id.
    path: &'static str,
    content_type: Option<&'static str>,
    body: Option<Vec<u8>>,
    status: u16,
    code: &'static str,
    /// A word the message must contain (what is wrong).
    says: &'static str,
}

fn case(
    method: &'static str,
    path: &'static str,
    body: Option<&str>,
    status: u16,
    code: &'static str,
    says: &'static str,
) -> Case {
    Case {
        method,
        path,
        content_type: body.map(|_| "application/json"),
        body: body.map(|b| b.as_bytes().to_vec()),
        status,
        code,
        says,
    }
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)).build().unwrap()
}

/// Sends one request; returns status, content type and body.
fn send(
    d: &Daemon,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Option<reqwest::blocking::Body>,
    token: bool,
) -> (u16, String, Vec<u8>) {
    let mut req = client().request(method.parse().unwrap(), format!("{}/api/v1{path}", d.url));
    if token {
        req = req.bearer_auth(&d.token);
    }
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    if let Some(b) = body {
        req = req.body(b);
    }
    let res = req.send().unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let status = res.status().as_u16();
    let ct = res.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (status, ct, res.bytes().unwrap().to_vec())
}

/// POSTs a file with curl: status, content type and body. The daemon
/// answers a body over the limit before it is all sent and closes the
/// connection, which can reset it before the client reads the answer: a
/// lost answer (no status) is tried again, up to 5 times.
fn post_file(d: &Daemon, path: &str, file: &std::path::Path, chunked: bool) -> (u16, String, Vec<u8>) {
    let mut got = (0, String::new(), Vec::new());
    for _ in 0..5 {
        got = post_file_once(d, path, file, chunked);
        if got.0 >= 200 {
            break;
        }
    }
    got
}

fn post_file_once(d: &Daemon, path: &str, file: &std::path::Path, chunked: bool) -> (u16, String, Vec<u8>) {
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-s", "-o", "-", "-w", "\n%{http_code} %{content_type}", "-H"])
        .arg(format!("Authorization: Bearer {}", d.token))
        .args(["-H", "content-type: application/json", "-H", "expect:", "--data-binary"])
        .arg(format!("@{}", file.display()));
    if chunked {
        cmd.args(["-H", "transfer-encoding: chunked"]);
    }
    let out = cmd.arg(format!("{}/api/v1{path}", d.url)).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, tail) = text.rsplit_once('\n').unwrap_or_else(|| panic!("POST {path}: curl printed {text}"));
    let (status, ct) = tail.split_once(' ').unwrap_or((tail, ""));
    (status.parse().unwrap_or(0), ct.to_string(), body.as_bytes().to_vec())
}

fn assert_error(what: &str, (status, ct, body): (u16, String, Vec<u8>), want_status: u16, code: &str, says: &str) {
    let text = String::from_utf8_lossy(&body);
    assert_eq!(status, want_status, "{what}: status {status}, body {text}");
    assert!(ct.starts_with("application/json"), "{what}: content type `{ct}`, body {text}");
    let v: Value = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {text}"));
    assert_eq!(v["code"], code, "{what}: {v}");
    let message = v["message"].as_str().unwrap_or_else(|| panic!("{what}: no message: {v}"));
    assert!(!message.trim().is_empty(), "{what}: empty message");
    assert!(message.contains(says), "{what}: the message `{message}` does not say `{says}`");
    assert_eq!(v.as_object().unwrap().len(), 2, "{what}: only code and message: {v}");
}

#[test]
fn every_malformed_request_gets_a_4xx_in_the_error_shape_with_a_message() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let cases = vec![
        // Bodies: not JSON, wrong types, missing fields, wrong content type.
        case("POST", "/campaigns", Some("{"), 400, "invalid", "EOF"),
        case("POST", "/campaigns", Some(""), 400, "invalid", "request body"),
        case("POST", "/campaigns", Some(r#"{"spec_toml": 5, "spec_path": "/x"}"#), 400, "invalid", "invalid type"),
        case("POST", "/campaigns", Some(r#"{"spec_toml": ""}"#), 400, "invalid", "spec_path"),
        case("POST", "/campaigns", Some(r#"{"spec_toml": "", "spec_path": "rel"}"#), 400, "invalid", "absolute"),
        case("POST", "/campaigns", Some("[1, 2]"), 400, "invalid", "request body"),
        Case {
            content_type: Some("text/plain"),
            ..case("POST", "/campaigns", Some("{}"), 400, "invalid", "Content-Type")
        },
        Case {
            content_type: Some("application/x-www-form-urlencoded"),
            ..case("POST", "/campaigns/{id}/questions", Some(r#"{"text": "why?"}"#), 400, "invalid", "application/json")
        },
        case("POST", "/campaigns/{id}/questions", Some(r#"{}"#), 400, "invalid", "text"),
        case("POST", "/campaigns/{id}/questions", Some(r#"{"text": "  "}"#), 400, "invalid", "empty"),
        case("POST", "/campaigns/{id}/questions", Some(r#"{"text": true}"#), 400, "invalid", "invalid type"),
        case("POST", "/campaigns/{id}/questions", Some(r#"{"text": "a\u0000b"}"#), 400, "invalid", "NUL"),
        case("POST", "/campaigns/{id}/questions", Some(r#"{"text": "q", "moment": "lunch"}"#), 400, "invalid", "lunch"),
        case("POST", "/campaigns/{id}/runs", Some(r#"{"agent": "nobody"}"#), 400, "invalid", "nobody"),
        case("POST", "/campaigns/{id}/runs", Some(r#"{}"#), 400, "invalid", "agent"),
        case("PUT", "/campaigns/{id}/notify", Some(r#"{}"#), 400, "invalid", "webhooks"),
        case("PUT", "/campaigns/{id}/notify", Some(r#"{"webhooks": 3}"#), 400, "invalid", "invalid type"),
        case(
            "PUT",
            "/campaigns/{id}/notify",
            Some(r#"{"webhooks": [{"url": "ftp://x", "events": ["claim"], "secret_env": "S"}]}"#),
            400,
            "invalid",
            "notify.webhooks[0].url",
        ),
        case(
            "PUT",
            "/campaigns/{id}/notify",
            Some(r#"{"webhooks": [{"url": "http://x", "events": ["claim"], "secret_env": "S", "secret": "s3cr3t"}]}"#),
            400,
            "invalid",
            "unknown field `secret`",
        ),
        case(
            "PUT",
            "/campaigns/{id}/notify",
            Some(r#"{"webhooks": [], "block_streak": 0}"#),
            400,
            "invalid",
            "block_streak",
        ),
        case("PUT", "/campaigns/{id}/notify", Some(r#"{"webhooks": [], "keep": [3]}"#), 400, "invalid", "no webhook 3"),
        case("PUT", "/campaigns/no-such-campaign/notify", Some(r#"{"webhooks": []}"#), 404, "not_found", "not found"),
        case("GET", "/campaigns/no-such-campaign/spend", None, 404, "not_found", "not found"),
        case("POST", "/campaigns/{id}/beam/tag", Some(r#"{"family": "Not A Name"}"#), 400, "invalid", "family"),
        case("POST", "/campaigns/{id}/beam/tag", Some(r#"{"family": 7}"#), 400, "invalid", "invalid type"),
        case(
            "POST",
            "/campaigns/{id}/beam/abandon",
            Some(r#"{"family": "x", "reason": " "}"#),
            400,
            "invalid",
            "reason",
        ),
        case("POST", "/campaigns/{id}/beam/abandon", Some(r#"{"family": "x"}"#), 400, "invalid", "reason"),
        case("POST", "/campaigns/{id}/beam/abandon", Some(r#"{"family": "x", "reason": "r"}"#), 404, "not_found", "x"),
        case("POST", "/campaigns/{id}/hook-installs", Some(r#"{}"#), 400, "invalid", "installed"),
        case("POST", "/campaigns/{id}/hook-installs", Some(r#"{"installed": 3}"#), 400, "invalid", "invalid type"),
        // Hooks: payload, agent and event names, spool parameters.
        case("POST", "/campaigns/{id}/hooks/claude-code/post-tool-use", Some("not json"), 400, "invalid", "not JSON"),
        case("POST", "/campaigns/{id}/hooks/claude-code/post-tool-use", Some("[]"), 400, "invalid", "object"),
        case("POST", "/campaigns/{id}/hooks/nobody/stop", Some("{}"), 400, "invalid", "nobody"),
        case("POST", "/campaigns/{id}/hooks/claude-code/Post_Tool", Some("{}"), 400, "invalid", "kebab"),
        case("POST", "/campaigns/{id}/hooks/claude-code/stop%20now", Some("{}"), 400, "invalid", "kebab"),
        case(
            "POST",
            "/campaigns/{id}/hooks/claude-code/stop?spooled_at=2026-01-01T00:00:00Z",
            Some("{}"),
            400,
            "invalid",
            "outcome",
        ),
        case(
            "POST",
            "/campaigns/{id}/hooks/claude-code/stop?spooled_at=x&outcome=maybe",
            Some("{}"),
            400,
            "invalid",
            "maybe",
        ),
        // Query parameters.
        case("GET", "/campaigns/{id}/log?limit=abc", None, 400, "invalid", "limit"),
        case("GET", "/campaigns/{id}/log?after=1.5", None, 400, "invalid", "after"),
        case("GET", "/campaigns/{id}/log?tail=99999999999999999999999", None, 400, "invalid", "tail"),
        case("GET", "/campaigns/{id}/events?after=abc", None, 400, "invalid", "after"),
        case("GET", "/campaigns/{id}/suggestions", None, 400, "invalid", "moment"),
        case("GET", "/campaigns/{id}/suggestions?moment=lunch", None, 400, "invalid", "lunch"),
        case("GET", "/campaigns/{id}/suggestions?moment=start&limit=-1", None, 400, "invalid", "limit"),
        case("POST", "/campaigns/{id}/evaluate?force=maybe", None, 400, "invalid", "force"),
        case("POST", "/campaigns/{id}/calibrate?runs=many", None, 400, "invalid", "runs"),
        case("POST", "/campaigns/{id}/calibrate?runs=1", None, 400, "invalid", "2 to 20"),
        // Path parameters: unknown and odd campaign ids.
        case("GET", "/campaigns/no-such-campaign", None, 404, "not_found", "no-such-campaign"),
        case("GET", "/campaigns/a%2Fb/stops", None, 404, "not_found", "not found"),
        case("GET", "/campaigns/..%2F..%2Fetc/audit", None, 404, "not_found", "not found"),
        case("GET", "/campaigns/%E2%9C%93%20%27%22%3C/beam", None, 404, "not_found", "not found"),
        case("GET", "/campaigns/a%00b", None, 400, "invalid", "control character"),
        case("GET", "/campaigns/%FF%FE/runs", None, 400, "invalid", "UTF-8"),
        case("POST", "/campaigns/no-such-campaign/hooks/claude-code/stop", Some("{}"), 404, "not_found", "not found"),
        case("POST", "/campaigns/no-such-campaign/evaluate", None, 404, "not_found", "not found"),
        case("GET", "/campaigns/no-such-campaign/events", None, 404, "not_found", "not found"),
        case("POST", "/campaigns/no-such-campaign/redteam", None, 404, "not_found", "not found"),
        case("GET", "/campaigns/..%2F..%2Fetc/redteam", None, 404, "not_found", "not found"),
        case("DELETE", "/campaigns/{id}/redteam", None, 405, "method_not_allowed", "GET"),
        // Unknown routes and wrong methods.
        case("GET", "/nope", None, 404, "not_found", "/api/v1/nope"),
        case("GET", "/campaigns/{id}/nope", None, 404, "not_found", "no API route"),
        case("POST", "/campaigns/{id}/hooks/claude-code/stop/extra", Some("{}"), 404, "not_found", "no API route"),
        case("DELETE", "/campaigns", None, 405, "method_not_allowed", "GET"),
        case("GET", "/campaigns/{id}/evaluate", None, 405, "method_not_allowed", "POST"),
        case("PUT", "/campaigns/{id}/questions", Some("{}"), 405, "method_not_allowed", "allowed"),
        case("POST", "/health", Some("{}"), 405, "method_not_allowed", "GET"),
    ];
    for c in &cases {
        let path = c.path.replace("{id}", &id);
        let what = format!("{} {}", c.method, path);
        let body = c.body.clone().map(reqwest::blocking::Body::from);
        assert_error(&what, send(&d, c.method, &path, c.content_type, body, true), c.status, c.code, c.says);
    }

    // Over the body limit (16 MiB): refused at once with a Content-Length,
    // while read without one (chunked).
    let file = f.dir.path().join("big.json");
    std::fs::write(&file, vec![b' '; 17 * 1024 * 1024]).unwrap();
    for (path, chunked) in [("questions", false), ("beam/tag", true), ("hooks/claude-code/stop", true)] {
        let got = post_file(&d, &format!("/campaigns/{id}/{path}"), &file, chunked);
        assert_error(&format!("{path}: a body over the limit (chunked: {chunked})"), got, 413, "too_large", "16 MiB");
    }

    // No token, a wrong one.
    assert_error("no token", send(&d, "GET", "/campaigns", None, None, false), 401, "unauthorized", "Bearer");
    let (status, ct, body) = {
        let res = client().get(format!("{}/api/v1/campaigns/{id}", d.url)).bearer_auth("not-the-token").send().unwrap();
        let ct = res.headers()["content-type"].to_str().unwrap().to_string();
        (res.status().as_u16(), ct, res.bytes().unwrap().to_vec())
    };
    assert_error("a wrong token", (status, ct, body), 401, "unauthorized", "token");

    // The daemon is still well after all of it.
    assert_eq!(d.api_get("/campaigns").as_array().unwrap().len(), 1);
}

/// Every route under /api/v1: method and path as the OpenAPI description names them.
const ROUTES: &[&str] = &[
    "GET /bank",
    "GET /bank/stats",
    "GET /campaigns",
    "POST /campaigns",
    "GET /campaigns/{id}",
    "POST /campaigns/{id}/archive",
    "POST /campaigns/{id}/unarchive",
    "GET /campaigns/{id}/audit",
    "GET /campaigns/{id}/beam",
    "POST /campaigns/{id}/beam/abandon",
    "POST /campaigns/{id}/beam/tag",
    "GET /campaigns/{id}/claims",
    "POST /campaigns/{id}/claims",
    "POST /campaigns/{id}/claims/{claim}/accept",
    "POST /campaigns/{id}/claims/{claim}/reject",
    "POST /campaigns/{id}/evaluate",
    "POST /campaigns/{id}/calibrate",
    "GET /campaigns/{id}/evaluations",
    "GET /campaigns/{id}/evaluation-progress",
    "GET /campaigns/{id}/events",
    "POST /campaigns/{id}/hook-installs",
    "GET /campaigns/{id}/hook-token",
    "POST /login-codes",
    "POST /campaigns/{id}/hooks/{agent}/{event}",
    "GET /campaigns/{id}/log",
    "GET /campaigns/{id}/questions",
    "POST /campaigns/{id}/questions",
    "GET /campaigns/{id}/questions/open",
    "POST /campaigns/{id}/answers",
    "GET /campaigns/{id}/runs",
    "POST /campaigns/{id}/runs",
    "POST /campaigns/{id}/runs/stop",
    "GET /campaigns/{id}/redteam",
    "POST /campaigns/{id}/redteam",
    "GET /campaigns/{id}/spend",
    "GET /campaigns/{id}/notify",
    "PUT /campaigns/{id}/notify",
    "GET /campaigns/{id}/stops",
    "GET /campaigns/{id}/suggestions",
    "GET /health",
    "GET /openapi.json",
];

fn operations(doc: &Value) -> BTreeSet<String> {
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            ops.insert(format!("{} {path}", method.to_uppercase()));
        }
    }
    ops
}

/// The routes `api::router` registers under /api/v1, read from its source
/// (src/api/mod.rs).
fn router_routes() -> BTreeSet<String> {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/api/mod.rs")).unwrap();
    let start = src.find("let api = Router::new()").expect("the API router in src/api/mod.rs");
    let block = &src[start..start + src[start..].find(';').unwrap()];
    let mut routes = BTreeSet::new();
    for line in block.lines().map(str::trim).filter(|l| l.starts_with(".route(\"")) {
        let path = line.split('"').nth(1).unwrap();
        for method in ["get", "post", "put", "patch", "delete"] {
            if line.contains(&format!("{method}(")) {
                routes.insert(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    routes
}

#[test]
fn the_openapi_description_lists_every_route_and_needs_no_token() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let (status, ct, body) = send(&d, "GET", "/openapi.json", None, None, false);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(ct.starts_with("application/json"), "{ct}");
    let doc: Value = serde_json::from_slice(&body).unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let want: BTreeSet<String> = ROUTES.iter().map(|s| s.to_string()).collect();
    assert_eq!(operations(&doc), want, "the description's operations");
    assert_eq!(router_routes(), want, "the router's routes (src/api/mod.rs)");

    // Bearer token everywhere but /health and /openapi.json; every
    // operation documents its errors in the one shape.
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    assert_eq!(doc["security"][0]["bearer"], serde_json::json!([]));
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let open = path == "/health" || path == "/openapi.json";
            assert_eq!(op.get("security").is_some(), open, "{method} {path}: security");
            let responses = op["responses"].as_object().unwrap();
            for (code, r) in responses {
                assert!(r["description"].is_string(), "{method} {path} {code}: a description");
                if code.starts_with('4') || code.starts_with('5') {
                    assert_eq!(
                        r["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ErrorBody",
                        "{method} {path} {code}"
                    );
                }
            }
            if !open {
                for code in ["401", "403", "500"] {
                    assert!(responses.contains_key(code), "{method} {path}: no {code}");
                }
            }
            if op.get("requestBody").is_some() {
                assert!(responses.contains_key("413"), "{method} {path}: a body but no 413");
                assert!(responses.contains_key("400"), "{method} {path}: a body but no 400");
            }
            if path.contains("{id}") {
                assert!(responses.contains_key("404"), "{method} {path}: no 404");
            }
        }
    }

    // `gadfly openapi` prints the same description, without a daemon.
    let out = common::gadfly().arg("openapi").output().unwrap();
    assert!(out.status.success());
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, doc);
}
