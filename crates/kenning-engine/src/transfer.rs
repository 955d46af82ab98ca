//! Export and import as JSON lines: one memory a line with its full history and its vector,
//! so a round trip loses nothing.

use kenning_core::{Embedding, Memory, MemoryRecord, MemoryVersion, PurgeCounts, PurgeMode, validate_author};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::redaction::redact;
use crate::service::{DomainStore, MemoryService};

/// One line of an export file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportLine {
    pub memory: Memory,
    #[serde(default)]
    pub history: Vec<MemoryVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<ExportedEmbedding>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedEmbedding {
    pub model: String,
    pub vector: Vec<f32>,
}

impl From<MemoryRecord> for ExportLine {
    fn from(record: MemoryRecord) -> Self {
        ExportLine {
            memory: record.memory,
            history: record.history,
            embedding: record.embedding.map(|embedding| ExportedEmbedding { model: embedding.model, vector: embedding.vector }),
        }
    }
}

impl From<ExportLine> for MemoryRecord {
    fn from(line: ExportLine) -> Self {
        MemoryRecord {
            memory: line.memory,
            history: line.history,
            embedding: line.embedding.map(|embedding| Embedding { model: embedding.model, vector: embedding.vector }),
        }
    }
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ImportReport {
    pub read: usize,
    pub written: usize,
    /// Records already present at the same or a newer version, or duplicates of other memories.
    pub skipped: usize,
    /// Secrets replaced by `[REDACTED:kind]` in the records read, history included.
    pub redacted: usize,
}

/// What a purge removed from one domain, or would remove in a dry run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainPurge {
    pub domain: String,
    #[serde(flatten)]
    pub counts: PurgeCounts,
}

const PAGE: usize = 500;

impl MemoryService {
    /// Calls `sink` with every memory of every domain (or only `domain`), page by page.
    pub fn export(&self, domain: Option<&str>, mut sink: impl FnMut(ExportLine) -> Result<()>) -> Result<usize> {
        let entries = match domain {
            Some(text) => vec![self.resolve_domain("domain", text)?],
            None => self.domains.iter().collect(),
        };
        let mut count = 0;
        for entry in entries {
            let mut offset = 0;
            loop {
                let records = entry.store.export(offset, PAGE)?;
                if records.is_empty() {
                    break;
                }
                offset += records.len();
                for record in records {
                    sink(ExportLine::from(record))?;
                    count += 1;
                }
            }
        }
        Ok(count)
    }

    /// Every memory one author wrote, for the author's data-rights export: the memories whose
    /// author is `author`, and those another author captured that `author` never touched are
    /// left out. A memory counts when its current record or any earlier version names the author.
    pub fn export_authored(&self, author: &str, domain: Option<&str>, mut sink: impl FnMut(ExportLine) -> Result<()>) -> Result<usize> {
        let author = author.trim();
        let mut count = 0;
        self.export(domain, |line| {
            let wrote = line.memory.author.as_deref() == Some(author)
                || line.history.iter().any(|version| version.memory.author.as_deref() == Some(author));
            if wrote {
                count += 1;
                sink(line)?;
            }
            Ok(())
        })?;
        Ok(count)
    }

    /// The author's data-rights hard delete: in every domain (or only `domain`), removes for
    /// good the memories [`Self::export_authored`] would export, with their history, vectors,
    /// links, graph edges and, for decisions, signals and outcomes (see
    /// [`kenning_core::MemoryStore::purge_author`]). With [`PurgeMode::DryRun`] it only counts. A domain
    /// that cannot be reached fails the purge rather than being skipped, so a purge that
    /// returns has reached every domain it names.
    pub fn purge_authored(&self, author: &str, domain: Option<&str>, mode: PurgeMode) -> Result<Vec<DomainPurge>> {
        let author = validate_author(author.trim())?;
        let entries = match domain {
            Some(text) => vec![self.resolve_domain("domain", text)?],
            None => self.domains.iter().collect(),
        };
        let mut purged = Vec::with_capacity(entries.len());
        for entry in entries {
            // Read before the purge, which takes the memories away.
            let purged_urns = match entry.store.state() {
                Some(_) => self.urns_written_by(entry, &author)?,
                None => Vec::new(),
            };
            let mut counts = entry.store.purge_author(&author, mode)?;
            if let Some(state) = entry.store.state() {
                counts.workflows = crate::workflows::purge_author(state, &author, mode)?;
                counts.contradictions = crate::contradictions::purge_about(state, &purged_urns, mode)?;
            }
            if mode == PurgeMode::Apply && counts != PurgeCounts::default() {
                // Deleted rows stay readable in a database's free space until it is rewritten.
                entry.store.erase_deleted()?;
            }
            purged.push(DomainPurge { domain: entry.domain.to_string(), counts });
        }
        Ok(purged)
    }

    /// The URNs of the memories of one domain that [`Self::purge_authored`] removes for `author`.
    fn urns_written_by(&self, entry: &DomainStore, author: &str) -> Result<Vec<String>> {
        let ids = entry.store.authored_by(author)?;
        Ok(entry.store.get_many(&ids)?.iter().map(|memory| memory.urn().to_string()).collect())
    }

    /// Imports records into the store of each record's domain, or into `into` when given
    /// (rewriting the records' domain, history included).
    pub fn import(&self, lines: Vec<ExportLine>, into: Option<&str>) -> Result<ImportReport> {
        let target = into.map(|text| self.resolve_domain("into", text)).transpose()?;
        let mut report = ImportReport { read: lines.len(), ..ImportReport::default() };
        let mut by_store: Vec<(usize, Vec<MemoryRecord>)> = Vec::new();
        for line in lines {
            let mut record = MemoryRecord::from(line);
            let redacted = redact(&mut record);
            if !redacted.is_empty() {
                // The vector was made from the text before redaction; the next reindex makes
                // one from the text stored.
                record.embedding = None;
                report.redacted += redacted.iter().map(|found| found.count).sum::<usize>();
            }
            if let Some(target) = target {
                record.memory.domain = target.domain.clone();
                for version in &mut record.history {
                    version.memory.domain = target.domain.clone();
                }
            }
            let index = self
                .domains
                .iter()
                .position(|entry| entry.domain == record.memory.domain)
                .ok_or_else(|| {
                    Error::Invalid(kenning_core::FieldError::new(
                        "memory.domain",
                        "is not a domain this installation has",
                        record.memory.domain.to_string(),
                        "pass `--into user` (or another configured domain) to import into it",
                    ))
                })?;
            match by_store.iter_mut().find(|(known, _)| *known == index) {
                Some((_, records)) => records.push(record),
                None => by_store.push((index, vec![record])),
            }
        }
        for (index, records) in by_store {
            for chunk in records.chunks(PAGE) {
                report.written += self.domains[index].store.import(chunk)?;
            }
        }
        report.skipped = report.read - report.written;
        Ok(report)
    }
}
