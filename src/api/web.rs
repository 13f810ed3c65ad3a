//! The console's static assets from web/: embedded at build time, or read
//! from `$GADFLY_WEB_DIR` when set (for working on them without rebuilding).

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use include_dir::{include_dir, Dir};

use super::AppState;

static WEB: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/web");

/// The bytes of a web/ file, from disk in dev mode, else embedded.
pub fn asset(path: &str) -> Option<Vec<u8>> {
    if path.split('/').any(|part| part == ".." || part.is_empty()) {
        return None;
    }
    if let Some(dir) = std::env::var_os("GADFLY_WEB_DIR").filter(|d| !d.is_empty()) {
        return std::fs::read(std::path::Path::new(&dir).join(path)).ok();
    }
    WEB.get_file(path).map(|f| f.contents().to_vec())
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "json" => "application/json",
        "png" => "image/png",
        "woff2" => "font/woff2",
        "txt" | "md" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// `/assets/{*path}`: static files hold no campaign data and need no login.
pub async fn serve_asset(Path(path): Path<String>) -> Response {
    match asset(&path) {
        Some(bytes) => {
            ([(header::CONTENT_TYPE, content_type(&path)), (header::CACHE_CONTROL, "no-cache")], bytes).into_response()
        }
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}

/// The console's single page, when web/index.html exists, with the CSRF
/// token its scripts send with every change (see `middleware::csrf_value`).
pub fn index(token: &str) -> Option<Response> {
    asset("index.html").map(|b| {
        let page = String::from_utf8_lossy(&b).replacen(
            "<meta name=\"gadfly-csrf\" content=\"\">",
            &format!("<meta name=\"gadfly-csrf\" content=\"{}\">", super::middleware::csrf_value(token)),
            1,
        );
        ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], page)
            .into_response()
    })
}

pub async fn campaigns_page(state: State<AppState>) -> Response {
    match index(&state.token) {
        Some(r) => r,
        None => super::pages::campaigns_page(state).await,
    }
}

pub async fn campaign_page(state: State<AppState>, id: Path<String>) -> Response {
    match index(&state.token) {
        Some(r) => r,
        None => super::pages::campaign_page(state, id).await,
    }
}

/// `/replay`: a `gadfly replay --json` report opened from a file, read in
/// the browser (issue #39); the server only serves the page.
pub async fn replay_page(state: State<AppState>) -> Response {
    match index(&state.token) {
        Some(r) => r,
        None => (StatusCode::NOT_FOUND, "the console's replay page needs web/index.html").into_response(),
    }
}

pub async fn bank_page(state: State<AppState>) -> Response {
    match index(&state.token) {
        Some(r) => r,
        None => (StatusCode::NOT_FOUND, "the console's bank page needs web/index.html").into_response(),
    }
}
