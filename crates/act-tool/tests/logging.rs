//! Argument values never reach messages, operation records or `tracing`
//! events; one event per call carries the documented fields.
//!
//! Kept alone in its own test binary: `tracing` caches callsite interest
//! process-wide, so other tests running beside it could hide events.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};

use common::{Harness, URL, call_for};
use serde_json::json;

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<String>>>);

struct Visitor<'a>(&'a mut String);

impl tracing::field::Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={:?} ", field.name(), value));
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut line = format!("{} ", event.metadata().level());
        event.record(&mut Visitor(&mut line));
        self.0.lock().unwrap().push(line);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn argument_values_never_reach_messages_records_or_logs() {
    const SECRET: &str = "hunter2-s3cr3t";
    let capture = Capture::default();
    let lines = capture.0.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let results = tracing::subscriber::with_default(capture, || {
        runtime.block_on(async {
            let h = Harness::new();
            let secret_fill = json!({"method": "fill", "selector": "input#password", "arguments": {"value": SECRET}});
            let grant = h.grant(URL, &secret_fill).await;
            let id = grant.id.as_str();
            let calls = [
                call_for(URL, id, &secret_fill),
                call_for(URL, id, &secret_fill),
                call_for(URL, id, &json!({"method": "fill", "selector": "input#password", "arguments": {"value": SECRET, "x": [SECRET]}})),
                call_for(URL, id, &json!({"method": "fill", "selector": "input#password", "arguments": {"value": format!("{SECRET}{}", "x".repeat(9000))}})),
                call_for("https://evil.example.net/", id, &secret_fill),
                call_for(URL, "apr_unknown", &secret_fill),
                json!({"url": URL, "approval_id": id, "arguments": {"value": SECRET}, "bogus": SECRET}),
            ];
            let mut results = Vec::new();
            for call in &calls {
                results.push(h.run(call).await);
            }
            (results, h.records())
        })
    });
    let (results, records) = results;
    assert_eq!(results[0]["status"], "ok");
    for result in &results[1..] {
        assert_eq!(result["status"], "error");
        assert!(!result["error"].to_string().contains(SECRET), "{result}");
    }
    assert_eq!(records.len(), results.len());
    for record in &records {
        assert!(!format!("{record:?}").contains(SECRET), "{record:?}");
    }
    let lines = lines.lock().unwrap();
    let call_events = lines.iter().filter(|l| l.contains("outcome=")).count();
    assert_eq!(call_events, results.len(), "one event per call: {lines:#?}");
    for line in lines.iter() {
        assert!(!line.contains(SECRET), "{line}");
        if line.contains("outcome=") {
            for field in ["operation_id=", "actor=", "run=", "approval_id=", "reason="] {
                assert!(line.contains(field), "{field} missing in {line}");
            }
        }
    }
    // The ok call is logged at info, refusals at warn.
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("INFO") && l.contains("outcome=\"ok\""))
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("WARN") && l.contains("APPROVAL_STALE"))
    );
}
