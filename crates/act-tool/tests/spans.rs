//! Each call opens its span (`countersign.act`, with the consume inside it
//! as `countersign.consume`), whose fields carry the operation and approval
//! ids, the action digest, the outcome and the decider, never an argument
//! value.
//!
//! Kept alone in its own test binary: `tracing` caches callsite interest
//! process-wide, so other tests running beside it could hide spans.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::{Harness, URL, call_for};
use serde_json::json;

/// One span as the subscriber saw it.
#[derive(Debug, Clone, Default)]
struct SeenSpan {
    name: String,
    parent: Option<u64>,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Capture {
    spans: Arc<Mutex<Vec<SeenSpan>>>,
    /// The spans entered on this thread, innermost last.
    entered: Arc<Mutex<Vec<u64>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attributes: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut span = SeenSpan {
            name: attributes.metadata().name().to_owned(),
            ..SeenSpan::default()
        };
        span.parent = match attributes.parent() {
            Some(parent) => Some(parent.into_u64()),
            None if attributes.is_contextual() => self.entered.lock().unwrap().last().copied(),
            None => None,
        };
        attributes.record(&mut Fields(&mut span.fields));
        let mut spans = self.spans.lock().unwrap();
        spans.push(span);
        tracing::span::Id::from_u64(spans.len() as u64)
    }
    fn record(&self, id: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        let span = &mut spans[id.into_u64() as usize - 1];
        values.record(&mut Fields(&mut span.fields));
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, id: &tracing::span::Id) {
        self.entered.lock().unwrap().push(id.into_u64());
    }
    fn exit(&self, _: &tracing::span::Id) {
        self.entered.lock().unwrap().pop();
    }
}

#[test]
fn an_act_and_its_consume_are_spans_with_ids_and_outcomes_never_values() {
    const SECRET: &str = "hunter2-s3cr3t";
    let capture = Capture::default();
    let spans = capture.spans.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (grant_id, results) = tracing::subscriber::with_default(capture, || {
        runtime.block_on(async {
            let h = Harness::new();
            let fill = json!({"method": "fill", "selector": "input#password", "arguments": {"value": SECRET}});
            let grant = h.grant(URL, &fill).await;
            let call = call_for(URL, grant.id.as_str(), &fill);
            let first = h.run(&call).await;
            let replay = h.run(&call).await;
            (grant.id.as_str().to_owned(), [first, replay])
        })
    });
    assert_eq!(results[0]["status"], "ok");
    assert_eq!(results[1]["error"]["code"], "APPROVAL_STALE");
    let spans = spans.lock().unwrap().clone();
    let named = |name: &str| -> Vec<(usize, SeenSpan)> {
        spans
            .iter()
            .enumerate()
            .filter(|(_, s)| s.name == name)
            .map(|(i, s)| (i + 1, s.clone()))
            .collect()
    };
    let acts = named("countersign.act");
    let consumes = named("countersign.consume");
    assert_eq!((acts.len(), consumes.len()), (2, 2), "{spans:#?}");
    let outcomes: Vec<(&str, &str)> = acts
        .iter()
        .map(|(_, s)| {
            (
                s.fields["countersign.outcome"].as_str(),
                s.fields
                    .get("countersign.decided_by")
                    .map_or("", String::as_str),
            )
        })
        .collect();
    assert_eq!(outcomes, [("ok", "person"), ("APPROVAL_STALE", "")]);
    for ((act_id, act), (_, consume)) in acts.iter().zip(&consumes) {
        assert_eq!(consume.parent, Some(*act_id as u64), "{consume:?}");
        assert_eq!(act.fields["countersign.approval_id"], grant_id);
        assert_eq!(consume.fields["countersign.approval_id"], grant_id);
        assert!(act.fields["countersign.operation_id"].starts_with("op_"));
        assert_eq!(act.fields["countersign.action_digest"].len(), 64);
    }
    let consumed: Vec<(&str, &str)> = consumes
        .iter()
        .map(|(_, s)| {
            (
                s.fields["countersign.outcome"].as_str(),
                s.fields
                    .get("countersign.stale_reason")
                    .map_or("", String::as_str),
            )
        })
        .collect();
    assert_eq!(consumed, [("consumed", ""), ("stale", "consumed")]);
    let everything = format!("{spans:?}");
    assert!(!everything.contains(SECRET), "{everything}");
}
