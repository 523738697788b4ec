//! The rules as a configuration file declares them (feature `serde`).

use serde::Deserialize;

use countersign_approval_core::AllowedWrite;

use crate::rule::{Rule, Tier};
use crate::set::{RuleError, RuleSetBuilder};

/// Rules as a host's configuration declares them: its own `[[rules]]`,
/// and the default pack with the hosts its `auto` rules approve on.
/// Unknown keys are refused.
///
/// ```
/// use countersign_rules::RulesConfig;
///
/// let config: RulesConfig = toml::from_str(r#"
///     default_pack = { auto_hosts = ["docs.example.com"] }
///
///     [[rules]]
///     id = "no-admin"
///     tier = "deny"
///     reason = "the agent never touches the admin console"
///     hosts = ["admin.example.com"]
/// "#)?;
/// let rules = config.into_builder()?.build()?;
/// assert_eq!(rules.rules().next().map(|r| r.id()), Some("no-admin"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RulesConfig {
    /// The default pack, when the host adds it.
    #[serde(default)]
    pub default_pack: Option<DefaultPackConfig>,
    /// The host's own rules, in order.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// Writes a page may still send in read-only mode.
    #[serde(default)]
    pub allowed_writes: Vec<AllowedWriteConfig>,
}

/// One `[[allowed_writes]]` table: `method = "POST"`, `address =
/// "https://shop.example/graphql"` (or a prefix ending in `/*`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowedWriteConfig {
    /// The method, in capitals: `POST`, `PUT`, `PATCH`, `DELETE`, ….
    pub method: String,
    /// The URL, without query; a final `/*` allows every path under it.
    pub address: String,
}

/// `default_pack = { auto_hosts = [...] }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefaultPackConfig {
    /// Host patterns the pack's `auto` rules approve on.
    pub auto_hosts: Vec<String>,
}

/// One `[[rules]]` table: the keys are [`Rule`]'s conditions.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct RuleConfig {
    pub id: String,
    pub tier: Tier,
    pub reason: String,
    #[serde(default)]
    pub hosts: Option<Vec<String>>,
    #[serde(default)]
    pub methods: Option<Vec<String>>,
    #[serde(default)]
    pub roles: Option<Vec<String>>,
    #[serde(default)]
    pub names: Option<Vec<String>>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    #[serde(default)]
    pub input_types: Option<Vec<String>>,
    #[serde(default)]
    pub form_action_hosts: Option<Vec<String>>,
    #[serde(default)]
    pub form_methods: Option<Vec<String>>,
    #[serde(default)]
    pub landmarks: Option<Vec<String>>,
    #[serde(default)]
    pub link_hosts: Option<Vec<String>>,
    #[serde(default)]
    pub same_host_link: Option<bool>,
    #[serde(default)]
    pub plain_same_host_link: Option<bool>,
    #[serde(default)]
    pub submits_form: Option<bool>,
    #[serde(default)]
    pub submitted_field_kinds: Option<Vec<String>>,
    #[serde(default)]
    pub destination_paths: Option<Vec<String>>,
    #[serde(default)]
    pub destination_queries: Option<Vec<String>>,
    #[serde(default)]
    pub destination_query_keys: Option<Vec<String>>,
}

impl RuleConfig {
    /// The rule this table declares (checked when the set is built).
    pub fn into_rule(self) -> Rule {
        let mut rule = Rule::new(self.tier, self.id, self.reason);
        rule.when.hosts = self.hosts;
        rule.when.methods = self.methods;
        rule.when.roles = self.roles;
        rule.when.names = self.names;
        rule.when.tags = self.tags;
        rule.when.input_types = self.input_types;
        rule.when.form_action_hosts = self.form_action_hosts;
        rule.when.form_methods = self.form_methods;
        rule.when.landmarks = self.landmarks;
        rule.when.link_hosts = self.link_hosts;
        rule.when.same_host_link = self.same_host_link;
        rule.when.plain_same_host_link = self.plain_same_host_link;
        rule.when.submits_form = self.submits_form;
        rule.when.submitted_field_kinds = self.submitted_field_kinds;
        rule.when.destination_paths = self.destination_paths;
        rule.when.destination_queries = self.destination_queries;
        rule.when.destination_query_keys = self.destination_query_keys;
        rule
    }
}

impl RulesConfig {
    /// A builder holding these rules, then the default pack when
    /// configured, and the allowed writes; refused when an allowed write
    /// is malformed.
    pub fn into_builder(self) -> Result<RuleSetBuilder, RuleError> {
        let mut builder =
            RuleSetBuilder::default().rules(self.rules.into_iter().map(RuleConfig::into_rule));
        if let Some(pack) = self.default_pack {
            builder = builder.default_pack(pack.auto_hosts);
        }
        for write in self.allowed_writes {
            builder = builder.allow_write(AllowedWrite::new(&write.method, &write.address)?);
        }
        Ok(builder)
    }
}
