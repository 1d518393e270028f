"""The facts the checks read from the job and hand to the estimators, by concern.

Each module reads the typed job (rules/job, ``Context.job``) through a check's Context (``value`` and
``needed``, so that every input read counts as that check's evidence and every missing one as missing),
names the values it read in the estimators' typed inputs, and calls rules/estimates for every figure: no
arithmetic here, and nothing is decided. The facts that several checks use are memoised per evaluation by
``Context.memo``, keyed by the fact's function, so that they agree.

Modules, by concern: ``layout`` (node groups, the job's layout, NICs),
``model`` (the model and its architecture), ``memory`` (per-GPU training memory), ``communication``
(collectives, bandwidths, scaling efficiency), ``throughput``, ``reliability`` (checkpoints, failures,
goodput), ``schedule`` (time to result and cost), ``goodput`` (the simulated days to completion), ``batch``
and ``sharding`` (the batch split and the sharding options), ``racks`` (the racks, their PDUs and the nodes
they hold), ``serving`` (the inference replica), ``serving_latency`` (measured serving latencies against
their floors and the SLOs), ``artifacts`` (the raw diagnostics of ``measurements``, parsed), ``node_topology``
(a node's ``nvidia-smi topo -m``), ``nccl_runs`` (the nccl-tests runs, read at the job's gradient message size),
``vendor_figures`` (the figures a quote supplies for a GPU or server the catalogue lacks).
"""
