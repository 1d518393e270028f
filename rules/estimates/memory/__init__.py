"""Training memory on one GPU and on its node's host: model state, activations, buffers, offload, and the sharding
options side by side."""
