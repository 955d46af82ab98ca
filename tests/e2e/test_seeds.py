"""The five seed documents (../shared/seeds in the design, summarised in the README's "Coming from
another memory server") replayed through the real binary with the official SDK: every example call
each seed gives, with its arguments as the seed writes them, sent to the kenning tool the README's
table maps it to, and checked to be accepted and to do what the seed says it does.

Tool names are kenning's (the seeds' dotted and differently named tools are refused by several
clients); arguments are the seed's. Ids a seed makes up (`dec_pg_user_001`) are the ids kenning
returned for the decision the example refers to. Where a seed gives an argument schema and no
example (Audrey, the coding-agent spec, the Membrane tools), the example is every documented
argument with a value of its documented type.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fake_llm import FakeLLM
from harness import PROJECT_DOMAIN, Connection, Workspace, connect

pytestmark = pytest.mark.anyio

PYTHON_FIXTURE = Path(__file__).resolve().parents[2] / "crates/kenning-code/tests/fixtures/python"


async def decision_status(conn: Connection, decision_id: str) -> str:
    return (await conn.ok("decision_get", {"decision_id": decision_id}))["status"]


# --- 000: Membria, decisions and calibration -------------------------------------------------------


async def test_seed_000_membria_examples(ws: Workspace) -> None:
    async with connect(ws, "stdio", ("--toolsets", "memory,decisions")) as conn:
        # 1.1 membria.capture_decision, its "Example Call".
        captured = await conn.ok("decision_capture", {
            "statement": "Use PostgreSQL for user database instead of MongoDB",
            "alternatives": ["MongoDB", "SQLite", "MySQL"],
            "confidence": 0.82,
            "assumptions": [
                "PostgreSQL can handle 10k+ req/s",
                "Team has PostgreSQL experience",
            ],
            "risk_level": "medium",
            "context": {
                "module": "database",
                "session_id": "sess_phase3_work",
                "file_path": "src/db/schema.ts",
                "reasoning": "ACID guarantees needed for transactions",
            },
        })
        assert captured["decision_id"].startswith("dec_") and captured["status"] == "pending"
        assert (captured["confidence"], captured["module"]) == (0.82, "database"), captured
        schema_decision = captured["decision_id"]
        # 1.3 membria.get_decision: the nested context landed in kenning's own fields.
        got = await conn.ok("decision_get", {"decision_id": schema_decision})
        assert (got["session_id"], got["file_path"], got["rationale"]) == (
            "sess_phase3_work", "src/db/schema.ts", "ACID guarantees needed for transactions"), got
        assert got["alternatives"] == ["MongoDB", "SQLite", "MySQL"] and got["risk_level"] == "medium"
        assert "similar_decisions" in got and got["antipatterns_triggered"] == []

        # Integration Example 1: the context holds only the module.
        example = await conn.ok("decision_capture", {
            "statement": "Use PostgreSQL for user database",
            "alternatives": ["MongoDB", "SQLite"],
            "confidence": 0.82,
            "assumptions": ["ACID guarantees needed", "Team knows PostgreSQL"],
            "context": {"module": "database"},
        })
        assert example["module"] == "database"
        dec_pg_user_001 = example["decision_id"]

        # Appendix: Quick Start's test call names no module at all.
        quick = await conn.ok("decision_capture", {"statement": "Test decision", "alternatives": ["Alt 1"], "confidence": 0.75})
        assert quick["module"] == "general" and any("filed under `general`" in warning for warning in quick["warnings"]), quick

        # 1.2 membria.update_decision, every argument; `confidence_update` is the new confidence.
        updated = await conn.ok("decision_update", {
            "decision_id": schema_decision,
            "status": "executed",
            "confidence_update": 0.8,
            "notes": "Schema migrated in staging",
            "linked_pr": "https://github.com/acme/app/pull/42",
            "linked_commit": "3f2a9c1",
        })
        assert (updated["previous_status"], updated["new_status"], updated["confidence"]) == ("pending", "executed", 0.8), updated

        # 2.2 membria.record_signal.
        signal = await conn.ok("decision_record_signal", {
            "decision_id": schema_decision,
            "signal_type": "ci_passed",
            "valence": "positive",
            "description": "All migrations ran in CI",
            "metrics": {"duration_s": 41},
        })
        assert signal["signal_id"].startswith("sig_") and 0 < signal["estimated_success"] <= 1, signal

        # Integration Example 2: record_outcome, 30 days later.
        outcome = await conn.ok("decision_record_outcome", {
            "decision_id": dec_pg_user_001,
            "final_status": "success",
            "final_score": 0.89,
            "signals": {
                "ci_passed": True,
                "incident_found": False,
            },
            "lessons_learned": [
                "Connection pooling critical at 8k req/s",
                "Monitoring saved us from N+1 queries",
            ],
        })
        assert outcome["calibration_impact"]["module"] == "database" and len(outcome["lesson_urns"]) == 2, outcome
        assert outcome["recommendation"]
        # 2.1's `decision_domain` names the module the outcome counts toward.
        counted = await conn.ok("decision_record_outcome", {
            "decision_id": schema_decision, "final_status": "partial", "final_score": 0.6,
            "signals": {"reliability_score": 0.9}, "decision_domain": "database",
        })
        assert counted["calibration_impact"]["module"] == "database"
        refused = await conn.refused("decision_record_outcome", {"decision_id": quick["decision_id"], "final_status": "success",
                                                                 "decision_domain": "auth"})
        assert refused["field"] == "decision_domain" and "general" in refused["problem"], refused

        # 3.1 membria.get_calibration: seed 000 calls the module its `domain`.
        calibration = (await conn.ok("decision_calibration", {"domain": "database", "include_trend": True,
                                                              "include_credible_interval": True}))["calibration"]
        assert calibration["module"] == "database" and calibration["sample_size"] == 2
        assert "trend" in calibration and len(calibration["credible_interval_95"]) == 2 and calibration["alpha"] > 1
        bare = (await conn.ok("decision_calibration", {"domain": "database", "include_trend": False,
                                                       "include_credible_interval": False}))["calibration"]
        assert "trend" not in bare and "credible_interval_95" not in bare, bare

        # 3.2 membria.get_confidence_guidance.
        guidance = (await conn.ok("decision_calibration", {"domain": "database", "decision_confidence": 0.8,
                                                           "context": "Use PostgreSQL for analytics"}))["guidance"]
        assert (guidance["module"], guidance["your_confidence"]) == ("database", 0.8), guidance

        # 3.3 membria.get_all_calibrations.
        every = (await conn.ok("decision_calibration", {"min_sample_size": 1, "sort_by": "success_rate"}))["all"]
        assert [module["module"] for module in every["modules"]] == ["database"], every

        # Integration Example 3: get_decision_context.
        context = await conn.ok("decision_context", {"statement": "Use MongoDB for cache layer", "module": "database", "depth": "standard"})
        assert context["calibration_context"]["module"] == "database" and context["depth"] == "standard"
        assert context["markdown"].startswith("## kenning decision context"), context["markdown"]

        # 4.2 membria.analyze_decision.
        analysis = (await conn.ok("decision_get", {"decision_id": dec_pg_user_001, "analysis": True}))["analysis"]
        assert analysis["causal_chain"]["outcome"].startswith("success"), analysis
        assert len(analysis["causal_chain"]["lessons"]) == 2
        assert analysis["prevention_effectiveness"]["prevented_issue"].startswith("choosing MongoDB or SQLite instead")
        assert analysis["antipatterns_avoided"] == []

        # 5.1 membria.get_skills.
        skills = await conn.ok("decision_skills", {"domain": "database", "decision_statement": "Use PostgreSQL for user database",
                                                   "min_confidence": 0.0, "limit": 10})
        assert skills["module"] == "database" and "antipatterns" in skills, skills

        # 5.2 membria.get_warnings, in the decisions toolset as decision_warnings.
        warnings = await conn.ok("decision_warnings", {"statement": "Use MongoDB for the session store", "module": "database",
                                                       "confidence": 0.99, "alternatives": ["PostgreSQL"],
                                                       "context": {"module": "database"}})
        assert set(warnings) >= {"warnings", "firewall_status", "risk_score"}, warnings
        assert warnings["firewall_status"] in ("ok", "caution", "block") and 0 <= warnings["risk_score"] <= 1

        # Message Formats, Error Response Format: confidence 1.5 names the field, the problem, what
        # was received and a suggestion, where the model can read it.
        error = await conn.refused("decision_capture", {"statement": "Test decision", "alternatives": ["Alt 1"], "confidence": 1.5})
        assert (error["field"], error["received"], error["problem"]) == ("confidence", 1.5, "must be between 0 and 1"), error
        assert "0.75" in error["suggestion"]

        # Resources: decisions, calibrations, skills and anomalies.
        listed = await conn.read_json("kenning://decisions?module=database")
        assert {decision["decision_id"] for decision in listed["decisions"]} == {schema_decision, dec_pg_user_001}
        assert (await conn.read_json(f"kenning://decisions/{dec_pg_user_001}/causal-chain"))
        assert (await conn.read_json("kenning://calibration/database"))["module"] == "database"
        assert "anomalies" in await conn.read_json("kenning://anomalies")


# --- 001: Audrey, memory dynamics ------------------------------------------------------------------


async def test_seed_001_audrey_tools(ws: Workspace) -> None:
    async with connect(ws, "stdio", ("--toolsets", "memory,dynamics")) as conn:
        # memory_encode: store a new episodic memory.
        encoded = await conn.ok("memory_capture", {
            "content": "The user prefers squash merges for feature branches.",
            "source": "told-by-user",
            "tags": ["git", "preferences"],
            "salience": 0.8,
        })
        memory = await conn.ok("memory_get", {"urn": encoded["urn"]})
        assert (memory["kind"], memory["source"], memory["tags"], memory["salience"]) == (
            "episodic", "told-by-user", ["git", "preferences"], 0.8), memory

        # Three more episodes, encoded the same way and alike enough for consolidation, and one
        # semantic memory.
        for n in range(1, 4):
            await conn.ok("memory_capture", {
                "content": f"The login integration test failed on CI because the session cookie was not set before the redirect (run {n}).",
                "source": "tool-result", "tags": ["ci"], "salience": 0.6,
            })
        await conn.ok("memory_capture", {"content": "The API gateway terminates TLS.", "kind": "semantic", "source": "inference"})

        # memory_recall with Audrey's `types`.
        recalled = await conn.ok("memory_recall", {"query": "session cookie login test", "limit": 10, "types": ["episodic"],
                                                   "min_confidence": 0.1})
        assert recalled["results"] and all(hit["kind"] == "episodic" for hit in recalled["results"]), recalled
        semantic = await conn.ok("memory_recall", {"query": "TLS gateway", "types": ["semantic"]})
        assert [hit["kind"] for hit in semantic["results"]] == ["semantic"], semantic

        # memory_consolidate: principles from the accumulated episodes.
        run = await conn.ok("memory_consolidate", {"min_cluster_size": 3, "similarity_threshold": 0.80})
        assert {"runId", "episodesEvaluated", "clustersFound", "principlesExtracted", "status"} <= set(run), run
        assert (run["clustersFound"], run["principlesExtracted"], run["status"]) == (1, 1, "completed"), run

        # A contradiction, for memory_resolve_truth.
        await conn.ok("memory_capture", {"content": "The payments API request timeout is 30s.", "namespace": "config", "source": "inference"})
        newer = await conn.ok("memory_capture", {"content": "The payments API request timeout is 45s.", "namespace": "config",
                                                 "source": "tool-result"})
        [contradiction] = newer["contradictions"]

        # memory_introspect: counts, contradiction stats, consolidation history.
        health = await conn.ok("memory_introspect", {})
        assert {"episodic", "semantic", "procedural", "causalLinks", "dormant", "contradictions", "lastConsolidation",
                "totalConsolidationRuns"} <= set(health), health
        assert health["contradictions"]["open"] == 1 and health["totalConsolidationRuns"] == 1 and health["semantic"] >= 2
        assert set(health["contradictions"]) >= {"open", "resolved", "context_dependent", "reopened"}

        # memory_resolve_truth: {resolution, conditions, explanation}.
        resolved = await conn.ok("memory_resolve_truth", {"contradiction_id": contradiction["id"]})
        assert resolved["resolution"] in ("a_wins", "b_wins", "context_dependent") and resolved["explanation"], resolved
        assert "conditions" in resolved


# --- 002: Membrane, protocols and skills -----------------------------------------------------------


async def run_protocol(conn: Connection, start: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
    view = start
    for _ in range(30):
        if view["status"] == "complete":
            return view
        step = view["step"]["step"]
        assert step in answers, f"no answer for {view['step']}"
        view = await conn.ok("protocol_continue", {"session_id": view["session_id"], "answer": answers[step]})
        assert "problem" not in view, view
    raise AssertionError("the protocol did not complete")


async def test_seed_002_membrane_protocols_and_skills(ws: Workspace) -> None:
    seed_protocols = {"explore_space", "add_objectives", "add_invariant", "add_health_coverage", "add_implementation",
                      "record_work", "investigate", "resolve_blocker"}
    async with connect(ws, "stdio", ("--toolsets", "memory,decisions,protocols")) as conn:
        # membrane_list: every protocol of the seed's protocols/ folder.
        listed = await conn.ok("protocol_list")
        assert seed_protocols <= {protocol["name"] for protocol in listed["protocols"]}, listed

        decision = await conn.ok("decision_capture", {"statement": "Refunds are retried with an idempotency key",
                                                      "alternatives": ["Retry blindly"], "confidence": 0.8, "module": "backend"})

        # membrane_start(protocol_name) with the seed's argument name; the skill comes with the first step.
        start = await conn.ok("protocol_start", {"protocol_name": "add_objectives"})
        assert start["skill"].startswith("# Understanding and designing modules"), start
        done = await run_protocol(conn, start, {
            "area": "refunds",
            "purpose": "Refunds return a customer's money once, quickly, whatever fails on the way.",
            "objectives": ["Refunds reach the card within 5 business days", "A retried refund is never paid twice"],
            "measures": ["The settlement report, checked weekly", "The idempotency test in CI"],
            "out_of_scope": ["Partial refunds of bundles"],
        })
        [objectives] = done["written"]
        written = await conn.ok("memory_get", {"urn": objectives["urn"]})
        assert written["namespace"] == "standards" and "never paid twice" in written["content"], written

        start = await conn.ok("protocol_start", {"protocol_name": "add_health_coverage"})
        assert start["skill"].startswith("# Covering the health of a module"), start
        done = await run_protocol(conn, start, {
            "area": "refunds",
            "signals": ["p99 latency of POST /refunds under 300 ms", "No refund paid twice"],
            "covered": ["p99 latency: the latency alert"],
            "gaps": ["No refund paid twice"],
        })
        namespaces = [(await conn.ok("memory_get", {"urn": entry["urn"]}))["namespace"] for entry in done["written"]]
        assert namespaces == ["standards", "tech-debt"], done["written"]

        start = await conn.ok("protocol_start", {"protocol_name": "add_implementation"})
        assert start["skill"].startswith("# Implementing a feature"), start
        done = await run_protocol(conn, start, {
            "feature": "Idempotent refunds: a retried refund returns the first one",
            "serves": [decision["urn"]],
            "approach": "Each refund request carries an idempotency key; the first response is stored and replayed for repeats.",
            "files": ["refunds/service.py", "refunds/store.py"],
            "verified": "tests/test_refunds.py::test_retry_is_idempotent",
            "follow_up": [],
        })
        how = await conn.ok("memory_get", {"urn": done["written"][0]["urn"]})
        assert (how["namespace"], how["kind"]) == ("patterns", "procedural"), how
        assert any(link["target"] == decision["urn"] for link in how["links"]), how

        # The other seed protocols start with their skills, and membrane_abort discards a session.
        skills = {"explore_space": "module_design", "add_invariant": "module_design", "record_work": "progress_tracking",
                  "investigate": "escalation_handling", "resolve_blocker": "escalation_handling"}
        for protocol in skills:
            start = await conn.ok("protocol_start", {"protocol_name": protocol})
            assert start["skill"].startswith("# "), start
            aborted = await conn.ok("protocol_abort", {"session_id": start["session_id"]})
            assert aborted["aborted"] is True


# --- 003: the senior coding agent's MCPs -----------------------------------------------------------


def inventory(ws: Workspace) -> None:
    """The Python fixture of kenning-code's tests, with ruff and mypy configured, committed."""
    shutil.copytree(PYTHON_FIXTURE, ws.repo, dirs_exist_ok=True)
    pyproject = ws.repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"\n', 'version = "0.1.0"\ndependencies = ["pytest"]\n')
                         + "\n[tool.ruff]\nline-length = 100\n\n[tool.mypy]\nstrict = true\n")
    git = ["git", "-C", str(ws.repo), "-c", "user.name=Ada Lovelace", "-c", "user.email=ada@example.com"]
    subprocess.run([*git, "add", "-A"], check=True, capture_output=True)
    subprocess.run([*git, "commit", "-qm", "Open the inventory"], check=True, capture_output=True)


async def test_seed_003_coding_agent_tools(ws: Workspace) -> None:
    inventory(ws)
    # The Python running these tests has pytest: the server runs the fixture's tests with it and
    # reads pytest's own documentation from its site-packages.
    env = {"VIRTUAL_ENV": sys.prefix}
    args = ("--toolsets", "memory,decisions,workflows,repo,test,docs")
    async with connect(ws, "stdio", args, env=env) as conn:
        # @memory: memory_write, memory_search, memory_retrieve, memory_update, memory_forget.
        written = await conn.ok("memory_capture", {
            "type": "semantic", "category": "architecture", "title": "Stock lives in the inventory package",
            "content": "Stock levels are kept by `inventory.stock`; `reserve` refuses more than is held.",
            "tags": ["inventory", "stock"], "confidence": 0.9,
        })
        memory = await conn.ok("memory_get", {"memory_id": written["urn"]})
        assert (memory["kind"], memory["category"], memory["confidence"]) == ("semantic", "architecture", 0.9), memory
        episode = await conn.ok("memory_capture", {"type": "episodic", "category": "debugging_lesson", "title": "Reserve bug",
                                                   "content": "Reserving stock failed when the count was zero."})
        found = await conn.ok("memory_recall", {"query": "where are stock levels kept", "memory_types": ["semantic"], "limit": 5})
        assert [hit["urn"] for hit in found["results"]] == [written["urn"]], found
        changed = await conn.ok("memory_update", {"memory_id": written["urn"], "content": "Stock levels are kept by `inventory.stock`.",
                                                  "reason": "reserve moved to its own module"})
        assert changed["version"] == 2, changed
        await conn.ok("memory_forget", {"memory_id": episode["urn"], "reason": "fixed and covered by a test"})
        assert (await conn.ok("memory_get", {"memory_id": episode["urn"]}))["status"] == "forgotten"

        # memory:// resources.
        semantic = await conn.read_json("memory://semantic/list")
        assert [entry["urn"] for entry in semantic["memories"]] == [written["urn"]], semantic
        assert (await conn.read_json("memory://procedural/list"))["total"] == 0
        assert (await conn.read_json("memory://episodic/list"))["total"] == 0, "the forgotten episode is not listed"
        assert (await conn.read_json("memory://stats"))["total_memories"] == 2

        # @repo.
        understood = await conn.ok("repo_understand", {"path": "inventory/stock.py", "depth": "shallow"})
        assert understood["test_files"] == ["tests/test_stock.py"], understood
        patterns = await conn.ok("repo_search_patterns", {"pattern_query": "refusing to reserve more stock than is held"})
        assert patterns["hits"], patterns
        await conn.ok("repo_find_similar", {"file_path": "inventory/models.py"})
        dependencies = await conn.ok("repo_dependencies", {"file_path": "inventory/models.py", "direction": "both"})
        assert any(entry["path"] == "inventory/stock.py" for entry in dependencies["imported_by"]), dependencies

        # @test.
        ran = await conn.ok("test_run", {"scope": "file", "target": "tests/test_stock.py"})
        assert (ran["runner"], ran["status"], ran["passed"], ran["skipped"]) == ("pytest", "passed", 3, 1), ran
        named = await conn.ok("test_run", {"scope": "function", "target": "test_restock_adds"})
        assert (named["passed"], named["deselected"]) == (1, 3), named
        linted = await conn.call("test_lint", {"files": [], "fix": False})
        assert linted.structured_content["runner"] == "ruff", linted
        checked = await conn.call("test_typecheck", {"files": []})
        assert checked.structured_content["runner"] == "mypy", checked
        suggested = await conn.ok("test_suggest", {"changed_files": ["inventory/stock.py"]})
        assert suggested["files"], suggested

        # @docs.
        docs = await conn.ok("docs_search", {"query": "decorator to mark a fixture factory function", "scope": "all"})
        assert docs["packages_searched"] >= 2 and docs["hits"], docs
        api = await conn.ok("docs_get_api", {"name": "pytest.fixture"})
        assert api["item"]["name"] == "_pytest.fixtures.fixture", api

        # @decisions: decision_log, decision_query, decision_update_outcome.
        logged = await conn.ok("decision_capture", {
            "decision": "Keep stock counts in memory behind the inventory module",
            "context": "Reservations were slow when every check hit the database",
            "alternatives": ["Redis", "Database row locks"],
            "rationale": "The service is a single process and restarts rebuild the counts",
            "risks": ["Counts are lost on a crash until rebuilt"],
            "related_files": ["inventory/stock.py"],
        })
        assert "confidence" not in logged and logged["module"] == "general", logged
        detail = await conn.ok("decision_get", {"decision_id": logged["decision_id"]})
        assert detail["problem"] == "Reservations were slow when every check hit the database", detail
        assert detail["risks"] == ["Counts are lost on a crash until rebuilt"] and "confidence" not in detail
        queried = await conn.ok("decision_query", {"query": "stock counts in memory", "related_to": "inventory/stock.py"})
        assert [entry["decision_id"] for entry in queried["decisions"]] == [logged["decision_id"]], queried
        for outcome, status in (("problematic", "partial"),):
            recorded = await conn.ok("decision_record_outcome", {
                "decision_id": logged["decision_id"], "outcome": outcome, "notes": "Counts drifted after two crashes",
                "lessons": ["Rebuild counts from the ledger at start"],
            })
            assert recorded["final_status"] == status and len(recorded["lesson_urns"]) == 1, recorded
        for outcome, status in (("successful", "success"), ("needs_revision", "failure")):
            other = await conn.ok("decision_capture", {"decision": f"Decision that turned out {outcome}", "context": "A test of outcome names",
                                                       "rationale": "It had to be decided"})
            recorded = await conn.ok("decision_record_outcome", {"decision_id": other["decision_id"], "outcome": outcome})
            assert recorded["final_status"] == status, recorded

        # @workflow.
        workflow = await conn.ok("workflow_create", {
            "name": "Move stock to Redis", "goal": "Stock counts survive a crash",
            "steps": [
                {"id": "design", "description": "Choose the key layout", "dependencies": [], "verification": "Reviewed"},
                {"id": "build", "description": "Write the Redis store", "dependencies": ["design"], "verification": "Tests pass"},
            ],
        })
        status = await conn.ok("workflow_status", {"workflow_id": workflow["workflow_id"]})
        assert [step["id"] for step in status["steps"]] == ["design", "build"], status
        step = await conn.ok("workflow_update_step", {"workflow_id": workflow["workflow_id"], "step_id": "design",
                                                      "status": "in_progress", "notes": "Started"})
        assert step["steps"][0]["status"] == "in_progress" and "Started" in json.dumps(step["steps"][0]["notes"]), step


# --- 004: subcog, URNs, domains, resources and LLM providers ---------------------------------------

KEY = "sk-ant-e2e-seeds-0123456789abcdef"


async def test_seed_004_subcog_urns_resources_and_llm_configuration(ws: Workspace) -> None:
    with FakeLLM(anthropic_key=KEY) as llm:
        # 2.8 LLM Configuration, the single [llm] table as the seed writes it (with base_url set to
        # the local fake, and the key in the environment as `api_key_env` says).
        (ws.config / "kenning.toml").write_text(f"""
[llm]
# Provider: anthropic | openai | ollama | lmstudio
provider = "anthropic"

# Model (provider-specific)
model = "claude-3-5-sonnet-20241022"

# API key environment variable (for cloud providers)
api_key_env = "ANTHROPIC_API_KEY"

# Base URL override (for custom endpoints)
base_url = "{llm.url}"

# Request defaults
temperature = 0.3
max_tokens = 1000
timeout_seconds = 30

# Rate limiting
requests_per_minute = 60
tokens_per_minute = 100000

# Retry configuration
max_retries = 3
retry_delay_ms = 1000
""")
        env = {"ANTHROPIC_API_KEY": KEY}
        async with connect(ws, "stdio", ("--toolsets", "memory,dynamics,sync"), env=env) as conn:
            # memory.capture returns the resource's URN.
            captured = await conn.ok("memory_capture", {"content": "Use PostgreSQL for the data layer.", "namespace": "decisions",
                                                        "tags": ["database", "architecture"]})
            urn = captured["urn"]
            assert urn.startswith(f"kenning://{PROJECT_DOMAIN}/decisions/"), urn
            # The seed's subcog:// form reads the same memory, as a tool argument and as a resource.
            subcog = urn.replace("kenning://", "subcog://")
            assert (await conn.ok("memory_get", {"urn": subcog}))["urn"] == urn
            assert (await conn.read_json(subcog))["urn"] == urn
            # memory.recall returns URNs and the resource template.
            recalled = await conn.ok("memory_recall", {"query": "PostgreSQL data layer"})
            assert recalled["results"][0]["urn"] == urn and recalled["resource_template"] == "kenning://{domain}/{namespace}/{id}"
            # memory.status: namespaces with their URIs.
            status = await conn.ok("memory_status")
            project = next(domain for domain in status["domains"] if domain["domain"] == PROJECT_DOMAIN)
            assert project["by_namespace"] == {"decisions": 1}, project
            # 1.2 Resource templates: a memory, a namespace listing, all memories of a domain.
            templates = {template.uri_template for template in (await conn.session.list_resource_templates()).resource_templates}
            assert {"kenning://{domain}/{namespace}/{id}", "kenning://{domain}/{namespace}{?kind,cursor}",
                    "kenning://{domain}{?kind,cursor}"} <= templates, templates
            listing = await conn.read_json(f"kenning://{PROJECT_DOMAIN}/decisions")
            assert listing["total"] == 1 and listing["memories"][0]["urn"] == urn
            domains = await conn.read_json(f"subcog://{PROJECT_DOMAIN}")
            assert [(entry["name"], entry["count"]) for entry in domains["namespaces"]] == [("decisions", 1)], domains

            # memory.consolidate through the configured provider, with the request defaults applied.
            for n in range(1, 4):
                await conn.ok("memory_capture", {
                    "content": f"The nightly export job ran out of memory while compressing the audit log (night {n}).",
                    "namespace": "performance", "kind": "episodic",
                })
            llm.say(json.dumps({"title": "Stream the audit log when compressing it",
                                "principle": "The export runs out of memory compressing the whole audit log at once; stream it."}))
            run = await conn.ok("memory_consolidate", {"min_cluster_size": 3})
            assert run["llm"]["status"] == "used" and run["principlesExtracted"] == 1, run
            [asked] = llm.completions()
            assert asked.body["model"] == "claude-3-5-sonnet-20241022" and asked.headers["x-api-key"] == KEY
            assert asked.body["max_tokens"] <= 1000 and round(asked.body["temperature"], 2) == 0.3, asked.body

        # A provider named without a model gets the provider's default model.
        (ws.config / "kenning.toml").write_text('[llm]\nprovider = "ollama"\n')
        doctor = ws.run("--json", "doctor")
        checks = {check["name"]: check for check in json.loads(doctor.stdout)}
        assert "ollama/llama3.2" in checks["llm"]["message"], checks["llm"]
