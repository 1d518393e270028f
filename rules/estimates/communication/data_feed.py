"""Input pipeline: storage read bandwidth and CPU cores needed to keep the GPUs fed."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rules.estimates._args import (
    require_non_negative,
    require_non_negative_int,
    require_positive,
    require_positive_int,
)


def cluster_tokens_per_s(tokens_per_s_per_gpu: float, gpus: int) -> float:
    """Return the cluster's training throughput in tokens/s: tokens/s per GPU × GPUs.

    Source: step 2 of the capacity-planning guide
    ("GPU Capacity Planning for AI Training & Serving"): "Multiply by number of
    GPUs to get total throughput". Use the per-GPU rate at this GPU count (measured scaling included).
    """
    require_positive("tokens_per_s_per_gpu", tokens_per_s_per_gpu)
    require_positive_int("gpus", gpus)
    return tokens_per_s_per_gpu * gpus


def required_read_gbs(cluster_tokens_per_s: float, bytes_per_token: float) -> float:
    """Return the storage read bandwidth in GB/s (1e9 B/s) that training consumes: tokens/s × bytes/token.

    ``bytes_per_token`` is what is read per training token: 2 for pre-tokenised uint16 ids (vocabulary
    < 65,536, e.g. Megatron-LM ``.bin`` indexed datasets), 4 for int32 ids, about 4 for raw English
    UTF-8 text (OpenAI's tokenizer guidance: one token ≈ 4 characters), more for compressed multimodal
    samples. Source: the acceptance plan's "Feed the GPUs consistently" (in
    "AI Training Server Sizing: Memory, GPU Count and Checkpoint Plan").
    This is the steady-state average; epochs re-read, shuffles and cold
    caches can need more.
    """
    require_positive("cluster_tokens_per_s", cluster_tokens_per_s)
    require_positive("bytes_per_token", bytes_per_token)
    return cluster_tokens_per_s * bytes_per_token / 1e9


@dataclass(frozen=True)
class DecodeCores:
    """CPU cores needed to decode / tokenise / augment the input stream."""

    cluster_cores: float  # cluster tokens/s ÷ tokens/s one core sustains
    cores_per_node: int  # ⌈cluster_cores / nodes⌉


def decode_cores_needed(cluster_tokens_per_s: float, tokens_per_s_per_core: float, nodes: int) -> DecodeCores:
    """Return the CPU cores the input pipeline needs: cluster tokens/s ÷ tokens/s per core, and per node.

    ``tokens_per_s_per_core`` is a measured (or assumed) rate of one dataloader core for this data
    path (read + decode + tokenise/augment + collate). Source: the acceptance plan's "Feed the GPUs
    consistently" (the acceptance plan:
    "measure accelerator idle time and dataloader
    queue behavior"); the per-node figure assumes an even split across nodes.
    """
    require_positive("cluster_tokens_per_s", cluster_tokens_per_s)
    require_positive("tokens_per_s_per_core", tokens_per_s_per_core)
    require_positive_int("nodes", nodes)
    cluster = cluster_tokens_per_s / tokens_per_s_per_core
    return DecodeCores(cluster, max(1, math.ceil(round(cluster / nodes, 9))))


@dataclass(frozen=True)
class CoreBudget:
    """A node's CPU cores after the dataloader workers and reserved processes."""

    cores_per_node: int
    dataloader_worker_cores: float  # GPUs × workers per GPU × cores per worker
    reserved_cores: float  # trainer processes, OS, NIC/IRQ handling, …
    cores_left: float  # max(0, cores − workers − reserved)
    shortfall_cores: float  # max(0, workers + reserved − cores): oversubscription


def cores_left_after_workers(
    cores_per_node: int,
    gpus_per_node: int,
    workers_per_gpu: int,
    *,
    reserved_cores: float = 0.0,
    cores_per_worker: float = 1.0,
) -> CoreBudget:
    """Return the node's cores left after dataloader workers (and reserved cores), or the shortfall.

    PyTorch ``DataLoader(num_workers=k)`` runs k worker processes per training process, i.e. per GPU
    (torch.utils.data docs, "Multi-process data loading"), each busy up to one core when the input is
    the bottleneck. ``reserved_cores`` covers the training processes themselves (one per GPU is a
    common floor), the OS and interrupt handling. Count physical or logical cores consistently with
    ``tokens_per_s_per_core`` in :func:`decode_cores_needed`.
    """
    require_positive_int("cores_per_node", cores_per_node)
    require_positive_int("gpus_per_node", gpus_per_node)
    require_non_negative_int("workers_per_gpu", workers_per_gpu)
    require_non_negative("reserved_cores", reserved_cores)
    require_positive("cores_per_worker", cores_per_worker)
    workers = gpus_per_node * workers_per_gpu * cores_per_worker
    balance = cores_per_node - workers - reserved_cores
    return CoreBudget(cores_per_node, workers, reserved_cores, max(0.0, balance), max(0.0, -balance))


@dataclass(frozen=True)
class DecodeCapacity:
    """Cores per node that can decode input: the dataloader workers, capped by the cores not reserved."""

    worker_processes: float  # dataloader workers per node (each busy up to one core)
    unreserved_cores: float  # cores left once the training processes, NCCL and the OS have theirs
    capacity_cores: float  # min of the two: decoding runs inside the workers, on the unreserved cores
    oversubscribed_cores: float  # workers beyond the unreserved cores (they share cores; no extra throughput)


def decode_capacity_cores(cores_per_node: int, gpus_per_node: int, workers_per_gpu: int, *,
                          reserved_cores: float = 0.0) -> DecodeCapacity:
    """Return how many cores per node can decode training input: min(worker processes, unreserved cores).

    With PyTorch's DataLoader the decoding runs inside the ``num_workers`` worker processes of each
    training process (torch.utils.data docs, "Multi-process data loading"): a node decodes with at most one
    core per worker, and never with more cores than remain after ``reserved_cores``. Workers beyond the
    unreserved cores time-share them and add nothing.
    """
    require_positive_int("cores_per_node", cores_per_node)
    require_positive_int("gpus_per_node", gpus_per_node)
    require_non_negative_int("workers_per_gpu", workers_per_gpu)
    require_non_negative("reserved_cores", reserved_cores)
    workers = float(gpus_per_node * workers_per_gpu)
    unreserved = max(0.0, cores_per_node - reserved_cores)
    return DecodeCapacity(workers, unreserved, min(workers, unreserved), max(0.0, workers - unreserved))
