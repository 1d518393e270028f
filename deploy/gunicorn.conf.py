"""gunicorn settings for the quotecheck API: `gunicorn -c deploy/gunicorn.conf.py service.wsgi:app`."""

import multiprocessing
import os

bind = os.environ.get("QUOTECHECK_BIND", "127.0.0.1:8000")
# Evaluations are CPU-bound (a few milliseconds each) and rendering a PDF takes about a second: one
# synchronous worker per core, plus one, keeps latency flat without oversubscribing the CPUs.
workers = int(os.environ.get("QUOTECHECK_WORKERS", multiprocessing.cpu_count() + 1))
worker_class = "sync"
timeout = 60
graceful_timeout = 30
# Request bodies are capped by the app (MAX_CONTENT_LENGTH, 2 MiB by default); these cap the headers.
limit_request_line = 8190
limit_request_fields = 100
accesslog = "-"
errorlog = "-"
forwarded_allow_ips = os.environ.get("QUOTECHECK_FORWARDED_ALLOW_IPS", "127.0.0.1")
