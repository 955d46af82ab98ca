//! [`CodeIndex`]: the repository's source files parsed into chunks and an import graph, kept
//! fresh incrementally and searched with kenning-index's BM25 and, given an embedder, vectors.
//!
//! Every call first refreshes: the repository is walked with the `ignore` crate (so
//! `.gitignore` is respected), and a file whose modification time and size are those recorded
//! is taken as is; otherwise it is read and hashed, and parsed again only if its hash changed.
//! One edited file costs one parse, not the repository's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::UNIX_EPOCH;

use chrono::{DateTime, Utc};
use kenning_core::interrupt::interrupted;
use kenning_core::provenance::file_facet;
use kenning_core::search::{FusionList, score_fusion};
use kenning_core::{Embedder, MemoryKind, Namespace, SearchFilter, Status};
use kenning_index::{DocInput, SearchIndex};
use sha2::{Digest, Sha256};

use crate::confine::Confinement;
use crate::error::{Error, Result};
use crate::graph::{Graph, Manifests};
use crate::lang::Language;
use crate::parse::{self, Chunk};
use crate::store::{FileRow, Store};
use crate::views::{ChunkHit, RefreshStats, SearchView, SimilarFile, SimilarView};

/// The most hits a search returns.
pub const MAX_LIMIT: usize = 50;
/// How many candidates each leg of a hybrid search ranks before fusion.
const CANDIDATES: usize = 100;
/// What a test file's chunk scores against the code it tests (see [`CodeIndex::search`]).
const TEST_CODE_WEIGHT: f64 = 0.8;
/// Lines of a chunk a hit shows.
const SNIPPET_LINES: usize = 12;

/// The code index of one repository.
pub struct CodeIndex {
    confinement: Confinement,
    embedder: Option<Arc<dyn Embedder>>,
    state: Mutex<State>,
    /// The documentation index (see [`crate::docs`]), built on the first docs search.
    pub(crate) docs: Mutex<crate::docs::DocsState>,
}

pub(crate) struct State {
    store: Store,
    pub(crate) files: BTreeMap<String, FileRow>,
    /// Chunk ids per file, in file order.
    file_chunks: BTreeMap<String, Vec<i64>>,
    pub(crate) chunks: HashMap<i64, (String, Chunk)>,
    vectors: HashMap<i64, Vec<f32>>,
    search: SearchIndex,
    /// Chunks retired from `search` since it was built; it is rebuilt when they outnumber the live.
    retired: usize,
    pub(crate) graph: Graph,
    pub(crate) manifests: Manifests,
    /// Every file the walk found, source or not (manifests, docs, configuration).
    pub(crate) all_files: BTreeSet<String>,
}

/// Which chunks a search considers.
#[derive(Debug, Clone, Default)]
pub struct SearchScope {
    /// Only chunks in this file or under this directory (relative, confined).
    pub path: Option<String>,
    pub language: Option<Language>,
}

impl CodeIndex {
    /// Opens (or creates) the index of the repository at `root`, stored at `index_path`.
    /// Nothing is parsed until the first call that needs the index.
    pub fn open(root: &Path, index_path: &Path, embedder: Option<Arc<dyn Embedder>>) -> Result<CodeIndex> {
        let confinement = Confinement::new(root).map_err(|error| Error::Repository(format!("{}: {error}", root.display())))?;
        let store = Store::open(index_path)?;
        let mut state = State {
            store,
            files: BTreeMap::new(),
            file_chunks: BTreeMap::new(),
            chunks: HashMap::new(),
            vectors: HashMap::new(),
            search: SearchIndex::new(),
            retired: 0,
            graph: Graph::default(),
            manifests: Manifests::default(),
            all_files: BTreeSet::new(),
        };
        state.files = state.store.files()?.into_iter().map(|file| (file.path.clone(), file)).collect();
        let model = embedder.as_ref().map(|embedder| embedder.model_id().to_owned());
        let mut missing = Vec::new();
        for row in state.store.chunks()? {
            state.file_chunks.entry(row.path.clone()).or_default().push(row.id);
            match (row.vector, &model) {
                (Some(vector), Some(model)) if row.model.as_deref() == Some(model.as_str()) => {
                    state.vectors.insert(row.id, vector);
                }
                (_, Some(_)) => missing.push(row.id),
                _ => {}
            }
            state.chunks.insert(row.id, (row.path, row.chunk));
        }
        for ids in state.file_chunks.values_mut() {
            ids.sort_unstable();
        }
        let index = CodeIndex { confinement, embedder, state: Mutex::new(state), docs: Mutex::default() };
        {
            let mut state = index.lock();
            index.embed_missing(&mut state, &missing)?;
            index.rebuild_search(&mut state);
        }
        Ok(index)
    }

    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    pub fn root(&self) -> &Path {
        self.confinement.root()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Brings the index up to date with the files on disk and returns the locked state.
    pub(crate) fn fresh(&self) -> Result<(MutexGuard<'_, State>, RefreshStats)> {
        let mut state = self.lock();
        let stats = self.refresh_locked(&mut state)?;
        Ok((state, stats))
    }

    /// Brings the index up to date with the files on disk.
    pub fn refresh(&self) -> Result<RefreshStats> {
        self.fresh().map(|(_, stats)| stats)
    }

    fn refresh_locked(&self, state: &mut State) -> Result<RefreshStats> {
        let root = self.confinement.root();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut all_files = BTreeSet::new();
        let mut manifests = Manifests::default();
        let mut changed: Vec<(FileRow, Vec<Chunk>)> = Vec::new();
        let mut touched: Vec<(String, i64, i64)> = Vec::new();
        let walker = ignore::WalkBuilder::new(root)
            .require_git(false)
            .filter_entry(|entry| !matches!(entry.file_name().to_str(), Some(".git" | "node_modules")))
            .build();
        for entry in walker {
            if interrupted() {
                return Err(Error::Interrupted);
            }
            let Ok(entry) = entry else { continue };
            if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                continue;
            }
            let Ok(relative) = entry.path().strip_prefix(root) else { continue };
            let Some(relative) = relative.to_str().map(|text| text.replace(std::path::MAIN_SEPARATOR, "/")) else { continue };
            all_files.insert(relative.clone());
            let file_name = relative.rsplit('/').next().unwrap_or_default();
            if matches!(file_name, "Cargo.toml" | "go.mod")
                && let Ok(text) = std::fs::read_to_string(entry.path())
            {
                manifests.add(&relative, &text);
            }
            let Some(language) = Language::of(&relative) else { continue };
            let Ok(metadata) = entry.metadata() else { continue };
            let mtime_ns = metadata
                .modified()
                .ok()
                .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |elapsed| i64::try_from(elapsed.as_nanos()).unwrap_or(i64::MAX));
            let size = i64::try_from(metadata.len()).unwrap_or(i64::MAX);
            seen.insert(relative.clone());
            if let Some(known) = state.files.get(&relative)
                && known.mtime_ns == mtime_ns
                && known.size == size
            {
                continue;
            }
            let Ok(bytes) = std::fs::read(entry.path()) else { continue };
            let hash = kenning_core::hex(&Sha256::digest(&bytes));
            if state.files.get(&relative).is_some_and(|known| known.hash == hash) {
                touched.push((relative, mtime_ns, size));
                continue;
            }
            let source = String::from_utf8_lossy(&bytes);
            let parsed = parse::parse(&relative, language, &source);
            let row = FileRow {
                path: relative,
                mtime_ns,
                size,
                hash,
                doc: parsed.doc,
                lines: i64::try_from(parsed.lines).unwrap_or(i64::MAX),
                imports: parsed.imports,
            };
            changed.push((row, parsed.chunks));
        }
        let removed: Vec<String> = state.files.keys().filter(|path| !seen.contains(*path)).cloned().collect();
        let stats_parsed = changed.len();
        if !changed.is_empty() || !removed.is_empty() || !touched.is_empty() {
            self.apply(state, changed, &removed, &touched)?;
        }
        state.all_files = all_files;
        let graph_stale = stats_parsed > 0 || !removed.is_empty() || state.graph.imports.is_empty() || state.manifests_differ(&manifests);
        state.manifests = manifests;
        if graph_stale {
            let known: BTreeSet<String> = state.files.keys().cloned().collect();
            state.graph = Graph::build(state.files.values().map(|file| (file.path.as_str(), file.imports.as_slice())), &known, &state.manifests);
        }
        Ok(RefreshStats { files: state.files.len(), parsed: stats_parsed, removed: removed.len(), chunks: state.chunks.len() })
    }

    fn apply(&self, state: &mut State, changed: Vec<(FileRow, Vec<Chunk>)>, removed: &[String], touched: &[(String, i64, i64)]) -> Result<()> {
        let model = self.embedder.as_ref().map(|embedder| embedder.model_id().to_owned());
        let mut embedded: Vec<(FileRow, Vec<(Chunk, Option<Vec<f32>>)>)> = Vec::with_capacity(changed.len());
        for (row, chunks) in changed {
            if interrupted() {
                return Err(Error::Interrupted);
            }
            let vectors = self.embed(&chunks)?;
            embedded.push((row, chunks.into_iter().zip(vectors).collect()));
        }
        let mut new_ids: Vec<(String, Vec<i64>)> = Vec::new();
        {
            let batch = state.store.batch()?;
            for path in removed {
                batch.remove(path)?;
            }
            for (path, mtime_ns, size) in touched {
                batch.touch(path, *mtime_ns, *size)?;
            }
            for (row, chunks) in &embedded {
                let with_model: Vec<(Chunk, Option<(&str, Vec<f32>)>)> = chunks
                    .iter()
                    .map(|(chunk, vector)| (chunk.clone(), vector.clone().and_then(|vector| model.as_deref().map(|model| (model, vector)))))
                    .collect();
                new_ids.push((row.path.clone(), batch.put(row, &with_model)?));
            }
            batch.commit()?;
        }
        for path in removed {
            state.retire_file(path);
            state.files.remove(path);
        }
        for (path, mtime_ns, size) in touched {
            if let Some(file) = state.files.get_mut(path) {
                file.mtime_ns = *mtime_ns;
                file.size = *size;
            }
        }
        for ((row, chunks), (_, ids)) in embedded.into_iter().zip(new_ids) {
            state.retire_file(&row.path);
            for ((chunk, vector), id) in chunks.into_iter().zip(&ids) {
                if let Some(vector) = vector {
                    state.vectors.insert(*id, vector);
                }
                state.chunks.insert(*id, (row.path.clone(), chunk));
                state.index_chunk(*id, model.as_deref());
            }
            state.file_chunks.insert(row.path.clone(), ids);
            state.files.insert(row.path.clone(), row);
        }
        if state.retired > state.chunks.len().max(64) {
            self.rebuild_search(state);
        }
        Ok(())
    }

    /// One vector per chunk (all `None` without an embedder).
    fn embed(&self, chunks: &[Chunk]) -> Result<Vec<Option<Vec<f32>>>> {
        let Some(embedder) = &self.embedder else { return Ok(vec![None; chunks.len()]) };
        let texts: Vec<String> = chunks.iter().map(embedding_text).collect();
        let mut vectors = Vec::with_capacity(chunks.len());
        for batch in texts.chunks(64) {
            let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
            let embedded = embedder.embed(&refs).map_err(|error| Error::Repository(format!("embedding code chunks: {error}")))?;
            vectors.extend(embedded.into_iter().map(Some));
        }
        Ok(vectors)
    }

    fn embed_missing(&self, state: &mut State, ids: &[i64]) -> Result<()> {
        let (Some(embedder), false) = (&self.embedder, ids.is_empty()) else { return Ok(()) };
        let chunks: Vec<Chunk> = ids.iter().filter_map(|id| state.chunks.get(id).map(|(_, chunk)| chunk.clone())).collect();
        let vectors = self.embed(&chunks)?;
        let model = embedder.model_id().to_owned();
        let batch = state.store.batch()?;
        for (id, vector) in ids.iter().zip(&vectors) {
            if let Some(vector) = vector {
                batch.set_vector(*id, &model, vector)?;
            }
        }
        batch.commit()?;
        for (id, vector) in ids.iter().zip(vectors) {
            if let Some(vector) = vector {
                state.vectors.insert(*id, vector);
            }
        }
        Ok(())
    }

    fn rebuild_search(&self, state: &mut State) {
        state.search = SearchIndex::new();
        state.retired = 0;
        let model = self.embedder.as_ref().map(|embedder| embedder.model_id().to_owned());
        if let Some(model) = &model {
            state.search.add_model(model);
        }
        let mut ids: Vec<i64> = state.chunks.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            state.index_chunk(id, model.as_deref());
        }
    }

    /// Hybrid search over chunks: BM25 over names, signatures, docs and code, fused with vector
    /// similarity when there is an embedder. Chunks of test files score [`TEST_CODE_WEIGHT`]
    /// of their fused score.
    pub fn search(&self, query: &str, scope: &SearchScope, limit: usize) -> Result<SearchView> {
        let (state, indexed) = self.fresh()?;
        let (hits, hybrid) = self.ranked(&state, query, scope, limit.clamp(1, MAX_LIMIT), None)?;
        Ok(SearchView {
            query: query.to_owned(),
            hits,
            ranking: if hybrid { "hybrid" } else { "full_text" }.to_owned(),
            indexed,
        })
    }

    fn filter(scope: &SearchScope) -> SearchFilter {
        SearchFilter {
            status: Some(Status::Active),
            file: scope.path.clone().filter(|path| !path.is_empty()),
            namespaces: scope.language.and_then(|language| Namespace::parse(language.name()).ok()).into_iter().collect(),
            ..SearchFilter::default()
        }
    }

    /// Ranked chunk hits for a text query (and an optional ready vector to use instead of the
    /// query's embedding); whether the vector leg took part.
    fn ranked(&self, state: &State, query: &str, scope: &SearchScope, limit: usize, vector: Option<Vec<f32>>) -> Result<(Vec<ChunkHit>, bool)> {
        let filter = Self::filter(scope);
        let text_query = with_identifier_words(query);
        let text_hits: Vec<(i64, f64)> =
            state.search.search_text(&text_query, &filter, CANDIDATES).into_iter().filter_map(|hit| Some((chunk_key(hit.id.as_str())?, hit.score))).collect();
        let mut lists = Vec::new();
        let mut hybrid = false;
        let mut text_hits = Some(text_hits);
        if let Some(embedder) = &self.embedder {
            let vector = match vector {
                Some(vector) => Some(vector),
                None => embedder.embed(&[query]).map_err(|error| Error::Repository(format!("embedding the query: {error}")))?.pop(),
            };
            if let Some(vector) = vector {
                let vector_hits: Vec<(i64, f64)> = state
                    .search
                    .search_vector(&vector, embedder.model_id(), &filter, CANDIDATES)
                    .into_iter()
                    .filter_map(|hit| Some((chunk_key(hit.id.as_str())?, hit.score)))
                    .collect();
                hybrid = true;
                let weight = embedder.recall_weight();
                lists.push(FusionList { weight, hits: vector_hits, unlisted_score: None });
                lists.push(FusionList { weight: 1.0 - weight, hits: text_hits.take().unwrap_or_default(), unlisted_score: Some(0.0) });
            }
        }
        if let Some(text_hits) = text_hits {
            lists.push(FusionList { weight: 1.0, hits: text_hits, unlisted_score: Some(0.0) });
        }
        let mut fused = score_fusion(&lists);
        // A search asks how something is done, which the code itself answers better than its
        // tests (which name the same things): test code keeps its place only when clearly better.
        for (id, score) in &mut fused {
            let path = state.chunks.get(id).map(|(path, _)| path.as_str()).unwrap_or_default();
            if Language::of(path).is_some_and(|language| crate::understand::is_test_file(path, language)) {
                *score *= TEST_CODE_WEIGHT;
            }
        }
        fused.sort_by(|a, b| b.1.total_cmp(&a.1));
        let hits = fused.into_iter().filter(|(_, score)| *score > 0.0).take(limit).filter_map(|(id, score)| state.hit(id, score)).collect();
        Ok((hits, hybrid))
    }

    /// Files most like `path` (a file of the repository) or like `snippet`: chunks ranked by
    /// the file's or snippet's vector and words, grouped by file.
    pub fn similar(&self, path: Option<&str>, snippet: Option<&str>, limit: usize) -> Result<SimilarView> {
        let (state, _) = self.fresh()?;
        let limit = limit.clamp(1, MAX_LIMIT);
        let (source, query, vector) = match (path, snippet) {
            (Some(path), _) => {
                let ids = state.file_chunks.get(path).cloned().unwrap_or_default();
                if ids.is_empty() && !state.files.contains_key(path) {
                    return Err(Error::Invalid(kenning_core::FieldError::new(
                        "file_path",
                        "is not a source file the index parses (Rust, Python, TypeScript, JavaScript, Go)",
                        path,
                        "name a source file, or pass `snippet` with the code to compare",
                    )));
                }
                let words: Vec<String> = ids
                    .iter()
                    .filter_map(|id| state.chunks.get(id))
                    .map(|(_, chunk)| format!("{} {}", chunk.name, chunk.signature))
                    .collect();
                let vector = mean(ids.iter().filter_map(|id| state.vectors.get(id)));
                (path.to_owned(), words.join(" "), vector)
            }
            (None, Some(snippet)) => ("snippet".to_owned(), snippet.to_owned(), None),
            (None, None) => {
                return Err(Error::Invalid(kenning_core::FieldError::new(
                    "file_path",
                    "is missing, and so is `snippet`",
                    serde_json::Value::Null,
                    "pass `file_path` (a file of the repository) or `snippet` (code to compare)",
                )));
            }
        };
        let query = first_words(&query, 400);
        let vector = match (vector, &self.embedder) {
            (Some(vector), _) => Some(vector),
            (None, Some(embedder)) => embedder.embed(&[query.as_str()]).map_err(|error| Error::Repository(error.to_string()))?.pop(),
            (None, None) => None,
        };
        let (hits, _) = self.ranked(&state, &query, &SearchScope::default(), CANDIDATES, vector)?;
        let mut files: Vec<SimilarFile> = Vec::new();
        for hit in hits {
            if Some(hit.path.as_str()) == path || files.iter().any(|file| file.path == hit.path) {
                continue;
            }
            files.push(SimilarFile { path: hit.path.clone(), score: hit.score, best_match: hit });
            if files.len() == limit {
                break;
            }
        }
        Ok(SimilarView { source, files })
    }
}

impl CodeIndex {
    /// The test code of a file: all of it for a test file, its test modules (`mod tests`)
    /// for a source file with tests inside.
    pub fn test_code(&self, path: &str) -> Vec<String> {
        let whole = Language::of(path).is_some_and(|language| crate::understand::is_test_file(path, language));
        self.lock()
            .chunks_of(path)
            .into_iter()
            .filter(|chunk| whole || chunk.name == "tests" || chunk.name.starts_with("tests::") || chunk.name.contains("::tests"))
            .map(|chunk| chunk.text.clone())
            .collect()
    }

    /// Every source file with documentation of its own, and that documentation's first line.
    pub fn module_docs(&self) -> Result<Vec<(String, String)>> {
        let (state, _) = self.fresh()?;
        Ok(state.files.values().filter(|file| !file.doc.is_empty()).map(|file| (file.path.clone(), file.doc.lines().next().unwrap_or_default().to_owned())).collect())
    }

    /// The names of a file's functions, methods and types.
    pub fn definitions(&self, path: &str) -> Vec<String> {
        self.lock()
            .chunks_of(path)
            .into_iter()
            .filter(|chunk| !matches!(chunk.kind.as_str(), "impl" | "module" | "constant"))
            .map(|chunk| chunk.name.clone())
            .collect()
    }
}

impl State {
    pub(crate) fn store_conn(&self) -> &rusqlite::Connection {
        &self.store.conn
    }

    pub(crate) fn store_conn_mut(&mut self) -> &mut rusqlite::Connection {
        &mut self.store.conn
    }

    fn manifests_differ(&self, other: &Manifests) -> bool {
        self.manifests.crates != other.crates || self.manifests.go_modules != other.go_modules
    }

    fn retire_file(&mut self, path: &str) {
        for id in self.file_chunks.remove(path).unwrap_or_default() {
            if let Some((_, chunk)) = self.chunks.remove(&id) {
                let key = format!("c{id}");
                let doc = DocInput {
                    id: &key,
                    kind: MemoryKind::Semantic,
                    status: Status::Forgotten,
                    namespace: "retired",
                    tags: &[],
                    confidence: 0.0,
                    occurred_at: DateTime::<Utc>::UNIX_EPOCH,
                    text: &chunk.name,
                    facets: &[],
                };
                self.search.upsert(id, &doc, &[]);
                self.retired += 1;
            }
            self.vectors.remove(&id);
        }
    }

    fn index_chunk(&mut self, id: i64, model: Option<&str>) {
        let Some((path, chunk)) = self.chunks.get(&id) else { return };
        let language = Language::of(path).map_or("other", Language::name);
        let key = format!("c{id}");
        let text = with_identifier_words(&format!("{path}\n{}\n{}\n{}\n{}", chunk.name, chunk.signature, chunk.doc, chunk.text));
        let facets = path_facets(path);
        let tags = [chunk.kind.clone()];
        let doc = DocInput {
            id: &key,
            kind: MemoryKind::Semantic,
            status: Status::Active,
            namespace: language,
            tags: &tags,
            confidence: 1.0,
            occurred_at: DateTime::<Utc>::UNIX_EPOCH,
            text: &text,
            facets: &facets,
        };
        let vector = self.vectors.get(&id);
        let vectors: Vec<(&str, &[f32])> = match (model, vector) {
            (Some(model), Some(vector)) => vec![(model, vector.as_slice())],
            _ => Vec::new(),
        };
        self.search.upsert(id, &doc, &vectors);
    }

    fn hit(&self, id: i64, score: f64) -> Option<ChunkHit> {
        let (path, chunk) = self.chunks.get(&id)?;
        Some(ChunkHit {
            path: path.clone(),
            name: chunk.name.clone(),
            kind: chunk.kind.clone(),
            language: Language::of(path)?,
            start_line: chunk.start_line,
            end_line: chunk.end_line,
            signature: chunk.signature.clone(),
            doc: chunk.doc.lines().next().unwrap_or_default().to_owned(),
            snippet: chunk.text.lines().take(SNIPPET_LINES).collect::<Vec<_>>().join("\n"),
            score: (score * 1000.0).round() / 1000.0,
        })
    }

    /// The chunks of a file, in order.
    pub(crate) fn chunks_of(&self, path: &str) -> Vec<&Chunk> {
        self.file_chunks.get(path).into_iter().flatten().filter_map(|id| self.chunks.get(id).map(|(_, chunk)| chunk)).collect()
    }
}

/// The facets that let a search be confined to a file or any directory above it.
fn path_facets(path: &str) -> Vec<String> {
    let mut facets = vec![file_facet(path)];
    let mut rest = path;
    while let Some((dir, _)) = rest.rsplit_once('/') {
        facets.push(file_facet(dir));
        rest = dir;
    }
    facets
}

fn chunk_key(id: &str) -> Option<i64> {
    id.strip_prefix('c')?.parse().ok()
}

fn embedding_text(chunk: &Chunk) -> String {
    let body = parse::truncate(&chunk.text, 1500);
    with_identifier_words(&format!("{} {} {}\n{}\n{}", chunk.kind, chunk.name, chunk.signature, chunk.doc, body))
}

/// `text` followed by the words inside its camelCase identifiers (`parseHttpRequest` adds
/// `parse Http Request`), so that full-text search finds code by the words of its names;
/// snake_case names are split by the analyzer already.
pub(crate) fn with_identifier_words(text: &str) -> String {
    let mut extra = String::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        let humps = word.chars().zip(word.chars().skip(1)).any(|(a, b)| a.is_lowercase() && b.is_uppercase());
        if !humps {
            continue;
        }
        let mut part = String::new();
        let mut previous_lower = false;
        for c in word.chars() {
            if c.is_uppercase() && previous_lower && !part.is_empty() {
                extra.push_str(&part);
                extra.push(' ');
                part.clear();
            }
            previous_lower = c.is_lowercase() || c.is_ascii_digit();
            part.push(c);
        }
        extra.push_str(&part);
        extra.push(' ');
    }
    if extra.is_empty() { text.to_owned() } else { format!("{text}\n{extra}") }
}

fn first_words(text: &str, max_bytes: usize) -> String {
    parse::truncate(text, max_bytes).to_owned()
}

fn mean<'v>(vectors: impl Iterator<Item = &'v Vec<f32>>) -> Option<Vec<f32>> {
    let mut sum: Option<Vec<f32>> = None;
    for vector in vectors {
        match &mut sum {
            None => sum = Some(vector.clone()),
            Some(sum) if sum.len() == vector.len() => sum.iter_mut().zip(vector).for_each(|(total, value)| *total += value),
            Some(_) => {}
        }
    }
    let mut sum = sum?;
    let norm = sum.iter().map(|value| value * value).sum::<f32>().sqrt();
    if norm > 0.0 {
        sum.iter_mut().for_each(|value| *value /= norm);
    }
    Some(sum)
}
