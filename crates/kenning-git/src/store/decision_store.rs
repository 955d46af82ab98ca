//! [`DecisionStore`] for [`GitNotesStore`]: a decision, its signals, outcome and edges live in
//! the note of its memory; skill edges in edges notes.

use super::*;

impl DecisionStore for GitNotesStore {
    fn insert_decision(&self, decision: &Decision, memory: &Memory, embedding: Option<&Embedding>) -> CoreResult<()> {
        Ok(self.write("kenning: decision", |draft| {
            match draft.insert(memory, embedding)? {
                Inserted::Created => {}
                Inserted::Duplicate(_) => return Err(Error::Refused(Refusal::IdTaken(memory.id.to_string()))),
            }
            let doc = DecisionDoc { record: decision.clone(), signals: Vec::new(), outcome: None, edges: Vec::new() };
            draft.put_decision(&decision.id, &doc)
        })?)
    }

    fn get_decision(&self, id: &DecisionId) -> CoreResult<Option<DecisionRecord>> {
        self.refresh()?;
        self.index.get_decision(id)
    }

    fn update_decision(&self, change: &DecisionChange) -> CoreResult<()> {
        Ok(self.write("kenning: decision update", |draft| draft.update_decision(change))?)
    }

    fn list_decisions(&self, filter: &DecisionFilter, offset: usize, limit: usize) -> CoreResult<Vec<DecisionRecord>> {
        self.refresh()?;
        self.index.list_decisions(filter, offset, limit)
    }

    fn count_decisions(&self, filter: &DecisionFilter) -> CoreResult<u64> {
        self.refresh()?;
        self.index.count_decisions(filter)
    }

    fn add_signal(&self, signal: &Signal) -> CoreResult<()> {
        Ok(self.write("kenning: signal", |draft| {
            let (_, mut doc) = draft.decision(&signal.decision_id)?;
            if doc.signals.iter().any(|existing| existing.id == signal.id) {
                return Err(Error::Refused(Refusal::IdTaken(signal.id.clone())));
            }
            doc.signals.push(signal.clone());
            doc.signals.sort_by(|a, b| (a.recorded_at, &a.id).cmp(&(b.recorded_at, &b.id)));
            draft.put_decision(&signal.decision_id, &doc)
        })?)
    }

    fn record_outcome(
        &self,
        change: &DecisionChange,
        outcome: &Outcome,
        lessons: &[(Memory, Option<Embedding>)],
        edges: &[Edge],
    ) -> CoreResult<Vec<Inserted>> {
        Ok(self.write("kenning: outcome", |draft| {
            let id = &outcome.decision_id;
            let (_, existing) = draft.decision(id)?;
            if existing.outcome.is_some() {
                return Err(Error::Refused(Refusal::Conflict { id: id.to_string(), expected: change.expected_revision }));
            }
            draft.update_decision(change)?;
            let inserted = lessons
                .iter()
                .map(|(memory, embedding)| draft.insert(memory, embedding.as_ref()))
                .collect::<Result<Vec<_>>>()?;
            let mut stored = outcome.clone();
            stored.lesson_ids = lessons
                .iter()
                .zip(&inserted)
                .map(|((memory, _), inserted)| match inserted {
                    Inserted::Created => memory.id.clone(),
                    Inserted::Duplicate(existing) => existing.clone(),
                })
                .collect();
            let (_, mut doc) = draft.decision(id)?;
            doc.outcome = Some(stored);
            doc.edges = edges.iter().map(EdgeDoc::from_edge).collect();
            draft.put_decision(id, &doc)?;
            Ok(inserted)
        })?)
    }

    fn outcomes(&self, module: Option<&str>) -> CoreResult<Vec<(Decision, Outcome)>> {
        self.refresh()?;
        self.index.outcomes(module)
    }

    fn sync_skills(&self, sync: &SkillSync) -> CoreResult<()> {
        Ok(self.write("kenning: skills", |draft| {
            for (memory, embedding) in &sync.inserts {
                if let Inserted::Duplicate(existing) = draft.insert(memory, embedding.as_ref())? {
                    return Err(Error::Refused(Refusal::IdTaken(existing.to_string())));
                }
            }
            for MemoryChange { next, previous, embedding } in &sync.replaces {
                draft.replace(next, previous, embedding.as_ref())?;
            }
            for (skill, edges) in &sync.edges_to {
                let Some(mut note) = draft.note(skill)? else {
                    // Edges to a memory without a note are kept in an edges note of their own.
                    draft.staged_edges.retain(|(id, _)| id != skill);
                    draft.staged_edges.push((skill.clone(), Note::edges_only(skill, edges)));
                    continue;
                };
                let memory = note.memory().map_err(|reason| Error::Note { id: skill.to_string(), reason })?;
                note.edges_to = Some(edges.iter().map(EdgeDoc::from_edge).collect());
                draft.stage(skill, note, memory);
            }
            Ok(())
        })?)
    }

    fn causal_chain(&self, start: &Node, max_depth: u32) -> CoreResult<Vec<Hop>> {
        self.refresh()?;
        self.index.causal_chain(start, max_depth)
    }

    fn edges_to(&self, node: &Node) -> CoreResult<Vec<Edge>> {
        self.refresh()?;
        self.index.edges_to(node)
    }
}
