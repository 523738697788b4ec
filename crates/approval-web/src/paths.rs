//! The pages' paths, relative to where the router is mounted: the ones
//! the pages put in their links, form actions and redirects, and the ones
//! [`ApprovalPages`](crate::ApprovalPages) gives the host.

use countersign_approval_core::ProposalId;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Everything but the unreserved characters of RFC 3986 is encoded, so an
/// id holding `/`, `?`, `#`, `%` or spaces stays one segment.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn segment(text: &str) -> String {
    let encoded = utf8_percent_encode(text, SEGMENT).to_string();
    // `.` and `..` are path steps, not names; encode them so that they stay
    // a segment (a browser would otherwise resolve them away).
    match encoded.as_str() {
        "." => "%2E".to_owned(),
        ".." => "%2E%2E".to_owned(),
        _ => encoded,
    }
}

pub(crate) fn run_path(base: &str, actor: &str, run: &str) -> String {
    format!("{base}/runs/{}/{}", segment(actor), segment(run))
}

pub(crate) fn proposal_path(base: &str, id: &ProposalId) -> String {
    // Proposal ids are `[A-Za-z0-9_-]{1,128}`: nothing to encode.
    format!("{base}/proposals/{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_stay_one_segment() {
        assert_eq!(run_path("", "a/b", "c?d#e"), "/runs/a%2Fb/c%3Fd%23e");
        assert_eq!(run_path("/x", ".", ".."), "/x/runs/%2E/%2E%2E");
        assert_eq!(run_path("", "é 1%", "r"), "/runs/%C3%A9%201%25/r");
        assert_eq!(run_path("", "a.b-c_d~e", "r"), "/runs/a.b-c_d~e/r");
    }
}
