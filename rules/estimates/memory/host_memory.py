"""Host (CPU) RAM a training node needs, term by term.

Sizing host RAM from its consumers rather than from "host RAM ≥ 2× GPU memory": that ratio is a rule
of thumb (NVIDIA's DGX H200 ships 2 TB for 1.13 TB of GPU memory, 1.8×), so a check may warn on it but
should decide on the sum computed here. All sizes are bytes; GiB = 2³⁰ bytes when a caller converts.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.estimates._args import (
    require_non_negative,
    require_non_negative_int,
    require_positive,
    require_positive_int,
)
from rules.estimates.model.layout import Layout
from rules.estimates.ratios import spare_fraction
from rules.units import GIB


@dataclass(frozen=True)
class HostMemory:
    """Host RAM needed on one node, by consumer (bytes)."""

    dataloader_workers_bytes: float  # GPUs × workers per GPU × worker RSS
    trainer_processes_bytes: float  # GPUs × RSS of each training (rank) process
    pinned_buffers_bytes: float  # GPUs × page-locked staging buffers per GPU
    offload_bytes: float  # model state on the host with its buffers (ZeRO-Offload, ZeRO-Infinity, FSDP CPUOffload)
    checkpoint_staging_bytes: float  # CPU copy of this node's checkpoint shard (asynchronous saves)
    os_reserve_bytes: float  # OS, page cache floor, daemons, margin for a process restart
    total_bytes: float

    @property
    def total_gib(self) -> float:
        """Total in GiB (2³⁰ bytes)."""
        return self.total_bytes / 2**30


def host_memory_per_node(
    gpus_per_node: int,
    workers_per_gpu: int,
    worker_rss_bytes: float,
    pinned_bytes_per_gpu: float,
    os_reserve_bytes: float,
    *,
    trainer_rss_bytes_per_gpu: float = 0.0,
    offload_bytes_per_node: float = 0.0,
    checkpoint_staging_bytes_per_node: float = 0.0,
) -> HostMemory:
    """Return the host RAM one node needs: workers + trainers + pinned buffers + offload + staging + OS.

    Terms:
    * Dataloader workers: PyTorch ``DataLoader(num_workers=k)`` starts k worker processes per training
      process (one per GPU), each with its own copy of the dataset object and Python heap
      (torch.utils.data docs, "Multi-process data loading"; copy-on-read of Python objects makes
      shared pages private over time, so use the measured RSS at steady state).
    * Trainer processes: each rank's own RSS (CUDA context, framework, model-loading copies); 0 if
      not measured.
    * Pinned buffers: ``pin_memory=True`` copies each batch into page-locked host memory before the
      host-to-device copy (torch.utils.data docs, "Memory Pinning"); with prefetching that is
      ``prefetch_factor × num_workers`` batches per GPU (see :func:`dataloader_prefetch_bytes_per_gpu`),
      plus NCCL/GPUDirect staging. Page-locked memory cannot be swapped.
    * Offload: model states moved to CPU with their pinned buffers and staging copies (ZeRO-Offload, Ren
      et al. 2021, arXiv 2101.06840; rules/estimates/memory/offload.py, :func:`offload_bytes_per_node`).
    * Checkpoint staging: asynchronous checkpointing first copies the state dict to CPU buffers,
      raising CPU memory by the checkpoint size per rank × ranks (PyTorch "Asynchronous Saving with
      Distributed Checkpoint (DCP)" recipe), i.e. a copy of this node's shard of the checkpoint.
    * OS reserve: operating system, monitoring, file-system clients and room to restart a process.
    """
    require_positive_int("gpus_per_node", gpus_per_node)
    require_non_negative_int("workers_per_gpu", workers_per_gpu)
    require_non_negative("worker_rss_bytes", worker_rss_bytes)
    require_non_negative("pinned_bytes_per_gpu", pinned_bytes_per_gpu)
    require_non_negative("os_reserve_bytes", os_reserve_bytes)
    require_non_negative("trainer_rss_bytes_per_gpu", trainer_rss_bytes_per_gpu)
    require_non_negative("offload_bytes_per_node", offload_bytes_per_node)
    require_non_negative("checkpoint_staging_bytes_per_node", checkpoint_staging_bytes_per_node)
    workers = gpus_per_node * workers_per_gpu * worker_rss_bytes
    trainers = gpus_per_node * trainer_rss_bytes_per_gpu
    pinned = gpus_per_node * pinned_bytes_per_gpu
    total = workers + trainers + pinned + offload_bytes_per_node + checkpoint_staging_bytes_per_node
    total += os_reserve_bytes
    return HostMemory(
        dataloader_workers_bytes=workers,
        trainer_processes_bytes=trainers,
        pinned_buffers_bytes=pinned,
        offload_bytes=offload_bytes_per_node,
        checkpoint_staging_bytes=checkpoint_staging_bytes_per_node,
        os_reserve_bytes=os_reserve_bytes,
        total_bytes=total,
    )


def dataloader_prefetch_bytes_per_gpu(
    batch_bytes: float, workers_per_gpu: int, prefetch_factor: int = 2
) -> float:
    """Return the host bytes of batches in flight per GPU: workers × prefetch_factor × batch bytes.

    Source: torch.utils.data.DataLoader docs: ``prefetch_factor`` is the "number of batches loaded in
    advance by each worker. 2 means there will be a total of 2 * num_workers batches prefetched across
    all workers" (default 2 when num_workers > 0). With ``pin_memory=True`` each is also copied to
    page-locked memory, so count this once for the worker-side copies and once for pinned buffers.
    """
    require_non_negative("batch_bytes", batch_bytes)
    require_non_negative_int("workers_per_gpu", workers_per_gpu)
    require_positive_int("prefetch_factor", prefetch_factor)
    return batch_bytes * workers_per_gpu * prefetch_factor


def offload_bytes_per_node(
    parameters: float,
    gpus_per_node: int,
    model_state_shards: int,
    bytes_per_parameter: float = 14.0,
) -> float:
    """Return the host bytes one node holds for offloaded model states: Ψ × bytes/param × GPUs / shards.

    ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840) keeps the fp16 parameters on the GPU and
    offloads the fp16 gradients (2 bytes/param) and the fp32 master parameters, momentum and variance
    (12), so 14 bytes/param by default; an implementation that keeps the CPU gradient partition in fp32
    needs 16. The offloaded states are partitioned across ``model_state_shards`` GPUs (the
    data-parallel degree with ZeRO-2, times tensor × pipeline degrees when those also split the
    model), of which ``gpus_per_node`` sit on this node.
    """
    require_positive("parameters", parameters)
    require_positive_int("gpus_per_node", gpus_per_node)
    require_positive_int("model_state_shards", model_state_shards)
    require_positive("bytes_per_parameter", bytes_per_parameter)
    return parameters * bytes_per_parameter * min(gpus_per_node, model_state_shards) / model_state_shards


def checkpoint_staging_bytes_per_node(checkpoint_bytes: float, nodes: int) -> float:
    """Return the host bytes a node needs to stage its shard of a checkpoint: checkpoint bytes / nodes.

    Assumes an evenly sharded checkpoint (FSDP / ZeRO-3 / DCP with every rank saving its shard); for
    a rank-0 ``torch.save`` of a replicated model pass ``nodes=1`` for that node. Source: PyTorch
    "Asynchronous Saving with Distributed Checkpoint (DCP)" recipe (CPU memory rises by checkpoint
    size per rank × ranks).
    """
    require_positive("checkpoint_bytes", checkpoint_bytes)
    require_positive_int("nodes", nodes)
    return checkpoint_bytes / nodes


def host_to_gpu_memory_ratio(host_memory_bytes: float, gpu_memory_bytes_per_node: float) -> float:
    """Return host RAM / total GPU memory of a node (the "≥ 2×" rule of thumb is a warning, not a limit).

    Source: NVIDIA DGX H200 (2 TB host RAM for 8 × 141 GB = 1.13 TB of GPU memory: 1.8×).
    """
    require_positive("host_memory_bytes", host_memory_bytes)
    require_positive("gpu_memory_bytes_per_node", gpu_memory_bytes_per_node)
    return host_memory_bytes / gpu_memory_bytes_per_node


@dataclass(frozen=True)
class Dataloader:
    """The input pipeline's processes per GPU, as measured or assumed."""

    workers_per_gpu: int  # DataLoader num_workers per training process
    worker_rss_gib: float  # resident memory of one worker at steady state
    pinned_gib_per_gpu: float  # page-locked staging buffers per GPU


@dataclass(frozen=True)
class NodeHostRam:
    """A training node's host RAM need against what it has, and against its GPU memory."""

    need: HostMemory
    gpu_memory_per_node_gib: float
    host_to_gpu_memory_ratio: float
    spare_fraction: float  # of the host RAM after the need


def training_node_host_ram(layout: Layout, host_memory_gib: float, gpu_memory_gib: float, dataloader: Dataloader,
                           os_reserve_gib: float, model_state_bytes_per_node: float,
                           checkpoint_bytes: float) -> NodeHostRam:
    """Returns one node's host RAM need (:func:`host_memory_per_node`) for a job on ``layout``.

    The job's GPUs on the node each run the dataloader's workers and pinned buffers; the node's host holds
    ``model_state_bytes_per_node`` of model state (its ranks' offloaded shards and their buffers,
    :func:`rules.estimates.memory.training_state.training_model_state`); asynchronous checkpointing stages the
    node's share of the checkpoint
    (:func:`checkpoint_staging_bytes_per_node`). The ratio to the node's GPU memory is the rule of thumb
    :func:`host_to_gpu_memory_ratio` reports.
    """
    gpus_on_node = layout.gpus_on_node
    need = host_memory_per_node(
        gpus_on_node, dataloader.workers_per_gpu, dataloader.worker_rss_gib * GIB, dataloader.pinned_gib_per_gpu * GIB,
        os_reserve_gib * GIB, offload_bytes_per_node=model_state_bytes_per_node,
        checkpoint_staging_bytes_per_node=checkpoint_staging_bytes_per_node(checkpoint_bytes, layout.nodes))
    gpu_memory_per_node_gib = gpu_memory_gib * layout.gpus_per_node
    return NodeHostRam(need=need, gpu_memory_per_node_gib=gpu_memory_per_node_gib,
                       host_to_gpu_memory_ratio=host_to_gpu_memory_ratio(host_memory_gib * GIB,
                                                                         gpu_memory_per_node_gib * GIB),
                       spare_fraction=spare_fraction(need.total_gib, host_memory_gib))
