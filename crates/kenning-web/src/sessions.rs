//! Web view sessions: what the sign-in cookie holds instead of the API key.
//!
//! Cookies are not isolated by port, so every other server on this machine's loopback address
//! (a development server, a tool's web page) receives the cookies of this one. The cookie
//! therefore holds an opaque token that works only for this web view, only for this process,
//! and only for a while: signing out, revoking the key it was opened with, restarting the
//! server or letting it idle ends it. The API key itself never leaves the sign-in form.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::error::Error;

/// The name of the cookie that carries a session's token.
pub(crate) const COOKIE: &str = "kenning_session";
/// How long a session lasts from sign-in, however busy.
pub(crate) const LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// How long a session lasts without a request.
const IDLE: Duration = Duration::from_secs(2 * 3600);
/// Sessions kept at most; signing in past it ends the session used longest ago.
const MAX_SESSIONS: usize = 1024;
const TOKEN_BYTES: usize = 32;

struct Session {
    key_id: String,
    opened: Instant,
    used: Instant,
}

impl Session {
    fn expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.opened) > LIFETIME || now.saturating_duration_since(self.used) > IDLE
    }
}

/// The open sessions of this process, by the SHA-256 of their token (so the table holds no
/// token, and looking one up takes the same time whatever it shares with another).
#[derive(Default)]
pub(crate) struct Sessions {
    open: Mutex<HashMap<[u8; 32], Session>>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Sessions {
    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Opens a session for the key with this public id and returns its token.
    pub(crate) fn start(&self, key_id: &str, now: Instant) -> Result<String, Error> {
        let mut random = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut random).map_err(|error| Error::Random(error.to_string()))?;
        let token = kenning_core::hex(&random);
        let mut open = self.open();
        open.retain(|_, session| !session.expired(now));
        if open.len() >= MAX_SESSIONS
            && let Some(oldest) = open.iter().min_by_key(|(_, session)| session.used).map(|(digest, _)| *digest)
        {
            open.remove(&oldest);
        }
        open.insert(digest(&token), Session { key_id: key_id.to_owned(), opened: now, used: now });
        Ok(token)
    }

    /// The public id of the key the session with this token was opened with, while it lasts.
    pub(crate) fn key_of(&self, token: &str, now: Instant) -> Option<String> {
        let mut open = self.open();
        let digest = digest(token);
        let session = open.get_mut(&digest)?;
        if session.expired(now) {
            open.remove(&digest);
            return None;
        }
        session.used = now;
        Some(session.key_id.clone())
    }

    /// Ends the session with this token.
    pub(crate) fn end(&self, token: &str) {
        self.open().remove(&digest(token));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_lasts_until_it_ends_idles_or_grows_old() {
        let sessions = Sessions::default();
        let start = Instant::now();
        let token = sessions.start("1a2b3c4d", start).unwrap();
        assert_eq!(token.len(), 64);
        assert_eq!(sessions.key_of(&token, start + Duration::from_secs(60)).as_deref(), Some("1a2b3c4d"));
        assert_eq!(sessions.key_of("kenning_1a2b3c4d", start), None, "only the token opens it");
        let mut now = start;
        while now < start + LIFETIME - IDLE / 2 {
            now += IDLE / 2;
            assert!(sessions.key_of(&token, now).is_some(), "in use, it stays open");
        }
        assert!(sessions.key_of(&token, start + LIFETIME + Duration::from_secs(1)).is_none(), "past its lifetime");

        let idle = sessions.start("1a2b3c4d", start).unwrap();
        assert!(sessions.key_of(&idle, start + IDLE + Duration::from_secs(1)).is_none(), "idle too long");
        let ended = sessions.start("1a2b3c4d", start).unwrap();
        sessions.end(&ended);
        assert!(sessions.key_of(&ended, start).is_none(), "signed out");
    }
}
