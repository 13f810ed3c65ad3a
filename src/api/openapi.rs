//! The OpenAPI description of the HTTP API, assembled from the handlers'
//! `#[utoipa::path]` annotations in `api`: served at
//! GET /api/v1/openapi.json and printed by `gadfly openapi`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use super::{beam, campaigns, claims, events, hooks, login, notify, questions, runs, spend, status};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "gadfly",
        description = "The daemon's HTTP API. Every call but /health and /openapi.json needs \
            `Authorization: Bearer TOKEN` (the master token in DATA_DIR/token, or a campaign's hook token \
            for its hook events, evaluation and beam tagging). Every error is `{\"code\", \"message\"}`."
    ),
    servers((url = "/api/v1")),
    paths(
        status::health,
        status::openapi,
        campaigns::list_campaigns,
        campaigns::create_campaign,
        campaigns::show_campaign,
        campaigns::evaluate,
        campaigns::calibrate,
        campaigns::archive,
        campaigns::unarchive,
        campaigns::list_evaluations,
        campaigns::evaluation_progress,
        hooks::hook,
        questions::list_questions,
        questions::ask,
        questions::open_questions,
        questions::answer,
        campaigns::list_stops,
        campaigns::campaign_audit,
        beam::beam_list,
        beam::beam_tag,
        beam::beam_abandon,
        claims::file_claim,
        claims::list_claims,
        claims::accept_claim,
        claims::reject_claim,
        events::stream_events,
        events::list_events,
        questions::suggestions,
        runs::list_runs,
        runs::start_run,
        runs::stop_run,
        super::redteam::start_redteam,
        super::redteam::redteam_state,
        spend::spend,
        notify::show_notify,
        notify::set_notify,
        hooks::hook_token,
        login::login_code,
        hooks::hook_install,
        questions::bank,
        questions::bank_stats,
    ),
    components(schemas(super::ErrorBody)),
    modifiers(&BearerToken),
    security(("bearer" = []))
)]
struct ApiDoc;

struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    }
}

/// The description as an OpenAPI value.
pub fn description() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The description as pretty JSON (built once).
pub fn json() -> String {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| description().to_pretty_json().expect("the OpenAPI description serializes")).clone()
}

/// One of the question bank's moments (`bank::MOMENTS`).
pub struct Moment;

impl utoipa::PartialSchema for Moment {
    fn schema() -> RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::Type::String)
            .enum_values(Some(crate::bank::MOMENTS))
            .into()
    }
}

impl utoipa::ToSchema for Moment {}

/// The methods the description lists for a path below /api/v1 (its
/// templates' `{param}` segments match any one segment), upper case.
pub fn allowed_methods(path: &str) -> Vec<String> {
    static DOC: OnceLock<utoipa::openapi::OpenApi> = OnceLock::new();
    let doc = DOC.get_or_init(description);
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    let mut methods = Vec::new();
    for (template, item) in doc.paths.paths.iter() {
        let t: Vec<&str> = template.split('/').collect();
        let matches = t.len() == segments.len()
            && t.iter().zip(&segments).all(|(t, s)| (t.starts_with('{') && !s.is_empty()) || t == s);
        if matches {
            let ops = [
                ("GET", &item.get),
                ("POST", &item.post),
                ("PUT", &item.put),
                ("PATCH", &item.patch),
                ("DELETE", &item.delete),
            ];
            methods.extend(ops.iter().filter(|(_, op)| op.is_some()).map(|(m, _)| m.to_string()));
        }
    }
    methods
}

fn error_response(description: &str) -> RefOr<Response> {
    ResponseBuilder::new()
        .description(description)
        .content("application/json", ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build())
        .build()
        .into()
}

/// One error response of the API (the `ErrorBody` shape), for the
/// handlers' `responses(...)`.
macro_rules! error_responses {
    ($($name:ident => $status:literal, $description:literal;)*) => {$(
        #[doc = $description]
        pub struct $name;

        impl utoipa::IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<Response>> {
                BTreeMap::from([($status.to_string(), error_response($description))])
            }
        }
    )*};
}

error_responses! {
    Invalid => 400, "invalid: a malformed request (body, query or path parameter); the message says what is wrong";
    Unauthorized => 401, "unauthorized: no token or a wrong one";
    Forbidden => 403, "forbidden: a hook token used outside its campaign's hook events, evaluation and beam tagging";
    NotFound => 404, "not_found: no such campaign (or beam family)";
    Conflict => 409, "conflict: the campaign's state forbids the request (its workspace folder no longer exists); the message says what to do";
    TooLarge => 413, "too_large: the request body is over the limit (16 MiB)";
    TooMany => 429, "too_many: a hook token forced evaluations too often (one a minute per campaign)";
    Internal => 500, "internal: the daemon failed (a bug or a broken store)";
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_description_is_openapi_3_with_a_bearer_scheme_and_the_error_shape() {
        let v: serde_json::Value = serde_json::from_str(&super::json()).unwrap();
        assert!(v["openapi"].as_str().unwrap().starts_with("3."), "{}", v["openapi"]);
        assert_eq!(v["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
        assert!(v["components"]["schemas"]["ErrorBody"]["required"].as_array().unwrap().len() == 2);
        assert!(v["paths"]["/campaigns/{id}/hooks/{agent}/{event}"]["post"]["responses"]["413"].is_object());
        assert!(v["paths"]["/health"]["get"]["security"].is_array(), "/health needs no token");
    }
}
