//! The console's login: `GET /login` with a one-time code or the token,
//! the login form's POST, and `POST /login-codes`, which mints the codes.

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::middleware::{session_value, COOKIE};
use super::openapi::{Forbidden, Internal, Unauthorized};
use super::{ApiResult, AppState};

#[derive(Deserialize)]
pub(super) struct LoginQuery {
    /// The master token (the contract's `/login?token=`; it stays in the
    /// browser's history: prefer a code).
    token: Option<String>,
    /// A one-time login code (`gadfly console`, `gadfly serve`).
    code: Option<String>,
}

/// The session cookie and a redirect to the campaigns; the answer is never
/// cached and sends no Referer onwards.
fn logged_in(state: &AppState) -> Response {
    let cookie = format!("{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict", session_value(&state.token));
    (
        [
            (header::SET_COOKIE, cookie),
            (header::CACHE_CONTROL, "no-store".to_string()),
            (header::REFERRER_POLICY, "no-referrer".to_string()),
        ],
        Redirect::to("/"),
    )
        .into_response()
}

fn login_refused(message: &str) -> Response {
    (StatusCode::UNAUTHORIZED, Html(super::pages::login_form(Some(message)))).into_response()
}

/// `GET /login?code=CODE` (one-time) or `GET /login?token=TOKEN`.
pub(super) async fn login(State(state): State<AppState>, Query(q): Query<LoginQuery>) -> Response {
    match (q.code, q.token) {
        (Some(c), _) if state.login_codes.redeem(c.trim()) => logged_in(&state),
        (Some(_), _) => login_refused("That login code is not valid: it was used already, is older than ten minutes, or the daemon restarted since. `gadfly console` prints a new link."),
        (None, Some(t)) if super::auth::constant_time_eq(t.trim(), &state.token) => logged_in(&state),
        (None, Some(_)) => login_refused("That token is not valid."),
        (None, None) => Html(super::pages::login_form(None)).into_response(),
    }
}

#[derive(Deserialize)]
pub(super) struct LoginForm {
    token: String,
}

/// The login form's POST: the token in the body, never in a URL.
pub(super) async fn login_form_post(
    State(state): State<AppState>,
    form: Result<axum::Form<LoginForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    match form.ok().map(|f| f.0.token) {
        Some(t) if super::auth::constant_time_eq(t.trim(), &state.token) => logged_in(&state),
        _ => login_refused("That token is not valid."),
    }
}

/// A one-time console login link.
#[derive(Serialize, ToSchema)]
pub(super) struct LoginCode {
    /// Good for one login, within `expires_in_s`.
    code: String,
    /// The link to open: `/login?code=CODE` on this daemon.
    url: String,
    expires_in_s: u64,
}

/// A one-time login link for the console (master token only): the link
/// logs one browser in, once, within ten minutes, and leaves no lasting
/// secret in its history.
#[utoipa::path(post, path = "/login-codes", tag = "daemon",
    responses((status = 200, description = "ok", body = LoginCode), Unauthorized, Forbidden, Internal))]
pub(super) async fn login_code(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Json<LoginCode>> {
    let code = state.login_codes.mint();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let base = if host.is_empty() { state.supervisor.endpoint().0 } else { format!("http://{host}") };
    Ok(Json(LoginCode {
        url: format!("{base}/login?code={code}"),
        code,
        expires_in_s: super::auth::LoginCodes::TTL.as_secs(),
    }))
}
