"""Moving data: link and collective bandwidths, nccl-tests results, a node's topology, and the input pipeline's
storage reads."""
