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
# The API logs JSON lines (QUOTECHECK_LOG_FORMAT=json, docs/settings.md) unless told otherwise; each request
# is then one JSON line of the app's, with its request id, which replaces gunicorn's access log, and gunicorn's
# own messages are JSON lines too.
os.environ.setdefault("QUOTECHECK_LOG_FORMAT", "json")
json_logs = os.environ["QUOTECHECK_LOG_FORMAT"] == "json"
accesslog = None if json_logs else "-"
errorlog = "-"
if json_logs:
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "service.logs.JsonFormatter"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        # The app adds its own JSON handler to the root logger when it is created (service/logs.py).
        "root": {"level": "INFO", "handlers": []},
        "loggers": {"gunicorn.error": {"level": "INFO", "handlers": ["stderr"], "propagate": False}},
    }
forwarded_allow_ips = os.environ.get("QUOTECHECK_FORWARDED_ALLOW_IPS", "127.0.0.1")


# /metrics adds up the counts of every worker process when they write them to one directory
# (prometheus_client's multiprocess mode, PROMETHEUS_MULTIPROC_DIR; docs/settings.md, "Metrics"). Set here,
# before the workers start, so each of them counts there. The counts of an earlier run are removed at start.
metrics_dir = os.environ.get("QUOTECHECK_METRICS_DIR")
if metrics_dir:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir


def on_starting(server):
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        os.makedirs(directory, exist_ok=True)
        for name in os.listdir(directory):
            if name.endswith(".db"):
                os.remove(os.path.join(directory, name))


def post_worker_init(worker):
    # The worker has loaded the app (service.wsgi): load what evaluations read and freeze it out of the
    # garbage collector's walks (service/startup.py says why). Here rather than in post_fork, which runs
    # before the app is loaded.
    from service.startup import settle_after_start_up

    settle_after_start_up()


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
