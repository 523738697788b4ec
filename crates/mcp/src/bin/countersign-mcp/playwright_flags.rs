//! Playwright MCP's command-line flags, for a configuration written for
//! `npx @playwright/mcp`: the harmless ones accepted, the origin lists
//! mapped onto the policy (where, unlike Playwright's, they cover
//! redirects and subresources), every other one refused by name.

use countersign_rules::HostPattern;

use crate::config::Config;

/// The flags of `@playwright/mcp` taken as they are.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct PlaywrightFlags {
    /// Accepted with `--playwright-compat`: countersign's Chromium is
    /// always headless.
    #[arg(long, requires = "playwright_compat")]
    headless: bool,
    /// Accepted with `--playwright-compat`: each identity's browser
    /// context always lives in memory only.
    #[arg(long, requires = "playwright_compat")]
    isolated: bool,
    /// Accepted with `--playwright-compat` for `chromium` or `chrome`:
    /// Chromium is what runs.
    #[arg(long, value_name = "BROWSER", requires = "playwright_compat")]
    browser: Option<String>,
    /// With `--playwright-compat`: `;`-separated origins
    /// (`https://docs.example.com`, `http://127.0.0.2:8000`); the policy
    /// allows their hosts, schemes and ports instead of the file's.
    #[arg(long, value_name = "ORIGINS", requires = "playwright_compat")]
    allowed_origins: Option<String>,
    /// With `--playwright-compat`: `;`-separated origins whose hosts the
    /// policy no longer allows.
    #[arg(long, value_name = "ORIGINS", requires = "playwright_compat")]
    blocked_origins: Option<String>,
}

/// Playwright MCP flags that countersign cannot honour, and why: given
/// one, `countersign-mcp` stops before it starts.
pub(crate) const REFUSED_FLAGS: &[(&str, &str)] = &[
    (
        "--allow-unrestricted-file-access",
        "a model never reaches local files",
    ),
    (
        "--caps",
        "the extra capabilities run code or act at coordinates, which no person can approve",
    ),
    (
        "--cdp-endpoint",
        "countersign launches its own Chromium behind the egress guard",
    ),
    (
        "--extension",
        "countersign launches its own Chromium behind the egress guard",
    ),
    (
        "--endpoint",
        "countersign launches its own Chromium behind the egress guard",
    ),
    (
        "--executable-path",
        "set `backend.chromium_path` in the configuration",
    ),
    (
        "--no-sandbox",
        "set `backend.sandbox = false` in the configuration, where it is written down",
    ),
    (
        "--user-data-dir",
        "each identity's browser context lives in memory only",
    ),
    (
        "--storage-state",
        "each identity's browser context starts empty",
    ),
    (
        "--init-script",
        "a script added to every page runs outside any approval",
    ),
    (
        "--init-page",
        "a script run on the page runs outside any approval",
    ),
    (
        "--grant-permissions",
        "a page gets no permission beyond Chromium's defaults",
    ),
    (
        "--port",
        "countersign serves HTTP on `http.listen` from the configuration",
    ),
    (
        "--host",
        "countersign serves HTTP on `http.listen` from the configuration",
    ),
    (
        "--proxy-server",
        "the browser's traffic goes through countersign's egress guard",
    ),
    (
        "--ignore-https-errors",
        "a certificate error is never ignored",
    ),
    ("--secrets", "a model's text is never replaced from a file"),
];

/// The first Playwright flag of `args` that cannot be honoured, as an
/// error naming it.
pub(crate) fn refused_flag(args: &[String]) -> Result<(), String> {
    for arg in args {
        let flag = arg.split('=').next().unwrap_or(arg);
        if let Some((name, why)) = REFUSED_FLAGS.iter().find(|(name, _)| *name == flag) {
            return Err(format!(
                "Playwright MCP's `{name}` cannot be honoured here: {why}"
            ));
        }
    }
    Ok(())
}

/// One origin of `--allowed-origins` or `--blocked-origins`.
#[derive(Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

/// Reads `scheme://host[:port]` (a trailing `/` allowed), the host as the
/// policy writes it (lower case, `*.` for subdomains).
fn origin_of(flag: &str, text: &str) -> Result<Origin, String> {
    let bad = |why: &str| format!("`{flag}` has `{text}`, which is not an origin: {why}");
    let (scheme, rest) = text
        .split_once("://")
        .ok_or_else(|| bad("write it as scheme://host[:port]"))?;
    let port_default = match scheme {
        "https" => 443,
        "http" => 80,
        _ => return Err(bad("the scheme is http or https")),
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#', '@']) {
        return Err(bad("an origin has no path, query, fragment or user"));
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) if !rest.ends_with(']') => (
            host,
            port.parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| bad("the port is a number from 1 to 65535"))?,
        ),
        _ => (rest, port_default),
    };
    let host = host.to_ascii_lowercase();
    HostPattern::parse(&host).map_err(|why| bad(&why))?;
    if host == "*" {
        return Err(bad("name a host"));
    }
    Ok(Origin {
        scheme: scheme.to_owned(),
        host,
        port,
    })
}

fn origins_of(flag: &str, list: &str) -> Result<Vec<Origin>, String> {
    let origins: Vec<Origin> = list
        .split(';')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| origin_of(flag, item))
        .collect::<Result<_, _>>()?;
    if origins.is_empty() {
        return Err(format!("`{flag}` names no origin"));
    }
    Ok(origins)
}

impl PlaywrightFlags {
    /// Applies the flags to `config`; answers the lines start-up prints
    /// about what they changed.
    pub(crate) fn apply(&self, config: &mut Config) -> Result<Vec<String>, String> {
        let mut said = Vec::new();
        if let Some(browser) = &self.browser
            && !matches!(browser.as_str(), "chromium" | "chrome")
        {
            return Err(format!(
                "`--browser {browser}` cannot be honoured here: countersign runs Chromium (give `chromium` or `chrome`)"
            ));
        }
        if let Some(list) = &self.allowed_origins {
            let origins = origins_of("--allowed-origins", list)?;
            let mut hosts: Vec<String> = origins.iter().map(|o| o.host.clone()).collect();
            let mut schemes: Vec<String> = origins.iter().map(|o| o.scheme.clone()).collect();
            let mut ports: Vec<u16> = origins.iter().map(|o| o.port).collect();
            hosts.dedup();
            schemes.sort();
            schemes.dedup();
            ports.sort_unstable();
            ports.dedup();
            said.push(format!(
                "policy: from --allowed-origins, hosts {hosts:?}, schemes {schemes:?}, ports {ports:?} (covering redirects and subresources too)"
            ));
            config.policy.allow_hosts = hosts;
            config.policy.schemes = Some(schemes);
            config.policy.ports = Some(ports);
        }
        if let Some(list) = &self.blocked_origins {
            for origin in origins_of("--blocked-origins", list)? {
                if let Some(pattern) = config.policy.allow_hosts.iter().find(|allowed| {
                    **allowed != origin.host
                        && HostPattern::parse(allowed).is_ok_and(|p| p.matches(&origin.host))
                }) {
                    return Err(format!(
                        "`--blocked-origins` names `{}`, which the allowed host `{pattern}` covers: the policy cannot leave one host out of a pattern, so list the allowed hosts one by one",
                        origin.host
                    ));
                }
                config
                    .policy
                    .allow_hosts
                    .retain(|allowed| *allowed != origin.host);
                said.push(format!(
                    "policy: from --blocked-origins, `{}` is not allowed",
                    origin.host
                ));
            }
            if config.policy.allow_hosts.is_empty() {
                return Err(
                    "`--blocked-origins` leaves no allowed host: the policy needs at least one"
                        .to_owned(),
                );
            }
        }
        Ok(said)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn config() -> Config {
        crate::config::parse(
            "[policy]\nallow_hosts = [\"docs.example.com\", \"*.example.org\", \"127.0.0.2\"]\n",
        )
        .unwrap()
    }

    #[test]
    fn allowed_origins_become_the_policys_hosts_schemes_and_ports() {
        let mut config = config();
        let flags = PlaywrightFlags {
            allowed_origins: Some("https://docs.example.com; http://127.0.0.2:8000/;".to_owned()),
            ..PlaywrightFlags::default()
        };
        let said = flags.apply(&mut config).unwrap();
        assert_eq!(config.policy.allow_hosts, ["docs.example.com", "127.0.0.2"]);
        assert_eq!(
            config.policy.schemes,
            Some(vec!["http".to_owned(), "https".to_owned()])
        );
        assert_eq!(config.policy.ports, Some(vec![443, 8000]));
        assert_eq!(said.len(), 1);
    }

    #[test]
    fn a_blocked_origin_leaves_the_allowed_hosts_or_is_refused_when_a_pattern_covers_it() {
        let mut config = config();
        let flags = PlaywrightFlags {
            blocked_origins: Some("https://docs.example.com".to_owned()),
            ..PlaywrightFlags::default()
        };
        flags.apply(&mut config).unwrap();
        assert_eq!(config.policy.allow_hosts, ["*.example.org", "127.0.0.2"]);
        let flags = PlaywrightFlags {
            blocked_origins: Some("https://admin.example.org".to_owned()),
            ..PlaywrightFlags::default()
        };
        assert_eq!(
            flags.apply(&mut config).unwrap_err(),
            "`--blocked-origins` names `admin.example.org`, which the allowed host `*.example.org` covers: the policy cannot leave one host out of a pattern, so list the allowed hosts one by one"
        );
    }

    #[test]
    fn origins_that_are_not_origins_are_refused_by_name() {
        for (text, why) in [
            ("docs.example.com", "write it as scheme://host[:port]"),
            ("ftp://docs.example.com", "the scheme is http or https"),
            (
                "https://docs.example.com/admin",
                "an origin has no path, query, fragment or user",
            ),
            (
                "https://docs.example.com:0",
                "the port is a number from 1 to 65535",
            ),
            ("https://*", "name a host"),
        ] {
            assert_eq!(
                origin_of("--allowed-origins", text).unwrap_err(),
                format!("`--allowed-origins` has `{text}`, which is not an origin: {why}")
            );
        }
        assert_eq!(
            origin_of("--allowed-origins", "https://Docs.Example.com")
                .unwrap()
                .host,
            "docs.example.com"
        );
        assert_eq!(
            origins_of("--blocked-origins", " ; ").unwrap_err(),
            "`--blocked-origins` names no origin"
        );
    }

    #[test]
    fn flags_that_cannot_be_honoured_are_refused_by_name() {
        let args = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            refused_flag(&args(&["--playwright-compat", "--caps=vision"])).unwrap_err(),
            "Playwright MCP's `--caps` cannot be honoured here: the extra capabilities run code or act at coordinates, which no person can approve"
        );
        assert!(refused_flag(&args(&["--playwright-compat", "--headless", "--isolated"])).is_ok());
        let flags = PlaywrightFlags {
            browser: Some("firefox".to_owned()),
            ..PlaywrightFlags::default()
        };
        assert_eq!(
            flags.apply(&mut config()).unwrap_err(),
            "`--browser firefox` cannot be honoured here: countersign runs Chromium (give `chromium` or `chrome`)"
        );
    }
}
