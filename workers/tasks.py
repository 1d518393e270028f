"""Heavy work as plain functions with serialisable arguments, so a Celery worker can run them unchanged.

Today they run in-process. To hand one to Celery, decorate it (``@shared_task(acks_late=True)``) where the
Celery app is wired; the arguments are JSON-friendly and the result is bytes.
"""

from __future__ import annotations

import json
from typing import Any


def render_record_pdf(record_json: str, signed: bool, instance_dir: str | None = None,
                      envelope_json: str | None = None) -> bytes:
    """Returns the PDF of the record in ``record_json``: signed when ``signed`` (the record must be approved).

    ``signed`` False gives the DRAFT (watermarked, unsigned). The keys come from ``instance_dir`` when given,
    else from the Flask app of the current app context (``service.record.signing_keys``). ``envelope_json``:
    the record's signed envelope as the service issued it, attached unchanged (else the record is signed
    now). Idempotent: the same record renders to the same content (the PDF signature's time aside).
    """
    from service.record import SigningKeys, signing_keys
    from service.record.render import draft_pdf, signed_pdf

    record: dict[str, Any] = json.loads(record_json)
    if not signed:
        return draft_pdf(record)
    keys = SigningKeys.load_or_create(instance_dir) if instance_dir else signing_keys()
    envelope = json.loads(envelope_json) if envelope_json is not None else None
    return signed_pdf(record, keys, envelope=envelope)
