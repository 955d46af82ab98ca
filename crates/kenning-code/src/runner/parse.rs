//! Reading a test command's output: cargo's libtest lines, pytest's summary, the JSON reports
//! of jest and vitest, and `go test -json` events.

use super::*;

/// One command's results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    pub status: String,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub deselected: usize,
    pub failures: Vec<Failure>,
    /// Something other than a test failed: a build, or collecting a test file.
    pub errored: bool,
}

/// Reads a test command's output.
pub fn parse_tests(kind: RunnerKind, output: &Output) -> Parsed {
    let mut parsed = match kind {
        RunnerKind::Cargo => parse_cargo(&output.stdout, &output.stderr),
        RunnerKind::Pytest => parse_pytest(&output.stdout),
        RunnerKind::Vitest | RunnerKind::Jest => parse_jest_json(&output.stdout),
        RunnerKind::Go => parse_go_json(&output.stdout),
    };
    parsed.status = if output.timed_out {
        "timeout"
    } else if parsed.failed > 0 {
        "failed"
    } else if parsed.errored {
        "error"
    } else if output.exit_code != Some(0) && !(kind == RunnerKind::Pytest && output.exit_code == Some(5)) {
        "error"
    } else if parsed.passed + parsed.skipped == 0 {
        "no_tests"
    } else {
        "passed"
    }
    .to_owned();
    if parsed.status == "error" && parsed.failures.is_empty() {
        parsed.failures.push(Failure {
            name: "run".to_owned(),
            file: None,
            line: None,
            message: format!("exited with {:?} before reporting tests", output.exit_code),
        });
    }
    parsed
}

/// `path:line:col` at the start of `text`, or after `at ` / `--> `.
pub(super) fn location(text: &str) -> Option<(String, u32)> {
    let text = text.trim();
    let mut parts = text.splitn(3, ':');
    let file = parts.next()?.trim();
    let line = parts.next()?.trim().parse().ok()?;
    (!file.is_empty() && !file.contains(' ')).then(|| (file.to_owned(), line))
}

fn parse_cargo(stdout: &str, stderr: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut summary = (0, 0, 0, false);
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("test ") {
            if let Some((name, outcome)) = rest.rsplit_once(" ... ") {
                match outcome.trim() {
                    "ok" => parsed.passed += 1,
                    "FAILED" => {
                        parsed.failed += 1;
                        parsed.failures.push(Failure { name: name.trim().to_owned(), file: None, line: None, message: String::new() });
                    }
                    other if other.starts_with("ignored") => parsed.skipped += 1,
                    _ => {}
                }
            }
        } else if let Some(rest) = line.strip_prefix("test result: ") {
            // `ok. 3 passed; 1 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.00s`
            summary.3 = true;
            for part in rest.split(';') {
                let words: Vec<&str> = part.split_whitespace().collect();
                let number = |at: usize| words.get(at).and_then(|word| word.parse::<usize>().ok()).unwrap_or(0);
                match words.last().copied() {
                    Some("passed") => summary.0 += number(words.len() - 2),
                    Some("failed") => summary.1 += number(words.len() - 2),
                    Some("ignored") => summary.2 += number(words.len() - 2),
                    _ => {}
                }
            }
        }
    }
    // Lines dropped by the output cap leave the summaries as the count to trust.
    if summary.3 {
        (parsed.passed, parsed.failed, parsed.skipped) = (summary.0, summary.1, summary.2);
    }
    // Each failure's panic: `---- name stdout ----`, then `thread 'name' panicked at file:line:col:`
    // and the message on the next lines.
    let lines: Vec<&str> = stdout.lines().collect();
    for (at, line) in lines.iter().enumerate() {
        let Some(name) = line.strip_prefix("---- ").and_then(|rest| rest.strip_suffix(" stdout ----")) else { continue };
        let mut file_line = None;
        let mut message = Vec::new();
        for next in &lines[at + 1..] {
            if next.starts_with("---- ") || next.starts_with("failures:") || next.starts_with("note: ") {
                break;
            }
            if let Some(position) = next.find("panicked at ") {
                let rest = &next[position + "panicked at ".len()..];
                file_line = location(rest.trim_end_matches(':'));
                let inline = rest.splitn(4, ':').nth(3).map(str::trim).unwrap_or_default();
                if !inline.is_empty() {
                    message.push(inline.trim_matches('\'').to_owned());
                }
            } else if file_line.is_some() && !next.trim().is_empty() {
                message.push(next.trim().to_owned());
            }
        }
        if let Some(failure) = parsed.failures.iter_mut().find(|failure| failure.name == name) {
            if let Some((file, line)) = file_line {
                failure.file = Some(file);
                failure.line = Some(line);
            }
            failure.message = message.join("\n");
        }
    }
    // Compile errors: `error[E0308]: mismatched types` then ` --> src/lib.rs:3:5`.
    let stderr_lines: Vec<&str> = stderr.lines().collect();
    for (at, line) in stderr_lines.iter().enumerate() {
        if !line.starts_with("error") || line.starts_with("error: could not compile") || line.starts_with("error: test failed") {
            continue;
        }
        let Some((code, message)) = line.split_once(": ") else { continue };
        let place = stderr_lines[at + 1..].iter().take(3).find_map(|next| next.trim().strip_prefix("--> ").and_then(location));
        if place.is_none() && code == "error" && message.starts_with("aborting") {
            continue;
        }
        parsed.errored = true;
        parsed.failures.push(Failure {
            name: code.to_owned(),
            file: place.as_ref().map(|(file, _)| file.clone()),
            line: place.map(|(_, line)| line),
            message: message.to_owned(),
        });
    }
    parsed
}

fn parse_pytest(stdout: &str) -> Parsed {
    let mut parsed = Parsed::default();
    // With `--tb=line` each failure is one line, `path:line: message`, in failure order.
    let mut places: Vec<(String, u32, String)> = Vec::new();
    let mut summary_seen = false;
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("FAILED ").or_else(|| line.strip_prefix("ERROR ")) {
            parsed.errored |= line.starts_with("ERROR ");
            let (name, message) = rest.split_once(" - ").unwrap_or((rest, ""));
            parsed.failures.push(Failure { name: name.trim().to_owned(), file: None, line: None, message: message.trim().to_owned() });
        } else if line.starts_with("PASSED ") || line.starts_with("XFAIL ") || line.starts_with("XPASS ") {
        } else if line.starts_with("SKIPPED ") {
        } else if let Some((file, number)) = location(line)
            && !line.starts_with(' ')
            && (file.ends_with(".py"))
        {
            let message = line.splitn(3, ':').nth(2).unwrap_or_default().trim().to_owned();
            places.push((file, number, message));
        } else if is_pytest_summary(line) {
            summary_seen = true;
            for part in line.trim_matches('=').split(" in ").next().unwrap_or_default().split(',') {
                let words: Vec<&str> = part.split_whitespace().collect();
                let (Some(count), Some(what)) = (words.first().and_then(|word| word.parse::<usize>().ok()), words.get(1)) else { continue };
                match *what {
                    "passed" | "xpassed" => parsed.passed += count,
                    "failed" => parsed.failed += count,
                    "skipped" | "xfailed" => parsed.skipped += count,
                    "deselected" => parsed.deselected += count,
                    _ => {}
                }
            }
        }
    }
    if !summary_seen {
        parsed.failed = parsed.failures.iter().filter(|failure| failure.name.contains("::")).count();
    }
    for failure in &mut parsed.failures {
        let file = failure.name.split("::").next().unwrap_or_default();
        if let Some(position) = places.iter().position(|(place, _, _)| place.ends_with(file)) {
            let (place, number, message) = places.remove(position);
            failure.file = Some(place.strip_prefix("./").unwrap_or(&place).to_owned());
            failure.line = Some(number);
            if failure.message.is_empty() {
                failure.message = message;
            }
        } else if failure.file.is_none() && file.ends_with(".py") {
            failure.file = Some(file.to_owned());
        }
    }
    parsed
}

fn is_pytest_summary(line: &str) -> bool {
    let trimmed = line.trim_matches(|c| c == '=' || c == ' ');
    trimmed.contains(" in ")
        && trimmed.split(',').all(|part| part.split_whitespace().next().is_some_and(|word| word.parse::<usize>().is_ok()))
        && (trimmed.contains("passed") || trimmed.contains("failed") || trimmed.contains("error") || trimmed.contains("skipped") || trimmed.contains("no tests ran"))
}

fn parse_jest_json(stdout: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let Some(start) = stdout.find('{') else { return parsed };
    let Ok(report) = serde_json::from_str::<serde_json::Value>(&stdout[start..]) else { return parsed };
    let count = |field: &str| report.get(field).and_then(serde_json::Value::as_u64).map_or(0, |n| usize::try_from(n).unwrap_or(0));
    parsed.passed = count("numPassedTests");
    parsed.failed = count("numFailedTests");
    parsed.skipped = count("numPendingTests") + count("numTodoTests");
    for file in report.get("testResults").and_then(serde_json::Value::as_array).into_iter().flatten() {
        let file_name = file.get("name").and_then(serde_json::Value::as_str).unwrap_or_default();
        for assertion in file.get("assertionResults").and_then(serde_json::Value::as_array).into_iter().flatten() {
            if assertion.get("status").and_then(serde_json::Value::as_str) != Some("failed") {
                continue;
            }
            let message = assertion
                .get("failureMessages")
                .and_then(serde_json::Value::as_array)
                .and_then(|messages| messages.first())
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default();
            let line = message
                .split(file_name)
                .nth(1)
                .and_then(|rest| rest.strip_prefix(':'))
                .and_then(|rest| rest.split(':').next())
                .and_then(|number| number.parse().ok())
                .or_else(|| assertion.get("location").and_then(|location| location.get("line")).and_then(serde_json::Value::as_u64).and_then(|n| u32::try_from(n).ok()));
            parsed.failures.push(Failure {
                name: assertion.get("fullName").and_then(serde_json::Value::as_str).unwrap_or_default().to_owned(),
                file: Some(file_name.to_owned()),
                line,
                message: message.lines().next().unwrap_or_default().to_owned(),
            });
        }
        if file.get("status").and_then(serde_json::Value::as_str) == Some("failed")
            && file.get("assertionResults").and_then(serde_json::Value::as_array).is_none_or(Vec::is_empty)
        {
            let message = file.get("message").and_then(serde_json::Value::as_str).unwrap_or_default();
            parsed.failed += 1;
            parsed.failures.push(Failure { name: "suite".to_owned(), file: Some(file_name.to_owned()), line: None, message: message.lines().next().unwrap_or_default().to_owned() });
        }
    }
    parsed
}

fn parse_go_json(stdout: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut output: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for line in stdout.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let field = |name: &str| event.get(name).and_then(serde_json::Value::as_str).unwrap_or_default().to_owned();
        let (action, package, test) = (field("Action"), field("Package"), field("Test"));
        match action.as_str() {
            "output" => output.entry((package, test)).or_default().push(field("Output")),
            "pass" if !test.is_empty() => parsed.passed += 1,
            "skip" if !test.is_empty() => parsed.skipped += 1,
            "fail" => {
                let lines = output.get(&(package.clone(), test.clone())).cloned().unwrap_or_default();
                // `    file_test.go:12: message` inside a test; `./x.go:3:2: undefined: y` for a build.
                let place = lines.iter().find_map(|line| {
                    let trimmed = line.trim();
                    let (file, number) = location(trimmed)?;
                    file.ends_with(".go").then(|| (file, number, trimmed.splitn(3, ':').nth(2).unwrap_or_default().trim().to_owned()))
                });
                if !test.is_empty() || place.is_some() {
                    if !test.is_empty() {
                        parsed.failed += 1;
                    }
                    parsed.failures.push(Failure {
                        name: if test.is_empty() { package } else { test },
                        file: place.as_ref().map(|(file, _, _)| file.clone()),
                        line: place.as_ref().map(|(_, line, _)| *line),
                        message: place.map(|(_, _, message)| message).unwrap_or_default(),
                    });
                }
            }
            _ => {}
        }
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::super::check::parse_problems;
    use super::*;

    fn output(stdout: &str, stderr: &str, exit_code: Option<i32>) -> Output {
        Output { stdout: stdout.to_owned(), stderr: stderr.to_owned(), exit_code, ..Output::default() }
    }

    #[test]
    fn jest_report_is_read() {
        let report = r#"{"numPassedTests":1,"numFailedTests":1,"numPendingTests":1,"numTodoTests":0,"testResults":[{"name":"/r/src/sum.test.ts","status":"failed","message":"","assertionResults":[{"fullName":"sum adds","status":"passed","failureMessages":[]},{"fullName":"sum fails","status":"failed","failureMessages":["AssertionError: expected 3 to be 4\n    at /r/src/sum.test.ts:9:17"]}]}]}"#;
        let parsed = parse_tests(RunnerKind::Vitest, &output(report, "", Some(1)));
        assert_eq!((parsed.status.as_str(), parsed.passed, parsed.failed, parsed.skipped), ("failed", 1, 1, 1));
        assert_eq!(parsed.failures[0].line, Some(9));
        assert_eq!(parsed.failures[0].message, "AssertionError: expected 3 to be 4");
    }

    #[test]
    fn go_events_are_read() {
        let events = [
            r#"{"Action":"run","Package":"example.com/m/calc","Test":"TestAdd"}"#,
            r#"{"Action":"pass","Package":"example.com/m/calc","Test":"TestAdd"}"#,
            r#"{"Action":"output","Package":"example.com/m/calc","Test":"TestSub","Output":"    calc_test.go:14: got 1, want 2\n"}"#,
            r#"{"Action":"fail","Package":"example.com/m/calc","Test":"TestSub"}"#,
            r#"{"Action":"skip","Package":"example.com/m/calc","Test":"TestSkip"}"#,
            r#"{"Action":"fail","Package":"example.com/m/calc"}"#,
        ]
        .join("\n");
        let parsed = parse_tests(RunnerKind::Go, &output(&events, "", Some(1)));
        assert_eq!((parsed.passed, parsed.failed, parsed.skipped), (1, 1, 1));
        assert_eq!(parsed.failures[0], Failure { name: "TestSub".into(), file: Some("calc_test.go".into()), line: Some(14), message: "got 1, want 2".into() });
    }

    /// Regression: tests a `-k` selection left out were counted as skipped.
    #[test]
    fn pytest_deselected_tests_are_not_skipped_tests() {
        let stdout = "tests/test_stock.py::test_restock PASSED\n========= 1 passed, 1 skipped, 3 deselected in 0.02s =========\n";
        let parsed = parse_tests(RunnerKind::Pytest, &output(stdout, "", Some(0)));
        assert_eq!((parsed.status.as_str(), parsed.passed, parsed.skipped, parsed.deselected), ("passed", 1, 1, 3));
    }

    #[test]
    fn problems_are_read_from_file_line_column_lines() {
        let text = "src/lib.rs:3:9: warning: unused variable: `x`\napp.py:10:1: E302 expected 2 blank lines\nnoise line\n";
        let problems = parse_problems(text);
        assert_eq!(problems.len(), 2);
        assert_eq!(problems[0].file.as_deref(), Some("src/lib.rs"));
        assert_eq!(problems[0].name, "warning");
        assert_eq!(problems[1].line, Some(10));
    }
}
