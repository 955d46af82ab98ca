"""The decisions toolset against the real `kenning serve --toolsets memory,decisions`, over both
transports, with the official SDK's `ClientSession`.

The scenario: 12 decisions in two modules with stated confidences, signals, outcomes, then
calibration, guidance, skills, warnings and context, each checked against values worked out
here by hand. Beta quantiles come from this file's own reference: for whole-number parameters
the exact identity I_x(a, b) = P(Binomial(a + b - 1, x) >= a), otherwise Simpson's rule on the
density; both inverted by bisection. Every error case seed 000 names for these tools is checked
for its format at the end.
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

import mcp.types as types
from harness import PROJECT_DOMAIN, Connection, Workspace, connect, http_server
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

# The scenario subscribes with resources/subscribe, which the SDK's ClientSession (a 2025-11-25
# handshake) uses; the SDK warns that 2026-07-28 replaces it, which test_listen covers.
pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")]

ARGS = ("--toolsets", "memory,decisions")
DECISION_TOOLS = {
    "decision_capture", "decision_update", "decision_get", "decision_query", "decision_record_signal",
    "decision_record_outcome", "decision_calibration", "decision_skills", "decision_context",
}
READ_ONLY_DECISION_TOOLS = {"decision_get", "decision_query", "decision_calibration", "decision_skills", "decision_context"}


# --- reference statistics -------------------------------------------------------------------

def beta_cdf(x: float, a: float, b: float) -> float:
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if float(a).is_integer() and float(b).is_integer():
        n, k = int(a + b - 1), int(a)
        return sum(math.comb(n, j) * x**j * (1 - x) ** (n - j) for j in range(k, n + 1))
    log_beta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)

    def density(t: float) -> float:
        return 0.0 if t <= 0 or t >= 1 else math.exp((a - 1) * math.log(t) + (b - 1) * math.log(1 - t) - log_beta)

    steps = 4000
    h = x / steps
    total = density(0) + density(x) + sum((4 if i % 2 else 2) * density(i * h) for i in range(1, steps))
    return total * h / 3


def beta_quantile(p: float, a: float, b: float) -> float:
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if beta_cdf(middle, a, b) < p else (low, middle)
    return (low + high) / 2


def probability_greater(x: tuple[float, float], y: tuple[float, float]) -> float:
    """P(X > Y) for X ~ Beta(x), Y ~ Beta(y) with whole-number parameters for Y: the integral
    of f_X(t) F_Y(t), F_Y exact, by the midpoint rule."""
    steps = 4000
    log_beta = math.lgamma(x[0]) + math.lgamma(x[1]) - math.lgamma(x[0] + x[1])
    total = 0.0
    for i in range(steps):
        t = (i + 0.5) / steps
        density = math.exp((x[0] - 1) * math.log(t) + (x[1] - 1) * math.log(1 - t) - log_beta)
        total += density * beta_cdf(t, *y) / steps
    return total


def close(actual: float, expected: float, tolerance: float = 1e-9) -> bool:
    return abs(actual - expected) <= tolerance


# --- helpers ----------------------------------------------------------------------------------


def assert_field_error(body: dict[str, Any], field: str, received: Any) -> None:
    """Seed 000's error format, {field, problem, received, suggestion}, in an isError result."""
    assert body["field"] == field, body
    assert body["received"] == received, body



async def updated_uris(conn: Connection, count: int) -> list[str]:
    """The URIs of the resources/updated notifications, once at least `count` have arrived."""
    with anyio.fail_after(10):
        while True:
            uris = [
                str(notification.params.uri)
                for notification in conn.notifications
                if isinstance(notification, types.ResourceUpdatedNotification)
            ]
            if len(uris) >= count:
                return uris
            await anyio.sleep(0.02)


# The scenario: (key, statement, module, stated confidence, alternative, outcome, score, lesson).
DECISIONS = [
    ("D1", "Use PostgreSQL for the orders service", "database", 0.8, "MongoDB", "success", 1.0, None),
    ("D2", "Use PostgreSQL for the billing service", "database", 0.8, "MySQL", "success", 1.0, None),
    ("D3", "Use PostgreSQL for the inventory service", "database", 0.7, "DynamoDB", "success", 1.0, None),
    ("D4", "Use PostgreSQL for the shipping service", "database", 0.9, "Cassandra", "success", 1.0, None),
    ("D5", "Add a Redis cache in front of the catalog", "database", 0.6, "No cache", "failure", 0.0,
     "Cache invalidation on catalog edits was never solved"),
    ("D6", "Add a read replica for reporting queries", "database", 0.7, "Nightly export", "success", 1.0, None),
    ("D7", "Shard the events table by tenant", "database", 0.5, "Partition by month", "failure", 0.0, None),
    ("A1", "Store sessions in Redis with a short expiry", "auth", 0.9, "Signed cookies", "failure", 0.0,
     "Redis restarts log every user out"),
    ("A2", "Store sessions in Redis for the admin app", "auth", 0.85, "Signed cookies", "failure", 0.0, None),
    ("A3", "Store sessions in Redis for the mobile API", "auth", 0.8, "Signed cookies", "failure", 0.0, None),
    ("A4", "Issue JWTs with a fifteen minute expiry", "auth", 0.7, "One hour expiry", "success", 1.0, None),
    ("A5", "Require MFA for admin accounts", "auth", 0.9, "Optional MFA", "partial", 0.5, None),
]


async def test_twelve_decisions_calibrate_and_teach(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport, args=ARGS) as conn:
        listed = {tool.name: tool for tool in (await conn.session.list_tools()).tools}
        assert DECISION_TOOLS <= set(listed)
        for name in DECISION_TOOLS:
            assert listed[name].annotations.read_only_hint is (name in READ_ONLY_DECISION_TOOLS), name
        assert "decision_context" in conn.init.instructions
        assert conn.init.capabilities.resources.subscribe is True

        ids: dict[str, str] = {}
        for key, statement, module, confidence, alternative, *_ in DECISIONS:
            captured = await conn.ok("decision_capture", {
                "statement": statement, "alternatives": [alternative], "confidence": confidence, "module": module,
            })
            assert captured["status"] == "pending" and captured["module"] == module
            assert captured["urn"] == f"kenning://{PROJECT_DOMAIN}/decisions/{captured['decision_id']}"
            ids[key] = captured["decision_id"]
        by_id = {ids[row[0]]: row for row in DECISIONS}

        # A decision is a memory: recall finds it in the decisions namespace.
        recalled = await conn.ok("memory_recall", {"query": "PostgreSQL orders service", "namespaces": ["decisions"]})
        assert recalled["results"][0]["urn"].endswith(ids["D1"])

        # Signals before any outcome start from the stated 0.8 with the weight of 2 observations:
        # a CI pass (weight 1) gives (0.8·2 + 1) / 3 = 0.8667, a merged PR then (1.6 + 2) / 4 = 0.9.
        signal = await conn.ok("decision_record_signal", {"decision_id": ids["D1"], "signal_type": "ci_passed", "valence": "positive"})
        assert (signal["estimated_success"], signal["prior_source"]) == (0.8667, "stated_confidence")
        signal = await conn.ok("decision_record_signal", {"decision_id": ids["D1"], "signal_type": "pr_merged", "valence": "positive"})
        assert signal["estimated_success"] == 0.9 and signal["signals_counted"] == 2

        moved = await conn.ok("decision_update", {"decision_id": ids["D1"], "status": "executed",
                                                  "linked_pr": "https://github.com/acme/widget-service/pull/12"})
        assert (moved["previous_status"], moved["new_status"]) == ("pending", "executed")

        # Subscribe before the outcomes: the auth calibration and the database skills.
        await conn.session.subscribe_resource("kenning://calibration/auth")
        await conn.session.subscribe_resource("kenning://skills/database")

        recorded: dict[str, dict[str, Any]] = {}
        for key in ("D1", "D2", "D3", "D4", "D5"):
            recorded[key] = await record_outcome(conn, ids[key], by_id)
        # 2 outcomes are not a pattern; the third makes the PostgreSQL skill, 3 of 3: the 5%
        # quantile of Beta(4, 1) is 0.05^(1/4) = 0.4729; the fourth, 4 of 4: 0.05^(1/5) = 0.5493.
        assert recorded["D2"]["skills"] == []
        assert [(s["kind"], s["change"]) for s in recorded["D3"]["skills"]] == [("skill", "created")]
        assert close(recorded["D3"]["skills"][0]["confidence"], 0.05 ** (1 / 4))
        assert [(s["kind"], s["change"]) for s in recorded["D4"]["skills"]] == [("skill", "updated")]
        assert close(recorded["D4"]["skills"][0]["confidence"], 0.05 ** (1 / 5))
        assert recorded["D5"]["skills"] == [], "the Redis cache is no PostgreSQL decision"
        assert len(recorded["D5"]["lesson_urns"]) == 1
        # The outcome moves calibration at once: after D4, 4 of 4 is Beta(5, 1), mean 5/6; D5
        # fails, Beta(5, 2), mean 5/7.
        impact = recorded["D5"]["calibration_impact"]
        assert close(impact["previous_success_rate"], 5 / 6) and close(impact["new_success_rate"], 5 / 7)
        assert impact["sample_size"] == 5 and impact["module"] == "database"

        # With 5 database outcomes the estimate starts from the module's record, 5/7, and a CI
        # failure gives (5/7 · 2) / 3 = 10/21 = 0.4762.
        signal = await conn.ok("decision_record_signal", {"decision_id": ids["D6"], "signal_type": "ci_failed", "valence": "negative"})
        assert (signal["prior_source"], signal["prior"], signal["estimated_success"]) == ("module_calibration", 0.7143, 0.4762)

        for key in ("D6", "D7", "A1", "A2", "A3", "A4", "A5"):
            recorded[key] = await record_outcome(conn, ids[key], by_id)
        # Three failed Redis-session decisions: an antipattern, 0 of 3, whose confidence is the
        # failure rate's bound 0.05^(1/4) = 0.4729; its success bound 1 - 0.4729 = 0.527 is not
        # below one half, so its severity is medium.
        assert [(s["kind"], s["change"]) for s in recorded["A3"]["skills"]] == [("antipattern", "created")]
        assert close(recorded["A3"]["skills"][0]["confidence"], 0.05 ** (1 / 4))
        assert recorded["A5"]["decision_status"] == "completed" and recorded["A1"]["decision_status"] == "failed"

        # The subscriptions: every outcome of a module is a change to its calibration and skills
        # resources, so the 5 auth outcomes notified kenning://calibration/auth and the 7
        # database ones kenning://skills/database.
        uris = await updated_uris(conn, 12)
        assert uris.count("kenning://calibration/auth") == 5
        assert uris.count("kenning://skills/database") == 7
        await conn.session.unsubscribe_resource("kenning://calibration/auth")

        # --- calibration --------------------------------------------------------------------
        # database: confidences 0.8 0.8 0.7 0.9 0.6 0.7 0.5 (sum 5.0), scores 1 1 1 1 0 1 0 (sum 5).
        # Beta(1 + 5, 1 + 2) = Beta(6, 3): mean 6/9, variance 6·3 / (9²·10) = 1/45; mean stated
        # confidence 5/7; gap 5/7 - 2/3 = 1/21; Brier (0.04+0.04+0.09+0.01+0.36+0.09+0.25)/7 =
        # 0.88/7. The interval is Beta(6, 3)'s 2.5% and 97.5% quantiles; 5/7 lies inside.
        database = (await conn.ok("decision_calibration", {"module": "database"}))["calibration"]
        assert database["sample_size"] == 7 and (database["alpha"], database["beta"]) == (6.0, 3.0)
        assert close(database["success_rate"], 2 / 3) and close(database["variance"], 1 / 45)
        assert close(database["mean_confidence"], 5 / 7) and close(database["confidence_gap"], 1 / 21)
        assert close(database["brier_score"], 0.88 / 7)
        low, high = beta_quantile(0.025, 6, 3), beta_quantile(0.975, 6, 3)
        assert close(database["credible_interval_95"][0], low, 1e-9) and close(database["credible_interval_95"][1], high, 1e-9)
        assert database["status"] == "well_calibrated"
        # Trend: the earlier 3 outcomes (1, 1, 1) give Beta(4, 1), the recent 4 (1, 0, 1, 0)
        # Beta(3, 3). P(recent > earlier) = 1 - ∫ 4t³ I_t(3, 3) dt
        # = 1 - 4 (10·B(7, 3) + 5·B(8, 2) + 1/9) = 1 - 4 (1/36 + 5/72 + 1/9) = 5/42: stable.
        assert database["trend"] == "stable"
        assert close(database["trend_detail"]["probability_recent_better"], 5 / 42, 1e-9)
        bins = {round(row["lower"], 1): row for row in database["reliability"]}
        assert (bins[0.7]["count"], bins[0.7]["observed_success"]) == (2, 1.0)
        assert (bins[0.5]["count"], bins[0.5]["observed_success"]) == (1, 0.0)
        assert bins[0.3]["count"] == 0 and "observed_success" not in bins[0.3]

        # auth: confidences 0.9 0.85 0.8 0.7 0.9 (sum 4.15), scores 0 0 0 1 0.5 (sum 1.5), the
        # partial outcome counting half: Beta(2.5, 4.5), mean 2.5/7 = 0.3571; stated 0.83; gap
        # 0.83 - 2.5/7 = 0.4729, above the interval: overconfident. Brier 2.4225 / 5 = 0.4845.
        # Five outcomes are too few for a trend (each half needs 3).
        auth = (await conn.ok("decision_calibration", {"mode": "module", "module": "auth"}))["calibration"]
        assert (auth["alpha"], auth["beta"]) == (2.5, 4.5) and close(auth["success_rate"], 2.5 / 7)
        assert close(auth["mean_confidence"], 0.83) and close(auth["confidence_gap"], 0.83 - 2.5 / 7)
        assert close(auth["brier_score"], 0.4845)
        high = beta_quantile(0.975, 2.5, 4.5)
        assert close(auth["credible_interval_95"][1], high, 1e-6) and 0.83 > high
        assert (auth["status"], auth["trend"]) == ("overconfident", "insufficient_data")
        assert "Overconfident by 47 points" in auth["recommendation"]

        # Overall: Beta(7.5, 6.5), mean 7.5/14, stated 9.15/12 = 0.7625, gap 0.2268; 0.7625 lies
        # just inside the interval (upper end 0.7789), so overall looks fine while auth is not.
        # Trend over time: the first 6 outcomes (D1-D6: 1 1 1 1 0 1) give Beta(6, 2), the last 6
        # (D7, A1-A5: 0 0 0 0 1 0.5) Beta(2.5, 5.5); P(recent > earlier) ≈ 0.029: declining.
        every = (await conn.ok("decision_calibration", {}))["all"]
        overall = every["overall"]
        assert overall["sample_size"] == 12 and close(overall["success_rate"], 7.5 / 14)
        assert close(overall["mean_confidence"], 9.15 / 12) and overall["status"] == "well_calibrated"
        assert close(overall["credible_interval_95"][1], beta_quantile(0.975, 7.5, 6.5), 1e-6)
        assert overall["trend"] == "declining"
        assert close(overall["trend_detail"]["probability_recent_better"], probability_greater((2.5, 5.5), (6, 2)), 1e-4)
        assert every["overall_calibration"] == "good"
        assert [(m["module"], m["sample_size"], m["status"]) for m in every["modules"]] == [
            ("auth", 5, "overconfident"), ("database", 7, "well_calibrated")]

        # Guidance for a proposed 0.9 in auth: the observed 1.5/5 - 0.9 = -0.6, shrunk once by
        # n / (n + 10) = 5/15, gives an adjustment of -0.2 and a suggestion of 0.7.
        guidance = (await conn.ok("decision_calibration", {"module": "auth", "confidence": 0.9,
                                                            "statement": "Store sessions in Redis for the partner portal"}))["guidance"]
        assert guidance["status"] == "data_available" and close(guidance["shrinkage"], 1 / 3)
        assert close(guidance["adjustment"], (0.3 - 0.9) / 3) and close(guidance["suggested_confidence"], 0.9 + (0.3 - 0.9) / 3)
        assert close(guidance["confidence_gap"], 0.9 - 2.5 / 7)
        assert [(p["kind"], p["applicability"]) for p in guidance["similar_patterns"]] == [("antipattern", 0.6)]

        # --- skills ---------------------------------------------------------------------------
        skills = await conn.ok("decision_skills", {"module": "database", "decision_statement": "Use PostgreSQL for the payments service"})
        assert len(skills["skills"]) == 1 and skills["antipatterns"] == []
        skill = skills["skills"][0]
        assert skill["skill_id"] == "sk_" + ids["D1"][4:]
        assert skill["evidence"] == {"successes": 4, "total_outcomes": 4, "weighted_successes": 4.0}
        assert close(skill["confidence"], 0.05 ** (1 / 5)) and skill["success_rate"] == 1.0
        # {postgresql, payment, service} against {postgresql, order, service}: Dice 4/6.
        assert skill["applicability_score"] == 0.6667
        assert skill["decision_ids"] == [ids["D1"], ids["D2"], ids["D3"], ids["D4"]]
        stored = await conn.ok("memory_get", {"urn": skill["urn"]})
        assert stored["kind"] == "procedural" and stored["namespace"] == "patterns" and stored["status"] == "active"
        assert stored["metadata"]["total_outcomes"] == "4"
        everything = await conn.ok("decision_skills", {})
        assert (len(everything["skills"]), len(everything["antipatterns"])) == (1, 1)
        antipattern = everything["antipatterns"][0]
        assert (antipattern["module"], antipattern["severity"], antipattern["success_rate"]) == ("auth", "medium", 0.0)
        assert antipattern["recommendation"] == "Avoid: Redis restarts log every user out"
        assert (await conn.ok("decision_skills", {"min_confidence": 0.5}))["antipatterns"] == []

        # --- warnings (context at minimal depth) ----------------------------------------------
        # The antipattern (medium, 0.3), overconfidence (0.9 is above auth's interval and more
        # than 0.25 above its mean: high, 0.5) and one alternative (low, 0.1):
        # risk 1 - 0.7 · 0.5 · 0.9 = 0.685, caution.
        warned = await conn.ok("decision_context", {
            "statement": "Store sessions in Redis for the partner portal", "module": "auth", "confidence": 0.9,
            "alternatives": ["Signed cookies"], "risk_level": "high", "depth": "minimal",
        })
        assert [(w["type"], w["severity"]) for w in warned["warnings"]] == [
            ("overconfidence", "high"), ("antipattern", "medium"), ("single_alternative", "low")]
        assert (warned["risk_score"], warned["firewall_status"]) == (0.685, "caution")
        assert warned["warnings"][0]["recommendation"] == "Consider 0.70"
        assert warned["similar_decisions"] == [] and warned["applicable_skills"] == []

        # --- context --------------------------------------------------------------------------
        # database: success 2/3 (posterior; 5 of 7 observed), stated 5/7; a proposed 0.75 gives
        # gap 0.75 - 2/3 and the suggestion 0.75 + (5/7 - 0.75) · 7/17 = 0.7353, shrunk once
        # toward the observed rate. Similar: the four PostgreSQL decisions
        # tie at 4/6, newest first; the skill applies; nothing to warn about.
        context = await conn.ok("decision_context", {
            "statement": "Use PostgreSQL for the payments service", "module": "database", "confidence": 0.75,
        })
        calibration = context["calibration_context"]
        assert close(calibration["team_success_rate"], 2 / 3) and close(calibration["team_confidence"], 5 / 7)
        assert close(calibration["gap"], 0.75 - 2 / 3) and close(calibration["suggested_confidence"], 0.75 + (5 / 7 - 0.75) * 7 / 17)
        assert [d["decision_id"] for d in context["similar_decisions"]] == [ids["D4"], ids["D3"], ids["D2"]]
        assert all(d["similarity"] == 0.6667 and d["success_rate"] == 1.0 for d in context["similar_decisions"])
        assert [s["skill_id"] for s in context["applicable_skills"]] == [skill["skill_id"]]
        assert (context["warnings"], context["risk_score"], context["firewall_status"]) == ([], 0.0, "ok")
        assert context["markdown"] == (
            "## kenning decision context\n\n"
            "**Module:** database\n"
            "**Team Success Rate:** 67% (7 decisions)\n"
            "**Your Confidence:** 75% vs Team Average: 71%\n"
            "**Status:** Well calibrated (gap: 0.05)\n"
            "**Suggested Confidence:** 74%\n"
            "**Firewall:** ok (risk 0.00)\n\n"
            "### Applicable Skills:\n"
            "1. Use PostgreSQL for the orders service (55% confidence, 4 of 4 succeeded)\n\n"
            "### Similar Decisions:\n"
            "- ✅ Use PostgreSQL for the shipping service (100% success)\n"
            "- ✅ Use PostgreSQL for the inventory service (100% success)\n"
            "- ✅ Use PostgreSQL for the billing service (100% success)\n\n"
            "### Warnings:\n"
            "- none\n"
        )
        full = await conn.ok("decision_context", {"statement": "Store sessions in Redis for the partner portal",
                                                  "module": "auth", "depth": "full"})
        assert sorted(full["causal_context"]["previous_failed_decisions"]) == sorted(row[1] for row in DECISIONS[7:10])
        assert full["causal_context"]["lessons_learned"] == ["Redis restarts log every user out"]

        # --- one decision, its chain, queries -------------------------------------------------
        got = await conn.ok("decision_get", {"decision_id": ids["D1"], "analysis": True})
        assert got["status"] == "completed" and got["outcome"]["final_status"] == "success"
        assert got["linked_pr"].endswith("/pull/12") and len(got["signals"]) == 2
        chain = got["analysis"]["causal_chain"]
        assert chain["signals"] == ["ci_passed (positive)", "pr_merged (positive)"]
        assert chain["outcome"] == "success (score 1)"
        assert [s["urn"] for s in chain["skills"]] == [skill["urn"]]
        triggered = (await conn.ok("decision_get", {"decision_id": ids["A5"]}))["antipatterns_triggered"]
        assert triggered == [], "MFA has nothing to do with Redis sessions"

        page = await conn.ok("decision_query", {"module": "auth", "status": "failed"})
        assert {d["decision_id"] for d in page["decisions"]} == {ids["A1"], ids["A2"], ids["A3"]}
        # Full-text search ranks the three Redis-session decisions above the Redis cache.
        page = await conn.ok("decision_query", {"query": "Redis sessions", "limit": 3})
        assert page["total"] == 4 and page["next_cursor"]
        assert {d["decision_id"] for d in page["decisions"]} == {ids["A1"], ids["A2"], ids["A3"]}
        rest = await conn.ok("decision_query", {"query": "Redis sessions", "limit": 3, "cursor": page["next_cursor"]})
        assert [d["decision_id"] for d in rest["decisions"]] == [ids["D5"]] and "next_cursor" not in rest

        # --- resources ------------------------------------------------------------------------
        templates = {t.uri_template for t in (await conn.session.list_resource_templates()).resource_templates}
        assert {"kenning://decisions/{decision_id}", "kenning://calibration/{module}{?domain}",
                "kenning://skills/{module}{?domain}"} <= templates
        listed_resources = {str(r.uri) for r in (await conn.session.list_resources()).resources}
        assert {"kenning://calibration", "kenning://calibration/auth", "kenning://anomalies"} <= listed_resources
        listing = await conn.read_json("kenning://decisions?module=auth")
        assert listing["total"] == 5
        assert (await conn.read_json(f"kenning://decisions/{ids['D1']}"))["decision_id"] == ids["D1"]
        assert (await conn.read_json(f"kenning://decisions/{ids['D1']}/causal-chain"))["causal_chain"]["outcome"] == chain["outcome"]
        assert len(await conn.read_json(f"kenning://decisions/{ids['D2']}/similar")) == 3
        assert (await conn.read_json("kenning://calibration/auth"))["status"] == "overconfident"
        assert (await conn.read_json("kenning://calibration"))["overall"]["trend"] == "declining"
        assert (await conn.read_json("kenning://skills/database"))["skills"][0]["skill_id"] == skill["skill_id"]
        anomalies = await conn.read_json("kenning://anomalies")
        assert [(a["module"], a["kind"]) for a in anomalies["anomalies"]] == [("auth", "overconfident"), ("all", "success_rate_dropped")]
        # A memory URN is still a memory, not a decision resource.
        assert (await conn.read_json(got["urn"]))["namespace"] == "decisions"


async def record_outcome(conn: Connection, decision_id: str, by_id: dict[str, tuple]) -> dict[str, Any]:
    _, _, _, _, _, status, score, lesson = by_id[decision_id]
    arguments: dict[str, Any] = {"decision_id": decision_id, "final_status": status, "final_score": score}
    if lesson:
        arguments["lessons_learned"] = [lesson]
    result = await conn.ok("decision_record_outcome", arguments)
    assert result["final_score"] == score and result["outcome_id"] == "out_" + decision_id[4:]
    return result


async def test_seed_error_cases(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport, args=ARGS) as conn:
        valid = {"statement": "Use PostgreSQL for the orders service", "alternatives": ["MongoDB"], "confidence": 0.8,
                 "module": "database"}
        # confidence_out_of_range
        assert_field_error(await conn.refused("decision_capture", {**valid, "confidence": 1.5}), "confidence", 1.5)
        assert_field_error(await conn.refused("decision_capture", {**valid, "confidence": -0.1}), "confidence", -0.1)
        # missing_alternatives
        assert_field_error(await conn.refused("decision_capture", {**valid, "alternatives": []}), "alternatives", [])
        # Left out, they are a decision log entry's: kept, and the result says none were listed.
        without = {key: value for key, value in valid.items() if key != "alternatives"}
        assert any("no alternatives" in warning for warning in (await conn.ok("decision_capture", without))["warnings"])
        # invalid_module, with the closest valid one suggested
        error = await conn.refused("decision_capture", {**valid, "module": "databse"})
        assert_field_error(error, "module", "databse")
        assert "did you mean `database`" in error["suggestion"]
        # statement length, risk level, decision id format
        assert_field_error(await conn.refused("decision_capture", {**valid, "statement": "Use PG"}), "statement", "Use PG")
        assert_field_error(await conn.refused("decision_capture", {**valid, "risk_level": "extreme"}), "risk_level", "extreme")
        assert_field_error(await conn.refused("decision_get", {"decision_id": "dec-123"}), "decision_id", "dec-123")
        # a mistyped argument names its path
        error = await conn.refused("decision_capture", {**valid, "confidence": "high"})
        assert error["field"] == "confidence"

        decision = (await conn.ok("decision_capture", valid))["decision_id"]
        # decision_not_found: a well-formed id no domain holds
        missing = "dec_" + "0" * 26
        for tool, arguments in (
            ("decision_get", {"decision_id": missing}),
            ("decision_update", {"decision_id": missing, "status": "executed"}),
            ("decision_record_signal", {"decision_id": missing, "signal_type": "ci_passed", "valence": "positive"}),
            ("decision_record_outcome", {"decision_id": missing, "final_status": "success"}),
        ):
            body = await conn.failure(tool, arguments)
            assert (body["error"], body["decision_id"]) == ("decision_not_found", missing), body
        # Illegal transitions name the allowed ones.
        error = await conn.refused("decision_update", {"decision_id": decision, "status": "completed"})
        assert_field_error(error, "status", "completed")
        assert "executed" in error["suggestion"]
        assert_field_error(await conn.refused("decision_record_signal", {"decision_id": decision, "signal_type": "deployed",
                                                                            "valence": "positive"}), "signal_type", "deployed")
        assert_field_error(await conn.refused("decision_record_outcome", {"decision_id": decision, "final_status": "success",
                                                                             "final_score": 2}), "final_score", 2)
        await conn.ok("decision_record_outcome", {"decision_id": decision, "final_status": "success"})
        error = await conn.refused("decision_record_outcome", {"decision_id": decision, "final_status": "failure"})
        assert_field_error(error, "decision_id", decision)
        # Calibration with fewer than 3 outcomes is no error: it says insufficient_data.
        calibration = (await conn.ok("decision_calibration", {"module": "database"}))["calibration"]
        assert (calibration["status"], calibration["sample_size"]) == ("insufficient_data", 1)
        guidance = (await conn.ok("decision_calibration", {"module": "database", "confidence": 0.8}))["guidance"]
        assert guidance["status"] == "no_data" and "suggested_confidence" not in guidance
        assert_field_error(await conn.refused("decision_calibration", {"mode": "everything"}), "mode", "everything")
        assert_field_error(await conn.refused("decision_context", {"statement": "Anything at all here", "depth": "deep"}), "depth", "deep")
        # Resources: a bad address is invalid params, an unknown decision is not found.
        with pytest.raises(MCPError) as caught:
            await conn.session.read_resource("kenning://calibration/auth?page=2")
        assert caught.value.code == -32602
        with pytest.raises(MCPError) as caught:
            await conn.session.read_resource(f"kenning://decisions/{missing}")
        assert caught.value.code in (-32002, -32602) and caught.value.data["uri"].endswith(missing)
        with pytest.raises(MCPError) as caught:
            await conn.session.subscribe_resource("kenning://stats")
        assert caught.value.code == -32602

        # graph_unavailable: the store breaks under a running server (its decision table is
        # dropped); the tool ran and failed, so the answer is an isError result, not a crash.
        store = ws.repo / ".git" / "kenning" / "project.db"
        with sqlite3.connect(store) as db:
            db.execute("DROP TABLE decisions")
        body = await conn.failure("decision_capture", valid)
        assert body["error"] == "storage_failure", body
        body = await conn.failure("decision_calibration", {})
        assert body["error"] == "storage_failure", body


async def test_listen_streams_resource_updates(ws: Workspace, transport: str) -> None:
    """The 2026-07-28 way: `subscriptions/listen` after `server/discover`, not a handshake."""

    async def scenario(client: Client) -> None:
        assert client.protocol_version == "2026-07-28"
        captured = await client.call_tool("decision_capture", {
            "statement": "Store sessions in Redis for the admin app", "alternatives": ["Signed cookies"],
            "confidence": 0.8, "module": "auth",
        })
        decision = captured.structured_content["decision_id"]
        # kenning://stats sends no updates, so the server leaves it out of what it honours.
        async with client.listen(resource_subscriptions=["kenning://calibration/auth", "kenning://stats"]) as subscription:
            assert subscription.honored.resource_subscriptions == ["kenning://calibration/auth"]
            await client.call_tool("decision_record_outcome", {"decision_id": decision, "final_status": "failure"})
            updated = []
            with anyio.fail_after(10):
                async for event in subscription:
                    updated.append(event.uri)
                    break
            assert updated == ["kenning://calibration/auth"], "the outcome sends one update of the calibration"

    if transport == "stdio":
        params = StdioServerParameters(command=ws.bin, args=["serve", *ARGS], env=ws.env(), cwd=str(ws.repo))
        async with Client(params, mode="auto") as client:
            await scenario(client)
    else:
        with http_server(ws, ARGS) as server:
            async with Client(server.url, mode="auto") as client:
                await scenario(client)


async def test_read_only_keeps_the_decision_reads(ws: Workspace) -> None:
    async with connect(ws, "stdio", args=(*ARGS, "--read-only")) as conn:
        names = {tool.name for tool in (await conn.session.list_tools()).tools}
        assert names & DECISION_TOOLS == READ_ONLY_DECISION_TOOLS


async def test_default_server_has_no_decision_tools_or_resources(ws: Workspace) -> None:
    async with connect(ws, "stdio") as conn:
        names = {tool.name for tool in (await conn.session.list_tools()).tools}
        assert not names & DECISION_TOOLS
        with pytest.raises(MCPError):
            await conn.session.subscribe_resource("kenning://calibration")


def test_cli_records_decisions_and_draws_calibration(ws: Workspace) -> None:
    def kenning(*args: str) -> dict[str, Any]:
        result = ws.run("--json", *args)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    ids = []
    for statement, confidence, status in (("Use PostgreSQL for the orders service", "0.9", "success"),
                                          ("Use PostgreSQL for the billing service", "0.9", "failure"),
                                          ("Use PostgreSQL for the search service", "0.9", "failure")):
        decision = kenning("decisions", "capture", statement, "--module", "database", "--confidence", confidence, "-a", "MongoDB")
        ids.append(decision["decision_id"])
        kenning("decisions", "outcome", decision["decision_id"], status, "--lesson", f"{status} lesson")
    charts = ws.root / "charts"
    run = kenning("calibration", "--out", str(charts))
    overall = run["calibrations"][0]
    # 1 of 3 at a stated 0.9: Beta(2, 3), mean 0.4; 0.9 lies above the interval's top end (the
    # reference's 97.5% quantile of Beta(2, 3)): overconfident.
    assert (overall["module"], overall["sample_size"], overall["status"]) == ("all", 3, "overconfident")
    assert close(overall["mean_success"], 0.4) and close(overall["credible_interval_95"][1], beta_quantile(0.975, 2, 3))
    assert "<svg" in (charts / "kenning-calibration.svg").read_text()
    assert (charts / "kenning-calibration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    human = ws.run("calibration", "--module", "database", "--out", str(charts))
    assert human.returncode == 0, human.stderr
    assert "database" in human.stdout and "overconfident" in human.stdout and "kenning-calibration-database.png" in human.stdout
    failure = ws.run("decisions", "capture", "Use PostgreSQL for the refunds service", "--module", "databse", "--confidence", "0.5", "-a", "x")
    assert failure.returncode != 0 and "did you mean `database`" in failure.stderr and failure.stdout == ""
