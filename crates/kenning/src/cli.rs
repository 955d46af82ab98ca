//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "kenning", version, about = "Durable, searchable memory for coding agents: an MCP server and CLI.")]
pub struct Cli {
    /// Print machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP over stdio (default) or streamable HTTP.
    Serve(ServeArgs),
    /// Serve the web view (memories, decisions, calibration) on loopback.
    Ui(UiArgs),
    /// Store a memory.
    Capture(CaptureArgs),
    /// Search memories.
    Recall(RecallArgs),
    /// Show one memory by URN.
    Get { urn: String },
    /// Change a memory, keeping its previous version.
    Update(UpdateArgs),
    /// Mark a memory obsolete (soft delete).
    Forget {
        urn: String,
        #[arg(long)]
        reason: String,
    },
    /// Bring a forgotten memory back.
    Restore {
        urn: String,
        #[arg(long)]
        reason: String,
    },
    /// Show a memory's earlier versions.
    History { urn: String },
    /// Copy a project or user memory into the organisation's shared memory, linked back to it.
    Promote {
        urn: String,
        /// The domain to copy it into: `org` or `org:{org-id}`.
        #[arg(long, default_value = "org")]
        to: String,
    },
    /// Show counts, store locations, the embedder and index health.
    Status,
    /// Rebuild the search index (the project's from its git notes alone) and embed memories that
    /// lack a vector from the current model.
    Reindex,
    /// Write every memory, with history and vectors, as JSON lines.
    Export {
        /// Only this domain (`project`, `user`, ...).
        #[arg(long)]
        domain: Option<String>,
        /// Output file; standard output when absent.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Leave vectors out (they are rebuilt by `kenning reindex`).
        #[arg(long)]
        no_vectors: bool,
        /// Only the memories this author wrote (their data-rights export).
        #[arg(long)]
        author: Option<String>,
    },
    /// Delete for good everything one author wrote (their data-rights erasure): memories with
    /// their whole history, vectors, links and graph edges, and decisions with their signals
    /// and outcomes, in every domain. Prints what was removed. Without --yes nothing is removed.
    Purge {
        /// The author whose memories go, as recorded on them (see `kenning export --author`).
        #[arg(long)]
        author: String,
        /// Only this domain (`project`, `user`, `org`, ...).
        #[arg(long)]
        domain: Option<String>,
        /// Only count what would be removed.
        #[arg(long, conflicts_with = "yes")]
        dry_run: bool,
        /// Confirm the deletion; it cannot be undone.
        #[arg(long)]
        yes: bool,
    },
    /// Group related episodic memories into semantic principles linked to them, with progress
    /// on stderr and the run's summary on stdout; `--rollback RUN` undoes a run, `--list` lists them.
    Consolidate(crate::consolidate::ConsolidateArgs),
    /// Decisions: capture, follow through signals to an outcome, and learn from them.
    Decisions {
        #[command(subcommand)]
        command: crate::decisions::DecisionCommand,
    },
    /// Guided protocols: list them, or run one with its questions asked in the terminal.
    Protocol {
        #[command(subcommand)]
        command: crate::protocols::ProtocolCommand,
    },
    /// Workflows: plans of steps with dependencies, kept so that work resumes after a crash.
    Workflow {
        #[command(subcommand)]
        command: crate::workflows::WorkflowCommand,
    },
    /// Print how well stated confidence matched outcomes, and draw the reliability diagram.
    Calibration(crate::decisions::CalibrationArgs),
    /// Answer a Claude Code hook (session-start, user-prompt, post-tool, post-tool-failure,
    /// pre-compact, stop, session-end): reads the hook's JSON on stdin, prints its answer; always
    /// exits 0, even on an argument error, so it never blocks the agent (problems go to hooks.log).
    Hook(HookArgs),
    /// Register kenning with agent clients: the MCP server and, where the client has them, the
    /// hooks, in each client's own configuration files (default: Claude Code, `.mcp.json` and
    /// `.claude/settings.json`; with --user, ~/.claude.json and ~/.claude/settings.json).
    Init(InitArgs),
    /// Check the binary, the configuration, the stores, the index, the hooks and the MCP
    /// registration, and say what to fix.
    Doctor,
    /// Exchange the project's memories with a git remote: fetch its notes, merge, push.
    Sync {
        /// The remote's name or URL (default: origin).
        remote: Option<String>,
        /// Instead of syncing, add refspecs to the remote so that a plain `git fetch` and
        /// `git push` carry the notes too.
        #[arg(long)]
        setup: bool,
    },
    /// Trust a repository's kenning.toml as it is now, so that it may set everything (language
    /// models, storage, the org domain, the user's id), not only what any repository may; asked
    /// again when the file changes. `--list` lists trusted files, `--revoke` stops trusting.
    Trust(crate::trust::TrustArgs),
    /// API keys for `kenning serve --http`: create, list, revoke.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Read memories exported by `kenning export`.
    Import {
        /// JSON-lines file, or `-` for standard input.
        file: PathBuf,
        /// Import everything into this domain instead of each record's own.
        #[arg(long)]
        into: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it, once; only its hash is kept.
    Create {
        /// A label, unique among active keys, e.g. `ci` or `laptop-alice`.
        #[arg(long)]
        name: String,
        /// Who the key acts as, recorded as the author of what it writes (default: the name).
        #[arg(long)]
        identity: Option<String>,
        /// The key may only read: every tool, prompt and web action that writes is refused.
        #[arg(long)]
        read_only: bool,
        /// The only domains the key reads and writes, comma-separated: `user`, `project` (every
        /// project), `project:{id}`, `org` (every organisation), `org:{id}` (default: every domain).
        #[arg(long, value_name = "DOMAINS")]
        domains: Option<String>,
    },
    /// List every key, revoked ones included (never the keys themselves).
    List,
    /// Revoke a key by name or id; servers refuse it from their next request.
    Revoke {
        /// The key's name or id.
        key: String,
    },
}

#[derive(Debug, Args)]
pub struct HookArgs {
    /// session-start, user-prompt, post-tool, post-tool-failure, pre-compact, stop or session-end.
    pub event: String,
    /// The most tokens of context to add, at least 50 (default: session-start 1500, user-prompt
    /// 600, post-tool and post-tool-failure 400).
    #[arg(long)]
    pub max_tokens: Option<usize>,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The clients to register with: claude, codex, gemini, cursor, vscode, claude-desktop,
    /// windsurf, zed, or all (every one found on this machine); comma-separated or repeated
    /// (default: claude).
    #[arg(long, value_name = "CLIENT")]
    pub client: Vec<String>,
    /// Register for every project of this user (e.g. ~/.claude.json and ~/.claude/settings.json)
    /// instead of the current project.
    #[arg(long)]
    pub user: bool,
    /// Show what would change, as a diff, and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio; ADDR is HOST:PORT or a port
    /// on loopback, default 127.0.0.1:8080. Any address but loopback needs API keys.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8080")]
    pub http: Option<String>,
    /// Comma-separated toolsets to enable: memory, decisions, sync, org, workflows, protocols, repo, test, docs, dynamics, or all (default: memory).
    #[arg(long, value_delimiter = ',')]
    pub toolsets: Option<Vec<String>>,
    /// Expose only tools that do not write.
    #[arg(long)]
    pub read_only: bool,
    /// With --http on loopback, also serve the web view (`kenning ui`) at / on the same port.
    #[arg(long, requires = "http")]
    pub ui: bool,
}

#[derive(Debug, Args)]
pub struct UiArgs {
    /// The port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 7777)]
    pub port: u16,
    /// Refuse every change (forget, restore) from the view.
    #[arg(long)]
    pub read_only: bool,
}

#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// The content (markdown); `-` reads standard input.
    pub content: String,
    #[arg(long)]
    pub title: Option<String>,
    /// episodic, semantic or procedural.
    #[arg(long)]
    pub kind: Option<String>,
    #[arg(long, short)]
    pub namespace: Option<String>,
    #[arg(long = "tag", short = 't')]
    pub tags: Vec<String>,
    #[arg(long)]
    pub category: Option<String>,
    /// Default: told-by-user.
    #[arg(long)]
    pub source: Option<String>,
    #[arg(long)]
    pub confidence: Option<f64>,
    #[arg(long)]
    pub salience: Option<f64>,
    /// When it happened (RFC 3339 or YYYY-MM-DD).
    #[arg(long)]
    pub event_time: Option<String>,
    /// `project`, `user`, ...; default the project inside a git repository, else user.
    #[arg(long)]
    pub domain: Option<String>,
    /// Caller metadata as KEY=VALUE; repeatable.
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    pub metadata: Vec<String>,
    /// Link to another memory's URN; repeatable.
    #[arg(long = "link", value_name = "URN")]
    pub links: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RecallArgs {
    pub query: String,
    #[arg(long, short)]
    pub limit: Option<usize>,
    #[arg(long)]
    pub cursor: Option<String>,
    /// light or full.
    #[arg(long)]
    pub detail: Option<String>,
    #[arg(long)]
    pub max_tokens: Option<usize>,
    #[arg(long = "kind")]
    pub kinds: Vec<String>,
    #[arg(long = "namespace", short = 'n')]
    pub namespaces: Vec<String>,
    #[arg(long = "tag", short = 't')]
    pub tags: Vec<String>,
    #[arg(long = "domain")]
    pub domains: Vec<String>,
    #[arg(long)]
    pub since: Option<String>,
    #[arg(long)]
    pub until: Option<String>,
    /// Only memories whose confidence now (after decay and evidence) is at least this, 0 to 1.
    #[arg(long)]
    pub min_confidence: Option<f64>,
    /// Also return dormant memories, whose confidence has decayed under the dormancy threshold.
    #[arg(long)]
    pub include_dormant: bool,
    /// Only memories captured on this git branch.
    #[arg(long)]
    pub branch: Option<String>,
    /// Only memories about this file or directory (a path from the current directory, inside the repository).
    #[arg(long, value_name = "PATH")]
    pub file: Option<std::path::PathBuf>,
    /// The time relative expressions in the query count from ("yesterday", "since March"); default now.
    #[arg(long, value_name = "TIME")]
    pub as_of: Option<String>,
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    pub urn: String,
    #[arg(long)]
    pub reason: String,
    #[arg(long)]
    pub content: Option<String>,
    #[arg(long)]
    pub title: Option<String>,
    #[arg(long)]
    pub kind: Option<String>,
    /// Replaces all tags; repeatable.
    #[arg(long = "tag", short = 't')]
    pub tags: Option<Vec<String>>,
    #[arg(long)]
    pub confidence: Option<f64>,
    #[arg(long)]
    pub salience: Option<f64>,
}
