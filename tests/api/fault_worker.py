"""`celery` for the fault tests: the same worker, with each step of a comparison taking QC_FAULT_STEP_DELAY_S longer.

Run as ``python tests/api/fault_worker.py -A workers.worker worker …``. The delay is added in the main
process before the pool forks, so every child has it; a test then has time to kill a worker mid-task.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[2]))

import workers.tasks  # noqa: E402

STEP_DELAY_S = float(os.environ.get("QC_FAULT_STEP_DELAY_S") or 0)


def _slowed(compare: Any) -> Any:
    def slow(submission_json: str, variants: list[dict[str, Any]], policy: Any = None,
             on_progress: Any = None) -> dict[str, Any]:
        def step(done: int, total: int) -> None:
            time.sleep(STEP_DELAY_S)
            if on_progress is not None:
                on_progress(done, total)

        return compare(submission_json, variants, policy, on_progress=step)

    return slow


if __name__ == "__main__":
    if STEP_DELAY_S:
        workers.tasks.compare_configurations = _slowed(workers.tasks.compare_configurations)
    from celery.__main__ import main

    sys.argv = ["celery", *sys.argv[1:]]
    sys.exit(main())
