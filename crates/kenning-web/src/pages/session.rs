//! Signing in with an API key (when the server has keys) and out again. The key is checked by
//! the same rule as a bearer token; what the browser keeps is not the key but the token of a
//! session bound to it (see [`crate::sessions`]), in a cookie that only this site's requests
//! carry (`HttpOnly`, `SameSite=Strict`). Every sign-in, refused or not, is audited.

use std::fmt::Write;
use std::sync::Arc;
use std::time::Instant;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};

use kenning_gateway::{LimitClass, Outcome, Verdict};

use crate::Web;
use crate::csrf;
use crate::error::Error;
use crate::guard::{self, Viewer};
use crate::html::{self, escape};
use crate::params::Params;
use crate::sessions;

/// Sign-in forms are bound to no key (nobody is signed in yet).
const LOGIN_FORM: &str = "login";
const LOGIN_SUBJECT: &str = "anyone";
/// The bucket every sign-in attempt takes from (nobody is known yet to give one of their own),
/// at the rate of the writing calls.
const SIGN_IN_BUCKET: &str = "sign-in";
/// The cookie that earlier versions kept the API key itself in; signing in or out removes it.
const OLD_KEY_COOKIE: &str = "kenning_key";

/// Where to go after signing in: a path on this site only, never another site. A browser reads
/// `//host`, `/\host` and, since it drops tabs and newlines from addresses, `/\t/host` as
/// another site, so only a path of plain URL characters whose second character is neither
/// slash nor backslash is kept.
fn local_path(next: Option<&str>) -> String {
    let safe = |path: &str| {
        path.starts_with('/')
            && !path[1..].starts_with(['/', '\\'])
            && path.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/%?#".contains(&byte))
    };
    match next {
        Some(path) if safe(path) => path.to_owned(),
        _ => "/".to_owned(),
    }
}

fn login_page(web: &Web, next: &str, error: Option<&str>) -> Html<String> {
    let token = web.csrf.issue(LOGIN_FORM, LOGIN_SUBJECT, html::now());
    let mut body = String::from(
        "<h1>Sign in</h1>\n<p>This server has API keys: sign in with one. The browser keeps a session for this site, never the key.</p>\n",
    );
    if let Some(error) = error {
        let _ = writeln!(body, "<div class=\"error\" role=\"alert\"><p><strong>Invalid <code class=\"field\">key</code></strong>: {}</p></div>", escape(error));
    }
    let _ = write!(
        body,
        "<form method=\"post\" action=\"/login\" class=\"confirm\">\n<input type=\"hidden\" name=\"{}\" value=\"{}\">\
         <input type=\"hidden\" name=\"next\" value=\"{}\">\n<label>API key <input type=\"password\" name=\"key\" autocomplete=\"off\" required autofocus size=\"40\" placeholder=\"kenning_…\"></label>\n\
         <div class=\"buttons\"><button type=\"submit\">Sign in</button></div>\n</form>\n",
        csrf::FIELD,
        escape(&token),
        escape(next)
    );
    html::bare_page("Sign in", &body)
}

/// `GET /login`; straight on when no key is needed.
pub(crate) async fn form(State(web): State<Arc<Web>>, RawQuery(raw): RawQuery) -> Result<Response, Error> {
    let params = Params::query(raw)?;
    let next = local_path(params.text("next"));
    if web.access.verdict(None).map_err(Error::Keys)?.is_none() {
        return Ok(Redirect::to(&next).into_response());
    }
    Ok(login_page(&web, &next, None).into_response())
}

/// `POST /login`: checks the key, opens a session bound to it and sets its cookie.
pub(crate) async fn login(State(web): State<Arc<Web>>, body: Bytes) -> Result<Response, Error> {
    let started = Instant::now();
    let params = Params::parse(&body)?;
    web.csrf.check(params.text(csrf::FIELD), LOGIN_FORM, LOGIN_SUBJECT, html::now())?;
    if let Err(wait) = web.access.limiter.take(SIGN_IN_BUCKET, LimitClass::Capture, started) {
        guard::record(&web, "sign_in", "POST /login", None, Outcome::RateLimited, started);
        return Err(Error::RateLimited {
            key: SIGN_IN_BUCKET.to_owned(),
            class: LimitClass::Capture.as_str(),
            per_minute: web.access.limiter.limits().per_minute(LimitClass::Capture),
            retry_after: wait.as_secs_f64().ceil().max(1.0) as u64,
        });
    }
    let next = local_path(params.text("next"));
    let key = params.text("key").unwrap_or_default();
    let (problem, signed_in) = match web.access.verdict(Some(key)).map_err(Error::Keys)? {
        None => return Ok(Redirect::to(&next).into_response()),
        Some(Verdict::Valid(key)) => (None, Some(key)),
        Some(Verdict::Revoked(key)) => (Some(format!("the API key `{}` was revoked", key.name)), None),
        Some(Verdict::Unknown) if key.is_empty() => (Some("is missing: paste the key `kenning keys create` printed".to_owned()), None),
        Some(Verdict::Unknown) => (Some("is not known to this server".to_owned()), None),
    };
    let (Some(key), None) = (signed_in, &problem) else {
        guard::record(&web, "sign_in", "POST /login", None, Outcome::Unauthorized, started);
        let problem = problem.unwrap_or_default();
        return Ok((StatusCode::UNAUTHORIZED, login_page(&web, &next, Some(&problem))).into_response());
    };
    let token = web.sessions.start(&key.id, started)?;
    guard::record(&web, "sign_in", "POST /login", Some(&key), Outcome::Ok, started);
    let mut response = Redirect::to(&next).into_response();
    // The token is hex digits, so the value needs no quoting in a cookie.
    let cookie = format!("{}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}", sessions::COOKIE, sessions::LIFETIME.as_secs());
    set_cookies(response.headers_mut(), &cookie);
    Ok(response)
}

/// `POST /logout`: ends the session and forgets its cookie.
pub(crate) async fn logout(State(web): State<Arc<Web>>, Extension(viewer): Extension<Viewer>, headers: HeaderMap, body: Bytes) -> Result<Response, Error> {
    let params = Params::parse(&body)?;
    web.csrf.check(params.text(csrf::FIELD), "logout", viewer.subject(), html::now())?;
    if let Some(token) = guard::session_token(&headers) {
        web.sessions.end(&token);
    }
    let mut response = Redirect::to("/login").into_response();
    set_cookies(response.headers_mut(), &format!("{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0", sessions::COOKIE));
    Ok(response)
}

/// Sets `cookie` and removes the cookie in which earlier versions kept the key itself.
fn set_cookies(headers: &mut HeaderMap, cookie: &str) {
    for value in [cookie.to_owned(), format!("{OLD_KEY_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.append(header::SET_COOKIE, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_of_this_site_are_followed() {
        for kept in ["/", "/memories?q=pool+size&tag=a", "/memory?urn=kenning%3A%2F%2Fuser%2Fcontext%2F01a", "/decisions#top"] {
            assert_eq!(local_path(Some(kept)), kept);
        }
        for refused in [
            "//evil.example/",
            "/\\evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/\r\n//evil.example",
            "/ /evil.example",
            "\\\\evil.example",
            "https://evil.example/",
            "javascript:alert(1)",
            "evil.example",
            "/memories\u{2028}x",
            "",
        ] {
            assert_eq!(local_path(Some(refused)), "/", "{refused:?}");
        }
        assert_eq!(local_path(None), "/");
    }
}
