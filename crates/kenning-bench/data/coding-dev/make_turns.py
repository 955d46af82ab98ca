#!/usr/bin/env python3
"""Builds turns.jsonl of the coding-agent retrieval set from two git repositories.

Usage: make_turns.py RIPGREP_GIT_DIR JJ_GIT_DIR > turns.jsonl

Each turn is one memory an agent working on the project could have kept: a commit's subject and
body (speaker: the author; session: the ISO week of the commit) or a changelog entry (speaker:
`changelog`; session: the release). Dates are rendered as LoCoMo session dates in UTC.
"""
import json
import re
import subprocess
import sys
from datetime import datetime, timezone

MAX_CHARS = 2500
RELEASE_BUMP = re.compile(r"^(\S+-)?\d+\.\d+\.\d+$")
# The conversation and the `git log` arguments of each source; the last argument is the commit
# whose CHANGELOG.md is read.
SOURCES = [
    ("ripgrep", ["--since=2019-01-01T00:00:00Z", "--until=2026-08-05T00:00:00Z", "3fce3b5bb0236da2df6d99672afb8a719642eca7"]),
    ("jj", ["--since=2024-01-04T00:00:00Z", "--until=2024-04-04T00:00:00Z", "9d905d5432869c7aa9539e6e5c7fece5842bed37"]),
]


def locomo_date(moment):
    hour = moment.strftime("%I").lstrip("0")
    return f"{hour}:{moment.strftime('%M')} {moment.strftime('%p').lower()} on {moment.day} {moment.strftime('%B')}, {moment.year}"


def trim(text):
    """Shortens a long message: first its fenced blocks (benchmark output, shell sessions) give
    way to a marker, then it is cut at the last paragraph break before MAX_CHARS."""
    text = text.strip()
    if len(text) <= MAX_CHARS:
        return text
    text = re.sub(r"```.*?```", "[output elided]", text, flags=re.S)
    if len(text) <= MAX_CHARS:
        return text
    cut = text.rfind("\n\n", 0, MAX_CHARS)
    if cut < MAX_CHARS * 2 // 3:
        cut = text.rfind("\n", 0, MAX_CHARS)
    if cut < MAX_CHARS * 2 // 3:
        cut = text.rfind(" ", 0, MAX_CHARS)
    return text[:cut].rstrip() + " [...]"


def commits(git_dir, args):
    out = subprocess.run(
        ["git", "--git-dir", git_dir, "log", "--no-merges", "--reverse", "--format=%x00%H%x01%an%x01%ct%x01%B", *args],
        check=True, capture_output=True, text=True,
    ).stdout
    for record in out.split("\0")[1:]:
        sha, author, stamp, message = record.split("\x01", 3)
        if "[bot]" in author:
            continue
        lines = [line for line in message.strip().splitlines() if not line.startswith(("Signed-off-by:", "Change-Id:"))]
        message = "\n".join(lines).strip()
        if RELEASE_BUMP.match(message):
            continue
        yield sha, author, datetime.fromtimestamp(int(stamp), timezone.utc), trim(message)


def ripgrep_changelog(text):
    """Yields (release, date, section, entry) from ripgrep's CHANGELOG for releases since 2019."""
    releases = re.split(r"\n(?=\d+\.\d+\.\d+ \(\d{4}-\d\d-\d\d\)\n=+\n)", text)
    for block in releases:
        head = re.match(r"(\d+\.\d+\.\d+) \((\d{4}-\d\d-\d\d)\)\n=+\n", block)
        if not head:
            continue
        release, date = head.group(1), head.group(2)
        if date < "2019-01-01":
            continue
        yield from entries(release, date, block[head.end():])


def jj_changelog(text):
    """Yields (release, date, section, entry) from jj's CHANGELOG for the releases of the commit window."""
    releases = re.split(r"\n(?=## \[)", text)
    for block in releases:
        head = re.match(r"## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d\d-\d\d)\n", block)
        if not head or not ("2024-01-04" <= head.group(2) <= "2024-04-03"):
            continue
        yield from entries(head.group(1), head.group(2), block[head.end():])


def entries(release, date, body):
    """A release's prose paragraphs and top-level bullets, each with its section heading."""
    section = ""
    current = []

    def flush():
        if current:
            entry = " ".join(" ".join(current).split())
            current.clear()
            # A bare lead-in such as "**BREAKING CHANGES**:" says nothing by itself.
            if not entry.endswith(":"):
                return entry
        return None

    for line in body.splitlines():
        stripped = line.strip()
        heading = re.match(r"^(###\s+(.*)|([A-Z][A-Za-z ]+):)$", stripped)
        if heading:
            entry = flush()
            if entry:
                yield release, date, section, entry
            section = (heading.group(2) or heading.group(3)).strip()
            continue
        if line.startswith("* ") or not stripped:
            entry = flush()
            if entry:
                yield release, date, section, entry
            if line.startswith("* "):
                current.append(stripped[2:])
            continue
        current.append(stripped)
    entry = flush()
    if entry:
        yield release, date, section, entry


def main():
    ripgrep_dir, jj_dir = sys.argv[1], sys.argv[2]
    dirs = {"ripgrep": ripgrep_dir, "jj": jj_dir}
    for conv, args in SOURCES:
        git_dir = dirs[conv]
        turns = []
        for sha, author, moment, message in commits(git_dir, args):
            year, week, _ = moment.isocalendar()
            turns.append((moment, f"{year}-W{week:02d}", author, message))
        changelog = subprocess.run(["git", "--git-dir", git_dir, "show", f"{args[-1]}:CHANGELOG.md"],
                                   check=True, capture_output=True, text=True).stdout
        parse = ripgrep_changelog if conv == "ripgrep" else jj_changelog
        for release, date, section, entry in parse(changelog):
            moment = datetime.strptime(date + " 12:00", "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc)
            text = f"{release} {section.lower()}: {entry}" if section else f"{release}: {entry}"
            turns.append((moment, release, "changelog", trim(text)))
        turns.sort(key=lambda turn: turn[0])
        seen = set()
        counters = {}
        for moment, session, speaker, text in turns:
            if (speaker, text) in seen:
                continue
            seen.add((speaker, text))
            counters[session] = counters.get(session, 0) + 1
            print(json.dumps({
                "id": f"{conv}:{session}:{counters[session]}",
                "conv": conv,
                "session": session,
                "date_time": locomo_date(moment),
                "speaker": speaker,
                "text": text,
            }, ensure_ascii=False))


if __name__ == "__main__":
    main()
