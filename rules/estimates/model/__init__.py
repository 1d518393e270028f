"""The job's shape as the estimators see it: the transformer's dimensions, its parameter counts, the batch and the
parallel layout."""
