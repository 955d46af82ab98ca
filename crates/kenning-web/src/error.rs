//! The web view's errors, each answered with a page that says what went wrong and what to do.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use kenning_core::FieldError;

use crate::html;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A query parameter or form field the page cannot use.
    #[error("{0}")]
    Invalid(FieldError),
    #[error("{0}")]
    Engine(kenning_engine::Error),
    /// The server runs read-only and the request would write.
    #[error("nothing can be changed from here: the server or the signed-in key is read-only")]
    ReadOnly,
    /// A form without a valid CSRF token.
    #[error("the form's security token is {0}")]
    Csrf(&'static str),
    /// The Host or Origin rule refused the request.
    #[error("{0}")]
    Forbidden(&'static str),
    /// The signed-in key's scope does not allow the request.
    #[error("{0}")]
    OutOfScope(String),
    /// A key is needed and none valid was presented.
    #[error("{0}")]
    Unauthorized(String),
    #[error("the API key `{key}` is over its limit of {per_minute} {class} requests a minute")]
    RateLimited { key: String, class: &'static str, per_minute: u32, retry_after: u64 },
    #[error("the key file cannot be read: {0}")]
    Keys(kenning_gateway::Error),
    #[error("no page at {0}")]
    NotFound(String),
    #[error("the web server failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("no random secret for the form tokens: {0}")]
    Random(String),
    #[error("the work behind this page stopped: {0}")]
    Task(String),
}

impl From<kenning_engine::Error> for Error {
    fn from(error: kenning_engine::Error) -> Self {
        match error {
            kenning_engine::Error::Invalid(field) => Error::Invalid(field),
            other => Error::Engine(other),
        }
    }
}

impl From<FieldError> for Error {
    fn from(field: FieldError) -> Self {
        Error::Invalid(field)
    }
}

impl Error {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Error::Invalid(_) => StatusCode::BAD_REQUEST,
            Error::Engine(kenning_engine::Error::NotFound { .. } | kenning_engine::Error::DecisionNotFound { .. }) | Error::NotFound(_) => {
                StatusCode::NOT_FOUND
            }
            Error::Engine(kenning_engine::Error::Busy { .. }) => StatusCode::CONFLICT,
            Error::Engine(kenning_engine::Error::Unavailable(_) | kenning_engine::Error::Interrupted) => StatusCode::SERVICE_UNAVAILABLE,
            Error::Engine(_) | Error::Keys(_) | Error::Io(_) | Error::Random(_) | Error::Task(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Error::ReadOnly | Error::Csrf(_) | Error::Forbidden(_) | Error::OutOfScope(_) => StatusCode::FORBIDDEN,
            Error::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Error::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// What the reader can do about it.
    fn suggestion(&self) -> Option<String> {
        match self {
            Error::Invalid(field) => Some(field.suggestion.clone()),
            Error::ReadOnly => Some(
                "start `kenning ui` without --read-only (and without `read_only` in kenning.toml), and sign in with a key made without --read-only, to change memories"
                    .to_owned(),
            ),
            Error::OutOfScope(_) => Some("sign in with a key whose --domains include one of this server's domains".to_owned()),
            Error::Csrf(_) => Some("go back, reload the page and submit the form again".to_owned()),
            Error::Forbidden(_) => Some("open the view from this machine at http://127.0.0.1:PORT/, the address `kenning ui` printed".to_owned()),
            Error::Unauthorized(_) => Some("sign in with an API key (`kenning keys create --name NAME` makes one)".to_owned()),
            Error::RateLimited { retry_after, .. } => Some(format!("wait {retry_after} s; limits are set in kenning.toml [server.rate_limits]")),
            Error::Engine(kenning_engine::Error::Busy { .. }) => Some("try again in a moment".to_owned()),
            _ => None,
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(error = %self, "web request failed");
        }
        let mut body = format!("<h1>{}</h1>\n", html::escape(status.canonical_reason().unwrap_or("Error")));
        body.push_str("<div class=\"error\" role=\"alert\">");
        match &self {
            Error::Invalid(field) => body.push_str(&html::field_error(field)),
            // What failed inside the server (a store's error text, a path) is for its log, not
            // for whoever made the request.
            _ if status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE => {
                body.push_str("<p>The server could not answer this request. Its log (on stderr) says why.</p>");
            }
            other => {
                body.push_str(&format!("<p>{}</p>", html::escape(&other.to_string())));
                if let Some(suggestion) = other.suggestion() {
                    body.push_str(&format!("<p class=\"suggestion\">{}</p>", html::escape(&suggestion)));
                }
            }
        }
        if matches!(self, Error::Unauthorized(_)) {
            body.push_str("<p><a href=\"/login\">Sign in</a></p>");
        }
        body.push_str("</div>\n<p><a href=\"/\">Overview</a></p>");
        let mut response = (status, html::bare_page(status.canonical_reason().unwrap_or("Error"), &body)).into_response();
        if let Error::RateLimited { retry_after, .. } = self {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
        }
        response
    }
}
