//! The rules as a host's configuration file declares them: only with the
//! `serde` feature (`required-features` in the manifest), so that
//! `cargo test -p countersign-rules` builds without it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use countersign_rules::Rule;

#[test]
fn the_toml_shape_refuses_unknown_keys_and_builds_the_same_rules() {
    let text = r#"
        default_pack = { auto_hosts = ["docs.example"] }
        [[rules]]
        id = "no-admin"
        tier = "deny"
        reason = "never the admin console"
        hosts = ["admin.shop.example"]
    "#;
    let config: countersign_rules::RulesConfig = toml::from_str(text).unwrap();
    let rules = config.into_builder().unwrap().build().unwrap();
    let ids: Vec<&str> = rules.rules().map(Rule::id).collect();
    assert_eq!(ids[0], "no-admin");
    assert_eq!(ids.len(), 1 + countersign_rules::DEFAULT_PACK.len());
    let typo = "[[rules]]\nid = \"x\"\ntier = \"deny\"\nreason = \"r\"\nhost = [\"a.example\"]\n";
    let error = toml::from_str::<countersign_rules::RulesConfig>(typo)
        .unwrap_err()
        .to_string();
    assert!(error.contains("unknown field `host`"), "{error}");
    let tier = "[[rules]]\nid = \"x\"\ntier = \"always\"\nreason = \"r\"\n";
    let error = toml::from_str::<countersign_rules::RulesConfig>(tier)
        .unwrap_err()
        .to_string();
    assert!(error.contains("unknown variant `always`"), "{error}");
}
