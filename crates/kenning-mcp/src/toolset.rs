//! [`Toolset`]: the groups of tools a server can expose, and the one parser of their names.

use kenning_core::{FieldError, closest};

/// A group of tools enabled together (`--toolsets memory,decisions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Toolset {
    Memory,
    Decisions,
    Sync,
    Org,
    Workflows,
    Protocols,
    Repo,
    Test,
    Docs,
    Dynamics,
}

/// The name that enables every toolset, as github-mcp-server accepts it.
pub const ALL_TOOLSETS: &str = "all";

impl Toolset {
    /// Every toolset, in the order they are listed.
    pub const ALL: [Toolset; 10] = [
        Toolset::Memory,
        Toolset::Decisions,
        Toolset::Sync,
        Toolset::Org,
        Toolset::Workflows,
        Toolset::Protocols,
        Toolset::Repo,
        Toolset::Test,
        Toolset::Docs,
        Toolset::Dynamics,
    ];

    /// The toolsets enabled when none are named. Every tool's definition sits in the agent's
    /// context for the whole session, so the default stays at the memory tools; `decisions`
    /// (about as large again) is enabled by naming it.
    pub const DEFAULT: &'static [Toolset] = &[Toolset::Memory];

    pub const fn name(self) -> &'static str {
        match self {
            Toolset::Memory => "memory",
            Toolset::Decisions => "decisions",
            Toolset::Sync => "sync",
            Toolset::Org => "org",
            Toolset::Workflows => "workflows",
            Toolset::Protocols => "protocols",
            Toolset::Repo => "repo",
            Toolset::Test => "test",
            Toolset::Docs => "docs",
            Toolset::Dynamics => "dynamics",
        }
    }

    /// Whether the toolset's tools act beyond the user's stores and this machine's reading of the
    /// code: `sync` pushes the project's notes to the remotes the repository names and `test`
    /// runs the repository's code. A repository's own configuration may not turn these on.
    pub fn acts_beyond_the_stores(self) -> bool {
        matches!(self, Toolset::Sync | Toolset::Test)
    }

    /// The toolset of this name (`all` is not one: [`Toolset::parse_list`] reads it).
    pub fn named(name: &str) -> Option<Toolset> {
        Toolset::ALL.into_iter().find(|known| known.name() == name)
    }

    /// Whether the toolset's tools work on the repository's code (served by the engine's
    /// `CodeService`).
    pub fn is_code(self) -> bool {
        matches!(self, Toolset::Repo | Toolset::Test | Toolset::Docs)
    }

    /// The toolsets a list of names enables, each once, in the order first named; `all` names
    /// every toolset and `None` gives [`Toolset::DEFAULT`].
    pub fn parse_list(names: Option<&[String]>) -> Result<Vec<Toolset>, FieldError> {
        let Some(names) = names else { return Ok(Toolset::DEFAULT.to_vec()) };
        let mut selected: Vec<Toolset> = Vec::new();
        for name in names {
            let name = name.trim();
            let named = if name == ALL_TOOLSETS { Toolset::ALL.to_vec() } else { vec![Toolset::parse(name)?] };
            for toolset in named {
                if !selected.contains(&toolset) {
                    selected.push(toolset);
                }
            }
        }
        Ok(selected)
    }

    fn parse(name: &str) -> Result<Toolset, FieldError> {
        Toolset::named(name).ok_or_else(|| {
            let known = TOOLSETS.join(", ");
            FieldError::new(
                "toolsets",
                "names an unknown toolset",
                name,
                match closest(name, TOOLSETS.iter().copied().chain([ALL_TOOLSETS])) {
                    Some(near) => format!("did you mean `{near}`? known toolsets: {known}, or `{ALL_TOOLSETS}`"),
                    None => format!("known toolsets: {known}, or `{ALL_TOOLSETS}`"),
                },
            )
        })
    }
}

/// The names of [`Toolset::ALL`], in order.
pub const TOOLSETS: &[&str] = &{
    let mut names = [""; Toolset::ALL.len()];
    let mut index = 0;
    while index < names.len() {
        names[index] = Toolset::ALL[index].name();
        index += 1;
    }
    names
};

/// The names of [`Toolset::DEFAULT`].
pub const DEFAULT_TOOLSETS: &[&str] = &[Toolset::Memory.name()];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_names_every_toolset_once_whatever_else_is_named() {
        let names = ["memory".to_owned(), " all ".to_owned(), "docs".to_owned()];
        assert_eq!(Toolset::parse_list(Some(&names[..])).unwrap(), Toolset::ALL.to_vec());
    }

    #[test]
    fn no_list_gives_the_default_and_the_default_names_match() {
        assert_eq!(Toolset::parse_list(None).unwrap(), Toolset::DEFAULT.to_vec());
        assert_eq!(DEFAULT_TOOLSETS, Toolset::DEFAULT.iter().map(|toolset| toolset.name()).collect::<Vec<_>>());
    }
}
