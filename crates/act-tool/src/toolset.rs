//! The tools a host offers a model for one context; Act only once enabled.

use std::sync::Arc;

use serde_json::Value;

use crate::act::Act;
use crate::browse::Browse;
use crate::context::Context;
use crate::definition::{ToolDefinition, ToolFormat, with_ref_target};
use crate::propose::Propose;

/// The tools built for one [`Context`].
///
/// Every tool is opt-in: a new toolset holds no tool, lists no definition
/// and refuses every call, until the host calls
/// [`enable_act`](Self::enable_act) (`browser_act`),
/// [`enable_propose`](Self::enable_propose) (`browser_propose` and
/// `browser_proposal_status`) or [`enable_browse`](Self::enable_browse)
/// (`browser_navigate` and `browser_observe`). While the browse tools are
/// enabled, the definitions of `browser_act` and `browser_propose` offer
/// `ref` beside `selector` (a call may give a ref whatever the toolset
/// lists: it is one more way to write a selector).
#[derive(Debug, Clone)]
pub struct Toolset {
    context: Arc<Context>,
    act: Option<Act>,
    propose: Option<Propose>,
    browse: Option<Browse>,
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
            propose: None,
            browse: None,
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

    /// Enables the propose tools (`browser_propose`,
    /// `browser_proposal_status`) for this toolset's context (idempotent)
    /// and returns them. They record proposals only when the context has a
    /// proposal store.
    pub fn enable_propose(&mut self) -> &Propose {
        let context = &self.context;
        self.propose
            .get_or_insert_with(|| Propose::new(Arc::clone(context)))
    }

    /// Builder form of [`enable_propose`](Self::enable_propose).
    pub fn with_propose(mut self) -> Self {
        self.enable_propose();
        self
    }

    /// Removes the propose tools again.
    pub fn disable_propose(&mut self) {
        self.propose = None;
    }

    /// The propose tools, if enabled.
    pub fn propose(&self) -> Option<&Propose> {
        self.propose.as_ref()
    }

    /// Enables the browse tools (`browser_navigate`, `browser_observe`) for
    /// this toolset's context (idempotent) and returns them. They need a
    /// backend with pages (a live browser, or the fake's page model).
    pub fn enable_browse(&mut self) -> &Browse {
        let context = &self.context;
        self.browse
            .get_or_insert_with(|| Browse::new(Arc::clone(context)))
    }

    /// Builder form of [`enable_browse`](Self::enable_browse).
    pub fn with_browse(mut self) -> Self {
        self.enable_browse();
        self
    }

    /// Removes the browse tools again.
    pub fn disable_browse(&mut self) {
        self.browse = None;
    }

    /// The browse tools, if enabled.
    pub fn browse(&self) -> Option<&Browse> {
        self.browse.as_ref()
    }

    /// The definitions of the enabled tools, to hand an LLM API.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.definitions_for(ToolFormat::JsonSchema)
    }

    /// The definitions of the enabled tools, shaped for one LLM API:
    /// the browse tools' first (navigate, observe), then Act's, then the
    /// propose tools'.
    pub fn definitions_for(&self, format: ToolFormat) -> Vec<ToolDefinition> {
        let refs = self.browse.is_some();
        let targets = |definition: ToolDefinition| {
            if refs && definition.name != Propose::STATUS_NAME {
                with_ref_target(definition)
            } else {
                definition
            }
        };
        self.browse
            .iter()
            .flat_map(|browse| browse.tool_definitions_for(format))
            .chain(
                self.act
                    .iter()
                    .map(|act| act.tool_definition_for(format))
                    .chain(
                        self.propose
                            .iter()
                            .flat_map(|propose| propose.tool_definitions_for(format)),
                    )
                    .map(targets),
            )
            .collect()
    }

    /// Runs a model's tool call by name, returning the JSON the model sees.
    pub async fn call(&self, name: &str, args: &Value) -> Result<Value, UnknownTool> {
        if let Some(browse) = &self.browse {
            if name == Browse::NAVIGATE_NAME {
                return Ok(browse.navigate(args).await.to_json());
            }
            if name == Browse::OBSERVE_NAME {
                return Ok(browse.observe(args).await.to_json());
            }
        }
        match (&self.act, &self.propose) {
            (Some(act), _) if name == Act::NAME => Ok(act.execute_json(args).await),
            (_, Some(propose)) if name == Propose::NAME => {
                Ok(propose.propose(args).await.to_json())
            }
            (_, Some(propose)) if name == Propose::STATUS_NAME => {
                Ok(propose.status(args).await.to_json())
            }
            _ => Err(UnknownTool {
                name: name.to_owned(),
            }),
        }
    }
}
