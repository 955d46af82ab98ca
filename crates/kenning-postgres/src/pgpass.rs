//! The password file libpq reads when a connection string gives no password (`~/.pgpass`,
//! `passfile` or `PGPASSFILE`): lines of `hostname:port:database:username:password`, `*` matching
//! anything, `\` escaping `:` and `\`, `#` starting a comment. As in libpq, a file that others
//! may read is ignored (with a warning), and the first matching line wins.

use std::path::Path;

use crate::conninfo::{Address, Target};

/// The password the file at `path` holds for `user` on `database` at `target`, if any.
pub(crate) fn lookup(path: &Path, target: &Target, database: &str, user: &str) -> Option<String> {
    let metadata = std::fs::metadata(path).ok()?;
    if !metadata.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if metadata.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                file = %path.display(),
                "the password file has group or world access and is ignored; its permissions should be u=rw (0600) or less"
            );
            return None;
        }
    }
    let text = std::fs::read_to_string(path).ok()?;
    find(&text, &host_name(target), &target.port.to_string(), database, user)
}

/// The host name the file is matched against: a socket in the default directory is `localhost`.
fn host_name(target: &Target) -> String {
    match &target.address {
        Address::Unix(dir) if crate::conninfo::is_default_socket_dir(dir) => "localhost".to_owned(),
        _ => target.name.clone(),
    }
}

fn find(text: &str, host: &str, port: &str, database: &str, user: &str) -> Option<String> {
    text.lines().map(|line| line.trim_end_matches('\r')).filter(|line| !line.is_empty() && !line.starts_with('#')).find_map(|line| {
        let fields = fields(line);
        let [h, p, d, u, password] = fields.as_slice() else { return None };
        let matches = |field: &String, value: &str| field == "*" || field == value;
        (matches(h, host) && matches(p, port) && matches(d, database) && matches(u, user)).then(|| password.clone())
    })
}

/// The five fields of a line: `:` separates them except in the last, `\` escapes the next character.
fn fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => fields.last_mut().expect("never empty").extend(chars.next()),
            ':' if fields.len() < 5 => fields.push(String::new()),
            other => fields.last_mut().expect("never empty").push(other),
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# comment\n\
        db.example:5432:org:kenning:first\n\
        db.example:*:*:kenning:second\n\
        localhost:5433:*:*:on\\:the\\\\socket\n\
        *:*:*:*:fallback:with:colons\n";

    #[test]
    fn the_first_matching_line_wins() {
        assert_eq!(find(FILE, "db.example", "5432", "org", "kenning").as_deref(), Some("first"));
        assert_eq!(find(FILE, "db.example", "6543", "other", "kenning").as_deref(), Some("second"));
        assert_eq!(find(FILE, "localhost", "5433", "x", "y").as_deref(), Some("on:the\\socket"));
        assert_eq!(find(FILE, "elsewhere", "1", "x", "y").as_deref(), Some("fallback:with:colons"));
        assert_eq!(find("a:1:b:c:d\nshort:line\n", "a", "2", "b", "c"), None);
    }

    #[test]
    fn a_file_others_can_read_is_ignored() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pgpass");
        std::fs::write(&path, "*:*:*:*:secret\n").unwrap();
        let target = Target { address: Address::Tcp("db".into()), name: "db".into(), port: 5432 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(lookup(&path, &target, "d", "u"), None);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(lookup(&path, &target, "d", "u").as_deref(), Some("secret"));
    }
}
