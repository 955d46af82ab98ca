//! [`Draft`]: the notes one write reads and stages, on top of the state the index reflects,
//! checked against that state before the notes commit is made.

use super::*;

/// The notes a write reads and stages, on top of the state the index reflects.
pub(super) struct Draft<'r> {
    pub(super) repo: &'r Repository,
    pub(super) tree: Option<git2::Tree<'r>>,
    pub(super) index: &'r SqliteStore,
    /// Notes to write, with the memory each holds now.
    pub(super) staged: Vec<(MemoryId, Note, Memory)>,
    /// Edges notes to write, by the memory their edges point at.
    pub(super) staged_edges: Vec<(MemoryId, Note)>,
    /// Tombstones to write over the notes of purged memories.
    pub(super) staged_purges: Vec<(MemoryId, Note)>,
    pub(super) embeddings: Vec<VersionedEmbedding>,
}

impl Draft<'_> {
    /// The note of `id` as this write sees it: staged, or as the base state holds it.
    pub(super) fn note(&self, id: &MemoryId) -> Result<Option<Note>> {
        if let Some((_, note, _)) = self.staged.iter().find(|(staged, _, _)| staged == id) {
            return Ok(Some(note.clone()));
        }
        let Some(tree) = &self.tree else { return Ok(None) };
        let Some(bytes) = notes::read_note(self.repo, tree, note_key(id))? else { return Ok(None) };
        Note::decode(&bytes).map(Some).map_err(|reason| Error::Note { id: id.to_string(), reason })
    }

    pub(super) fn stage(&mut self, id: &MemoryId, note: Note, memory: Memory) {
        self.staged.retain(|(staged, _, _)| staged != id);
        self.staged.push((id.clone(), note, memory));
    }

    pub(super) fn embed(&mut self, memory: &Memory, embedding: Option<&Embedding>) {
        if let Some(embedding) = embedding {
            self.embeddings.push(VersionedEmbedding { id: memory.id.clone(), version: memory.version, embedding: embedding.clone() });
        }
    }

    /// An active memory other than `except` holding the content of `memory`, as this write
    /// would leave the notes.
    pub(super) fn active_duplicate(&self, memory: &Memory, except: Option<&MemoryId>) -> Result<Option<MemoryId>> {
        if memory.status != kenning_core::Status::Active {
            return Ok(None);
        }
        let hash = memory.content_hash();
        let others = |id: &MemoryId| id != &memory.id && Some(id) != except;
        for (id, _, staged) in &self.staged {
            if others(id) && staged.status == kenning_core::Status::Active && staged.namespace == memory.namespace && staged.content_hash() == hash {
                return Ok(Some(id.clone()));
            }
        }
        // A staged memory was checked above as this write leaves it, so the index's copy of it
        // no longer counts.
        let found = self.index.active_duplicate(memory, except)?;
        Ok(found.filter(|found| !self.staged.iter().any(|(id, _, _)| id == found)))
    }

    pub(super) fn insert(&mut self, memory: &Memory, embedding: Option<&Embedding>) -> Result<Inserted> {
        // Checked before the id, so that retrying a capture whose acknowledgement was lost
        // reports the duplicate instead of failing.
        if let Some(existing) = self.active_duplicate(memory, None)? {
            return Ok(Inserted::Duplicate(existing));
        }
        if self.note(&memory.id)?.is_some() {
            return Err(Error::Refused(Refusal::IdTaken(memory.id.to_string())));
        }
        let note = Note::new(memory).map_err(|reason| Error::Note { id: memory.id.to_string(), reason })?;
        self.stage(&memory.id, note, memory.clone());
        self.embed(memory, embedding);
        Ok(Inserted::Created)
    }

    /// The note of `id` and the memory it holds, or not-found.
    pub(super) fn existing(&self, id: &MemoryId) -> Result<(Note, Memory)> {
        let note = self.note(id)?.ok_or_else(|| Error::Refused(Refusal::NotFound(id.to_string())))?;
        let memory = note.memory().map_err(|reason| Error::Note { id: id.to_string(), reason })?;
        Ok((note, memory))
    }

    pub(super) fn replace(&mut self, next: &Memory, previous: &MemoryVersion, embedding: Option<&Embedding>) -> Result<()> {
        let id = &next.id;
        let (mut note, current) = self.existing(id)?;
        if current.version != previous.version {
            return Err(Error::Refused(Refusal::Conflict { id: id.to_string(), expected: previous.version }));
        }
        if let Some(existing) = self.active_duplicate(next, Some(id))? {
            return Err(Error::Refused(Refusal::Duplicate { id: id.to_string(), existing: existing.to_string() }));
        }
        let invalid = |reason: String| Error::Note { id: id.to_string(), reason };
        note.push_history(previous).map_err(invalid)?;
        note.set_memory(next).map_err(invalid)?;
        self.stage(id, note, next.clone());
        self.embed(next, embedding);
        Ok(())
    }

    /// The note of decision `id` with its decision part, or not-found.
    pub(super) fn decision(&self, id: &DecisionId) -> Result<(Note, DecisionDoc)> {
        let memory_id = MemoryId::parse(id.as_str()).map_err(|error| Error::Refused(Refusal::NotFound(error.to_string())))?;
        let note = self.note(&memory_id)?.ok_or_else(|| Error::Refused(Refusal::NotFound(id.to_string())))?;
        let doc = note
            .decision()
            .map_err(|reason| Error::Note { id: id.to_string(), reason })?
            .ok_or_else(|| Error::Refused(Refusal::NotFound(id.to_string())))?;
        Ok((note, doc))
    }

    pub(super) fn update_decision(&mut self, change: &DecisionChange) -> Result<()> {
        let id = &change.next.id;
        let (_, mut doc) = self.decision(id)?;
        change.check_revision(Some(doc.record.revision))?;
        if let Some(memory) = &change.memory {
            self.replace(&memory.next, &memory.previous, memory.embedding.as_ref())?;
        }
        doc.record = change.next.clone();
        self.put_decision(id, &doc)
    }

    /// Stages the decision part of a decision's note, over the note as it stands (staged or not).
    pub(super) fn put_decision(&mut self, id: &DecisionId, doc: &DecisionDoc) -> Result<()> {
        let (mut note, memory) = self.existing(&MemoryId::parse(id.as_str()).map_err(|error| Error::Refused(Refusal::NotFound(error.to_string())))?)?;
        note.set_decision(doc).map_err(|reason| Error::Note { id: id.to_string(), reason })?;
        self.stage(&memory.id.clone(), note, memory);
        Ok(())
    }
}
