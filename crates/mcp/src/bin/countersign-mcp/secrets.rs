//! Secrets of the configuration (a webhook's signing secret, a bot token,
//! the metrics scraper's token): read from the environment or a file, never
//! from the file itself, and never shown in an error.

use std::path::PathBuf;

/// Reads a secret (`noun`: `secret`, `token`) from exactly one of the
/// keys `<noun>_env` and `<noun>_file`; `what` names the table in errors.
/// The secret's text never appears in an error.
pub(crate) fn read_secret(
    what: &str,
    noun: &str,
    env: Option<&str>,
    file: Option<&PathBuf>,
) -> Result<String, String> {
    match (env, file) {
        (Some(name), None) => std::env::var(name)
            .map_err(|_| format!("{what}: the environment variable `{name}` is not set")),
        (None, Some(path)) => std::fs::read_to_string(path)
            .map(|text| text.trim().to_owned())
            .map_err(|e| {
                format!(
                    "{what}: cannot read the {noun} file `{}`: {e}",
                    path.display()
                )
            }),
        (Some(_), Some(_)) => Err(format!(
            "{what}: give the {noun} as `{noun}_env` or `{noun}_file`, not both"
        )),
        (None, None) => Err(format!(
            "{what}: give the {noun} as `{noun}_env` (an environment variable) or `{noun}_file`"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_comes_from_exactly_one_place() {
        let what = "`notify[0]` (webhook)";
        assert_eq!(
            read_secret(what, "secret", None, None).unwrap_err(),
            "`notify[0]` (webhook): give the secret as `secret_env` (an environment variable) or `secret_file`"
        );
        assert_eq!(
            read_secret(what, "secret", Some("X"), Some(&PathBuf::from("/x"))).unwrap_err(),
            "`notify[0]` (webhook): give the secret as `secret_env` or `secret_file`, not both"
        );
        assert_eq!(
            read_secret(what, "secret", Some("COUNTERSIGN_TEST_UNSET_SECRET"), None).unwrap_err(),
            "`notify[0]` (webhook): the environment variable `COUNTERSIGN_TEST_UNSET_SECRET` is not set"
        );
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "whsec_abc\n").unwrap();
        assert_eq!(
            read_secret(what, "secret", None, Some(&file.path().to_path_buf())).unwrap(),
            "whsec_abc"
        );
    }
}
