"""The PDF task: plain arguments in, bytes out, so a Celery worker can run it unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from service.record import SigningKeys, UnsignableRecord, verify_document
from workers.tasks import render_record_pdf


def test_task_renders_a_signed_pdf_with_the_instance_key(approved: dict[str, Any], instance: Path,
                                                         instance_keys: SigningKeys) -> None:
    pdf = render_record_pdf(json.dumps(approved), True, str(instance))

    result = verify_document(pdf, instance_keys.trusted())
    assert result.ok, result.all_reasons()


def test_task_refuses_to_sign_an_unapproved_record(evaluation: dict[str, Any], instance: Path) -> None:
    with pytest.raises(UnsignableRecord):
        render_record_pdf(json.dumps(evaluation), True, str(instance))
