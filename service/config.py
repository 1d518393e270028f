"""Configuration defaults; create_app layers the instance file, the environment and test_config on top."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from schemas.json_reader import MAX_JSON_BYTES

ENV_PREFIX = "QUOTECHECK"
# How long a new API token is valid unless `quotecheck token create --expires` says otherwise.
DEFAULT_TOKEN_LIFETIME_DAYS = 90


def system_clock() -> datetime:
    """Returns the current time, timezone-aware UTC."""
    return datetime.now(UTC)


DEFAULTS: dict[str, Any] = {
    # None: a SQLite file in the instance folder. postgresql://… is served by psycopg 3.
    "DATABASE_URL": None,
    # Requests above this many bytes get 413 before their body is read (the limit of every JSON document).
    "MAX_CONTENT_LENGTH": MAX_JSON_BYTES,
    # Bring the schema to the newest migration on start. Off in production where `quotecheck db upgrade`
    # runs once per release; harmless when on, since concurrent starts serialise on an advisory lock.
    "AUTO_MIGRATE": True,
    # A policy JSON file; None uses the bundled default policy.
    "POLICY_FILE": None,
    # Problem "type" URIs are this base + a slug per error class (RFC 9457).
    "PROBLEM_TYPE_BASE": "https://quotecheck.dev/problems/",
    # How long a SQLite writer waits for the write lock before giving up.
    "SQLITE_BUSY_TIMEOUT_S": 30,
    # PostgreSQL: how long opening a connection may take (libpq's connect_timeout: whole seconds, 2 at least);
    # the server cancels a statement running past the statement timeout; the client gives up on a server that
    # sent nothing back for the socket timeout (a paused or cut-off server), which must exceed the statement
    # timeout; a request waits at most the pool timeout for a pooled connection. A request that hits one gets
    # 503 with Retry-After. Migrations run without the statement and socket timeouts.
    "DATABASE_CONNECT_TIMEOUT_S": 5,
    "DATABASE_STATEMENT_TIMEOUT_S": 30,
    "DATABASE_SOCKET_TIMEOUT_S": 45,
    "DATABASE_POOL_TIMEOUT_S": 10,
    # The Retry-After (seconds) of a 503: a database or task queue that did not answer, or a readiness failure.
    "RETRY_AFTER_S": 5,
    # GET /readyz pings the workers through the broker (when there is one) and waits this long for the first
    # answer; the outcome of that check is kept this long, so frequent probes cost one ping per period.
    "READINESS_WORKER_TIMEOUT_S": 1,
    "READINESS_CACHE_S": 5,
    # With a broker, GET /readyz is not ready when a task has waited longer than this to be started and no run was
    # written meanwhile (read from the task table: no broker needed), so a stuck consumer shows within it plus a
    # probe period. Its broker check waits at most READINESS_BROKER_TIMEOUT_S, below the probes' own 5 s timeouts.
    "READINESS_MAX_QUEUED_AGE_S": 20,
    "READINESS_BROKER_TIMEOUT_S": 2,
    # GET /metrics answers `Authorization: Bearer <METRICS_TOKEN>` (a Prometheus scraper's credentials file) and
    # admin API tokens. None: admin API tokens only. At least 32 characters.
    "METRICS_TOKEN": None,
    # "json": one JSON object per log line, with the request id (service/logs.py); "text": Python's default
    # format. deploy/gunicorn.conf.py makes "json" the default of the API under gunicorn.
    "LOG_FORMAT": "text",
    "DEFAULT_PAGE_SIZE": 20,
    "MAX_PAGE_SIZE": 100,
    # The record signing key. Neither file set: an ECDSA P-256 key and a self-signed certificate generated on
    # first use in <instance>/signing/ (under a file lock, so processes starting at once generate one key).
    # Production sets both (PEM; the key readable by the service user only); setting one alone is an error.
    "SIGNING_CERT_FILE": None,
    "SIGNING_KEY_FILE": None,
    # Decrypts an encrypted SIGNING_KEY_FILE. A string: in the environment, JSON-quote values such as "true"
    # or digits, e.g. QUOTECHECK_SIGNING_KEY_PASSWORD='"1234"', or they arrive as JSON numbers or booleans.
    "SIGNING_KEY_PASSWORD": None,
    # Load (or generate) the signing key when the app is created, so a bad configuration stops the start
    # rather than the first approval. False: on first use (for processes that never sign, without the key).
    "SIGNING_KEYS_AT_START": True,
    # The RFC 3161 time-stamping authority that timestamps every signature (PDF: PAdES B-LTA with validation
    # data; envelope: a token over its signature value), and the root (PEM) its certificate chains to. No URL:
    # no timestamps, PAdES B-B. A URL without a root is an error (a TSA is trusted only through its root).
    "TSA_URL": None,
    "TSA_TRUST_ROOT_FILE": None,
    # The clock the workflow reads (waiver expiry, timestamps); tests replace it to move time.
    "CLOCK": system_clock,
    # The module whose init_app(app) registers the app's task queue (service/tasks/tasks_port.py): the Celery app
    # of the worker package. Named, not imported, so that the service does not depend on the worker package
    # (workers import service, never the reverse). None: no background tasks (those requests answer 503).
    "TASK_QUEUE": "workers.celery_app",
    # Celery (workers/celery_app.py). No broker: tasks run in-process at once (eager) and their progress is
    # kept in memory; the task table in the database is what GET /api/v1/tasks/{id} reads either way.
    # redis://host:6379/0 hands them to `celery -A workers.worker worker` processes.
    "CELERY_BROKER_URL": None,
    # None: the broker's URL when that is Redis (progress and states of running tasks live there).
    "CELERY_RESULT_BACKEND": None,
    # The queue tasks are sent to; a worker consumes it with `-Q` (default: this queue).
    "CELERY_QUEUE": "quotecheck",
    # The queue webhook deliveries are sent to, consumed by a worker of its own (`celery -A workers.webhook_worker
    # worker`) so that a slow receiver never holds the workers of the other tasks. None: CELERY_QUEUE + "-webhooks".
    "CELERY_WEBHOOK_QUEUE": None,
    # Past the soft limit a task gets SoftTimeLimitExceeded (recorded as its failure); past the hard limit
    # its worker process is killed (prefork pool only). A comparison of 16 variants takes about a second.
    "CELERY_TASK_SOFT_TIME_LIMIT_S": 120,
    "CELERY_TASK_TIME_LIMIT_S": 150,
    # Redis hands a message a worker took but did not acknowledge (it died) to another worker after this
    # long; more than the hard limit, so no running task is handed out twice. A task row in PROGRESS unwritten
    # for longer than the hard limit is stale: its worker died, and asking for the same work runs it again.
    "CELERY_VISIBILITY_TIMEOUT_S": 300,
    # How often each worker sends the tasks the API accepted while the broker was unreachable (the outbox).
    "TASK_DISPATCH_INTERVAL_S": 10,
    # Fair shares: a user with this many tasks of their own queued or running (issued by their requests, not yet
    # ended, not stale) is refused further background work with 429 and Retry-After: TASK_LIMIT_RETRY_AFTER_S
    # (whole seconds). Asking for work already queued or done reuses its task and is never refused.
    "MAX_ACTIVE_TASKS_PER_USER": 4,
    "TASK_LIMIT_RETRY_AFTER_S": 10,
    # How long the result backend keeps a task's state; the database keeps the outcome for good.
    "CELERY_RESULT_EXPIRES_S": 24 * 3600,
    # Redis (broker and result backend): how long connecting may take, and how long a command may wait for its
    # answer, so that a Redis that hangs costs a request seconds and a 503, not the worker's whole timeout.
    "CELERY_CONNECT_TIMEOUT_S": 2,
    "CELERY_SOCKET_TIMEOUT_S": 5,
    # Further Celery settings by their lowercase names, applied last, e.g. {"broker_transport_options":
    # {"global_keyprefix": "qc:"}}. Serialisation is JSON only whatever this says.
    "CELERY": {},
    # Days a new or rotated API token is valid (1-3650); `--expires 30d` overrides it per token. An expired
    # token gets 401.
    "TOKEN_LIFETIME_DAYS": DEFAULT_TOKEN_LIFETIME_DAYS,
    # A record's DRAFT PDF is rendered once and kept (service/approval/draft_pdfs.py). A request that finds another
    # rendering the same draft waits at most this long for it, then answers 503 (ask again).
    "DRAFT_PDF_WAIT_S": 30,
    # A claim to render a draft older than this is taken over: the request that made it died. Longer than a
    # render and than gunicorn's worker timeout (60 s), so a live render is never duplicated.
    "DRAFT_PDF_CLAIM_STALE_S": 90,
    # How long a browser stays signed in to the pages (/ui) after signing in with a token; never past the
    # token's own expiry.
    "UI_SESSION_LIFETIME_S": 8 * 3600,
    # After this many failed sign-ins to the pages within the window from one client address, or with tokens of one
    # prefix, further sign-ins from that client or with that prefix get 429 until the window passes
    # (service/accounts/throttle.py). Whole numbers of at least 1; another value stops the start.
    "SIGN_IN_MAX_FAILURES": 20,
    "SIGN_IN_WINDOW_S": 900,
    # The peers whose X-Forwarded-For names the client whose sign-ins are counted (the reverse proxy): the variable
    # deploy/gunicorn.conf.py reads for the same purpose. Comma-separated addresses, or "*" for any peer.
    "FORWARDED_ALLOW_IPS": "127.0.0.1",
    # POST /api/v1/comparisons takes at most this many variants.
    "MAX_COMPARISON_VARIANTS": 16,
    # Webhooks (service/webhooks/subscriptions.py, docs/webhooks.md): how long one attempt waits for the receiver's
    # answer,
    # how many attempts a delivery gets before it is marked failed, the backoff between them (doubling from
    # the base, at most the max), and how often the workers' beat drains the outbox for retries.
    "WEBHOOK_TIMEOUT_S": 10,
    "WEBHOOK_MAX_ATTEMPTS": 10,
    "WEBHOOK_BACKOFF_BASE_S": 30,
    "WEBHOOK_BACKOFF_MAX_S": 3600,
    "WEBHOOK_DRAIN_INTERVAL_S": 30,
    # Webhooks go to public addresses only, unless a network is listed here (CIDR, e.g. ["10.20.0.0/16"] for an
    # on-premises receiver, ["127.0.0.0/8"] for one on this host in development); cloud metadata addresses never
    # (service/webhooks/addresses.py).
    "WEBHOOK_ALLOWED_NETWORKS": [],
    # Webhook signing secrets are stored encrypted (AES-256-GCM) with this key: 32 random bytes in base64
    # (`openssl rand -base64 32`). Required where CELERY_BROKER_URL is set (registering a webhook is refused without
    # it); otherwise None uses a key generated in <instance>/webhooks/ (service/webhooks/secret_box.py). After a
    # rotation, the keys that sealed stored secrets are listed in WEBHOOK_SECRET_PREVIOUS_KEYS until
    # `quotecheck webhook rekey` sealed them all again under the new one.
    "WEBHOOK_SECRET_KEY": None,
    "WEBHOOK_SECRET_PREVIOUS_KEYS": [],
}


def clock_of(config: dict[str, Any]) -> Callable[[], datetime]:
    """Returns the configured clock; falls back to the system clock."""
    return config.get("CLOCK") or system_clock
