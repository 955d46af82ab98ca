//! Tokens against cross-site request forgery. Each writing form carries a token that the server
//! signed with a secret drawn when the process started (HMAC-SHA-256), binding it to the form's
//! action and target (`forget` of one URN, say), to whoever the page was served to (the
//! signed-in key, or this machine's user when no key is needed) and to when it was issued. A
//! page on another site can neither read a token nor make one, and a token taken from one form
//! does not work in another or after the process restarted.

use hmac::{KeyInit, Mac};

use crate::error::Error;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// How long a form stays valid after the page that holds it was served.
const LIFETIME_SECONDS: i64 = 12 * 3600;
/// Clock steps tolerated for a token that seems to be from the future.
const SKEW_SECONDS: i64 = 60;

/// The name of the form field that carries the token.
pub(crate) const FIELD: &str = "csrf_token";

pub(crate) struct CsrfKey([u8; 32]);

impl CsrfKey {
    pub(crate) fn random() -> Result<CsrfKey, Error> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|error| Error::Random(error.to_string()))?;
        Ok(CsrfKey(secret))
    }

    fn mac(&self, issued: i64, form: &str, subject: &str) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        // Each part is length-prefixed so that no two (form, subject) pairs sign the same bytes.
        for part in [issued.to_string().as_str(), form, subject] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
        mac
    }

    /// A token for `form` (its action and target) served to `subject` at `now` (Unix seconds).
    pub(crate) fn issue(&self, form: &str, subject: &str, now: i64) -> String {
        let tag = self.mac(now, form, subject).finalize().into_bytes();
        format!("{now}.{}", kenning_core::hex(&tag))
    }

    /// Checks a submitted token; the refusal says whether it was missing, malformed, expired or
    /// not made for this form.
    pub(crate) fn check(&self, token: Option<&str>, form: &str, subject: &str, now: i64) -> Result<(), Error> {
        let token = token.map(str::trim).filter(|token| !token.is_empty()).ok_or(Error::Csrf("missing"))?;
        let (issued, hex) = token.split_once('.').ok_or(Error::Csrf("malformed"))?;
        let issued: i64 = issued.parse().map_err(|_| Error::Csrf("malformed"))?;
        let tag = decode_hex(hex).ok_or(Error::Csrf("malformed"))?;
        if issued > now + SKEW_SECONDS || now - issued > LIFETIME_SECONDS {
            return Err(Error::Csrf("expired"));
        }
        self.mac(issued, form, subject).verify_slice(&tag).map_err(|_| Error::Csrf("not valid for this form"))
    }
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 || !text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len()).step_by(2).map(|at| u8::from_str_radix(&text[at..at + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_works_only_for_its_form_subject_and_time() {
        let key = CsrfKey::random().unwrap();
        let token = key.issue("forget\nkenning://user/context/01a", "local", 1_000);
        assert!(key.check(Some(&token), "forget\nkenning://user/context/01a", "local", 1_100).is_ok());
        for (form, subject, now) in [
            ("forget\nkenning://user/context/01b", "local", 1_100),
            ("restore\nkenning://user/context/01a", "local", 1_100),
            ("forget\nkenning://user/context/01a", "key_2", 1_100),
            ("forget\nkenning://user/context/01a", "local", 1_000 + LIFETIME_SECONDS + 1),
        ] {
            assert!(key.check(Some(&token), form, subject, now).is_err(), "{form} {subject} {now}");
        }
        let other = CsrfKey::random().unwrap();
        assert!(other.check(Some(&token), "forget\nkenning://user/context/01a", "local", 1_100).is_err());
        for bad in [None, Some(""), Some("123"), Some("x.abcd"), Some("1000.zz")] {
            assert!(key.check(bad, "forget\nkenning://user/context/01a", "local", 1_100).is_err(), "{bad:?}");
        }
    }
}
