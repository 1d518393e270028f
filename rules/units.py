"""Unit constants and conversions. Names carry units; these convert between them."""

GIB = 2**30  # bytes in a GiB (memory capacities, as drivers report them)
GB = 10**9  # bytes in a GB (storage, bandwidth, and the ZeRO paper's model-state figures)
TB = 10**12
TFLOPS = 10**12
SECONDS_PER_MINUTE = 60
SECONDS_PER_HOUR = 3_600
SECONDS_PER_DAY = 86_400
MS_PER_SECOND = 1e3


def bytes_to_gib(size_bytes: float) -> float:
    return size_bytes / GIB


def gib_to_bytes(size_gib: float) -> float:
    return size_gib * GIB


def bytes_to_gb(size_bytes: float) -> float:
    return size_bytes / GB


def tflops_to_flops(tflops: float) -> float:
    return tflops * TFLOPS


def min_to_s(minutes: float) -> float:
    return minutes * SECONDS_PER_MINUTE


def s_to_min(seconds: float) -> float:
    return seconds / SECONDS_PER_MINUTE


def h_to_s(hours: float) -> float:
    return hours * SECONDS_PER_HOUR


def days_to_s(days: float) -> float:
    return days * SECONDS_PER_DAY


def s_to_days(seconds: float) -> float:
    return seconds / SECONDS_PER_DAY


def s_to_ms(seconds: float) -> float:
    return seconds * MS_PER_SECOND
