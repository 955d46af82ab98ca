//! Building the memory service from configuration: the one place that picks backends.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use kenning_core::{Domain, Embedder, MemoryStore};
use kenning_embed::TransformerEmbedder;
use kenning_engine::{DomainStore, MemoryService};
use kenning_sqlite::SqliteStore;

use crate::config::{Config, EmbedderChoice};
use crate::project::Project;

/// Opens the project store (inside a git repository) and the user store, and the embedder.
pub fn memory_service(config: &Config, project: Option<&Project>) -> Result<MemoryService> {
    let mut domains = Vec::new();
    if let Some(project) = project.filter(|_| !config.project_disabled) {
        domains.push(open_sqlite(Domain::Project(project.id.clone()), &project.store_path())?);
    }
    domains.push(open_sqlite(Domain::User, &config.user_db_path()?)?);
    Ok(MemoryService::new(domains, embedder(config)?))
}

fn open_sqlite(domain: Domain, path: &Path) -> Result<DomainStore> {
    let store = SqliteStore::open(path).with_context(|| format!("opening the {domain} store at {}", path.display()))?;
    let store: Arc<dyn MemoryStore> = Arc::new(store);
    Ok(DomainStore { domain, store })
}

fn embedder(config: &Config) -> Result<Option<Arc<dyn Embedder>>> {
    match config.embedder {
        EmbedderChoice::None => Ok(None),
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
