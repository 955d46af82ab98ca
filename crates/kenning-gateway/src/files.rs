//! Files and folders only the user can read: the key file holds no secret, but its hashes and
//! identities are nobody else's business, and the audit log says who read what and when.

use std::fs::OpenOptions;
use std::path::Path;

/// Options that create a file readable and writable by its owner alone (0600 on Unix).
pub fn private_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Creates `dir` and any missing parents, each open to its owner alone (0700 on Unix); folders
/// that already exist keep their permissions.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}
