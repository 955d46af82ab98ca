//! Documentation search over the project and the installed dependencies, and API lookups.

use std::path::PathBuf;

use kenning_code::docs::{DocScope, DocSources};

use super::common::{index, repository};

/// Cargo's home, where the registry sources of this workspace's own dependencies are.
fn sources() -> DocSources {
    let cargo_home = std::env::var_os("CARGO_HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
    DocSources { cargo_home: Some(cargo_home), site_packages: Vec::new() }
}

/// The version of `name` in this workspace's Cargo.lock, whose sources cargo has downloaded.
fn locked_version(name: &str) -> String {
    let lock = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock")).unwrap();
    let block = lock.split("[[package]]").find(|block| block.contains(&format!("name = \"{name}\"\n"))).unwrap();
    block.lines().find_map(|line| line.strip_prefix("version = ")).unwrap().trim_matches('"').to_owned()
}

#[test]
fn project_docs_and_doc_comments_are_searched() {
    let repo = repository("rust");
    let index = index(repo.path());
    let found = index.search_docs("how are discounts rounded", DocScope::Project, &sources(), 5).unwrap();
    assert_eq!((found.hits[0].name.as_str(), found.hits[0].file.as_str(), found.hits[0].line), ("Discounts", "README.md", 5), "{:?}", found.hits);
    let comment = index.search_docs("refusing an empty cart", DocScope::Project, &sources(), 5).unwrap();
    assert_eq!(comment.hits[0].name, "Cart::checkout", "{:?}", comment.hits);
    assert_eq!(comment.packages_searched, 0);
}

#[test]
fn an_installed_dependency_is_searched_at_its_locked_version() {
    let repo = repository("rust");
    let version = locked_version("fastrand");
    std::fs::write(repo.path().join("Cargo.toml"), "[package]\nname = \"shop\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nfastrand = \"2\"\n\n[workspace]\n").unwrap();
    std::fs::write(
        repo.path().join("Cargo.lock"),
        format!("version = 4\n\n[[package]]\nname = \"fastrand\"\nversion = \"{version}\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n\n[[package]]\nname = \"shop\"\nversion = \"0.1.0\"\n"),
    )
    .unwrap();
    let index = index(repo.path());
    let packages = kenning_code::docs::installed_packages(index.confinement(), &sources());
    assert_eq!(packages.iter().map(|package| (package.name.as_str(), package.version.as_str())).collect::<Vec<_>>(), [("fastrand", version.as_str())]);

    let found = index.search_docs("shuffle a slice randomly", DocScope::Dependencies, &sources(), 5).unwrap();
    let hit = &found.hits[0];
    assert_eq!((hit.source.as_str(), hit.version.as_deref()), ("fastrand", Some(version.as_str())), "{:?}", found.hits);
    assert!(hit.name.ends_with("shuffle"), "{:?}", found.hits);

    let api = index.api("fastrand::shuffle", &sources()).unwrap();
    let item = api.item.unwrap();
    assert_eq!(item.doc, "Shuffles a slice randomly.");
    assert!(item.signature.starts_with("pub fn shuffle"), "{}", item.signature);
    assert!(item.file.contains(&format!("fastrand-{version}")), "{}", item.file);
    assert!(!api.others.is_empty(), "the global function and the method are both found");

    // A second search reads the package's items from the index file, not the sources.
    assert_eq!(index.search_docs("shuffle a slice randomly", DocScope::All, &sources(), 5).unwrap().hits[0].source, "fastrand");
    // A name in the project itself.
    let local = index.api("Cart::checkout", &sources()).unwrap().item.unwrap();
    assert_eq!((local.source.as_str(), local.file.as_str(), local.line), ("project", "src/cart.rs", 34));
}

/// A folder of documented declarations: `package.json` at `version` and a `.d.ts` whose one
/// function is documented as `doc`.
fn npm_package(dir: &std::path::Path, version: &str, function: &str, doc: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("package.json"), format!("{{\"name\": \"x\", \"version\": \"{version}\"}}")).unwrap();
    std::fs::write(dir.join("index.d.ts"), format!("/** {doc} */\nexport declare function {function}(): number;\n")).unwrap();
}

/// Dependencies named by an absolute or `../` path, linked out of `node_modules`, or whose
/// `top_level.txt` names a folder elsewhere are not read; those installed where they belong are.
#[test]
fn dependencies_that_lead_out_of_their_folders_are_not_read() {
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    git2::Repository::init(root).unwrap();
    let outside = tempfile::tempdir().unwrap();
    npm_package(&outside.path().join("pkg"), "6.6.6", "leakCanary", "Leaks the canary secret.");
    std::fs::create_dir_all(outside.path().join("py")).unwrap();
    std::fs::write(outside.path().join("py/__init__.py"), "\"\"\"Leaks the canary secret.\"\"\"\n").unwrap();

    let absolute = outside.path().join("pkg").display().to_string();
    let climbing = format!("{}{}", "../".repeat(root.join("node_modules").components().count()), absolute.trim_start_matches('/'));
    std::fs::write(
        root.join("package.json"),
        serde_json::json!({"dependencies": {"ledger": "1.0.0", absolute.as_str(): "1.0.0", climbing.as_str(): "1.0.0", "linked": "1.0.0"}}).to_string(),
    )
    .unwrap();
    npm_package(&root.join("node_modules/ledger"), "1.0.0", "roundLedger", "Rounds the ledger total.");
    std::os::unix::fs::symlink(outside.path().join("pkg"), root.join("node_modules/linked")).unwrap();

    let site = root.join(".venv/lib/python3.12/site-packages");
    std::fs::write(root.join("requirements.txt"), "billing\nevil\nescape\n").unwrap();
    std::fs::create_dir_all(site.join("billing")).unwrap();
    std::fs::write(site.join("billing/__init__.py"), "\"\"\"Bills the ledger.\"\"\"\n").unwrap();
    std::fs::create_dir_all(site.join("billing-1.0.dist-info")).unwrap();
    std::fs::create_dir_all(site.join("evil-1.0.dist-info")).unwrap();
    std::fs::write(site.join("evil-1.0.dist-info/top_level.txt"), format!("{}\n", outside.path().join("py").display())).unwrap();
    std::fs::create_dir_all(site.join("escape-1.0.dist-info")).unwrap();
    let up = "../".repeat(site.components().count());
    std::fs::write(site.join("escape-1.0.dist-info/top_level.txt"), format!("{up}{}\n", outside.path().join("py").display().to_string().trim_start_matches('/'))).unwrap();

    let index = index(root);
    let packages = kenning_code::docs::installed_packages(index.confinement(), &sources());
    let names: Vec<(&str, &str)> = packages.iter().map(|package| (package.ecosystem.as_str(), package.name.as_str())).collect();
    assert_eq!(names, [("npm", "ledger"), ("pypi", "billing")]);
    let found = index.search_docs("canary secret", DocScope::Dependencies, &sources(), 10).unwrap();
    assert!(found.hits.iter().all(|hit| !hit.doc.contains("canary")), "{:?}", found.hits);
    let found = index.search_docs("round the ledger total", DocScope::Dependencies, &sources(), 10).unwrap();
    assert_eq!(found.hits.first().map(|hit| hit.source.as_str()), Some("ledger"), "{:?}", found.hits);
}

/// The site-packages folder pytest is installed in, of a Python with pytest
/// (`kenning_conformance::services::python`).
fn python_site_packages() -> Option<PathBuf> {
    let python = kenning_conformance::services::python(&["pytest"])?;
    let output = std::process::Command::new(python)
        .args(["-c", "import os, pytest; print(os.path.dirname(os.path.dirname(pytest.__file__)))"])
        .output()
        .expect("the Python that imports pytest runs");
    let path = PathBuf::from(String::from_utf8(output.stdout).expect("a UTF-8 path").trim());
    assert!(path.join("pytest").is_dir(), "pytest is not in {}", path.display());
    Some(path)
}

/// Regression: a pyproject.toml declaring `dependencies = ["pytest"]` on one line (or as a
/// Poetry table) gave no dependency at all, and `pytest.fixture`, which pytest re-exports from
/// `_pytest.fixtures`, was not found.
#[test]
fn python_dependencies_are_read_from_pyproject_and_re_exports_resolved() {
    let Some(site) = python_site_packages() else { return };
    let sources = DocSources { cargo_home: None, site_packages: vec![site] };
    let repo = repository("python");
    let index = index(repo.path());
    for manifest in [
        "[project]\nname = \"inventory\"\nversion = \"0.1.0\"\ndependencies = [\"pytest\"]\n",
        "[tool.poetry]\nname = \"inventory\"\n\n[tool.poetry.dependencies]\npython = \"^3.10\"\npytest = \"*\"\n",
    ] {
        std::fs::write(repo.path().join("pyproject.toml"), manifest).unwrap();
        let names: Vec<String> = kenning_code::docs::installed_packages(index.confinement(), &sources).into_iter().map(|package| package.name).collect();
        assert!(names.contains(&"pytest".to_owned()) && names.contains(&"_pytest".to_owned()), "{manifest}: {names:?}");
    }
    let api = index.api("pytest.fixture", &sources).unwrap();
    let item = api.item.expect("pytest.fixture is found where it is defined");
    assert_eq!((item.source.as_str(), item.name.as_str()), ("_pytest", "_pytest.fixtures.fixture"), "{item:?}");
    assert!(item.doc.to_lowercase().contains("fixture"), "{}", item.doc);
    assert!(item.file.ends_with("_pytest/fixtures.py"), "{}", item.file);
    let found = index.search_docs("decorator to mark a fixture factory function", DocScope::Dependencies, &sources, 5).unwrap();
    assert!(found.packages_searched >= 2, "{found:?}");
}
