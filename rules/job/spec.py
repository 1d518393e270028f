"""The job a submission describes, typed: what is trained and served, how, on which hardware, what was measured.

Each leaf is a ``Given`` (value, JSON Pointer, source); sections mirror schemas/submission.schema.json, whose
member names the field metadata holds (``at``), so that the parser (rules/job/parse.py) is the one place that
walks the submission and applies defaults (``default``: a value, or a function of the section's other values).
Sections by concern: workload.py (training, serving), cluster.py (the quote), measured.py (measurements); the
estimators' vocabulary (ModelShape, Layout, GpuSpec, NodeSpec) is built from these by the facts.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.job.cluster import Cluster
from rules.job.measured import Measurements
from rules.job.workload import Serving, Training


@dataclass(frozen=True)
class Job:
    """The whole job of one submission: training and serving workloads, the quoted cluster, the measurements.

    Every section is there whether or not the submission holds it (its values then absent), so that a check can
    name what is missing; ``trains`` and ``serves`` say whether it holds each workload.
    """

    training: Training
    serving: Serving
    cluster: Cluster
    measurements: Measurements
    trains: bool
    serves: bool
