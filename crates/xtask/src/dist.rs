//! `cargo xtask dist`: the packages a user installs without building, for the host platform.
//!
//! From one built `kenning` binary (the `distribution` build by default: the release build without
//! its symbol table; `--profile dev` packages the test build) it writes into `target/dist/`:
//!
//! - `kenning-<version>-<target>.tar.gz`: the binary, the README and the licence files;
//! - `kenning-<version>-py3-none-<platform>.whl`: a Python wheel whose only content is the binary as
//!   a script (`kenning-<version>.data/scripts/kenning`), the layout maturin's `bindings = "bin"`
//!   makes, so `pip install kenning` and `uvx kenning` put the command on PATH. The platform tag of
//!   each target is declared in `packaging/python/pyproject.toml`, with the project's metadata;
//! - `kenning-<version>.tgz` and `kenning-<os>-<cpu>-<version>.tgz`: the npm launcher package
//!   (`packaging/npm/kenning`) and the package holding the binary for this platform, in the
//!   esbuild layout: the launcher lists every platform's package in `optionalDependencies`, npm
//!   installs the one whose `os` and `cpu` match, and the launcher runs its binary;
//! - `SHA256SUMS` of all of them.
//!
//! The wheel is written here rather than by maturin because maturin builds the binary itself: it
//! could not package the binary the tests already built, and it would add a tool to install.

mod wheel;

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use flate2::Compression;
use flate2::write::GzEncoder;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The files besides the binary that every package carries.
const DOCUMENTS: [&str; 3] = ["README.md", "LICENSE", "NOTICE"];

#[derive(Debug, Args)]
pub struct DistArgs {
    /// The cargo profile whose `kenning` binary is packaged (built first if out of date).
    #[arg(long, default_value = "distribution")]
    profile: String,
    /// The folder the packages are written into (default `target/dist`).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(args: &DistArgs) -> Result<()> {
    let root = workspace_root();
    let target = host_target()?;
    let platform = Platform::of(&target)?;
    let binary = build(&root, &args.profile)?;
    let out = args.out.clone().unwrap_or_else(|| root.join("target/dist"));
    fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;

    let python = PythonProject::load(&root.join("packaging/python/pyproject.toml"))?;
    let binary_bytes =
        fs::read(&binary).with_context(|| format!("reading {}", binary.display()))?;
    let wheel_tag = python.platform_tag(&target, &binary_bytes)?;

    // The test build packs its unoptimised binary (several times the release's size) quickly; a
    // release packs smaller. The three packages compress at the same time, one thread each.
    let level = if args.profile == "dev" {
        Compression::fast()
    } else {
        Compression::best()
    };
    let metadata = python.metadata(&root)?;
    let written = std::thread::scope(|scope| -> Result<Vec<PathBuf>> {
        let archive =
            scope.spawn(|| write_archive(&root, &out, &target, &platform, &binary_bytes, level));
        let wheel = scope.spawn(|| {
            wheel::write(
                &out,
                &metadata,
                &wheel_tag,
                &platform.binary_name,
                &binary_bytes,
                level,
            )
        });
        let mut written = write_npm_packages(&root, &out, &platform, &binary_bytes, level)?;
        written.insert(0, wheel.join().expect("the wheel's thread")?);
        written.insert(0, archive.join().expect("the archive's thread")?);
        Ok(written)
    })?;
    write_checksums(&out, &written)?;
    for path in &written {
        let size = fs::metadata(path)?.len();
        println!("{}\t{:.1} MB", path.display(), size as f64 / 1e6);
    }
    println!("{}", out.join("SHA256SUMS").display());
    Ok(())
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

/// Cargo, without the variables `cargo run` set for this program (`CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_NAME`, ...): build scripts such as ring's rerun when those change, so passing them on
/// would rebuild their crates here and again in the next plain `cargo build`.
fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_MANIFEST_")
            || matches!(
                name,
                "CARGO_CRATE_NAME" | "CARGO_BIN_NAME" | "CARGO_PRIMARY_PACKAGE"
            )
        {
            command.env_remove(name);
        }
    }
    command
}

/// The target triple `rustc` builds for when given none.
fn host_target() -> Result<String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(rustc)
        .arg("-vV")
        .output()
        .context("running rustc -vV")?;
    let text = String::from_utf8(output.stdout)?;
    text.lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .context("rustc -vV printed no host line")
}

/// Builds the binary of `profile` (cargo does nothing when it is up to date) and returns the path
/// cargo reports for it, which follows `CARGO_TARGET_DIR` and the profile's folder.
fn build(root: &Path, profile: &str) -> Result<PathBuf> {
    let output = cargo()
        .current_dir(root)
        .args([
            "build",
            "--locked",
            "--package",
            "kenning",
            "--bin",
            "kenning",
            "--profile",
            profile,
        ])
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo build")?;
    ensure!(
        output.status.success(),
        "cargo build --profile {profile} failed"
    );
    let messages = String::from_utf8(output.stdout)?;
    for line in messages.lines() {
        let message: Value = serde_json::from_str(line).context("a message of cargo build")?;
        if message["reason"] == "compiler-artifact"
            && message["target"]["name"] == "kenning"
            && let Some(executable) = message["executable"].as_str()
        {
            return Ok(PathBuf::from(executable));
        }
    }
    bail!("cargo build --profile {profile} reported no kenning executable")
}

/// What the packages need to know about the host: npm's names for it and the binary's file name.
struct Platform {
    npm_os: &'static str,
    npm_cpu: &'static str,
    binary_name: String,
}

impl Platform {
    fn of(target: &str) -> Result<Platform> {
        let npm_cpu = match target.split('-').next() {
            Some("x86_64") => "x64",
            Some("aarch64") => "arm64",
            _ => {
                bail!("no npm cpu name for the target {target}: add its architecture to xtask dist")
            }
        };
        let npm_os = if target.contains("-linux-") {
            "linux"
        } else if target.contains("-apple-darwin") {
            "darwin"
        } else if target.contains("-windows-") {
            "win32"
        } else {
            bail!("no npm os name for the target {target}: add its system to xtask dist")
        };
        let binary_name = if npm_os == "win32" {
            "kenning.exe"
        } else {
            "kenning"
        }
        .to_owned();
        Ok(Platform {
            npm_os,
            npm_cpu,
            binary_name,
        })
    }

    fn npm_package(&self) -> String {
        format!("kenning-{}-{}", self.npm_os, self.npm_cpu)
    }
}

/// `packaging/python/pyproject.toml`: the wheel's metadata and each target's platform tag.
#[derive(Debug, Deserialize)]
struct PythonProject {
    project: ProjectTable,
    tool: ToolTable,
}

#[derive(Debug, Deserialize)]
struct ProjectTable {
    name: String,
    description: String,
    readme: String,
    #[serde(rename = "requires-python")]
    requires_python: String,
    license: String,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    classifiers: Vec<String>,
    #[serde(default)]
    urls: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct ToolTable {
    #[serde(rename = "kenning-dist")]
    dist: DistTable,
}

#[derive(Debug, Deserialize)]
struct DistTable {
    #[serde(rename = "platform-tags")]
    platform_tags: std::collections::BTreeMap<String, String>,
}

impl PythonProject {
    fn load(path: &Path) -> Result<PythonProject> {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    /// The wheel's platform tag for `target`. A Linux tag is `manylinux_2_N_<arch>`, a promise
    /// that the binary runs on glibc 2.N or newer: the declared N is raised to the newest glibc
    /// symbol version the binary really needs, so a binary built on a newer system is never
    /// offered to an older one.
    fn platform_tag(&self, target: &str, binary: &[u8]) -> Result<String> {
        let declared = self.tool.dist.platform_tags.get(target).with_context(|| {
            format!("packaging/python/pyproject.toml declares no platform tag for {target} in [tool.kenning-dist.platform-tags]")
        })?;
        let Some(rest) = declared.strip_prefix("manylinux_2_") else {
            return Ok(declared.clone());
        };
        let (minor, arch) = rest
            .split_once('_')
            .context("a manylinux tag reads manylinux_2_<minor>_<arch>")?;
        let declared_minor: u32 = minor
            .parse()
            .context("the manylinux tag's glibc minor version")?;
        let needed = newest_glibc_minor(binary).unwrap_or(0);
        Ok(format!("manylinux_2_{}_{arch}", declared_minor.max(needed)))
    }

    /// The wheel's METADATA file (core metadata 2.1), the README as its description.
    fn metadata(&self, root: &Path) -> Result<String> {
        let project = &self.project;
        let readme = fs::read_to_string(root.join("packaging/python").join(&project.readme))
            .with_context(|| format!("reading the readme {}", project.readme))?;
        let mut text = format!(
            "Metadata-Version: 2.1\nName: {}\nVersion: {VERSION}\nSummary: {}\nLicense: {}\nRequires-Python: {}\n",
            project.name, project.description, project.license, project.requires_python
        );
        if !project.keywords.is_empty() {
            text.push_str(&format!("Keywords: {}\n", project.keywords.join(",")));
        }
        for classifier in &project.classifiers {
            text.push_str(&format!("Classifier: {classifier}\n"));
        }
        for (label, url) in &project.urls {
            text.push_str(&format!("Project-URL: {label}, {url}\n"));
        }
        text.push_str("Description-Content-Type: text/markdown\n\n");
        text.push_str(&readme);
        Ok(text)
    }
}

/// The newest `GLIBC_2.N` symbol version named in an ELF binary, if any.
fn newest_glibc_minor(binary: &[u8]) -> Option<u32> {
    const PREFIX: &[u8] = b"GLIBC_2.";
    binary
        .windows(PREFIX.len())
        .enumerate()
        .filter(|(_, window)| *window == PREFIX)
        .filter_map(|(at, _)| {
            let digits = &binary[at + PREFIX.len()..];
            let len = digits
                .iter()
                .take_while(|byte| byte.is_ascii_digit())
                .count();
            std::str::from_utf8(&digits[..len]).ok()?.parse().ok()
        })
        .max()
}

/// A gzip-compressed tar archive being written.
struct TarGz {
    builder: tar::Builder<GzEncoder<io::BufWriter<File>>>,
}

impl TarGz {
    fn create(path: &Path, level: Compression) -> Result<TarGz> {
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        Ok(TarGz {
            builder: tar::Builder::new(GzEncoder::new(io::BufWriter::new(file), level)),
        })
    }

    /// Adds a file with fixed owner and time, so that two runs write the same archive.
    fn add(&mut self, path: &str, mode: u32, contents: &[u8]) -> io::Result<()> {
        let mut header = tar::Header::new_gnu();
        header.set_size(contents.len() as u64);
        header.set_mode(mode);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        self.builder.append_data(&mut header, path, contents)
    }

    fn finish(self) -> io::Result<()> {
        self.builder.into_inner()?.finish()?.flush()
    }
}

fn read_document(root: &Path, name: &str) -> Result<Vec<u8>> {
    fs::read(root.join(name)).with_context(|| format!("reading {name}"))
}

fn write_archive(
    root: &Path,
    out: &Path,
    target: &str,
    platform: &Platform,
    binary: &[u8],
    level: Compression,
) -> Result<PathBuf> {
    let stem = format!("kenning-{VERSION}-{target}");
    let path = out.join(format!("{stem}.tar.gz"));
    let mut archive = TarGz::create(&path, level)?;
    archive.add(&format!("{stem}/{}", platform.binary_name), 0o755, binary)?;
    for name in DOCUMENTS {
        archive.add(
            &format!("{stem}/{name}"),
            0o644,
            &read_document(root, name)?,
        )?;
    }
    archive.finish()?;
    Ok(path)
}

/// The launcher package from `packaging/npm/kenning` and this platform's binary package, as the
/// tarballs `npm pack` makes (every file under `package/`).
fn write_npm_packages(
    root: &Path,
    out: &Path,
    platform: &Platform,
    binary: &[u8],
    level: Compression,
) -> Result<Vec<PathBuf>> {
    let source = root.join("packaging/npm/kenning");
    let mut manifest: Value = serde_json::from_slice(&fs::read(source.join("package.json"))?)
        .context("parsing packaging/npm/kenning/package.json")?;
    manifest["version"] = json!(VERSION);
    let optional = manifest["optionalDependencies"]
        .as_object_mut()
        .context("packaging/npm/kenning/package.json has no optionalDependencies")?;
    ensure!(
        optional.contains_key(&platform.npm_package()),
        "packaging/npm/kenning/package.json does not list {} in optionalDependencies",
        platform.npm_package()
    );
    // Every platform package is released with the launcher, at the same version.
    for version in optional.values_mut() {
        *version = json!(VERSION);
    }

    let launcher = out.join(format!("kenning-{VERSION}.tgz"));
    let mut tarball = TarGz::create(&launcher, level)?;
    tarball.add(
        "package/package.json",
        0o644,
        &serde_json::to_vec_pretty(&manifest)?,
    )?;
    tarball.add(
        "package/bin/kenning",
        0o755,
        &fs::read(source.join("bin/kenning"))?,
    )?;
    for name in DOCUMENTS {
        tarball.add(
            &format!("package/{name}"),
            0o644,
            &read_document(root, name)?,
        )?;
    }
    tarball.finish()?;

    let name = platform.npm_package();
    let platform_manifest = json!({
        "name": name,
        "version": VERSION,
        "description": format!("The kenning binary for {} {}.", platform.npm_os, platform.npm_cpu),
        "license": manifest["license"],
        "repository": manifest["repository"],
        "os": [platform.npm_os],
        "cpu": [platform.npm_cpu],
        "preferUnplugged": true,
    });
    let binary_package = out.join(format!("{name}-{VERSION}.tgz"));
    let mut tarball = TarGz::create(&binary_package, level)?;
    tarball.add(
        "package/package.json",
        0o644,
        &serde_json::to_vec_pretty(&platform_manifest)?,
    )?;
    tarball.add(
        &format!("package/bin/{}", platform.binary_name),
        0o755,
        binary,
    )?;
    for name in ["LICENSE", "NOTICE"] {
        tarball.add(
            &format!("package/{name}"),
            0o644,
            &read_document(root, name)?,
        )?;
    }
    tarball.finish()?;
    Ok(vec![launcher, binary_package])
}

/// `SHA256SUMS` in the format `sha256sum --check` reads.
fn write_checksums(out: &Path, files: &[PathBuf]) -> Result<()> {
    let mut text = String::new();
    for path in files {
        let digest = Sha256::digest(fs::read(path)?);
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .context("a package's file name")?;
        text.push_str(&format!("{}  {name}\n", kenning_core::hex(&digest)));
    }
    fs::write(out.join("SHA256SUMS"), text).context("writing SHA256SUMS")
}
