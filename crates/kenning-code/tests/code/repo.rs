//! The repository inspector on one fixture per language: understand, dependencies, pattern
//! search and similar files give the expected answers, and the index refreshes incrementally.

use kenning_code::{Depth, Direction, Language, SearchScope};

use super::common::{commit_all, index, repository};

fn paths(edges: &Option<Vec<kenning_code::views::DependencyEdge>>) -> Vec<(String, usize)> {
    edges.iter().flatten().map(|edge| (edge.path.clone(), edge.distance)).collect()
}

#[test]
fn rust_file_is_understood() {
    let repo = repository("rust");
    let index = index(repo.path());
    let view = index.understand("src/cart.rs", Depth::Shallow).unwrap();
    assert_eq!(view.purpose, "The shopping cart: items, totals and checkout.");
    assert_eq!(view.language, Some(Language::Rust));
    assert_eq!(view.imports_from, vec!["src/price.rs"]);
    assert_eq!(view.imported_by, vec!["src/lib.rs", "tests/checkout.rs"]);
    assert_eq!(view.test_files, vec!["tests/checkout.rs"]);
    let names: Vec<&str> = view.outline.iter().map(|item| item.name.as_str()).collect();
    assert_eq!(names, vec!["CartError", "Cart", "Cart", "Cart::add", "Cart::total", "Cart::describe", "Cart::checkout"]);
    assert!(view.patterns.iter().any(|pattern| pattern.starts_with("fallible functions return `Result`")), "{:?}", view.patterns);
    assert!(view.conventions_observed.iter().any(|convention| convention.starts_with("indented with 4 spaces")), "{:?}", view.conventions_observed);
    let last = view.last_modified.unwrap();
    assert_eq!((last.author.as_str(), last.summary.as_str()), ("Ada Lovelace", "Add the fixture"));
    // A file with unit tests inside is its own test file.
    assert_eq!(index.understand("src/price.rs", Depth::Shallow).unwrap().test_files, vec!["src/price.rs", "tests/checkout.rs"]);
}

#[test]
fn rust_dependencies_are_transitive_to_the_depth_asked() {
    let repo = repository("rust");
    let index = index(repo.path());
    let direct = index.dependencies("src/price.rs", Direction::ImportedBy, 1).unwrap();
    assert_eq!(paths(&direct.imported_by), vec![("src/cart.rs".to_owned(), 1), ("src/lib.rs".to_owned(), 1)]);
    assert!(direct.imports.is_none());
    let deep = index.dependencies("src/price.rs", Direction::ImportedBy, 3).unwrap();
    assert!(paths(&deep.imported_by).contains(&("tests/checkout.rs".to_owned(), 2)), "{:?}", deep.imported_by);
    let both = index.dependencies("tests/checkout.rs", Direction::Both, 2).unwrap();
    assert_eq!(paths(&both.imports), vec![("src/cart.rs".to_owned(), 1), ("src/price.rs".to_owned(), 2)]);
    assert_eq!(paths(&both.imported_by), Vec::<(String, usize)>::new());
}

#[test]
fn python_module_is_understood_and_linked_to_its_tests() {
    let repo = repository("python");
    let index = index(repo.path());
    let view = index.understand("inventory/stock.py", Depth::Deep).unwrap();
    assert_eq!(view.purpose, "Stock levels: restocking and reserving items.");
    assert_eq!(view.imports_from, vec!["inventory/models.py"]);
    assert_eq!(view.imported_by, vec!["tests/test_stock.py"]);
    assert_eq!(view.test_files, vec!["tests/test_stock.py"]);
    assert!(view.patterns.iter().any(|pattern| pattern.starts_with("exceptions raised")), "{:?}", view.patterns);
    let transitive = view.transitive.unwrap();
    assert_eq!(paths(&transitive.imports), vec![("inventory/models.py".to_owned(), 1)]);
    assert_eq!(transitive.external, Vec::<String>::new());
    let tests = index.dependencies("tests/test_stock.py", Direction::Imports, 1).unwrap();
    assert_eq!(tests.external, vec!["pytest", "time"]);
}

#[test]
fn typescript_imports_resolve_without_extensions() {
    let repo = repository("typescript");
    let index = index(repo.path());
    let view = index.understand("src/auth.ts", Depth::Shallow).unwrap();
    assert_eq!(view.purpose, "Handles sign-in flows: checks credentials and opens a session.");
    assert_eq!(view.imports_from, vec!["src/session.ts", "src/types.ts"]);
    assert_eq!(view.imported_by, vec!["src/auth.test.ts"]);
    assert_eq!(view.test_files, vec!["src/auth.test.ts"]);
    let types = index.understand("src/types.ts", Depth::Shallow).unwrap();
    assert!(types.conventions_observed.iter().any(|convention| convention.starts_with("interfaces prefixed with `I`")), "{:?}", types.conventions_observed);
    assert_eq!(index.dependencies("src/auth.test.ts", Direction::Imports, 1).unwrap().external, vec!["vitest"]);
}

#[test]
fn javascript_requires_resolve() {
    let repo = repository("javascript");
    let index = index(repo.path());
    let view = index.understand("lib/router.js", Depth::Shallow).unwrap();
    assert_eq!(view.purpose, "The router: maps paths to handlers.");
    assert_eq!(view.imports_from, vec!["lib/handlers.js"]);
    assert_eq!(view.imported_by, vec!["test/router.test.js"]);
    let handlers = index.understand("lib/handlers.js", Depth::Shallow).unwrap();
    let names: Vec<&str> = handlers.outline.iter().map(|item| item.name.as_str()).collect();
    assert_eq!(names, vec!["health", "greet"]);
    assert_eq!(handlers.test_files, vec!["test/router.test.js"]);
}

#[test]
fn go_packages_resolve_through_the_module_path() {
    let repo = repository("go");
    let index = index(repo.path());
    let main = index.understand("main.go", Depth::Shallow).unwrap();
    assert_eq!(main.purpose, "Command calc adds two numbers from the command line.");
    assert_eq!(main.imports_from, vec!["calc/calc.go"]);
    assert_eq!(main.external_imports, vec!["fmt", "os"]);
    let calc = index.understand("calc/calc.go", Depth::Shallow).unwrap();
    assert_eq!(calc.test_files, vec!["calc/calc_test.go"]);
    let names: Vec<&str> = calc.outline.iter().map(|item| item.name.as_str()).collect();
    assert_eq!(names, vec!["Adder", "Add", "Adder.Sum"]);
    assert!(calc.patterns.iter().any(|pattern| pattern.starts_with("errors returned and checked")), "{:?}", calc.patterns);
}

#[test]
fn a_directory_is_summarised() {
    let repo = repository("python");
    let index = index(repo.path());
    let view = index.understand("inventory", Depth::Shallow).unwrap();
    assert_eq!(view.kind, "directory");
    assert_eq!(view.purpose, "Inventory: items in stock and restocking them.");
    assert_eq!(view.imported_by, vec!["tests/test_stock.py"]);
    let root = index.structure().unwrap();
    assert_eq!(root.languages.get("python"), Some(&4));
    assert_eq!(root.manifests, vec!["pyproject.toml"]);
}

#[test]
fn pattern_search_finds_the_code_that_does_it() {
    let repo = repository("rust");
    let index = index(repo.path());
    let found = index.search("how does checkout handle errors", &SearchScope::default(), 3).unwrap();
    assert_eq!(found.ranking, "hybrid");
    assert_eq!((found.hits[0].path.as_str(), found.hits[0].name.as_str()), ("src/cart.rs", "Cart::checkout"), "{:?}", found.hits);
    let format = index.search("format price as euros", &SearchScope::default(), 3).unwrap();
    assert_eq!(format.hits[0].name, "format_price");
    assert_eq!(format.hits[0].start_line, 4);
    // Confined to a directory, a search finds nothing outside it.
    let scoped = index.search("cart", &SearchScope { path: Some("tests".into()), language: None }, 10).unwrap();
    assert!(!scoped.hits.is_empty() && scoped.hits.iter().all(|hit| hit.path.starts_with("tests/")));

    let repo = repository("typescript");
    let index = super::common::index(repo.path());
    let camel = index.search("lookup session", &SearchScope { path: None, language: Some(Language::TypeScript) }, 3).unwrap();
    assert_eq!(camel.hits[0].name, "lookupSession");
}

#[test]
fn similar_files_are_found_by_content() {
    let repo = repository("python");
    std::fs::write(
        repo.path().join("inventory/orders.py"),
        "\"\"\"Orders take items off the shelf.\"\"\"\nfrom .models import Item\n\n\ndef reserve_for_order(item: Item, amount: int) -> Item:\n    \"\"\"Reserves items for an order, refusing to go below zero.\"\"\"\n    if amount > item.count:\n        raise ValueError(item.sku)\n    item.count -= amount\n    return item\n",
    )
    .unwrap();
    let index = index(repo.path());
    let similar = index.similar(Some("inventory/orders.py"), None, 3).unwrap();
    assert_eq!(similar.files[0].path, "inventory/stock.py");
    let snippet = index.similar(None, Some("def restock(item, amount):\n    item.count += amount"), 3).unwrap();
    assert_eq!(snippet.files[0].path, "inventory/stock.py");
    assert_eq!(snippet.files[0].best_match.name, "restock");
}

#[test]
fn the_index_refreshes_only_what_changed() {
    let repo = repository("rust");
    let root = repo.path();
    let first = index(root);
    let full = first.refresh().unwrap();
    assert_eq!((full.files, full.parsed, full.removed), (4, 4, 0));
    assert_eq!(first.refresh().unwrap().parsed, 0);

    // An edit re-parses that file alone, and search sees the new code at once.
    std::fs::write(root.join("src/price.rs"), "//! Prices.\n\n/// Rounds to whole euros.\npub fn round_to_euros(cents: u64) -> u64 { cents / 100 * 100 }\n").unwrap();
    let edited = first.refresh().unwrap();
    assert_eq!((edited.parsed, edited.removed), (1, 0));
    let found = first.search("round whole euros", &SearchScope::default(), 1).unwrap();
    assert_eq!(found.hits[0].name, "round_to_euros");
    assert!(first.search("discount percent", &SearchScope::default(), 10).unwrap().hits.iter().all(|hit| hit.name != "discounted"));

    // Touching a file without changing it costs a hash, not a parse. Its modification time is
    // moved explicitly, so the refresh sees it changed even on a file system whose clock is
    // coarser than the time this test takes.
    let cart = std::fs::File::options().write(true).open(root.join("src/cart.rs")).unwrap();
    let modified = cart.metadata().unwrap().modified().unwrap();
    cart.set_modified(modified + std::time::Duration::from_secs(5)).unwrap();
    drop(cart);
    assert_eq!(first.refresh().unwrap().parsed, 0);

    // A deleted file leaves the index and the graph.
    std::fs::remove_file(root.join("src/price.rs")).unwrap();
    let removed = first.refresh().unwrap();
    assert_eq!((removed.files, removed.removed), (3, 1));
    assert!(!first.understand("src/cart.rs", Depth::Shallow).unwrap().imports_from.contains(&"src/price.rs".to_owned()));

    // Another process opening the index finds it up to date on disk.
    drop(first);
    let second = index(root);
    assert_eq!(second.refresh().unwrap().parsed, 0);
    assert_eq!(second.search("how does checkout handle errors", &SearchScope::default(), 1).unwrap().hits[0].name, "Cart::checkout");

    // Ignored files are not indexed.
    std::fs::create_dir_all(root.join("target/debug")).unwrap();
    std::fs::write(root.join("target/debug/build.rs"), "fn generated() {}").unwrap();
    assert_eq!(second.refresh().unwrap().parsed, 0);
    let repository = git2::Repository::open(root).unwrap();
    commit_all(&repository, "Drop prices");
    assert_eq!(second.understand("src", Depth::Shallow).unwrap().last_modified.unwrap().summary, "Drop prices");
}
