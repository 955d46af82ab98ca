"""Install-to-first-recall time of each channel, from the files `cargo xtask dist` wrote: the
seconds from a fresh folder to the first recall answered through the installed command (install
offline, start `kenning serve` over stdio, capture, recall). Prints each run and the median.

    cargo xtask dist --out target/dist
    python3 tests/packaging/install_timing.py target/dist [--runs 5]

It needs the Python MCP SDK (tests/e2e/requirements.txt), pip and npm, as the tests do.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from channels import CHANNELS, INSTALLERS, capture_then_recall, workspace_for  # noqa: E402


def install_then_recall(channel: str, dist: Path) -> float:
    with tempfile.TemporaryDirectory(prefix=f"kenning-{channel}-") as folder:
        root = Path(folder)
        start = time.perf_counter()
        command = INSTALLERS[channel](dist, root)
        ws = workspace_for(channel, command, root)
        asyncio.run(capture_then_recall(ws, command))
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dist", type=Path, help="the folder cargo xtask dist wrote")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for channel in CHANNELS:
        times = [install_then_recall(channel, args.dist.resolve()) for _ in range(args.runs)]
        runs = " ".join(f"{seconds:.2f}" for seconds in times)
        print(f"{channel:8} median {statistics.median(times):6.2f} s   runs: {runs}")


if __name__ == "__main__":
    main()
