"""`make bench`: evaluation latency per example, and resident memory over 10,000 evaluations.

Prints figures and their ratio to the target; exits non-zero only when a target is missed, so the
targets are checked here and not by timed assertions inside the test suite.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from rules.evaluate import default_engine, evaluate

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.json"))

LATENCY_TARGET_MS = 1000.0  # DESIGN.md: every check with its numbers "within a second"
RSS_GROWTH_TARGET = 0.10  # issue [1]: 10,000 evaluations leave resident memory flat within 10 %
EVALUATIONS = 10_000


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def bench_latency() -> list[bool]:
    verdicts = []
    print(f"{'example':45} {'mean ms':>9} {'p95 ms':>9} {'target ms':>10} {'ratio':>7}")
    for path in EXAMPLES:
        submission = json.loads(path.read_text())
        evaluate(submission)
        samples = []
        for _ in range(50):
            start = time.perf_counter()
            evaluate(submission)
            samples.append((time.perf_counter() - start) * 1000)
        p95 = statistics.quantiles(samples, n=20)[18]
        print(f"{path.name:45} {statistics.mean(samples):9.2f} {p95:9.2f} {LATENCY_TARGET_MS:10.0f} "
              f"{p95 / LATENCY_TARGET_MS:7.3f}")
        verdicts.append(p95 <= LATENCY_TARGET_MS)
    return verdicts


def bench_memory() -> bool:
    submission = json.loads(EXAMPLES[0].read_text())
    engine = default_engine()
    for _ in range(500):
        evaluate(submission, engine=engine)
    warm = rss_kib()
    start = time.perf_counter()
    for i in range(1, EVALUATIONS + 1):
        evaluate(submission, engine=engine)
        if i % 2500 == 0:
            print(f"  after {i:6d} evaluations: RSS {rss_kib() / 1024:7.1f} MiB")
    elapsed = time.perf_counter() - start
    after = rss_kib()
    growth = after / warm - 1
    print(f"{EVALUATIONS} evaluations of {EXAMPLES[0].name} in {elapsed:.1f} s "
          f"({elapsed / EVALUATIONS * 1000:.2f} ms each)")
    print(f"RSS after warm-up {warm / 1024:.1f} MiB, after {EVALUATIONS}: {after / 1024:.1f} MiB, growth "
          f"{growth:+.2%} (target ≤ {RSS_GROWTH_TARGET:.0%}, ratio {max(growth, 0) / RSS_GROWTH_TARGET:.2f})")
    return growth <= RSS_GROWTH_TARGET


def main() -> int:
    print("== evaluation latency ==")
    ok = all(bench_latency())
    print("\n== resident memory over repeated evaluations ==")
    ok = bench_memory() and ok
    print("\nall targets met" if ok else "\nTARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
