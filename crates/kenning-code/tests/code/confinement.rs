//! Paths from callers: traversal, absolute paths and symbolic-link escapes are refused.

use kenning_code::{Confinement, RootPath};

use super::common::repository;

#[test]
fn hostile_paths_are_refused_with_a_field_error() {
    let repo = repository("rust");
    let root = repo.path();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink("/etc", root.join("etc-link")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("src/outside")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), root.join("secret-link.txt")).unwrap();
    std::os::unix::fs::symlink(root.join("missing-target"), root.join("dangling")).unwrap();
    std::os::unix::fs::symlink(root.join("loop-b"), root.join("loop-a")).unwrap();
    std::os::unix::fs::symlink(root.join("loop-a"), root.join("loop-b")).unwrap();
    let confinement = Confinement::new(root).unwrap();
    let outside_absolute = outside.path().join("secret.txt").display().to_string();
    let root_parent = root.parent().unwrap().join("x").display().to_string();
    let hostile: Vec<String> = [
        "../secret.txt",
        "../../etc/passwd",
        "src/../../secret.txt",
        "src/../..",
        "./../x",
        "..",
        "/etc/passwd",
        "/",
        "etc-link/passwd",
        "etc-link",
        "src/outside/secret.txt",
        "src/outside",
        "secret-link.txt",
        "dangling",
        "loop-a",
        "loop-a/deeper",
        ".git/config",
        "src/.git/hooks/pre-commit",
        "..\\..\\windows\\system32",
        "src\\lib.rs",
        "C:\\Windows",
        "~/.ssh/id_rsa",
        "~root",
        "file:///etc/passwd",
        "src/lib.rs\0.txt",
        "src/\nlib.rs",
        "",
    ]
    .iter()
    .map(|path| (*path).to_owned())
    .chain([outside_absolute, root_parent, "a/".repeat(3000)])
    .collect();
    assert!(hostile.len() >= 20);
    for path in &hostile {
        let error = confinement.resolve("path", path, RootPath::Refused).expect_err(path);
        assert_eq!(error.field, "path", "{path}");
        assert!(!error.problem.is_empty() && !error.suggestion.is_empty(), "{path}: {error:?}");
        assert!(error.received.is_string(), "{path}");
    }
}

#[test]
fn paths_inside_are_accepted_in_normal_form() {
    let repo = repository("rust");
    let root = repo.path();
    std::os::unix::fs::symlink(root.join("src"), root.join("sources")).unwrap();
    let confinement = Confinement::new(root).unwrap();
    assert_eq!(confinement.resolve("path", "src/lib.rs", RootPath::Refused).unwrap(), "src/lib.rs");
    assert_eq!(confinement.resolve("path", "./src//cart.rs", RootPath::Refused).unwrap(), "src/cart.rs");
    assert_eq!(confinement.resolve("path", &root.join("src/price.rs").display().to_string(), RootPath::Refused).unwrap(), "src/price.rs");
    // A link that stays inside the repository is followed.
    assert_eq!(confinement.resolve("path", "sources/lib.rs", RootPath::Refused).unwrap(), "sources/lib.rs");
    // A file that does not exist yet is fine, as long as where it would be is inside.
    assert_eq!(confinement.resolve("path", "src/new.rs", RootPath::Refused).unwrap(), "src/new.rs");
    assert_eq!(confinement.resolve("path", ".", RootPath::Allowed).unwrap(), "");
    assert!(confinement.resolve("path", ".", RootPath::Refused).is_err());
    let missing = confinement.existing("path", "src/nowhere.rs", RootPath::Refused).unwrap_err();
    assert_eq!(missing.problem, "does not exist in the repository");
}

/// A link `gitlink -> .git` spells no `.git`, but leads there: where a path leads is what counts.
#[test]
fn a_link_into_git_is_refused_for_where_it_leads() {
    let repo = repository("rust");
    let root = repo.path();
    std::os::unix::fs::symlink(root.join(".git"), root.join("gitlink")).unwrap();
    std::os::unix::fs::symlink(root.join(".git/config"), root.join("config-link")).unwrap();
    let confinement = Confinement::new(root).unwrap();
    for path in ["gitlink/config", "gitlink", "gitlink/HEAD", "config-link"] {
        let error = confinement.resolve("path", path, RootPath::Refused).expect_err(path);
        assert!(error.problem.contains(".git"), "{path}: {error:?}");
    }
    assert_eq!(confinement.inside(std::path::Path::new("gitlink/config")), None);
    assert_eq!(confinement.read_text("config-link"), "");
}

/// A README or manifest that is a link to a file elsewhere reads as absent; one inside is read.
#[test]
fn files_the_repository_names_are_read_only_where_they_resolve_inside() {
    let repo = repository("rust");
    let root = repo.path();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "the canary secret").unwrap();
    std::fs::remove_file(root.join("README.md")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), root.join("README.md")).unwrap();
    std::os::unix::fs::symlink(root.join("src/lib.rs"), root.join("lib-link.rs")).unwrap();
    let confinement = Confinement::new(root).unwrap();
    assert_eq!(confinement.read_text("README.md"), "");
    assert!(!confinement.holds("README.md"));
    assert_eq!(confinement.read_text("lib-link.rs"), std::fs::read_to_string(root.join("src/lib.rs")).unwrap());
    assert_eq!(confinement.read_text("/etc/hostname"), "", "an absolute path elsewhere is not read");
    assert_eq!(confinement.read_text("../secret.txt"), "");
}
