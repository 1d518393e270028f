"""JSON Pointers of the submission's members (schemas/submission.schema.json): where the job parser reads them, and
where the evidence of a check names them."""

from dataclasses import fields
from functools import cache

from rules.job.cluster import Cluster
from rules.job.measured import Measurements
from rules.job.workload import Serving, Training

TRAINING = "/workload/training"
TRAINING_MODEL = f"{TRAINING}/model"
ARCHITECTURE = f"{TRAINING_MODEL}/architecture"
PARALLELISM = f"{TRAINING}/parallelism"
THROUGHPUT = f"{TRAINING}/throughput"
CHECKPOINT = f"{TRAINING}/checkpoint"
RELIABILITY = f"{TRAINING}/reliability"
DATALOADER = f"{TRAINING}/dataloader"
TRAINING_DATA = f"{TRAINING}/data"
SHARED_CLUSTER_UTILISATION = f"{TRAINING}/shared_cluster_utilisation"
MEASURED_QUEUE_WAIT = f"{TRAINING}/measured_queue_wait_days"

INFERENCE = "/workload/inference"
INFERENCE_MODEL = f"{INFERENCE}/model"
INFERENCE_ARCHITECTURE = f"{INFERENCE_MODEL}/architecture"
SLO = f"{INFERENCE}/slo"

NODE_GROUPS = "/quote/node_groups"
LINE_ITEMS = "/quote/line_items"
FABRIC = "/quote/fabric"
STORAGE = "/quote/storage"
RACKS = "/quote/racks"
CURRENCY = "/quote/currency"

PEAK_MEMORY_RUNS = "/measurements/peak_memory"
SCALING_RUNS = "/measurements/scaling"
NCCL_TESTS_RUNS = "/measurements/nccl_tests"
MEASURED_READ = "/measurements/storage/read_gbs"
MEASURED_WRITE = "/measurements/storage/write_gbs"
RESTORE_TEST = "/measurements/restore_test"
MEASURED_POWER = "/measurements/power/sustained_w_per_node"
SERVING_LATENCY_RUNS = "/measurements/serving_latency"

QUOTE = "/quote"
MEASUREMENTS = "/measurements"

# Where each section of the job (rules/job/spec.py) sits in the submission.
SECTIONS = {"training": TRAINING, "serving": INFERENCE, "cluster": QUOTE, "measurements": MEASUREMENTS}


@cache
def field_pointer(path: str) -> str:
    """Returns the JSON Pointer of the job's field at dotted ``path`` (``training.model.parameters``,
    ``cluster.node_groups.0.gpu.count``): the submission member behind it, for evidence and for the record's pages.

    KeyError names a path that is not a field of the job.
    """
    head, *rest = path.split(".")
    section: type | None = {"training": Training, "serving": Serving, "cluster": Cluster,
                            "measurements": Measurements}.get(head)
    if section is None:
        raise KeyError(path)
    pointer = SECTIONS[head]
    parts = iter(rest)
    for name in parts:
        declared = {f.name: f.metadata for f in fields(section)}.get(name)
        if declared is None or section is None:
            raise KeyError(path)
        pointer += f"/{declared['at']}"
        section = declared["section"]
        if declared["each"] is not None:
            index = next(parts, None)
            if index is None:
                break
            if not index.isdigit():
                raise KeyError(path)
            pointer += f"/{index}"
            section = declared["each"]
    return pointer
