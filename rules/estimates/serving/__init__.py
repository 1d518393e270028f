"""Serving: memory, latency and capacity of an inference replica, modelled and measured."""
