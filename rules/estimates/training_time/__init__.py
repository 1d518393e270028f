"""Training time: the work and time of one step, the FLOPs of a run, its scaling, and the days and GPUs a schedule
needs."""
