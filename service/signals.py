"""Signals other code may subscribe to (blinker, as Flask's own signals)."""

from blinker import Namespace

_signals = Namespace()

# Sent just before a submission's compare-and-set, with the submission id as sender and
# ``expected_version``. Instrumentation hooks here; the concurrency tests use it to line up two requests
# so that both have read the same version before either writes.
before_compare_and_set = _signals.signal("before-compare-and-set")

# Sent by ``audit.anchor`` once a transaction holds the audit chain's write lock and has read the anchor a
# record will carry, before that transaction appends the event that issues the record. The concurrency test
# of the anchor uses it to write another event in that window.
audit_anchored = _signals.signal("audit-anchored")

# Sent by ``audit.append`` with the session as sender and the ``event`` just appended (flushed, not committed).
# service/webhooks/subscriptions.py writes the outbox rows of the events it reports here, so they commit or roll back
# with the audit event itself (a transactional outbox).
audit_appended = _signals.signal("audit-appended")
