"""Searches over the estimators: the fastest layouts, the fewest GPUs that fit, and what a remedy must quote."""
