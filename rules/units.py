"""Unit constants. Names carry units; these convert between them."""

GIB = 2**30  # bytes in a GiB (memory capacities, as drivers report them)
GB = 10**9  # bytes in a GB (storage, bandwidth, and the ZeRO paper's model-state figures)
TB = 10**12
TFLOPS = 10**12
SECONDS_PER_DAY = 86_400
SECONDS_PER_HOUR = 3_600
