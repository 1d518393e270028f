"""`make bench` part `remedies`: the remediation search of the one-rack example against one evaluation of it.

Times ``search_remedies`` of examples/fail-70b-ddp-one-rack.json as `quotecheck remedies` runs it (its own
evaluation, the layout search and every candidate's full evaluation, within the policy's budget) against one
full evaluation of the same submission, medians of several runs; issue 17's target is at most 50 evaluations.
Both are timed in CPU seconds of this process (``time.process_time``): the two are pure Python in one thread,
and on a machine other work shares, wall time would charge either of them for the others' load.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from rules.advice.remedies import search_remedies
from rules.evaluate import default_engine, evaluate

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "fail-70b-ddp-one-rack.json"
TARGET_EVALUATIONS = 50.0  # issue 17: the remediation search in at most 50× one evaluation's time


def _median_s(run: Callable[[], object], repeats: int) -> float:
    """Returns the median CPU seconds of ``repeats`` calls of ``run`` after one warm-up call."""
    run()
    samples = []
    for _ in range(repeats):
        start = time.process_time()
        run()
        samples.append(time.process_time() - start)
    return statistics.median(samples)


def bench_remedies() -> bool:
    """Prints the search's time, evaluations and remedies against one evaluation; True when within the target."""
    submission = json.loads(EXAMPLE.read_text())
    engine = default_engine()
    evaluation_s = _median_s(lambda: evaluate(submission, engine=engine), 30)
    search_s = _median_s(lambda: search_remedies(submission), 5)
    result = search_remedies(submission)
    ratio = search_s / evaluation_s
    best = result["remedies"][0] if result["remedies"] else None
    print(f"{EXAMPLE.name}: {len(result['problems'])} checks fail or warn; {result['found']} remedies in "
          f"{result['evaluations']} evaluations (budget {result['max_evaluations']})"
          + (f"; best: {len(best['changes'])} changes, {best['verdict']}" if best else ""))
    print(f"search: median {search_s * 1000:.0f} ms CPU; one evaluation: median {evaluation_s * 1000:.2f} ms CPU; "
          f"{ratio:.1f} evaluations (target ≤ {TARGET_EVALUATIONS:g}, ratio {ratio / TARGET_EVALUATIONS:.2f})")
    return ratio <= TARGET_EVALUATIONS
