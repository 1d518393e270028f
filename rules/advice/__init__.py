"""Advice beside the checks: the layout search and the best layout, the remedies, what-if variants and quotes
side by side, and a record beside its as-built evaluation. Each evaluates through rules.evaluate; none decides a
check."""
