//! [`MemoryStore`] for [`GitNotesStore`]: each write a notes commit through
//! [`GitNotesStore::write`], each read answered by the index once it is caught up.

use super::*;

impl MemoryStore for GitNotesStore {
    fn insert(&self, batch: &[(Memory, Option<Embedding>)]) -> CoreResult<Vec<Inserted>> {
        Ok(self.write("kenning: capture", |draft| {
            batch.iter().map(|(memory, embedding)| draft.insert(memory, embedding.as_ref())).collect()
        })?)
    }

    fn active_holders(&self, memories: &[&Memory]) -> CoreResult<Vec<Option<MemoryId>>> {
        self.refresh()?;
        self.index.active_holders(memories)
    }

    fn get(&self, id: &MemoryId) -> CoreResult<Option<Memory>> {
        self.refresh()?;
        self.index.get(id)
    }

    fn get_many(&self, ids: &[MemoryId]) -> CoreResult<Vec<Memory>> {
        self.refresh()?;
        self.index.get_many(ids)
    }

    fn replace(&self, next: &Memory, previous: &MemoryVersion, embedding: Option<&Embedding>) -> CoreResult<()> {
        Ok(self.write("kenning: update", |draft| draft.replace(next, previous, embedding))?)
    }

    fn replace_many(&self, changes: &[kenning_core::Replacement<'_>]) -> CoreResult<()> {
        Ok(self.write("kenning: update", |draft| {
            changes.iter().try_for_each(|change| draft.replace(change.next, change.previous, change.embedding))
        })?)
    }

    fn history(&self, id: &MemoryId) -> CoreResult<Vec<MemoryVersion>> {
        self.refresh()?;
        self.index.history(id)
    }

    /// Reads are this machine's statistics: they go to the index only, never into notes.
    fn record_access(&self, ids: &[MemoryId], at: DateTime<Utc>) -> CoreResult<()> {
        self.index.record_access(ids, at)
    }

    fn list(&self, filter: &SearchFilter, offset: usize, limit: usize) -> CoreResult<Vec<Memory>> {
        self.refresh()?;
        self.index.list(filter, offset, limit)
    }

    fn count(&self, filter: &SearchFilter) -> CoreResult<u64> {
        self.refresh()?;
        self.index.count(filter)
    }

    fn search_text(&self, query: &str, filter: &SearchFilter, limit: usize) -> CoreResult<Vec<ScoredId>> {
        self.refresh()?;
        self.index.search_text(query, filter, limit)
    }

    fn search_vector(&self, vector: &[f32], model: &str, filter: &SearchFilter, limit: usize) -> CoreResult<Vec<ScoredId>> {
        self.refresh()?;
        self.index.search_vector(vector, model, filter, limit)
    }

    fn neighbours(&self, ids: &[MemoryId], filter: &SearchFilter, window: TimeDelta) -> CoreResult<Vec<Vec<MemoryId>>> {
        self.refresh()?;
        self.index.neighbours(ids, filter, window)
    }

    fn missing_embeddings(&self, model: &str, limit: usize) -> CoreResult<Vec<Memory>> {
        self.refresh()?;
        self.index.missing_embeddings(model, limit)
    }

    /// Vectors are derived from the text and kept in the index only.
    fn set_embeddings(&self, items: &[(MemoryId, Embedding)]) -> CoreResult<()> {
        self.refresh()?;
        self.index.set_embeddings(items)
    }

    fn export(&self, offset: usize, limit: usize) -> CoreResult<Vec<MemoryRecord>> {
        self.refresh()?;
        self.index.export(offset, limit)
    }

    fn import(&self, records: &[MemoryRecord]) -> CoreResult<usize> {
        Ok(self.write("kenning: import", |draft| {
            let mut written = 0;
            for record in records {
                let memory = &record.memory;
                let id = &memory.id;
                let current = draft.note(id)?;
                let current_memory = current.as_ref().map(Note::memory).transpose().map_err(|reason| Error::Note { id: id.to_string(), reason })?;
                if current_memory.as_ref().is_some_and(|current| current.version >= memory.version) {
                    continue;
                }
                if let Some(existing) = draft.active_duplicate(memory, Some(id))? {
                    tracing::info!(%id, %existing, "import skipped a duplicate of an active memory");
                    continue;
                }
                let invalid = |reason: String| Error::Note { id: id.to_string(), reason };
                let mut note = match current {
                    Some(mut note) => {
                        note.set_memory(memory).map_err(invalid)?;
                        note
                    }
                    None => Note::new(memory).map_err(invalid)?,
                };
                for version in &record.history {
                    note.push_history(version).map_err(invalid)?;
                }
                if let Some(current) = current_memory
                    && !note.has_history_version(current.version)
                {
                    // The version being overwritten stays in the history, as the index keeps it.
                    let overwritten = MemoryVersion {
                        version: current.version,
                        superseded_at: memory.updated_at,
                        reason: format!("replaced by imported version {}", memory.version),
                        memory: current,
                    };
                    note.push_history(&overwritten).map_err(invalid)?;
                }
                draft.stage(id, note, memory.clone());
                draft.embed(memory, record.embedding.as_ref());
                written += 1;
            }
            Ok(written)
        })?)
    }

    fn stats(&self) -> CoreResult<StoreStats> {
        self.refresh()?;
        let mut stats = self.index.stats()?;
        stats.backend = "git-notes".to_owned();
        stats.location = self.location.clone();
        stats.warnings.extend(self.skipped_warnings()?);
        Ok(stats)
    }

    /// The index's mark once it has caught up with the notes, so that a write by another
    /// process (or a sync) moves it too.
    fn change_mark(&self) -> CoreResult<Option<String>> {
        self.refresh()?;
        self.index.change_mark()
    }

    fn authored_by(&self, author: &str) -> CoreResult<Vec<MemoryId>> {
        self.refresh()?;
        Ok(self.index.authored(author)?)
    }

    fn purge_author(&self, author: &str, mode: PurgeMode) -> CoreResult<PurgeCounts> {
        Ok(self.purge(author, mode)?)
    }

    /// The index database (and its index file) is rewritten; the notes commits from before a
    /// purge keep their notes, which only a rewrite of the notes history on every clone erases.
    fn erase_deleted(&self) -> CoreResult<()> {
        Ok(self.index.erase_purged()?)
    }

    fn rebuild_index(&self) -> CoreResult<u64> {
        Ok(self.rebuild()?)
    }

    fn warm_up(&self, model: Option<&str>) -> CoreResult<()> {
        self.refresh()?;
        self.index.warm_up(model)
    }

    fn sync(&self, remote: &str) -> CoreResult<SyncReport> {
        Ok(self.sync_with(remote)?)
    }

    /// Working state stays in this clone's index database, beside the access counts: it is
    /// the state of work in progress here, not knowledge to share, so it never enters the notes
    /// and no sync carries it. It survives the process (the index's durability) and an index
    /// rebuild, which only touches the mirrored memories.
    fn state(&self) -> Option<&dyn kenning_core::state::StateStore> {
        self.index.state()
    }

    /// The branch (`git_branch`, absent on a detached HEAD) and commit (`git_commit`, absent
    /// before the first commit) checked out at capture.
    fn capture_context(&self) -> BTreeMap<String, String> {
        let provenance = self.provenance();
        let mut context = BTreeMap::new();
        if let Some(branch) = provenance.branch {
            context.insert(BRANCH_KEY.to_owned(), branch);
        }
        if let Some(commit) = provenance.commit {
            context.insert(COMMIT_KEY.to_owned(), commit);
        }
        context
    }
}
