//! The binary's configuration file (TOML) and what it builds.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use countersign_rules::{AllowedWriteConfig, DefaultPackConfig, RuleConfig, RuleSet, RulesConfig};
use serde::Deserialize;

use crate::notify::{NotificationsConfig, NotifyConfig};

/// The smallest bearer token or approver token accepted: long enough
/// that guessing it is hopeless.
pub(crate) const MIN_TOKEN_CHARS: usize = 16;

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where actions may happen.
    pub policy: PolicyConfig,
    /// Where grants, proposals and operation records live.
    #[serde(default)]
    pub store: StoreConfig,
    /// What performs the actions.
    #[serde(default)]
    pub backend: BackendConfig,
    /// The HTTP listener: approval pages and the MCP endpoint.
    #[serde(default)]
    pub http: HttpConfig,
    /// The identity of the stdio session (`--stdio`).
    pub stdio: Option<IdentityConfig>,
    /// Bearer tokens of MCP clients over HTTP.
    #[serde(default)]
    pub tokens: Vec<TokenConfig>,
    /// The people who may approve, each with a secret token.
    #[serde(default)]
    pub approvers: Vec<ApproverConfig>,
    /// `[[rules]]`: who decides a proposal, on its target's facts. Read as
    /// tables first, so that a refusal names the rule.
    #[serde(default)]
    pub rules: Vec<toml::Table>,
    /// `[default_rules]`: the shipped pack, its `auto` rules approving on
    /// `auto_hosts`.
    pub default_rules: Option<DefaultPackConfig>,
    /// `[[allowed_writes]]`: what a page may still send in read-only mode,
    /// after an act a rule approved. None unless listed.
    #[serde(default)]
    pub allowed_writes: Vec<AllowedWriteConfig>,
    /// `[[notify]]`: who is told that a proposal waits (a webhook, a Slack
    /// channel, mail). None unless listed.
    #[serde(default)]
    pub notify: Vec<NotifyConfig>,
    /// `[notifications]`: when "expiring soon" goes out.
    #[serde(default)]
    pub notifications: NotificationsConfig,
    /// `[metrics]`: Prometheus text at `/metrics` for a scraper holding a
    /// token. Not served unless configured.
    pub metrics: Option<MetricsConfig>,
    /// `[compat]`: Playwright MCP's tools instead of countersign's.
    #[serde(default)]
    pub compat: CompatConfig,
}

/// `[compat]`: which other server's tools `countersign-mcp` offers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompatConfig {
    /// Offer Playwright MCP's tools (as `--playwright-compat` does).
    #[serde(default)]
    pub playwright: bool,
    /// How long one state-changing call waits for a person's decision
    /// (default 50, below the 60 s most clients wait for a tool call).
    pub approval_wait_secs: Option<u64>,
}

/// The longest wait a state-changing call may be configured with: a
/// proposal waits no longer by default either.
pub(crate) const MAX_APPROVAL_WAIT_SECS: u64 = 600;

/// `[metrics]`: `/metrics` on its own address (`listen`), or beside the
/// MCP endpoint for a scraper's bearer token (and on its own address too,
/// when both are given).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// A listen address of its own, serving `/metrics` only.
    pub listen: Option<SocketAddr>,
    /// The environment variable holding the scraper's bearer token.
    pub token_env: Option<String>,
    /// Or the file holding it.
    pub token_file: Option<PathBuf>,
}

impl Config {
    /// The rules the file declares, checked; `None` when it declares none.
    /// Rule-approved grants live as long as page-approved ones
    /// (`http.grant_ttl_secs`).
    pub fn rule_set(&self) -> Result<Option<RuleSet>, String> {
        if self.rules.is_empty() && self.default_rules.is_none() {
            if !self.allowed_writes.is_empty() {
                return Err(
                    "`allowed_writes` needs rules: only an act a rule approved is read-only"
                        .to_owned(),
                );
            }
            return Ok(None);
        }
        let mut rules = Vec::with_capacity(self.rules.len());
        for (index, table) in self.rules.iter().enumerate() {
            let name = match table.get("id").and_then(toml::Value::as_str) {
                Some(id) => format!("rule `{id}`"),
                None => format!("the rule at `rules[{index}]`"),
            };
            let rule: RuleConfig = table
                .clone()
                .try_into()
                .map_err(|e: toml::de::Error| format!("{name}: {}", e.message().trim_end()))?;
            rules.push(rule);
        }
        let config = RulesConfig {
            default_pack: self.default_rules.clone(),
            rules,
            allowed_writes: self.allowed_writes.clone(),
        };
        config
            .into_builder()
            .map_err(|e| e.to_string())?
            .grant_ttl(std::time::Duration::from_secs(self.http.grant_ttl_secs))
            .build()
            .map(Some)
            .map_err(|e| e.to_string())
    }
}

/// `[policy]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Allowed hosts (`docs.example.com`, `*.example.com`, IP literals).
    pub allow_hosts: Vec<String>,
    /// Allowed schemes (default `https` only).
    pub schemes: Option<Vec<String>>,
    /// Allowed methods (default: the policy's).
    pub methods: Option<Vec<String>>,
    /// Allowed ports (default: any).
    pub ports: Option<Vec<u16>>,
    /// Special-use ranges allowed anyway (e.g. `127.0.0.2/32` for a local site).
    #[serde(default)]
    pub special_use: Vec<String>,
    /// Answer every host with these addresses instead of asking DNS.
    pub addresses: Option<Vec<IpAddr>>,
}

/// `[store]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `memory`, `redis://…` or `postgres://…`.
    pub url: String,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: "memory".to_owned(),
        }
    }
}

/// `[backend]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendConfig {
    /// `fake` (records, clicks nothing) or `chromium`.
    #[serde(default = "fake")]
    pub kind: String,
    /// Whether the browser's traffic goes through the egress guard
    /// (`chromium` only; off only when the file says `false`).
    #[serde(default = "yes")]
    pub guard: bool,
    /// The Chromium binary (`chromium` only; default: `chromium` on `PATH`).
    pub chromium_path: Option<PathBuf>,
    /// Whether Chromium runs with its sandbox (`chromium` only; default
    /// on, which Chromium refuses as root).
    #[serde(default = "yes")]
    pub sandbox: bool,
    /// The fake's pages, which `browser_navigate` and `browser_observe`
    /// show (`fake` only; without any the fake has no pages).
    #[serde(default)]
    pub pages: Vec<PageConfig>,
}

fn fake() -> String {
    "fake".to_owned()
}

fn yes() -> bool {
    true
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig {
            kind: fake(),
            guard: true,
            chromium_path: None,
            sandbox: true,
            pages: Vec::new(),
        }
    }
}

/// `[[backend.pages]]`: one page of the fake's site.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageConfig {
    /// Its URL, as the policy canonicalises it (`http://127.0.0.2:8000/`).
    pub url: String,
    /// Its title.
    #[serde(default)]
    pub title: String,
    /// Its elements, in document order.
    #[serde(default)]
    pub elements: Vec<ElementConfig>,
}

/// One element of a fake page.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElementConfig {
    /// Its role (`button`, `link`, `textbox`, …).
    pub role: String,
    /// Its accessible name.
    pub name: String,
    /// A CSS selector that names it for actions (compared as text).
    pub selector: Option<String>,
    /// Its tag (default `div`).
    pub tag: Option<String>,
}

/// `[http]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// The address to listen on (default `127.0.0.1:8080`; port 0 picks one).
    #[serde(default = "listen")]
    pub listen: SocketAddr,
    /// The URL clients and approvers reach the listener at (default
    /// `http://` and the bound address).
    pub public_url: Option<String>,
    /// `Host` values the MCP endpoint accepts (default: loopback names).
    pub allowed_hosts: Option<Vec<String>>,
    /// How long a proposal waits for a decision, in seconds (default 600).
    #[serde(default = "proposal_ttl")]
    pub proposal_ttl_secs: u64,
    /// How long an approved grant stays usable, in seconds (default 120).
    #[serde(default = "grant_ttl")]
    pub grant_ttl_secs: u64,
    /// The secret the approval pages sign their forms with, as 64
    /// hexadecimal digits (32 bytes); the same on every process that serves
    /// the pages, so a form rendered by one may be posted to another.
    /// Default: a fresh random key at start-up.
    pub form_key: Option<String>,
}

impl HttpConfig {
    /// The form key's 32 bytes, when one is set and well-formed.
    pub fn form_key_bytes(&self) -> Result<Option<[u8; 32]>, String> {
        let Some(text) = &self.form_key else {
            return Ok(None);
        };
        let refused = || {
            "`http.form_key` must be 64 hexadecimal digits (32 bytes, e.g. from `openssl rand -hex 32`)"
                .to_owned()
        };
        if text.len() != 64 {
            return Err(refused());
        }
        let mut key = [0u8; 32];
        for (byte, pair) in key.iter_mut().zip(text.as_bytes().chunks(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| refused())?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| refused())?;
        }
        if key.iter().all(|b| *b == 0) {
            return Err("`http.form_key` is all zeros: draw it at random".into());
        }
        Ok(Some(key))
    }
}

fn listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}
fn proposal_ttl() -> u64 {
    600
}
fn grant_ttl() -> u64 {
    120
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: listen(),
            public_url: None,
            allowed_hosts: None,
            proposal_ttl_secs: proposal_ttl(),
            grant_ttl_secs: grant_ttl(),
            form_key: None,
        }
    }
}

/// An actor and a run.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityConfig {
    /// The actor.
    pub actor: String,
    /// The run.
    pub run: String,
}

/// `[[tokens]]`: one MCP client's bearer token and who it acts as.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// The secret.
    pub token: String,
    /// The actor.
    pub actor: String,
    /// The run.
    pub run: String,
}

impl std::fmt::Debug for TokenConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "token for {}/{}", self.actor, self.run)
    }
}

/// `[[approvers]]`: a person who may decide, and their secret token.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproverConfig {
    /// Who they are (recorded in the grants they approve).
    pub name: String,
    /// Their secret (a sign-in link or a bearer token).
    pub token: String,
}

impl std::fmt::Debug for ApproverConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "approver {}", self.name)
    }
}

/// Reads and checks `path`.
pub fn load(path: &Path) -> Result<Config, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the configuration `{}`: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("in `{}`: {e}", path.display()))
}

/// Parses and checks a configuration's text.
pub fn parse(text: &str) -> Result<Config, String> {
    let config: Config = toml::from_str(text).map_err(|e| e.to_string().trim_end().to_owned())?;
    check(&config)?;
    Ok(config)
}

fn check(config: &Config) -> Result<(), String> {
    config.http.form_key_bytes()?;
    if let Some(wait) = config.compat.approval_wait_secs
        && !(1..=MAX_APPROVAL_WAIT_SECS).contains(&wait)
    {
        return Err(format!(
            "`compat.approval_wait_secs` is {wait}: give 1 to {MAX_APPROVAL_WAIT_SECS} seconds"
        ));
    }
    if config.policy.allow_hosts.is_empty() {
        return Err("`policy.allow_hosts` is empty: list the hosts actions may happen on".into());
    }
    let url = config.store.url.as_str();
    if !(url == "memory" || url.starts_with("redis://") || url.starts_with("postgres://")) {
        return Err(format!(
            "`store.url` is `{url}`: use `memory`, a `redis://` or a `postgres://` URL"
        ));
    }
    check_backend(&config.backend)?;
    let mut seen = HashSet::new();
    let secrets = config
        .tokens
        .iter()
        .map(|t| ("tokens", &t.token))
        .chain(config.approvers.iter().map(|a| ("approvers", &a.token)));
    for (table, secret) in secrets {
        if secret.chars().count() < MIN_TOKEN_CHARS {
            return Err(format!(
                "a token in `{table}` is shorter than {MIN_TOKEN_CHARS} characters"
            ));
        }
        // A client token that is also an approver's would let the agent
        // approve its own proposals.
        if !seen.insert(secret.as_str()) {
            return Err(format!(
                "a token in `{table}` is used twice: every client and approver needs its own"
            ));
        }
    }
    if config.http.proposal_ttl_secs == 0 || config.http.grant_ttl_secs == 0 {
        return Err("`http.proposal_ttl_secs` and `http.grant_ttl_secs` must be above 0".into());
    }
    config.rule_set()?;
    Ok(())
}

fn check_backend(backend: &BackendConfig) -> Result<(), String> {
    match backend.kind.as_str() {
        "fake" => {
            let chromium_only = [
                ("chromium_path", backend.chromium_path.is_some()),
                ("sandbox", !backend.sandbox),
                ("guard", !backend.guard),
            ];
            if let Some((key, _)) = chromium_only.iter().find(|(_, set)| *set) {
                return Err(format!(
                    "`backend.{key}` applies to `kind = \"chromium\"` only; the fake opens no browser"
                ));
            }
        }
        "chromium" => {
            if !backend.pages.is_empty() {
                return Err(
                    "`backend.pages` applies to `kind = \"fake\"` only; chromium loads the real pages"
                        .into(),
                );
            }
        }
        other => {
            return Err(format!(
                "`backend.kind` is `{other}`: use `fake` or `chromium`"
            ));
        }
    }
    let mut urls = HashSet::new();
    for page in &backend.pages {
        let parsed = url::Url::parse(&page.url)
            .map_err(|e| format!("`backend.pages` has the url `{}`: {e}", page.url))?;
        if !urls.insert(parsed.to_string()) {
            return Err(format!("`backend.pages` has the url `{}` twice", page.url));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "[policy]\nallow_hosts = [\"docs.example.com\"]\n";

    #[test]
    fn a_minimal_file_takes_the_defaults() {
        let config = parse(MINIMAL).unwrap();
        assert_eq!(config.store.url, "memory");
        assert_eq!(config.backend.kind, "fake");
        assert!(config.backend.guard);
        assert!(config.backend.sandbox);
        assert!(config.backend.chromium_path.is_none());
        assert!(config.backend.pages.is_empty());
        assert_eq!(config.http.listen.to_string(), "127.0.0.1:8080");
    }

    #[test]
    fn a_shared_form_key_is_read_and_a_bad_one_refused() {
        let key = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
        let config = parse(&format!("{MINIMAL}[http]\nform_key = \"{key}\"\n")).unwrap();
        let bytes = config.http.form_key_bytes().unwrap().unwrap();
        assert_eq!(bytes[..4], [0x00, 0x11, 0x22, 0x33]);
        assert_eq!(bytes[31], 0xff);
        assert!(
            parse(MINIMAL)
                .unwrap()
                .http
                .form_key_bytes()
                .unwrap()
                .is_none()
        );
        let shape = "`http.form_key` must be 64 hexadecimal digits (32 bytes, e.g. from `openssl rand -hex 32`)";
        for bad in [
            &key[..62],
            "zz112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
            "é0112233445566778899aabbccddeeff00112233445566778899aabbccddeef",
        ] {
            assert_eq!(
                parse(&format!("{MINIMAL}[http]\nform_key = \"{bad}\"\n")).unwrap_err(),
                shape,
                "{bad}"
            );
        }
        assert_eq!(
            parse(&format!(
                "{MINIMAL}[http]\nform_key = \"{}\"\n",
                "0".repeat(64)
            ))
            .unwrap_err(),
            "`http.form_key` is all zeros: draw it at random"
        );
    }

    #[test]
    fn a_fake_site_and_a_chromium_backend_are_read() {
        let fake = parse(&format!(
            "{MINIMAL}[[backend.pages]]\nurl = \"http://127.0.0.2:9/\"\ntitle = \"demo\"\n\
             elements = [{{ role = \"button\", name = \"count\", selector = \"button#count\", tag = \"button\" }}]\n"
        ))
        .unwrap();
        assert_eq!(fake.backend.pages.len(), 1);
        assert_eq!(fake.backend.pages[0].elements[0].name, "count");
        assert_eq!(
            fake.backend.pages[0].elements[0].tag.as_deref(),
            Some("button")
        );
        let chromium = parse(&format!(
            "{MINIMAL}[backend]\nkind = \"chromium\"\nchromium_path = \"/opt/chromium\"\nsandbox = false\n"
        ))
        .unwrap();
        assert!(
            chromium.backend.guard,
            "the guard stays on unless the file turns it off"
        );
        assert!(!chromium.backend.sandbox);
        assert_eq!(
            chromium.backend.chromium_path.as_deref(),
            Some(Path::new("/opt/chromium"))
        );
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let error = |text: &str| parse(text).unwrap_err();
        assert!(error("").contains("policy"));
        assert!(error("[policy]\nallow_hosts = []\n").contains("`policy.allow_hosts` is empty"));
        assert!(error(&format!("{MINIMAL}[store]\nurl = \"mysql://x\"\n")).contains("`mysql://x`"));
        assert!(error(&format!("{MINIMAL}[backend]\nkind = \"firefox\"\n")).contains("`firefox`"));
        assert!(error(&format!("{MINIMAL}colour = 1\n")).contains("colour"));
        assert_eq!(
            error(&format!(
                "{MINIMAL}[backend]\nchromium_path = \"/usr/bin/chromium\"\n"
            )),
            "`backend.chromium_path` applies to `kind = \"chromium\"` only; the fake opens no browser"
        );
        assert_eq!(
            error(&format!("{MINIMAL}[backend]\nguard = false\n")),
            "`backend.guard` applies to `kind = \"chromium\"` only; the fake opens no browser"
        );
        let chromium_pages = format!(
            "{MINIMAL}[backend]\nkind = \"chromium\"\n[[backend.pages]]\nurl = \"http://a/\"\n"
        );
        assert!(
            error(&chromium_pages).starts_with("`backend.pages` applies to `kind = \"fake\"` only")
        );
        let bad_page = format!("{MINIMAL}[[backend.pages]]\nurl = \"not a url\"\n");
        assert!(error(&bad_page).starts_with("`backend.pages` has the url `not a url`: "));
        let twice = format!(
            "{MINIMAL}[[backend.pages]]\nurl = \"http://a/\"\n[[backend.pages]]\nurl = \"http://a\"\n"
        );
        assert_eq!(
            error(&twice),
            "`backend.pages` has the url `http://a` twice"
        );
        let short = format!("{MINIMAL}[[tokens]]\ntoken = \"abc\"\nactor = \"a\"\nrun = \"r\"\n");
        assert!(error(&short).contains("shorter than 16"));
        let shared = format!(
            "{MINIMAL}[[tokens]]\ntoken = \"0123456789abcdef\"\nactor = \"a\"\nrun = \"r\"\n\
             [[approvers]]\nname = \"alice\"\ntoken = \"0123456789abcdef\"\n"
        );
        assert!(error(&shared).contains("used twice"));
    }

    #[test]
    fn rules_are_read_and_a_bad_rule_is_refused_by_name() {
        let none = parse(MINIMAL).unwrap();
        assert!(none.rule_set().unwrap().is_none());
        let good = format!(
            "{MINIMAL}[default_rules]\nauto_hosts = [\"docs.example.com\"]\n\
             [[rules]]\nid = \"no-admin\"\ntier = \"deny\"\nreason = \"never the admin\"\nhosts = [\"admin.example.com\"]\n"
        );
        let rules = parse(&good).unwrap().rule_set().unwrap().unwrap();
        assert_eq!(rules.rules().next().map(|r| r.id()), Some("no-admin"));
        assert_eq!(rules.grant_ttl(), std::time::Duration::from_secs(120));
        let rule = |body: &str| format!("{MINIMAL}[[rules]]\nid = \"x\"\nreason = \"r\"\n{body}");
        assert_eq!(
            error_of(&rule("tier = \"deny\"\nhost = [\"a.example\"]\n")),
            "rule `x`: unknown field `host`, expected one of `id`, `tier`, `reason`, `hosts`, `methods`, `roles`, `names`, `tags`, `input_types`, `form_action_hosts`, `form_methods`, `landmarks`, `link_hosts`, `same_host_link`, `plain_same_host_link`, `submits_form`, `submitted_field_kinds`, `destination_paths`, `destination_queries`, `destination_query_keys`"
        );
        assert_eq!(
            error_of(&rule("tier = \"person\"\nnames = []\n")),
            "rule `x`: `names` is an empty list"
        );
        assert!(
            parse(&rule("tier = \"person\"\nnames = [\"(pay\"]\n"))
                .unwrap_err()
                .starts_with("rule `x`: `names` pattern `(pay` does not compile")
        );
        assert_eq!(
            error_of(&rule("tier = \"auto\"\nroles = [\"link\"]\n")),
            "rule `x`: an auto rule must name the hosts it approves on (`hosts`)"
        );
        assert!(
            error_of(&rule("tier = \"auto\"\nhosts = [\"*\"]\n"))
                .starts_with("rule `x`: an auto rule must not match any element")
        );
        assert_eq!(
            error_of(&format!(
                "{MINIMAL}[[rules]]\ntier = \"deny\"\nreason = \"r\"\n"
            )),
            "the rule at `rules[0]`: missing field `id`"
        );
        assert_eq!(
            error_of(&format!(
                "{MINIMAL}[default_rules]\nauto_hosts = [\"docs.example.com\"]\nhosts = []\n"
            )),
            "unknown field `hosts`, expected `auto_hosts`"
        );
    }

    #[test]
    fn notify_tables_are_checked_at_start_up() {
        let webhook = "[[notify]]\nkind = \"webhook\"\nurl = \"https://hooks.example.com/in\"\nsecret_env = \"HOOK_SECRET\"\n";
        let config = parse(&format!("{MINIMAL}{webhook}")).unwrap();
        assert_eq!(config.notify.len(), 1);
        assert_eq!(config.notifications.expiring_lead_secs, 120);
        let timed = parse(&format!(
            "{MINIMAL}{webhook}[notifications]\nexpiring_lead_secs = 30\n"
        ))
        .unwrap();
        assert_eq!(timed.notifications.expiring_lead_secs, 30);
        assert_eq!(
            error_of(&format!("{MINIMAL}[[notify]]\nkind = \"pager\"\n")),
            "unknown variant `pager`, expected one of `webhook`, `slack`, `email`"
        );
        assert_eq!(
            error_of(&format!("{MINIMAL}{webhook}secret = \"whsec_inline\"\n")),
            "unknown field `secret`, expected one of `url`, `secret_env`, `secret_file`"
        );
        // Every store keeps an outbox: notifications with Redis and
        // PostgreSQL parse.
        for url in ["redis://127.0.0.1:6379", "postgres://app@127.0.0.1/app"] {
            let config = parse(&format!("{MINIMAL}{webhook}[store]\nurl = \"{url}\"\n")).unwrap();
            assert_eq!((config.store.url.as_str(), config.notify.len()), (url, 1));
        }
    }

    fn error_of(text: &str) -> String {
        let message = parse(text).unwrap_err();
        // toml prefixes its own errors with where they are; keep the words.
        message.lines().last().unwrap_or_default().to_owned()
    }
}
