"""The request bodies the API and the reviewer pages read alike (waivers, decisions, purchase orders): each one's
schema and the checks a JSON Schema cannot say, declared once (service/inputs.py ``Body``)."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from rules.errors import Problem
from service.api_schemas.components import (
    DECISION_REQUEST,
    PO_NUMBER_PATTERN,
    PURCHASE_ORDER_REQUEST,
    SYSTEM_PATTERN,
    WAIVER_REQUEST,
)
from service.approval.workflow import MIN_JUSTIFICATION
from service.http import now
from service.inputs import Body, refuse


def _check_waiver(body: dict[str, Any]) -> None:
    """Raises InvalidRequest for a justification too short to say why, or an expiry that is no date or is past."""
    problems = []
    justification = body["justification"].strip()
    if len(justification) < MIN_JUSTIFICATION:
        problems.append(Problem("/justification", f"must say why in at least {MIN_JUSTIFICATION} characters, "
                                                  f"found {len(justification)}"))
    expires = body.get("expires")
    if expires is not None:
        today = now().date()
        try:
            day = date.fromisoformat(expires)
        except ValueError:
            day = None
        if day is None or len(expires) != 10:
            problems.append(Problem("/expires", f"{expires!r} is not an ISO date (YYYY-MM-DD)"))
        elif day < today:
            problems.append(Problem("/expires", f"{day.isoformat()} is in the past (today is {today.isoformat()})"))
    refuse("waiver", problems)


WAIVER_BODY = Body("WaiverRequest", "waiver", WAIVER_REQUEST, check=_check_waiver)
DECISION_BODY = Body("DecisionRequest", "decision", DECISION_REQUEST)


def _check_purchase_order(body: dict[str, Any]) -> None:
    """Raises InvalidRequest for a number or system that the schema's pattern takes only as ECMA 262 reads it."""
    problems = []
    # Python's "$" also matches before a final newline, which JSON Schema's (ECMA 262) does not: check the
    # whole text here too.
    if not re.fullmatch(PO_NUMBER_PATTERN.removeprefix("^").removesuffix("$"), body["po_number"]):
        problems.append(Problem("/po_number", "must be 1-64 of A-Z a-z 0-9 . _ / -"))
    if not re.fullmatch(SYSTEM_PATTERN.removeprefix("^").removesuffix("$"), body["system"]):
        problems.append(Problem("/system", "must be 1-64 printable characters without leading or trailing blanks"))
    refuse("purchase order", problems)


PURCHASE_ORDER_BODY = Body("PurchaseOrderRequest", "purchase order", PURCHASE_ORDER_REQUEST,
                           check=_check_purchase_order)
