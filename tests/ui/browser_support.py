"""Where the browser tests keep what they make and what they install, and the users they act as."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Screenshots of every page, the downloaded PDF and gunicorn's log (ignored by git).
ARTIFACTS = ROOT / "test-artifacts" / "browser"
# axe-core, installed from the npm registry on first use (ignored by git).
TOOLS = ROOT / ".test-tools" / "axe"
AXE = TOOLS / "node_modules" / "axe-core" / "axe.min.js"
AXE_PACKAGE = "axe-core@4"
ROLES = {"submitter": "Sam Submitter", "reviewer": "Rita Reviewer", "approver": "Alex Approver"}
