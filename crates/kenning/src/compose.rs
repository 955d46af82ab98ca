//! Building the services from configuration: the one place that picks backends.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use kenning_core::expansion::Vocabulary;
use kenning_core::decision::{DecisionStore, ModuleList};
use kenning_core::llm::LanguageModel;
use kenning_core::{Domain, Embedder, MemoryStore};
use kenning_embed::{StaticEmbedder, TransformerEmbedder};
use kenning_engine::{DecisionDomain, DecisionService, DomainStore, MemoryService};
use kenning_postgres::{PostgresStore, Settings, VectorIndex};
use kenning_git::GitNotesStore;
use kenning_sqlite::SqliteStore;

use crate::config::{Config, EmbedderChoice, OrgConfig};
use crate::project::Project;

/// The engine's services over the configured stores.
pub struct Services {
    pub memory: Arc<MemoryService>,
    pub decisions: Arc<DecisionService>,
    /// The project's id as its domain carries it (see [`crate::project::identity`]).
    pub project_id: Option<String>,
}

/// Opens the project store (inside a git repository: the repository's git notes, indexed in
/// `.git/kenning/project.db`), the user store (SQLite) and, when configured, the organisation's
/// store on PostgreSQL, and the embedder. Each domain's store keeps both its memories and its
/// decisions. The org store connects on first use: a database that is down leaves the other
/// domains working.
///
/// With an `[llm]` section the engine gets the chain of its providers; a provider whose key
/// variable is unset stops startup with an error naming the variable.
pub fn services(config: &Config, project: Option<&Project>) -> Result<Services> {
    let llm = crate::llm::language_model(config.llm.as_deref())?;
    open_services(config, project, llm.map(|chain| chain as Arc<dyn LanguageModel>))
}

/// The services without a language model, for `kenning doctor`, which checks the stores and the
/// providers separately so that a missing key does not hide the state of the stores.
pub fn services_without_llm(config: &Config, project: Option<&Project>) -> Result<Services> {
    open_services(config, project, None)
}

fn open_services(config: &Config, project: Option<&Project>, llm: Option<Arc<dyn LanguageModel>>) -> Result<Services> {
    let mut stores: Vec<(Domain, Arc<dyn DecisionStore>)> = Vec::new();
    let mut project_id = None;
    if let Some(project) = project.filter(|_| !config.project_disabled) {
        let (id, store) = open_project(project, config)?;
        stores.push((Domain::Project(id.clone()), store));
        project_id = Some(id);
    }
    stores.push(open_sqlite(Domain::User, &config.user_db_path()?, config)?);
    if let Some(org) = config.org()? {
        stores.push(open_postgres(org)?);
    }
    let memory_domains = stores
        .iter()
        .map(|(domain, store)| DomainStore { domain: domain.clone(), store: store.clone() as Arc<dyn MemoryStore> })
        .collect();
    let decision_domains = stores.into_iter().map(|(domain, store)| DecisionDomain { domain, store }).collect();
    let memory = Arc::new(
        MemoryService::new(memory_domains, embedder(config)?)
            .with_author(config.author())
            .with_repository_root(project.map(|project| project.root.clone()))
            .with_llm(llm)
            .with_decay(config.decay)
            .with_deduplication(config.deduplication.clone())
            .with_vocabulary(vocabulary(config))
            .with_query_rewrite(config.rewrite_queries)
            .with_query_decomposition(config.decompose_queries),
    );
    let modules = match &config.decision_modules {
        Some(names) => ModuleList::new(names).map_err(kenning_engine::Error::Invalid)?,
        None => ModuleList::default(),
    };
    let decisions = Arc::new(DecisionService::new(memory.clone(), decision_domains, modules));
    Ok(Services { memory, decisions, project_id })
}

fn open_sqlite(domain: Domain, path: &Path, config: &Config) -> Result<(Domain, Arc<dyn DecisionStore>)> {
    let store = SqliteStore::open_with(path, config.durability).with_context(|| format!("opening the {domain} store at {}", path.display()))?;
    Ok((domain, Arc::new(store)))
}

fn open_postgres(org: &OrgConfig) -> Result<(Domain, Arc<dyn DecisionStore>)> {
    let domain = Domain::parse("domains.org.id", &format!("org:{}", org.id)).map_err(kenning_engine::Error::Invalid)?;
    let mut settings = Settings::new(org.url.clone());
    settings.read_url = org.read_url.clone();
    settings.environment = postgres_environment();
    if let Some(schema) = &org.schema {
        settings.schema = schema.clone();
    }
    if let Some(text) = &org.vector_index {
        settings.vector_index = VectorIndex::parse(text).ok_or_else(|| {
            kenning_engine::Error::Invalid(kenning_core::FieldError::new(
                "domains.org.vector_index",
                "is not a known vector index",
                text.as_str(),
                "use `hnsw` (the default) or `exact`",
            ))
        })?;
    }
    let store = PostgresStore::open(&settings).with_context(|| format!("setting up the {domain} store"))?;
    Ok((domain, Arc::new(store)))
}

/// What libpq would take from this process's environment: the `PG*` variables, the login name
/// and the home folder (for `~/.pgpass` and `~/.postgresql/`). kenning-postgres reads no
/// environment of its own.
pub fn postgres_environment() -> kenning_postgres::Environment {
    let login = std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).ok();
    kenning_postgres::Environment::from_lookup(|name| std::env::var(name).ok(), login, dirs::home_dir())
}

/// The project domain's store: the notes of the repository, indexed beside them.
/// Opens the project's notes and settles the id its domain takes: the configured one, else the
/// one its memories were first stored under, else the derived one.
pub fn open_project(project: &Project, config: &Config) -> Result<(String, Arc<dyn DecisionStore>)> {
    let (store, recorded) = open_project_notes(project, config)?;
    Ok((crate::project::identity(project, recorded.as_deref()), Arc::new(store)))
}

/// The project's notes store and the id its memories were first stored under, if any.
pub fn open_project_notes(project: &Project, config: &Config) -> Result<(GitNotesStore, Option<String>)> {
    let store = GitNotesStore::open(&project.root, &project.store_path(), config.durability)
        .with_context(|| format!("opening the project store in the git notes of {}", project.root.display()))?;
    let recorded = store.recorded_project_id().with_context(|| format!("reading the project's id from the notes of {}", project.root.display()))?;
    Ok((store, recorded))
}

fn embedder(config: &Config) -> Result<Option<Arc<dyn Embedder>>> {
    match config.embedder {
        EmbedderChoice::None => Ok(None),
        EmbedderChoice::Builtin => Ok(Some(Arc::new(StaticEmbedder::builtin().context("opening the built-in embedding model")?))),
        EmbedderChoice::Transformer => {
            let dir = config
                .model_dir
                .as_ref()
                .context("the transformer embedder needs a model folder: set embedder.model_dir or KENNING_MODEL_DIR")?;
            let embedder = TransformerEmbedder::load(dir).with_context(|| format!("loading the model in {}", dir.display()))?;
            Ok(Some(Arc::new(embedder)))
        }
    }
}

/// The code toolsets' service, when one of them (`repo`, `test`, `docs`) is enabled inside a
/// repository; its index lives beside the project store (`.git/kenning/code.db`).
pub fn code_service(services: &Services, project: Option<&Project>, options: &kenning_mcp::ServerOptions) -> Result<Option<Arc<kenning_engine::CodeService>>> {
    // An unknown name is refused when the server is made; here it only enables nothing.
    let wanted = options.selected_toolsets().is_ok_and(|toolsets| toolsets.iter().any(|toolset| toolset.is_code()));
    let (Some(project), true) = (project, wanted) else { return Ok(None) };
    // The interpreter of an activated virtual environment runs the project's Python tools.
    let python = std::env::var_os("VIRTUAL_ENV").map(|venv| std::path::PathBuf::from(venv).join("bin/python")).filter(|python| python.exists());
    let cargo_home = std::env::var_os("CARGO_HOME").map(std::path::PathBuf::from).or_else(|| dirs::home_dir().map(|home| home.join(".cargo")));
    let site_packages = std::env::var_os("VIRTUAL_ENV")
        .map(|venv| std::fs::read_dir(std::path::Path::new(&venv).join("lib")).into_iter().flatten().flatten().map(|lib| lib.path().join("site-packages")).collect())
        .unwrap_or_default();
    let docs = kenning_code::docs::DocSources { cargo_home, site_packages };
    let toolchain = kenning_code::runner::Toolchain { python, docs };
    let index = project.git_dir.join("kenning").join("code.db");
    let code = kenning_engine::CodeService::open(services.memory.clone(), services.decisions.clone(), &index, toolchain)
        .with_context(|| format!("opening the code index at {}", index.display()))?;
    Ok(Some(Arc::new(code)))
}

/// The built-in synonyms with the project's own groups added.
fn vocabulary(config: &Config) -> Vocabulary {
    let mut vocabulary = Vocabulary::built_in();
    for group in &config.synonyms {
        vocabulary.add_group(group);
    }
    vocabulary
}
