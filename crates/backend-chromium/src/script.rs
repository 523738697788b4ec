//! Page-side JavaScript, kept as files under `src/js/`, and the one helper
//! that calls it (`Runtime.callFunctionOn`).
//!
//! Every function runs in an isolated world (or on an object resolved in
//! one): it shares the DOM with the page but not the page's JavaScript, so
//! a page cannot replace the functions it calls. The page still controls
//! what the DOM and its styles say; the decisions that matter most (what is
//! painted at the action point, what the accessibility tree says) come
//! from the protocol itself instead (see `target.rs`).

use chromiumoxide::cdp::js_protocol::runtime::{
    CallArgument, CallFunctionOnParams, ExceptionDetails, ExecutionContextId, RemoteObject,
    RemoteObjectId,
};
use serde_json::Value;

use crate::browser::Tab;
use crate::error::ChromiumError;

/// Finds a selector's single element (`js/resolve.js`).
pub(crate) const RESOLVE: &str = include_str!("js/resolve.js");
/// What the strict checks read about an element (`js/describe.js`).
pub(crate) const DESCRIBE: &str = include_str!("js/describe.js");
/// Whether a hit node is an element or inside it, across shadow roots and
/// pseudo-elements, and whether it shows a frame (`js/contains.js`).
pub(crate) const CONTAINS: &str = include_str!("js/contains.js");
/// Whether an element has focus (`js/focused.js`).
pub(crate) const FOCUSED: &str = include_str!("js/focused.js");
/// An element's tag, text and bound attributes (`js/identity.js`).
pub(crate) const IDENTITY: &str = include_str!("js/identity.js");
/// A `<select>`'s option by value (`js/option.js`).
pub(crate) const OPTION: &str = include_str!("js/option.js");
/// A checkbox's `checked` (`js/checked.js`).
pub(crate) const CHECKED: &str = include_str!("js/checked.js");

/// What a function is called on.
pub(crate) enum On<'a> {
    /// The global object of an execution context (an isolated world).
    World(ExecutionContextId),
    /// An object, as `this`.
    Object(&'a RemoteObjectId),
}

/// A call's argument: a JSON value or an object of the same world.
pub(crate) enum Arg<'a> {
    /// Passed by value.
    Value(Value),
    /// Passed by reference.
    Object(&'a RemoteObjectId),
}

/// The text of a script exception, for messages.
pub(crate) fn exception_text(details: &ExceptionDetails) -> String {
    details
        .exception
        .as_ref()
        .and_then(|e| e.description.clone())
        .unwrap_or_else(|| details.text.clone())
}

impl Tab {
    /// Calls `function` on `on` with `args`, awaiting a returned promise;
    /// the answer by value when `by_value`, else as a remote object. A
    /// thrown exception is [`ChromiumError::Script`].
    pub(crate) async fn call_function(
        &self,
        function: &str,
        on: On<'_>,
        args: Vec<Arg<'_>>,
        by_value: bool,
    ) -> Result<RemoteObject, ChromiumError> {
        let mut call = CallFunctionOnParams::new(function);
        match on {
            On::World(world) => call.execution_context_id = Some(world),
            On::Object(object) => call.object_id = Some(object.clone()),
        }
        if !args.is_empty() {
            call.arguments = Some(
                args.into_iter()
                    .map(|arg| match arg {
                        Arg::Value(value) => CallArgument {
                            value: Some(value),
                            ..CallArgument::default()
                        },
                        Arg::Object(object) => CallArgument {
                            object_id: Some(object.clone()),
                            ..CallArgument::default()
                        },
                    })
                    .collect(),
            );
        }
        call.return_by_value = Some(by_value);
        call.await_promise = Some(true);
        let answer = self
            .inner
            .page
            .execute(call)
            .await
            .map_err(|e| ChromiumError::protocol("Runtime.callFunctionOn", e))?;
        if let Some(details) = &answer.result.exception_details {
            return Err(ChromiumError::Script(exception_text(details)));
        }
        Ok(answer.result.result.clone())
    }

    /// Evaluates `function` (a JavaScript function declaration taking no
    /// arguments) in a fresh isolated world of the main frame and returns
    /// its result as JSON. The isolated world shares the DOM with the page
    /// but not its scripts' globals, so a page cannot tamper with it. For
    /// reading page state in tests and diagnostics; it is not input.
    pub async fn inspect(&self, function: &str) -> Result<serde_json::Value, ChromiumError> {
        let frame = self.main_frame().await?;
        let context = self.isolated_world(frame.id).await?;
        let answer = self
            .call_function(function, On::World(context), Vec::new(), true)
            .await?;
        Ok(answer.value.unwrap_or_default())
    }

    /// [`call_function`](Self::call_function) by value, decoded as `T`.
    pub(crate) async fn call_value<T: serde::de::DeserializeOwned>(
        &self,
        function: &str,
        on: On<'_>,
        args: Vec<Arg<'_>>,
    ) -> Result<T, ChromiumError> {
        let answer = self.call_function(function, on, args, true).await?;
        serde_json::from_value(answer.value.unwrap_or_default())
            .map_err(|e| ChromiumError::Script(format!("unexpected page answer: {e}")))
    }
}
