"""Child process of `make bench`: render and sign the PDF of the record read from stdin; print figures as JSON.

Run in a fresh interpreter so that its peak resident memory (``ru_maxrss``) is the cost of rendering and
signing alone — interpreter, imports, fonts and the renders — and not of whatever the parent did before.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time

RENDERS = 5


def _pages(pdf: bytes) -> int:
    from io import BytesIO

    from pyhanko.pdf_utils.reader import PdfFileReader

    return int(PdfFileReader(BytesIO(pdf)).root["/Pages"]["/Count"])


def main() -> int:
    record = json.load(sys.stdin)
    started = time.perf_counter()
    from service.record import SigningKeys
    from service.record.render import signed_pdf, warm_up

    keys = SigningKeys.generate()
    imported = time.perf_counter()
    warm_up()
    warmed = time.perf_counter()
    samples = []
    pdf = b""
    for _ in range(RENDERS):
        start = time.perf_counter()
        pdf = signed_pdf(record, keys)
        samples.append(time.perf_counter() - start)
    print(json.dumps({
        "import_s": imported - started,
        "warm_up_s": warmed - imported,
        "first_s": samples[0],
        "median_s": statistics.median(samples),
        "max_s": max(samples),
        # Linux reports ru_maxrss in KiB: the peak resident set of this whole process.
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "pdf_bytes": len(pdf),
        "pages": _pages(pdf),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
