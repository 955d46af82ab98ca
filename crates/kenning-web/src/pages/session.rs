//! Signing in with an API key (when the server has keys) and out again. The key is checked by
//! the same rule as a bearer token, then kept in a cookie that only this site's requests carry
//! (`HttpOnly`, `SameSite=Strict`) and that is checked again on every request.

use std::fmt::Write;
use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};

use kenning_service::Verdict;

use crate::Web;
use crate::csrf;
use crate::error::Error;
use crate::guard::{KEY_COOKIE, Viewer};
use crate::html::{self, escape};
use crate::params::Params;

/// Sign-in forms are bound to no key (nobody is signed in yet).
const LOGIN_FORM: &str = "login";
const LOGIN_SUBJECT: &str = "anyone";

/// Where to go after signing in: a path on this site only, never another site.
fn local_path(next: Option<&str>) -> String {
    match next {
        Some(path) if path.starts_with('/') && !path.starts_with("//") && !path.contains('\\') => path.to_owned(),
        _ => "/".to_owned(),
    }
}

fn login_page(web: &Web, next: &str, error: Option<&str>) -> Html<String> {
    let token = web.csrf.issue(LOGIN_FORM, LOGIN_SUBJECT, html::now());
    let mut body = String::from("<h1>Sign in</h1>\n<p>This server has API keys: sign in with one. It is kept in a cookie for this site only.</p>\n");
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
    let params = Params::query(raw);
    let next = local_path(params.text("next"));
    if web.access.verdict(None).map_err(Error::Keys)?.is_none() {
        return Ok(Redirect::to(&next).into_response());
    }
    Ok(login_page(&web, &next, None).into_response())
}

/// `POST /login`.
pub(crate) async fn login(State(web): State<Arc<Web>>, body: Bytes) -> Result<Response, Error> {
    let params = Params::parse(&body);
    web.csrf.check(params.text(csrf::FIELD), LOGIN_FORM, LOGIN_SUBJECT, html::now())?;
    let next = local_path(params.text("next"));
    let key = params.text("key").unwrap_or_default();
    let problem = match web.access.verdict(Some(key)).map_err(Error::Keys)? {
        None => return Ok(Redirect::to(&next).into_response()),
        Some(Verdict::Valid(_)) => None,
        Some(Verdict::Revoked(key)) => Some(format!("the API key `{}` was revoked", key.name)),
        Some(Verdict::Unknown) if key.is_empty() => Some("is missing: paste the key `kenning keys create` printed".to_owned()),
        Some(Verdict::Unknown) => Some("is not known to this server".to_owned()),
    };
    if let Some(problem) = problem {
        return Ok((StatusCode::UNAUTHORIZED, login_page(&web, &next, Some(&problem))).into_response());
    }
    // Keys are `kenning_` and hex digits, so the value needs no quoting in a cookie.
    let cookie = format!("{KEY_COOKIE}={key}; Path=/; HttpOnly; SameSite=Strict");
    let mut response = Redirect::to(&next).into_response();
    let value = HeaderValue::from_str(&cookie).map_err(|_| kenning_core::FieldError::new("key", "holds characters a key never has", "", "paste the key exactly as `kenning keys create` printed it"))?;
    response.headers_mut().insert(header::SET_COOKIE, value);
    Ok(response)
}

/// `POST /logout`: forgets the cookie.
pub(crate) async fn logout(State(web): State<Arc<Web>>, Extension(viewer): Extension<Viewer>, body: Bytes) -> Result<Response, Error> {
    let params = Params::parse(&body);
    web.csrf.check(params.text(csrf::FIELD), "logout", viewer.subject(), html::now())?;
    let mut response = Redirect::to("/login").into_response();
    response.headers_mut().insert(header::SET_COOKIE, HeaderValue::from_static("kenning_key=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"));
    Ok(response)
}
