//! `/metrics`: what countersign counts (`countersign_approval_core::measure`),
//! as Prometheus text: on a listen address of its own, or for a scraper
//! holding the configured bearer token. Never open beside `/mcp` without
//! a token.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use countersign_approval_core::measure;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::config::{MIN_TOKEN_CHARS, MetricsConfig};
use crate::secrets::read_secret;

/// The buckets of the approval wait, in seconds: a rule's instant decision
/// to a person's hour.
const APPROVAL_WAIT_BUCKETS: &[f64] = &[
    0.1, 1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// The buckets of a store call, in seconds: an in-memory lookup to a store
/// that has stopped answering.
const STORE_CALL_BUCKETS: &[f64] = &[
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0,
];

/// The recorder's handle and the scraper's token, if one is required.
struct Scrape {
    handle: PrometheusHandle,
    token: Option<String>,
}

/// Installs the process's metrics recorder and answers the `/metrics`
/// route: for the scraper's token (read from the environment or a file)
/// when one is configured, which it must be unless `/metrics` has a listen
/// address of its own.
pub(crate) fn route(config: &MetricsConfig) -> Result<Router, String> {
    let what = "`metrics`";
    let token = match (&config.token_env, &config.token_file, config.listen) {
        // On an address of its own, a token is optional.
        (None, None, Some(_)) => None,
        (env, file, _) => Some(read_secret(what, "token", env.as_deref(), file.as_ref())?),
    };
    if token
        .as_ref()
        .is_some_and(|token| token.chars().count() < MIN_TOKEN_CHARS)
    {
        return Err(format!(
            "{what}: the token is shorter than {MIN_TOKEN_CHARS} characters"
        ));
    }
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(measure::APPROVAL_WAIT.to_owned()),
            APPROVAL_WAIT_BUCKETS,
        )
        .and_then(|builder| {
            builder.set_buckets_for_metric(
                Matcher::Full(measure::STORE_CALL.to_owned()),
                STORE_CALL_BUCKETS,
            )
        })
        .map_err(|e| format!("{what}: the histograms' buckets are refused: {e}"))?
        .install_recorder()
        .map_err(|e| format!("{what}: the metrics recorder cannot start: {e}"))?;
    measure::describe();
    let scrape = Arc::new(Scrape { handle, token });
    Ok(Router::new().route("/metrics", get(scrape_metrics).with_state(scrape)))
}

async fn scrape_metrics(State(scrape): State<Arc<Scrape>>, headers: HeaderMap) -> Response {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let admitted = match &scrape.token {
        None => true,
        Some(wanted) => presented.is_some_and(|token| same_secret(token, wanted)),
    };
    if !admitted {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
        )
            .into_response();
    }
    scrape.handle.run_upkeep();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        scrape.handle.render(),
    )
        .into_response()
}

/// Whether `a` is `b`, in time that does not depend on where they differ.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |differ, (x, y)| differ | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beside_mcp_a_token_is_required_and_long_enough() {
        let config = |listen: Option<&str>, token_file| MetricsConfig {
            listen: listen.map(|l| l.parse().unwrap()),
            token_env: None,
            token_file,
        };
        assert_eq!(
            route(&config(None, None)).err().unwrap(),
            "`metrics`: give the token as `token_env` (an environment variable) or `token_file`"
        );
        let short = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(short.path(), "too-short\n").unwrap();
        let error = route(&config(
            Some("127.0.0.1:0"),
            Some(short.path().to_path_buf()),
        ))
        .err()
        .unwrap();
        assert_eq!(error, "`metrics`: the token is shorter than 16 characters");
        assert!(!error.contains("too-short"));
    }

    #[test]
    fn secrets_match_only_whole() {
        assert!(same_secret("scraper-token-0123", "scraper-token-0123"));
        assert!(!same_secret("scraper-token-0123", "scraper-token-0124"));
        assert!(!same_secret("scraper-token-012", "scraper-token-0123"));
        assert!(!same_secret("", "x"));
    }
}
