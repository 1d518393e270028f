"""`python -m bench api`: ``POST /api/v1/submissions`` against reference endpoints for the same body, side by side.

Each server is gunicorn with deploy/gunicorn.conf.py, on one fresh PostgreSQL database (127.0.0.1:5432,
database ``test``, trust auth, as the API tests use), loaded by ``wrk`` for BENCH_WRK_S seconds (default 10),
BENCH_WRK_REPEATS alternating runs (default 3), medians; the figures are ratios measured in the same run, so
a loaded machine shifts both sides. The servers (bench/reference_apps.py):

- the service (``service.wsgi:app``);
- the reference (16 and 32 connections): parse, validate and evaluate the body as the service does, and store
  the record as one row. Target (issue 25): the service's throughput ≥ 0.5 × the reference's, so its own
  bookkeeping (authentication, audit chain, digests, response) costs at most as much as that work; and the
  service's p99 ≤ 2 × its p50 (issue 13);
- the bare parse-and-validate endpoint (16 and 32): issue 13's reference; the ratio to it is a figure now;
- two bounds (16 connections): the bare endpoint that also evaluates (storing nothing), and the one that also
  stores the body as one row (evaluating nothing).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from bench.reference_apps import STORE_TABLES_DDL
from service import create_app
from service.accounts.auth import create_token
from service.persistence.db import get_db

ROOT = Path(__file__).resolve().parent.parent
API_EXAMPLE = ROOT / "examples" / "dgx-h100-70b-finetune.json"

API_RATIO_TARGET = 0.5  # issue 25: POST throughput ≥ 0.5 × the reference endpoint's (evaluate + store one row) …
CONNECTIONS = (16, 32)  # … at 16 and at 32 connections …
P99_OVER_P50_TARGET = 2.0  # … with p99 ≤ 2 × p50 (issue 13)
PG_ADMIN = {"host": "127.0.0.1", "port": 5432, "dbname": "test", "user": "postgres"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def gunicorn(target: str, env: dict[str, str], log: Path) -> Iterator[str]:
    """Yields the base URL of ``target`` served by gunicorn with deploy/gunicorn.conf.py; stops it afterwards."""
    port = _free_port()
    env = {**os.environ, **env, "QUOTECHECK_BIND": f"127.0.0.1:{port}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with log.open("wb") as errors:
        server = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", str(ROOT / "deploy" / "gunicorn.conf.py"),
                                   target], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=errors)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=5):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"gunicorn {target} did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=40)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


_WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = io.open(os.getenv("BENCH_BODY"), "rb"):read("*a")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN")
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("BENCH requests=%d duration_us=%d p50_us=%d p99_us=%d errors=%d status=%d\\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
"""


def wrk(url: str, connections: int, seconds: float, script: Path, env: dict[str, str]) -> dict[str, float]:
    """Returns wrk's figures for POSTing the body to ``url``: requests/s, p50 and p99 in ms, failed requests."""
    command = ["wrk", "-t", str(min(2, connections)), "-c", str(connections), "-d", f"{seconds:g}s",
               "--timeout", "30s", "-s", str(script), f"{url}/api/v1/submissions"]
    run = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env}, timeout=seconds + 120)
    found = re.search(r"BENCH (.*)", run.stdout)
    if run.returncode != 0 or found is None:
        raise RuntimeError(f"wrk failed: {run.stdout[-1000:]} {run.stderr[-1000:]}")
    figures = {key: float(value) for key, value in (pair.split("=") for pair in found.group(1).split())}
    return {"rps": figures["requests"] / (figures["duration_us"] / 1e6), "p50_ms": figures["p50_us"] / 1000,
            "p99_ms": figures["p99_us"] / 1000, "failed": figures["errors"] + figures["status"],
            "requests": figures["requests"]}


@contextmanager
def postgres_database() -> Iterator[str]:
    """Yields the URL of a new PostgreSQL database for the run; dropped afterwards."""
    name = f"qc_bench_{secrets.token_hex(6)}"
    with psycopg.connect(**PG_ADMIN, autocommit=True, connect_timeout=3) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://{PG_ADMIN['user']}@{PG_ADMIN['host']}:{PG_ADMIN['port']}/{name}"
    finally:
        with psycopg.connect(**PG_ADMIN, autocommit=True, connect_timeout=3) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _submitter_token(database_url: str, instance: Path) -> str:
    """Returns a new submitter token in the service's database (migrated by creating the app)."""
    app = create_app({"DATABASE_URL": database_url, "INSTANCE_PATH": str(instance)})
    with app.app_context(), get_db(app).session() as session:
        _, token = create_token(session, "bench", "submitter", datetime.now(UTC))
        session.commit()
    get_db(app).engine.dispose()
    return token


Runs = dict[str, dict[int, list[dict[str, float]]]]
# The servers, by label, in the order their runs alternate: the gunicorn target and the connection counts it is
# loaded at. The two bounds (bench/reference_apps.py) run at the first count only: they explain the ratios
# rather than make them.
SERVERS = {"service": ("service.wsgi:app", CONNECTIONS),
           "reference": ("bench.reference_apps:reference_app()", CONNECTIONS),
           "bare": ("bench.reference_apps:bare_app()", CONNECTIONS),
           "evaluate": ("bench.reference_apps:evaluating_app()", CONNECTIONS[:1]),
           "store": ("bench.reference_apps:storing_app()", CONNECTIONS[:1])}
LABELS = {"service": "POST /api/v1/submissions", "reference": "reference: evaluate + one INSERT",
          "bare": "bare parse + validate", "evaluate": "parse + validate + evaluate",
          "store": "parse + validate + one INSERT"}


def _measure(database_url: str, seconds: float, repeats: int) -> Runs:
    """Returns wrk's figures per server (SERVERS' labels), connection count and repeat.

    The servers run at once (an idle sync worker costs nothing) and the runs alternate in SERVERS' order, so
    that a change in the machine's load between runs reaches both sides of each ratio alike.
    """
    runs: Runs = {label: {c: [] for c in counts} for label, (_, counts) in SERVERS.items()}
    with tempfile.TemporaryDirectory() as folder, ExitStack() as servers:
        instance = Path(folder) / "instance"
        script = Path(folder) / "post.lua"
        script.write_text(_WRK_SCRIPT)
        env = {"BENCH_BODY": str(API_EXAMPLE), "BENCH_TOKEN": _submitter_token(database_url, instance)}
        store_url = database_url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(store_url, autocommit=True) as connection:
            for ddl in STORE_TABLES_DDL:
                connection.execute(ddl)
        server_env = {"QUOTECHECK_DATABASE_URL": database_url, "QUOTECHECK_INSTANCE_PATH": str(instance),
                      "BENCH_STORE_URL": store_url}
        urls = {label: servers.enter_context(gunicorn(target, server_env, Path(folder) / f"{label}.log"))
                for label, (target, _) in SERVERS.items()}
        for url in urls.values():
            wrk(url, CONNECTIONS[0], min(2.0, seconds), script, env)  # every worker warm
        for connections in CONNECTIONS:
            for _ in range(repeats):
                for label, url in urls.items():
                    if connections in runs[label]:
                        runs[label][connections].append(wrk(url, connections, seconds, script, env))
    return runs


def _print_medians(connections: int, label: str, figures: list[dict[str, float]]) -> None:
    middle = {key: statistics.median(run[key] for run in figures) for key in ("rps", "p50_ms", "p99_ms")}
    each = ", ".join(f"{run['rps']:.0f}" for run in figures)
    print(f"{connections:3d} connections, {label:32}: median {middle['rps']:8.1f} req/s ({each}), "
          f"p50 {middle['p50_ms']:7.1f} ms, "
          f"p99 {middle['p99_ms']:7.1f} ms, {sum(int(run['failed']) for run in figures)} failed")


def _ratio(runs: list[dict[str, float]], references: list[dict[str, float]]) -> float:
    """Returns the median of the throughput ratios of alternating runs."""
    return statistics.median(s["rps"] / b["rps"] for s, b in zip(runs, references, strict=True))


def judge_api(runs: Runs) -> list[bool]:
    """Prints the figures of ``runs`` (as _measure returns them) and returns the verdicts, per connection count:
    the service's throughput ÷ the reference's ≥ API_RATIO_TARGET with no failed request, p99 ÷ p50 ≤ 2."""
    verdicts = []
    for connections in CONNECTIONS:
        service, reference, bare = (runs[label][connections] for label in ("service", "reference", "bare"))
        for label in ("service", "reference", "bare"):
            _print_medians(connections, LABELS[label], runs[label][connections])
        ratio = _ratio(service, reference)
        spread = statistics.median(run["p99_ms"] / run["p50_ms"] for run in service)
        met = ratio >= API_RATIO_TARGET and not any(run["failed"] for run in service + reference)
        print(f"    service ÷ reference {ratio:.3f} (median of the alternating pairs; target ≥ {API_RATIO_TARGET:g}, "
              f"{'met' if met else 'MISSED'}); p99 / p50 {spread:.2f} (target ≤ {P99_OVER_P50_TARGET:g}, "
              f"{'met' if spread <= P99_OVER_P50_TARGET else 'MISSED'}); service ÷ bare {_ratio(service, bare):.3f} "
              f"(a figure: issue 13's ≥ 0.5 is retired)")
        verdicts += [met, spread <= P99_OVER_P50_TARGET]
    connections = CONNECTIONS[0]
    print(f"bounds (no target; bench/reference_apps.py), {connections} connections:")
    for label in ("evaluate", "store"):
        _print_medians(connections, LABELS[label], runs[label][connections])
        print(f"    ÷ bare {_ratio(runs[label][connections], runs['bare'][connections]):.3f}")
    return verdicts


def bench_api() -> list[bool]:
    """Measures POST /api/v1/submissions and the reference endpoints with wrk, alternating, in this run (medians)."""
    missed = [False] * (2 * len(CONNECTIONS))
    if shutil.which("wrk") is None:
        print("wrk is not installed (Debian: apt-get install wrk): the API targets are not measured")
        return missed
    try:
        psycopg.connect(**PG_ADMIN, connect_timeout=3).close()
    except psycopg.Error as error:
        print(f"PostgreSQL on {PG_ADMIN['host']}:{PG_ADMIN['port']} is unreachable ({' '.join(str(error).split())}): "
              "the API targets are not measured")
        return missed
    seconds = float(os.environ.get("BENCH_WRK_S", "10"))
    repeats = int(os.environ.get("BENCH_WRK_REPEATS", "3"))
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} before; {repeats} × wrk runs "
          f"of {seconds:g} s per server and connection count, alternating; body {API_EXAMPLE.name}; "
          "gunicorn -c deploy/gunicorn.conf.py")
    with postgres_database() as database_url:
        runs = _measure(database_url, seconds, repeats)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} after (the bench itself loads the CPUs)")
    return judge_api(runs)
