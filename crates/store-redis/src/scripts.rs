//! The five Lua scripts, each one atomic operation on one grant's hash.

use redis::{Cmd, Script};

const PRELUDE: &str = include_str!("lua/prelude.lua");

/// One of the store's five Lua scripts, each one atomic operation on one
/// grant's hash. Their SHA-1s are what `EVALSHA` names (see
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
}

impl GrantScript {
    /// Every script.
    pub const ALL: [GrantScript; 5] = [
        GrantScript::Issue,
        GrantScript::Get,
        GrantScript::Revoke,
        GrantScript::Consume,
        GrantScript::Abandon,
    ];

    /// The script's name: `issue`, `get`, `revoke`, `consume` or `abandon`.
    pub fn name(self) -> &'static str {
        match self {
            GrantScript::Issue => "issue",
            GrantScript::Get => "get",
            GrantScript::Revoke => "revoke",
            GrantScript::Consume => "consume",
            GrantScript::Abandon => "abandon",
        }
    }

    fn body(self) -> &'static str {
        match self {
            GrantScript::Issue => include_str!("lua/issue.lua"),
            GrantScript::Get => include_str!("lua/get.lua"),
            GrantScript::Revoke => include_str!("lua/revoke.lua"),
            GrantScript::Consume => include_str!("lua/consume.lua"),
            GrantScript::Abandon => include_str!("lua/abandon.lua"),
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
        let source = format!("{PRELUDE}\n{}", kind.body());
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

    /// `EVALSHA <sha> 1 <key> <args…>`, or with `reload`, `EVAL <source> 1 <key> <args…>`
    /// (which also puts the script back into the server's cache).
    pub(crate) fn invocation(&self, reload: bool, key: &str, args: &[&str]) -> Cmd {
        let mut cmd = if reload {
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(self.source.as_str());
            cmd
        } else {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(self.sha.as_str());
            cmd
        };
        cmd.arg(1).arg(key);
        for arg in args {
            cmd.arg(*arg);
        }
        cmd
    }
}

/// All five scripts.
#[derive(Debug, Clone)]
pub(crate) struct Scripts {
    issue: LoadedScript,
    get: LoadedScript,
    revoke: LoadedScript,
    consume: LoadedScript,
    abandon: LoadedScript,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            issue: LoadedScript::new(GrantScript::Issue),
            get: LoadedScript::new(GrantScript::Get),
            revoke: LoadedScript::new(GrantScript::Revoke),
            consume: LoadedScript::new(GrantScript::Consume),
            abandon: LoadedScript::new(GrantScript::Abandon),
        }
    }

    pub(crate) fn get(&self, kind: GrantScript) -> &LoadedScript {
        match kind {
            GrantScript::Issue => &self.issue,
            GrantScript::Get => &self.get,
            GrantScript::Revoke => &self.revoke,
            GrantScript::Consume => &self.consume,
            GrantScript::Abandon => &self.abandon,
        }
    }
}
