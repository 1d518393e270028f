"""Failures and what they cost: failure rates, checkpoints, the simulated days to completion, and queueing."""
