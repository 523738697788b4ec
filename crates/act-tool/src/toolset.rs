//! The tools a host offers a model for one context; Act only once enabled.

use std::sync::Arc;

use serde_json::Value;

use crate::definition::{ToolDefinition, ToolFormat};
use crate::{Act, Context};

/// The tools built for one [`Context`].
///
/// Act is opt-in: a new toolset holds no Act, lists no definition for it
/// and refuses calls to it, until the host calls
/// [`enable_act`](Self::enable_act).
#[derive(Debug, Clone)]
pub struct Toolset {
    context: Arc<Context>,
    act: Option<Act>,
}

/// A tool call named a tool this toolset does not hold (unknown, or not enabled).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no enabled tool has the requested name")]
pub struct UnknownTool {
    name: String,
}

impl UnknownTool {
    /// The name the call gave.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Toolset {
    /// A toolset for `context` (a [`Context`] or an `Arc<Context>`) with no tool enabled.
    pub fn new(context: impl Into<Arc<Context>>) -> Self {
        Toolset {
            context: context.into(),
            act: None,
        }
    }

    /// The host context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// Enables Act for this toolset's context (idempotent) and returns it.
    pub fn enable_act(&mut self) -> &Act {
        let context = &self.context;
        self.act
            .get_or_insert_with(|| Act::new(Arc::clone(context)))
    }

    /// Builder form of [`enable_act`](Self::enable_act).
    pub fn with_act(mut self) -> Self {
        self.enable_act();
        self
    }

    /// Removes Act again.
    pub fn disable_act(&mut self) {
        self.act = None;
    }

    /// The Act tool, if enabled.
    pub fn act(&self) -> Option<&Act> {
        self.act.as_ref()
    }

    /// The definitions of the enabled tools, to hand an LLM API.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.act.iter().map(Act::tool_definition).collect()
    }

    /// The definitions of the enabled tools, shaped for one LLM API.
    pub fn definitions_for(&self, format: ToolFormat) -> Vec<ToolDefinition> {
        self.act
            .iter()
            .map(|act| act.tool_definition_for(format))
            .collect()
    }

    /// Runs a model's tool call by name, returning the JSON the model sees.
    pub async fn call(&self, name: &str, args: &Value) -> Result<Value, UnknownTool> {
        match &self.act {
            Some(act) if name == Act::NAME => Ok(act.execute_json(args).await),
            _ => Err(UnknownTool {
                name: name.to_owned(),
            }),
        }
    }
}
