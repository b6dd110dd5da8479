//! Who an operation is done for, as the audit log records it.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::error::Shown;

/// The side an operation comes from.
///
/// The agent side (the MCP server, or any adapter that serves a model) is recorded as `agent`;
/// the human at the trusted side (the CLI) by effective user id, `uid:N` — a value the process
/// cannot be talked into changing, unlike `$USER`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Actor {
    /// An agent, through an agent-facing adapter.
    Agent,
    /// The human running the trusted side, by effective user id.
    Human {
        /// The effective user id.
        uid: u32,
    },
}

impl Actor {
    /// The human running this process: its effective user id.
    pub fn human() -> Self {
        Actor::Human {
            uid: rustix::process::geteuid().as_raw(),
        }
    }

    /// An actor as the audit log or the changelog recorded it, for a person to read: a user
    /// id (`uid:1000`, perhaps followed by the name `--actor` gave) with its account's name
    /// first (`alice (uid:1000)`, `alice (uid:1000) as ops bot`); anything else as recorded.
    /// Escaped once ([`Shown`]), so a recorded actor cannot pass for page text.
    pub fn shown(recorded: &str) -> String {
        let escaped = Shown::text(recorded).to_string();
        let Some(rest) = recorded.strip_prefix("uid:") else {
            return escaped;
        };
        let (uid, given) = match rest.split_once(' ') {
            Some((uid, given)) => (uid, Some(given)),
            None => (rest, None),
        };
        let Some(name) = uid.parse::<u32>().ok().and_then(crate::accounts::name_of) else {
            return escaped;
        };
        let name = Shown::text(name);
        match given.and_then(|g| g.strip_prefix('(')?.strip_suffix(')')) {
            Some(given) => format!("{name} (uid:{uid}) as {}", Shown::text(given)),
            None if given.is_none() => format!("{name} (uid:{uid})"),
            None => format!("{name} ({escaped})"),
        }
    }

    /// How a human's change to the grants is recorded: [`Actor::human`] (`uid:N`), followed by
    /// the name the caller gave, if any (`uid:N (alice)`, escaped as [`Shown`] escapes it).
    ///
    /// Guarantee: the side is always the process's user id; no name can pass for another side
    /// (`agent`) or another user.
    pub fn human_named(name: Option<&str>) -> String {
        let me = Self::human().to_string();
        match name {
            Some(name) => format!("{me} ({})", Shown::text(name)),
            None => me,
        }
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Agent => f.write_str("agent"),
            Actor::Human { uid } => write!(f, "uid:{uid}"),
        }
    }
}

impl Serialize for Actor {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}
