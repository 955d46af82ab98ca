//! The names of the relations kenning itself writes: on a memory's links (`Link::relation`) and
//! on the edges of the decision graph (`Edge::relation`). A link an agent makes may carry any
//! relation it names, so the field stays text; every relation kenning writes or looks for is
//! named here, once.

// Links between memories.

/// A capture kept by a merge -> the memory it confirmed.
pub const MERGED_INTO: &str = "merged-into";
/// A capture -> a stored memory it may say the same as.
pub const POSSIBLY_DUPLICATE_OF: &str = "possibly-duplicate-of";
/// A capture -> a stored memory making another claim about the same thing.
pub const RELATED_TO: &str = "related-to";
/// A memory settled against by supersession -> its replacement.
pub const SUPERSEDED_BY: &str = "superseded-by";
/// A principle -> each episode it was consolidated from; a lesson -> its decision.
pub const DERIVED_FROM: &str = "derived-from";
/// A workflow's closing memory -> each memory its steps produced.
pub const PRODUCED: &str = "produced";
/// A retired duplicate (the same content captured on two clones) -> the memory that stays.
pub const DUPLICATE_OF: &str = "duplicate-of";

// Edges of the decision graph, in causal order.

/// decision -> signal
pub const OBSERVED: &str = "observed";
/// decision -> outcome
pub const RESULTED_IN: &str = "resulted-in";
/// signal -> outcome: the signal preceded the outcome.
pub const PRECEDED: &str = "preceded";
/// outcome -> lesson memory
pub const TAUGHT: &str = "taught";
/// outcome -> skill memory (a success of the skill's pattern)
pub const SUPPORTS: &str = "supports";
/// outcome -> antipattern memory (a failure of the pattern, or a success against it)
pub const EVIDENCES: &str = "evidences";
