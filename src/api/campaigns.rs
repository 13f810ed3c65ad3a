//! Campaigns: create, list and show them, evaluate a workspace, and what
//! a campaign recorded (evaluations, stop attempts, the claim audit).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::{IntoParams, ToSchema};

use super::middleware::HookCaller;
use super::openapi::{Conflict, Forbidden, Internal, Invalid, NotFound, TooLarge, TooMany, Unauthorized};
use super::{ApiError, ApiPath, ApiQuery, ApiResult, AppState, CampaignId, JsonBody};

/// Every campaign with its status and latest verdict; `state` says where its
/// agent stands (active, running, done, stopped_by_budget, stopped, failed),
/// `attached` the agent session gadfly knows of, and `archived_at` when it
/// was archived (archived campaigns are listed too; the console and
/// `campaign list` hide them).
#[utoipa::path(get, path = "/campaigns", tag = "campaigns",
    responses((status = 200, description = "ok", body = [Object]), Unauthorized, Forbidden, Internal))]
pub(super) async fn list_campaigns(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(super::views::campaign_summaries(&state.supervisor).await?)))
}

#[derive(Deserialize, ToSchema)]
pub(super) struct CreateCampaign {
    /// The campaign spec (TOML).
    spec_toml: String,
    /// Where the spec was read from, absolute: relative paths in it are taken from its folder.
    #[schema(pattern = "^/")]
    spec_path: String,
}

#[derive(Serialize, ToSchema)]
pub(super) struct CreatedCampaign {
    id: String,
    name: String,
    mode: String,
}

/// Create a campaign from its spec.
#[utoipa::path(post, path = "/campaigns", tag = "campaigns", request_body = CreateCampaign,
    responses((status = 201, description = "created", body = CreatedCampaign),
        Invalid, Unauthorized, Forbidden, TooLarge, Internal))]
pub(super) async fn create_campaign(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<CreateCampaign>,
) -> ApiResult<(StatusCode, Json<CreatedCampaign>)> {
    let row = state.supervisor.create_campaign(&req.spec_toml, &req.spec_path).await?;
    Ok((StatusCode::CREATED, Json(CreatedCampaign { id: row.id, name: row.name, mode: row.mode })))
}

/// One campaign: spec, status, latest evaluation, runs; also `state`,
/// `attached` and `archived_at` as in the list, and `latest_moment` (the
/// newest moment detected other than a completion claim or the start, else
/// the newest of those).
#[utoipa::path(get, path = "/campaigns/{id}", tag = "campaigns", params(CampaignId),
    responses((status = 200, description = "ok", body = Object), Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn show_campaign(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(super::views::campaign_detail(&state.supervisor, &id).await?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct EvalQuery {
    /// Run the harness even if this tree was evaluated before.
    #[serde(default)]
    force: Option<bool>,
}

/// Evaluate the campaign's workspace now (a snapshot built and run in a
/// fresh folder; cached per tree unless `force`) and return the verdict.
#[utoipa::path(post, path = "/campaigns/{id}/evaluate", tag = "campaigns", params(CampaignId, EvalQuery),
    responses((status = 200, description = "ok", body = Object), Invalid, Unauthorized, Forbidden, NotFound, Conflict, TooMany, Internal))]
pub(super) async fn evaluate(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    ApiQuery(q): ApiQuery<EvalQuery>,
    hook: Option<axum::extract::Extension<HookCaller>>,
) -> ApiResult<Json<Value>> {
    let force = q.force.unwrap_or(false);
    if force && hook.is_some() {
        forced_by_hook_token(&id)?;
    }
    let e = state.supervisor.evaluate(&id, force).await?;
    Ok(Json(super::views::evaluation_json(&e)))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct CalibrateQuery {
    /// How many evaluations of the initial kernel against itself (2 to 20;
    /// 5 when left out).
    #[serde(default)]
    runs: Option<u32>,
}

/// Calibrate the campaign's harness: the initial kernel against itself,
/// `runs` evaluations with fresh seeds. Returns each scenario's bias and
/// noise, and `fair`: false when a scenario's bias is beyond its noise or a
/// run failed. Later evaluations are judged with the noise found. The
/// master token only.
#[utoipa::path(post, path = "/campaigns/{id}/calibrate", tag = "campaigns", params(CampaignId, CalibrateQuery),
    responses((status = 200, description = "ok", body = Object), Invalid, Unauthorized, Forbidden, NotFound, Conflict, Internal))]
pub(super) async fn calibrate(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    ApiQuery(q): ApiQuery<CalibrateQuery>,
) -> ApiResult<Json<Value>> {
    let runs = q.runs.unwrap_or(crate::calibration::DEFAULT_RUNS);
    if !(2..=crate::app::CALIBRATION_MAX_RUNS).contains(&runs) {
        return Err(ApiError::Invalid(format!(
            "runs: {runs} is out of range; a calibration takes 2 to {} evaluations",
            crate::app::CALIBRATION_MAX_RUNS
        )));
    }
    let c = state.supervisor.calibrate(&id, runs).await?;
    Ok(Json(serde_json::json!({"fair": c.fair(), "summary": c.summary(), "calibration": c})))
}

/// How often a hook token may force an evaluation of its campaign: each
/// one runs the harness (minutes on a GPU, and the machine is shared), and
/// an unchanged tree's verdict is cached anyway (THREATS row 16).
const FORCED_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

fn forced_by_hook_token(campaign: &str) -> ApiResult<()> {
    static LAST: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>> =
        std::sync::LazyLock::new(Default::default);
    let mut last = LAST.lock().expect("forced-evaluation times poisoned");
    let now = std::time::Instant::now();
    if let Some(at) = last.get(campaign) {
        let wait = FORCED_EVERY.saturating_sub(now.duration_since(*at));
        if !wait.is_zero() {
            return Err(ApiError::TooMany(format!(
                "a hook token may force an evaluation of {campaign} once a minute; try again in {} s, or drop \
                 `force` (an unchanged tree's verdict is cached, a changed one is evaluated anyway)",
                wait.as_secs().max(1)
            )));
        }
    }
    last.insert(campaign.to_string(), now);
    Ok(())
}

/// Every evaluation of the campaign, oldest first: the workspace's, and
/// (`origin` "beam") its beam candidates'; each says whether its figures
/// are a result (`incorrect`, `geomean_counts`).
#[utoipa::path(get, path = "/campaigns/{id}/evaluations", tag = "campaigns", params(CampaignId),
    responses((status = 200, description = "ok", body = [Object]),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn list_evaluations(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    // Each with its id; one whose body does not decode is skipped (the store warns).
    let list = state.supervisor.store().list_evaluations(&id).await?;
    Ok(Json(Value::Array(list.iter().map(super::views::evaluation_json).collect())))
}

/// What the campaign's running evaluation is doing now (`gadfly eval`'s
/// progress line): `evaluating`, and while it is, the `step` (preparing the
/// candidate, waiting for a worker, building, running the harness, reading
/// the results, measuring again) and the `seconds` spent in it.
#[utoipa::path(get, path = "/campaigns/{id}/evaluation-progress", tag = "campaigns", params(CampaignId),
    responses((status = 200, description = "ok", body = Object),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn evaluation_progress(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(match state.supervisor.evaluation_step(&id) {
        Some((step, seconds)) => json!({"evaluating": true, "step": step, "seconds": (seconds * 10.0).round() / 10.0}),
        None => json!({"evaluating": false}),
    }))
}

/// Every stop attempt (completion claim) and the gate's decision.
#[utoipa::path(get, path = "/campaigns/{id}/stops", tag = "campaigns", params(CampaignId),
    responses((status = 200, description = "ok", body = [Object]),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn list_stops(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(json!(state.supervisor.store().list_stop_attempts(&id).await?)))
}

/// Every completion claim: verdict, decision, question, what followed (docs/AUDIT.md).
#[utoipa::path(get, path = "/campaigns/{id}/audit", tag = "campaigns", params(CampaignId),
    responses((status = 200, description = "ok", body = Object), Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn campaign_audit(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    let audit = crate::audit::campaign(state.supervisor.store(), &id).await?;
    Ok(Json(crate::audit::campaign_json(&audit)))
}

#[derive(Serialize, ToSchema)]
pub(super) struct ArchiveMark {
    id: String,
    /// Whether the campaign is archived now.
    archived: bool,
    /// When it was archived; null when it is not.
    archived_at: Option<String>,
}

/// Archive the campaign: the lists hide it (`GET /campaigns` still returns
/// it, with `archived_at`); nothing it recorded is removed, and its hooks,
/// evaluations and questions keep working. Archiving one already archived
/// changes nothing.
#[utoipa::path(post, path = "/campaigns/{id}/archive", tag = "campaigns", params(CampaignId),
    responses((status = 200, description = "ok", body = ArchiveMark), Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn archive(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<ArchiveMark>> {
    mark(&state, &id, true).await
}

/// Unarchive the campaign: the lists show it again.
#[utoipa::path(post, path = "/campaigns/{id}/unarchive", tag = "campaigns", params(CampaignId),
    responses((status = 200, description = "ok", body = ArchiveMark), Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn unarchive(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<ArchiveMark>> {
    mark(&state, &id, false).await
}

async fn mark(state: &AppState, id: &str, archived: bool) -> ApiResult<Json<ArchiveMark>> {
    let row = state.supervisor.archive_campaign(id, archived).await?;
    Ok(Json(ArchiveMark { archived: row.archived_at.is_some(), archived_at: row.archived_at, id: row.id }))
}
