//! A typed client of the daemon's HTTP API, used by the CLI, the hook,
//! the demo and the tests.

use std::time::Duration;

use anyhow::{anyhow, Context};
use serde_json::Value;

use crate::config::ClientConfig;

/// One hook invocation's id; its retries send the same one.
pub const CALL_ID_HEADER: &str = "x-gadfly-call-id";

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// An answer to a hook call as it came, before its signature is checked.
#[derive(Debug)]
pub struct RawAnswer {
    pub status: u16,
    pub signature: Option<String>,
    pub body: Vec<u8>,
}

impl RawAnswer {
    /// The body as JSON (null when it is not), or the API's failure.
    pub fn into_result(self) -> Result<Value, ApiFailure> {
        let body: Value = serde_json::from_slice(&self.body).unwrap_or(Value::Null);
        if (200..300).contains(&self.status) {
            return Ok(body);
        }
        Err(ApiFailure {
            status: self.status,
            code: body["code"].as_str().unwrap_or("error").to_string(),
            message: body["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| String::from_utf8_lossy(&self.body).into_owned()),
        })
    }
}

/// An answer of the API that is not a success, with its code and message.
#[derive(Debug, thiserror::Error)]
#[error("{message} (HTTP {status}, {code})")]
pub struct ApiFailure {
    pub status: u16,
    pub code: String,
    pub message: String,
}

impl Client {
    pub fn new(config: &ClientConfig, timeout: Duration) -> anyhow::Result<Client> {
        let http =
            reqwest::Client::builder().timeout(timeout).connect_timeout(Duration::from_secs(5)).no_proxy().build()?;
        Ok(Client { http, base: format!("{}/api/v1", config.url), token: config.token.clone() })
    }

    /// The daemon's URL (without /api/v1).
    pub fn base_url(&self) -> &str {
        self.base.strip_suffix("/api/v1").unwrap_or(&self.base)
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.http.request(method, format!("{}{}", self.base, path));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let resp = req.send().await.map_err(|e| {
            if e.is_connect() {
                anyhow!(
                    "cannot reach the gadfly daemon at {} (is `gadfly serve` running? set GADFLY_URL): {e}",
                    self.base
                )
            } else {
                anyhow!(e)
            }
        })?;
        let status = resp.status();
        let bytes = resp.bytes().await.context("reading the daemon's answer")?;
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        Err(ApiFailure {
            status: status.as_u16(),
            code: body["code"].as_str().unwrap_or("error").to_string(),
            message: body["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned()),
        }
        .into())
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(self.request(reqwest::Method::GET, path)).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.send(self.request(reqwest::Method::POST, path).json(body)).await
    }

    /// Posts a hook payload with the hook's nonce and returns the answer
    /// as it came (status, signature header, body bytes), for the hook to
    /// check that the daemon signed it before it reads it. A connection
    /// error is an error, as in [`Client::post_raw`].
    pub async fn post_hook(&self, path: &str, body: Vec<u8>, call_id: &str, nonce: &str) -> anyhow::Result<RawAnswer> {
        let resp = self
            .request(reqwest::Method::POST, path)
            .header("content-type", "application/json")
            .header(CALL_ID_HEADER, call_id)
            .header(crate::signing::NONCE_HEADER, nonce)
            .body(body)
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        let status = resp.status().as_u16();
        let signature =
            resp.headers().get(crate::signing::SIGNATURE_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string);
        let body = resp.bytes().await.context("reading the daemon's answer")?.to_vec();
        Ok(RawAnswer { status, signature, body })
    }

    fn unreachable(&self, e: reqwest::Error) -> anyhow::Error {
        if e.is_connect() {
            anyhow::Error::new(e).context(format!(
                "cannot reach the gadfly daemon at {} (is `gadfly serve` running? set GADFLY_URL)",
                self.base
            ))
        } else {
            anyhow!(e)
        }
    }

    /// Posts raw bytes (a hook payload is forwarded as it came).
    pub async fn post_raw(&self, path: &str, body: Vec<u8>, call_id: &str) -> anyhow::Result<Value> {
        self.send(
            self.request(reqwest::Method::POST, path)
                .header("content-type", "application/json")
                .header(CALL_ID_HEADER, call_id)
                .body(body),
        )
        .await
    }
}
