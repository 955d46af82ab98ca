//! Calibration: the reliability diagram (drawn by kenning-chart) and table per module, the
//! skills and antipatterns mined from outcomes, the anomalies that need attention, and a check
//! of a proposed decision against the record.

use std::fmt::Write;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{RawQuery, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};

use kenning_chart::{ReliabilityChart, Series, reliability_png, reliability_svg};
use kenning_core::Calibration;
use kenning_engine::decisions::{ALL_MODULES, CalibrationQuery, ContextQuery, SkillsQuery};

use super::blocking;
use crate::Web;
use crate::error::Error;
use crate::guard::Viewer;
use crate::html::{self, Section, badge, escape, percent};
use crate::params::{Params, url};

/// Skills or antipatterns shown per page.
const PATTERNS_PER_PAGE: usize = 10;
/// The most patterns mined per kind (the engine's bound).
const MAX_PATTERNS: usize = 100;

struct Selection {
    module: Option<String>,
    domain: Option<String>,
}

impl Selection {
    fn read(params: &Params) -> Selection {
        Selection { module: params.text("module").map(str::to_owned), domain: params.text("domain").map(str::to_owned) }
    }

    fn pairs(&self) -> Vec<(&'static str, &str)> {
        vec![("module", self.module.as_deref().unwrap_or("")), ("domain", self.domain.as_deref().unwrap_or(""))]
    }
}

/// The calibrations to draw and tabulate (checked, so an unknown module is a field error), and
/// the chart's title.
async fn calibrations(viewer: &Viewer, selection: &Selection) -> Result<(String, Vec<(String, Calibration)>), Error> {
    let decisions = viewer.decisions.clone();
    let (module, domain) = (selection.module.clone(), selection.domain.clone());
    blocking(move || {
        let calibrations = decisions.calibrations(module.as_deref(), domain.as_deref())?;
        let domain = decisions.domain(domain.as_deref())?;
        let title = match &module {
            Some(module) => format!("Calibration of {module} decisions ({domain})"),
            None => format!("Calibration of decisions ({domain})"),
        };
        Ok((title, calibrations))
    })
    .await
}

fn chart(title: String, calibrations: &[(String, Calibration)]) -> ReliabilityChart {
    ReliabilityChart {
        title,
        series: calibrations
            .iter()
            .map(|(module, calibration)| Series::from_calibration(if module == ALL_MODULES { "overall" } else { module }, calibration))
            .collect(),
    }
}

/// `GET /calibration/diagram.svg`.
pub(crate) async fn svg(Extension(viewer): Extension<Viewer>, RawQuery(raw): RawQuery) -> Result<Response, Error> {
    let selection = Selection::read(&Params::query(raw)?);
    let (title, calibrations) = calibrations(&viewer, &selection).await?;
    Ok(([(header::CONTENT_TYPE, "image/svg+xml")], reliability_svg(&chart(title, &calibrations))).into_response())
}

/// `GET /calibration/diagram.png`.
pub(crate) async fn png(Extension(viewer): Extension<Viewer>, RawQuery(raw): RawQuery) -> Result<Response, Error> {
    let selection = Selection::read(&Params::query(raw)?);
    let (title, calibrations) = calibrations(&viewer, &selection).await?;
    let image = tokio::task::spawn_blocking(move || reliability_png(&chart(title, &calibrations))).await.map_err(|error| Error::Task(error.to_string()))?;
    Ok(([(header::CONTENT_TYPE, "image/png")], image).into_response())
}

/// `GET /calibration`.
pub(crate) async fn page(State(web): State<Arc<Web>>, Extension(viewer): Extension<Viewer>, RawQuery(raw): RawQuery) -> Result<Html<String>, Error> {
    let params = Params::query(raw)?;
    let selection = Selection::read(&params);
    let skills_offset = params.number("skills", 0, MAX_PATTERNS)?.unwrap_or(0);
    let antipatterns_offset = params.number("antipatterns", 0, MAX_PATTERNS)?.unwrap_or(0);
    let statement = params.text("statement").map(str::to_owned);
    let confidence = params.fraction("confidence")?;
    let (title, calibrations) = calibrations(&viewer, &selection).await?;
    let decisions = viewer.decisions.clone();
    let (module, domain) = (selection.module.clone(), selection.domain.clone());
    let (report, skills, anomalies, context) = blocking(move || {
        let report = decisions.calibration(CalibrationQuery {
            mode: Some("module".to_owned()),
            module: module.clone(),
            domain: domain.clone(),
            ..CalibrationQuery::default()
        })?;
        let skills = decisions.skills(SkillsQuery { module: module.clone(), limit: Some(MAX_PATTERNS), domain: domain.clone(), ..SkillsQuery::default() })?;
        let anomalies = decisions.anomalies(domain.as_deref())?;
        let context = match statement {
            Some(statement) => Some(decisions.context(ContextQuery { statement, module, confidence, domain, ..ContextQuery::default() })?),
            None => None,
        };
        Ok((report, skills, anomalies, context))
    })
    .await?;

    let mut modules = vec![(String::new(), "every module".to_owned())];
    modules.extend(viewer.decisions.modules().names().iter().map(|module| (module.clone(), module.clone())));
    let mut domains = vec![(String::new(), "default domain".to_owned())];
    domains.extend(viewer.decisions.domains().map(|domain| (domain.to_string(), domain.to_string())));
    let mut body = format!(
        "<h1>Calibration</h1>\n<form method=\"get\" action=\"/calibration\" class=\"search\">{}\n{}\n<button type=\"submit\">Show</button></form>\n",
        html::select("module", "Module", &modules, selection.module.as_deref()),
        html::select("domain", "Domain", &domains, selection.domain.as_deref()),
    );
    if let Some(view) = &report.calibration {
        let _ = writeln!(body, "<p class=\"lead\">{} {}</p>", badge(&view.status), escape(&view.recommendation));
    }
    let pairs = selection.pairs();
    let alt = format!(
        "Reliability diagram: stated confidence against observed success for {}",
        calibrations.iter().map(|(module, c)| format!("{module} ({} outcomes)", c.sample_size)).collect::<Vec<_>>().join(", ")
    );
    let _ = writeln!(
        body,
        "<figure class=\"diagram\"><img src=\"{}\" alt=\"{}\" width=\"{}\" height=\"{}\"><figcaption>{} · <a href=\"{}\">PNG</a> · <a href=\"{}\">SVG</a></figcaption></figure>",
        escape(&url("/calibration/diagram.svg", &pairs)),
        escape(&alt),
        kenning_chart::WIDTH,
        kenning_chart::HEIGHT,
        escape(&title),
        escape(&url("/calibration/diagram.png", &pairs)),
        escape(&url("/calibration/diagram.svg", &pairs)),
    );
    body.push_str(
        "<div class=\"scroll\"><table class=\"list\"><caption>Per module</caption><thead><tr><th scope=\"col\">Module</th>\
         <th scope=\"col\" class=\"number\">Outcomes</th><th scope=\"col\" class=\"number\">Success</th><th scope=\"col\">95% interval</th>\
         <th scope=\"col\" class=\"number\">Stated</th><th scope=\"col\" class=\"number\">Gap</th><th scope=\"col\">Status</th>\
         <th scope=\"col\">Trend</th><th scope=\"col\" class=\"number\">Brier</th></tr></thead><tbody>\n",
    );
    for (module, calibration) in &calibrations {
        let name = if module == ALL_MODULES { "overall".to_owned() } else { module.clone() };
        let link = if module == ALL_MODULES {
            escape(&name)
        } else {
            format!("<a href=\"{}\">{}</a>", escape(&url("/calibration", &[("module", module), ("domain", selection.domain.as_deref().unwrap_or(""))])), escape(&name))
        };
        let (low, high) = calibration.credible_interval_95;
        let _ = writeln!(
            body,
            "<tr><th scope=\"row\">{link}</th><td class=\"number\">{}</td><td class=\"number\">{}</td><td>{}–{}</td><td class=\"number\">{}</td><td class=\"number\">{}</td><td>{}</td><td>{}</td><td class=\"number\">{}</td></tr>",
            calibration.sample_size,
            percent(calibration.mean_success),
            percent(low),
            percent(high),
            calibration.mean_confidence.map(percent).unwrap_or_else(|| "–".to_owned()),
            calibration.confidence_gap.map(|gap| format!("{:+.0}", gap * 100.0)).unwrap_or_else(|| "–".to_owned()),
            badge(calibration.status.as_str()),
            escape(calibration.trend.as_str()),
            calibration.brier_score.map(|brier| format!("{brier:.3}")).unwrap_or_else(|| "–".to_owned()),
        );
    }
    body.push_str("</tbody></table></div>\n");

    body.push_str("<section><h2>Warnings</h2>\n");
    if anomalies.anomalies.is_empty() {
        body.push_str("<p class=\"empty\">Nothing needs attention.</p>\n");
    }
    body.push_str("<ul class=\"warnings\">\n");
    for anomaly in &anomalies.anomalies {
        let _ = writeln!(body, "<li><strong>{}</strong> {} {}</li>", escape(&anomaly.module), badge(&anomaly.kind), escape(&anomaly.message));
    }
    body.push_str("</ul></section>\n");

    let _ = writeln!(body, "<section><h2>Skills</h2>");
    patterns(
        &mut body,
        skills.skills.iter().map(|skill| (skill.statement.as_str(), skill.module.as_str(), skill.confidence, skill.evidence.successes, skill.evidence.total_outcomes, skill.urn.as_str())).collect(),
        "No skills mined yet: a skill needs several successful decisions alike.",
        skills_offset,
        |offset| page_link(&pairs, "skills", offset),
    );
    body.push_str("</section>\n<section><h2>Antipatterns</h2>\n");
    patterns(
        &mut body,
        skills.antipatterns.iter().map(|pattern| (pattern.pattern.as_str(), pattern.module.as_str(), pattern.confidence, pattern.evidence.successes, pattern.evidence.total_outcomes, pattern.urn.as_str())).collect(),
        "No antipatterns: no kind of decision keeps failing.",
        antipatterns_offset,
        |offset| page_link(&pairs, "antipatterns", offset),
    );
    body.push_str("</section>\n");

    let _ = write!(
        body,
        "<section><h2>Check a proposed decision</h2>\n<form method=\"get\" action=\"/calibration\" class=\"search\">\
         <input type=\"hidden\" name=\"module\" value=\"{}\"><input type=\"hidden\" name=\"domain\" value=\"{}\">\
         <label class=\"grow\">Decision <input name=\"statement\" value=\"{}\" placeholder=\"e.g. Use Redis for the session cache\"></label>\
         <label>Confidence <input name=\"confidence\" inputmode=\"decimal\" size=\"5\" value=\"{}\" placeholder=\"0.8\"></label>\
         <button type=\"submit\">Check</button></form>\n",
        escape(selection.module.as_deref().unwrap_or("")),
        escape(selection.domain.as_deref().unwrap_or("")),
        escape(params.text("statement").unwrap_or("")),
        escape(params.text("confidence").unwrap_or("")),
    );
    if let Some(context) = &context {
        let _ = writeln!(body, "<p class=\"lead\">Firewall {} · risk {:.2}</p>", badge(&context.firewall_status), context.risk_score);
        if let Some(suggested) = context.calibration_context.suggested_confidence {
            let _ = writeln!(body, "<p>Suggested confidence: <strong>{}</strong>. {}</p>", percent(suggested), escape(&context.calibration_context.recommendation));
        }
        if context.warnings.is_empty() {
            body.push_str("<p class=\"empty\">No warnings.</p>\n");
        }
        body.push_str("<ul class=\"warnings\">\n");
        for warning in &context.warnings {
            let _ = writeln!(body, "<li>{} {} <span class=\"muted\">{}</span> {}</li>", badge(&warning.severity), escape(&warning.message), escape(&warning.evidence), escape(&warning.recommendation));
        }
        body.push_str("</ul>\n");
    }
    body.push_str("</section>\n");
    Ok(html::page(&web, &viewer, Section::Calibration, "Calibration", &body))
}

fn page_link(pairs: &[(&str, &str)], name: &str, offset: usize) -> String {
    let offset = offset.to_string();
    let mut pairs = pairs.to_vec();
    pairs.push((name, &offset));
    url("/calibration", &pairs)
}

/// One page of mined patterns: (statement, module, confidence, successes, outcomes, URN).
fn patterns(
    body: &mut String,
    items: Vec<(&str, &str, f64, usize, usize, &str)>,
    empty: &str,
    offset: usize,
    link: impl Fn(usize) -> String,
) {
    if items.is_empty() {
        let _ = writeln!(body, "<p class=\"empty\">{}</p>", escape(empty));
        return;
    }
    body.push_str("<ul>\n");
    for (statement, module, confidence, successes, outcomes, urn) in items.iter().skip(offset).take(PATTERNS_PER_PAGE) {
        let _ = writeln!(
            body,
            "<li><a href=\"{}\">{}</a> · {} · {successes} of {outcomes} succeeded · confidence {confidence:.2}</li>",
            escape(&url("/memory", &[("urn", urn)])),
            escape(statement),
            escape(module)
        );
    }
    body.push_str("</ul>\n");
    let end = (offset + PATTERNS_PER_PAGE).min(items.len());
    if offset > 0 || end < items.len() {
        let first = (offset > 0).then(|| link(0));
        let next = (end < items.len()).then(|| link(end));
        body.push_str(&html::pager(&format!("{}-{} of {}", offset + 1, end, items.len()), first, next));
    }
}
