//! The store's Lua scripts, each one atomic operation on the keys of one
//! actor's slot (or, for the pointer script, on one id's pointer).

use redis::{Cmd, Script};

const PRELUDE: &str = include_str!("lua/prelude.lua");
/// The notification outbox's functions, after the prelude in every script:
/// a step records its event in its own script.
const OUTBOX_PRELUDE: &str = include_str!("lua/outbox_prelude.lua");

/// A proposal script's body: the proposal prelude, then the script (the
/// grant prelude goes before both, as before every script).
macro_rules! proposal_script {
    ($path:literal) => {
        concat!(
            include_str!("lua/proposal_prelude.lua"),
            "\n",
            include_str!($path)
        )
    };
}

/// A standing-grant script's body: the standing prelude, then the script
/// (the grant prelude goes before both, as before every script).
macro_rules! standing_script {
    ($path:literal) => {
        concat!(
            include_str!("lua/standing_prelude.lua"),
            "\n",
            include_str!($path)
        )
    };
}

/// One of the store's Lua scripts, each one atomic operation on keys of one
/// cluster slot. Their SHA-1s are what `EVALSHA` names (see
/// [`RedisApprovalStore::script_sha`](crate::RedisApprovalStore::script_sha)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GrantScript {
    /// Creates a grant unless its key exists.
    Issue,
    /// Reads a grant.
    Get,
    /// Revokes an active grant.
    Revoke,
    /// The check-and-mark of `consume_once`.
    Consume,
    /// Gives back an attempt's consume (`abandon`).
    Abandon,
    /// Stops a run or an actor (`stop_run`, `stop_actor`).
    Stop,
    /// Resumes a run or an actor (`resume_run`, `resume_actor`).
    Resume,
    /// Claims, reads, keeps or releases the pointer from a grant id to its
    /// actor's slot.
    Pointer,
    /// Stores a new proposal unless its key exists (`propose`).
    Propose,
    /// Reads a proposal (`get_proposal`, and the read before a decision).
    GetProposal,
    /// Lists a run's pending proposals (`pending_proposals`).
    ListProposals,
    /// Approves a proposal and issues its grant in one step
    /// (`approve_proposal`): the issue script's body runs inside it.
    Approve,
    /// Denies a proposal (`deny_proposal`).
    Deny,
    /// Stores a new standing grant unless its key exists (`issue_standing`).
    IssueStanding,
    /// Reads a standing grant (`get_standing`, and the read before a write).
    GetStanding,
    /// Lists a run's usable standing grants (`standing_grants`).
    ListStanding,
    /// Takes one use of a standing grant (`use_standing`).
    UseStanding,
    /// Gives back an attempt's use of a standing grant (`give_back_use`).
    GiveBack,
    /// Revokes a standing grant (`revoke_standing`).
    RevokeStanding,
    /// Schedules, claims, finishes or retries notification events in one
    /// actor's outbox (`NotificationOutbox`).
    Outbox,
    /// Finds the actors whose outboxes hold due events, in a slot of its
    /// own.
    OutboxDirectory,
}

impl GrantScript {
    /// Every script.
    pub const ALL: [GrantScript; 21] = [
        GrantScript::Issue,
        GrantScript::Get,
        GrantScript::Revoke,
        GrantScript::Consume,
        GrantScript::Abandon,
        GrantScript::Stop,
        GrantScript::Resume,
        GrantScript::Pointer,
        GrantScript::Propose,
        GrantScript::GetProposal,
        GrantScript::ListProposals,
        GrantScript::Approve,
        GrantScript::Deny,
        GrantScript::IssueStanding,
        GrantScript::GetStanding,
        GrantScript::ListStanding,
        GrantScript::UseStanding,
        GrantScript::GiveBack,
        GrantScript::RevokeStanding,
        GrantScript::Outbox,
        GrantScript::OutboxDirectory,
    ];

    /// The script's name: `issue`, `get`, `revoke`, `consume`, `abandon`,
    /// `stop`, `resume`, `pointer`, `propose`, `get_proposal`,
    /// `list_proposals`, `approve`, `deny`, `issue_standing`, `get_standing`,
    /// `list_standing`, `use_standing`, `give_back`, `revoke_standing`,
    /// `outbox` or `outbox_directory`.
    pub fn name(self) -> &'static str {
        match self {
            GrantScript::Issue => "issue",
            GrantScript::Get => "get",
            GrantScript::Revoke => "revoke",
            GrantScript::Consume => "consume",
            GrantScript::Abandon => "abandon",
            GrantScript::Stop => "stop",
            GrantScript::Resume => "resume",
            GrantScript::Pointer => "pointer",
            GrantScript::Propose => "propose",
            GrantScript::GetProposal => "get_proposal",
            GrantScript::ListProposals => "list_proposals",
            GrantScript::Approve => "approve",
            GrantScript::Deny => "deny",
            GrantScript::IssueStanding => "issue_standing",
            GrantScript::GetStanding => "get_standing",
            GrantScript::ListStanding => "list_standing",
            GrantScript::UseStanding => "use_standing",
            GrantScript::GiveBack => "give_back",
            GrantScript::RevokeStanding => "revoke_standing",
            GrantScript::Outbox => "outbox",
            GrantScript::OutboxDirectory => "outbox_directory",
        }
    }

    fn body(self) -> &'static str {
        match self {
            GrantScript::Issue => include_str!("lua/issue.lua"),
            GrantScript::Get => include_str!("lua/get.lua"),
            GrantScript::Revoke => include_str!("lua/revoke.lua"),
            GrantScript::Consume => include_str!("lua/consume.lua"),
            GrantScript::Abandon => include_str!("lua/abandon.lua"),
            GrantScript::Stop => standing_script!("lua/stop.lua"),
            GrantScript::Resume => include_str!("lua/resume.lua"),
            GrantScript::Pointer => include_str!("lua/pointer.lua"),
            GrantScript::Propose => proposal_script!("lua/propose.lua"),
            GrantScript::GetProposal => proposal_script!("lua/get_proposal.lua"),
            GrantScript::ListProposals => proposal_script!("lua/list_proposals.lua"),
            // issue.lua's body, as it is, becomes a function of the approve
            // script: a grant approved from a proposal is issued by the very
            // code that issues every other one.
            GrantScript::Approve => concat!(
                include_str!("lua/proposal_prelude.lua"),
                "\nlocal function issue_grant(KEYS, ARGV)\n",
                include_str!("lua/issue.lua"),
                "\nend\n",
                include_str!("lua/approve.lua"),
            ),
            GrantScript::Deny => proposal_script!("lua/deny.lua"),
            GrantScript::IssueStanding => standing_script!("lua/standing_issue.lua"),
            GrantScript::GetStanding => standing_script!("lua/standing_get.lua"),
            GrantScript::ListStanding => standing_script!("lua/standing_list.lua"),
            GrantScript::UseStanding => standing_script!("lua/standing_use.lua"),
            GrantScript::GiveBack => standing_script!("lua/standing_give_back.lua"),
            GrantScript::RevokeStanding => standing_script!("lua/standing_revoke.lua"),
            GrantScript::Outbox => include_str!("lua/outbox.lua"),
            GrantScript::OutboxDirectory => include_str!("lua/outbox_directory.lua"),
        }
    }
}

/// A script's full source and its SHA-1, as EVALSHA names it.
#[derive(Debug, Clone)]
pub(crate) struct LoadedScript {
    source: String,
    sha: String,
}

impl LoadedScript {
    fn new(kind: GrantScript) -> Self {
        let source = format!("{PRELUDE}\n{OUTBOX_PRELUDE}\n{}", kind.body());
        let sha = Script::new(&source).get_hash().to_owned();
        LoadedScript { source, sha }
    }

    /// The SHA-1 of the source, in lower-case hex.
    pub(crate) fn sha(&self) -> &str {
        &self.sha
    }

    /// `SCRIPT LOAD <source>`.
    pub(crate) fn load_cmd(&self) -> Cmd {
        let mut cmd = redis::cmd("SCRIPT");
        cmd.arg("LOAD").arg(self.source.as_str());
        cmd
    }

    /// `EVALSHA <sha> <n> <keys…> <args…>`, or with `reload`, `EVAL <source>
    /// <n> <keys…> <args…>` (which also puts the script back into the
    /// server's cache). Every key is in one slot; the first routes the call.
    pub(crate) fn invocation(&self, reload: bool, keys: &[&str], args: &[&[u8]]) -> Cmd {
        let mut cmd = if reload {
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(self.source.as_str());
            cmd
        } else {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(self.sha.as_str());
            cmd
        };
        cmd.arg(keys.len());
        for key in keys {
            cmd.arg(*key);
        }
        for arg in args {
            cmd.arg(*arg);
        }
        cmd
    }
}

/// Every script, in the order of [`GrantScript::ALL`].
#[derive(Debug, Clone)]
pub(crate) struct Scripts {
    loaded: Vec<LoadedScript>,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            loaded: GrantScript::ALL
                .into_iter()
                .map(LoadedScript::new)
                .collect(),
        }
    }

    pub(crate) fn get(&self, kind: GrantScript) -> &LoadedScript {
        let index = match kind {
            GrantScript::Issue => 0,
            GrantScript::Get => 1,
            GrantScript::Revoke => 2,
            GrantScript::Consume => 3,
            GrantScript::Abandon => 4,
            GrantScript::Stop => 5,
            GrantScript::Resume => 6,
            GrantScript::Pointer => 7,
            GrantScript::Propose => 8,
            GrantScript::GetProposal => 9,
            GrantScript::ListProposals => 10,
            GrantScript::Approve => 11,
            GrantScript::Deny => 12,
            GrantScript::IssueStanding => 13,
            GrantScript::GetStanding => 14,
            GrantScript::ListStanding => 15,
            GrantScript::UseStanding => 16,
            GrantScript::GiveBack => 17,
            GrantScript::RevokeStanding => 18,
            GrantScript::Outbox => 19,
            GrantScript::OutboxDirectory => 20,
        };
        &self.loaded[index]
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn every_script_is_found_by_its_kind() {
        let scripts = Scripts::new();
        for kind in GrantScript::ALL {
            assert_eq!(scripts.get(kind).sha(), LoadedScript::new(kind).sha());
        }
    }
}
