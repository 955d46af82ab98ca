"""Runs the official MCP conformance suite (server scenarios, active suite) against `kenning serve --http`.

`scripts/test` runs it with KENNING_BIN, KENNING_TEST_NODE and KENNING_TEST_CONFORMANCE set (the
binary, Node 22 and the suite's entry point), and KENNING_TEST_CONFORMANCE_RESULTS (a folder for
the suite's per-scenario checks, replaced on each run and kept for reading afterwards). The server runs in a fresh workspace (a temporary store
and config, a git repository as the project) on a free port and is stopped with SIGINT afterwards;
it must shut down cleanly and write nothing to stdout.

Scenarios that test the suite's own fixture tools and resources, which a memory server does not
have, are listed in expected-failures.yml beside this file with the reason. The suite fails the run
on a scenario that fails and is not listed, and on one that is listed but passes (a stale entry).
This script then prints every scenario with its outcome, so the pass list is in the log.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))

from harness import http_server, make_workspace  # noqa: E402

EXPECTED_FAILURES = HERE / "expected-failures.yml"
SUITE_TIMEOUT = 600.0


def required_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set: run the conformance suite through scripts/test")
    return value


# The suite names each result folder server-<scenario>-<ISO timestamp with dashes>.
RESULT_FOLDER = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def scenario_outcomes(results: Path) -> dict[str, list[str]]:
    """Reads the suite's results folder: per scenario, the messages of its failed checks."""
    outcomes: dict[str, list[str]] = {}
    for checks_file in sorted(results.glob("server-*/checks.json")):
        match = RESULT_FOLDER.match(checks_file.parent.name)
        scenario = match.group("scenario") if match else checks_file.parent.name
        failures = [
            f"{check.get('name', '?')}: {check.get('errorMessage') or check.get('message') or 'failed'}"
            for check in json.loads(checks_file.read_text())
            if str(check.get("status", "")).upper() == "FAILURE"
        ]
        outcomes[scenario] = failures
    return outcomes


def main() -> int:
    kenning_bin = required_env("KENNING_BIN")
    node = required_env("KENNING_TEST_NODE")
    suite = required_env("KENNING_TEST_CONFORMANCE")
    results = Path(required_env("KENNING_TEST_CONFORMANCE_RESULTS"))
    shutil.rmtree(results, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="kenning-conformance-") as temporary:
        workspace = make_workspace(kenning_bin, Path(temporary))
        with http_server(workspace) as server:
            print(f"conformance: kenning serves {server.url}", flush=True)
            completed = subprocess.run(
                [node, suite, "server", "--url", server.url, "--suite", "active",
                 "--expected-failures", str(EXPECTED_FAILURES), "--output-dir", str(results)],
                stdin=subprocess.DEVNULL, timeout=SUITE_TIMEOUT,
            )
    outcomes = scenario_outcomes(results)
    print("\nconformance: every scenario, and why a failed one failed")
    for scenario, failures in sorted(outcomes.items()):
        print(f"  {'FAIL' if failures else 'pass'}  {scenario}")
        for failure in failures:
            print(f"          {failure}")
    expected = expected_failures()
    passed = [scenario for scenario, failures in outcomes.items() if not failures]
    unexpected = [scenario for scenario, failures in outcomes.items() if failures and scenario not in expected]
    stale = [scenario for scenario in passed if scenario in expected]
    listed = [scenario for scenario, failures in outcomes.items() if failures and scenario in expected]
    for scenario in unexpected:
        print(f"conformance: {scenario} failed and is not listed in {EXPECTED_FAILURES.name}")
    for scenario in stale:
        print(f"conformance: {scenario} passed but is listed in {EXPECTED_FAILURES.name}: remove it there")
    if not outcomes:
        print("conformance: the suite wrote no results", file=sys.stderr)
        return 1
    # The closing line counts scenarios: a listed (expected) failure as skipped, an unexpected
    # failure or a stale listing as failed. The suite's own exit code decides.
    print(f"({len(listed)} scenarios skipped: they need the suite's fixtures, see {EXPECTED_FAILURES.name}; "
          f"the suite exits {completed.returncode})")
    print(f"conformance: {len(passed) - len(stale)} passed, {len(unexpected) + len(stale)} failed, {len(listed)} skipped")
    return completed.returncode


def expected_failures() -> set[str]:
    """The scenario names listed in expected-failures.yml (a `server:` list of plain names)."""
    names = set()
    for line in EXPECTED_FAILURES.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("- "):
            names.add(stripped[2:].strip())
    return names


if __name__ == "__main__":
    sys.exit(main())
