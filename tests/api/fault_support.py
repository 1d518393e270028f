"""Private servers for the fault tests: a Redis and a PostgreSQL of the test's own, on loopback ports of their own.

Each is started as an operator would (``redis-server``; ``initdb`` then ``pg_ctl``), can be paused, stopped
and started again, and is stopped at the end. PostgreSQL refuses to run as root: as root its commands run
as the ``postgres`` user (``runuser``) in a directory that user owns. A test is skipped with the reason when
a binary is missing. Workers and the API under gunicorn are started the same way, as subprocesses configured
through the environment only.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[2]
HOST = "127.0.0.1"
START_TIMEOUT_S = 30
# Runs `celery` with each step of a comparison slowed down, so that a test can kill a worker mid-task.
SLOW_WORKER = Path(__file__).with_name("fault_worker.py")


def free_port() -> int:
    """Returns a loopback TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def wait_until(condition: Any, timeout_s: float, what: str, interval_s: float = 0.05) -> None:
    """Waits until ``condition()`` is true; AssertionError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s} s"
        time.sleep(interval_s)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.2):
            return True
    except OSError:
        return False


class Pausable:
    """A service process a test can stop (SIGSTOP) and let go on (SIGCONT): the kernel still accepts its
    connections, and it answers nothing meanwhile (a Redis server, or a worker's main process, which then consumes
    nothing and answers no ping)."""

    process: subprocess.Popen | None

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


class RedisServer(Pausable):
    """``redis-server`` on a port of its own, without persistence: stopped, it forgets everything."""

    def __init__(self, workdir: Path) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("redis-server is not installed (the fault tests start Redis servers of their own)")
        self.workdir, self.port = workdir, free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", HOST, "--save", "", "--appendonly", "no",
                   "--daemonize", "no", "--dir", str(self.workdir)]
        log = (self.workdir / "redis.log").open("ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        wait_until(lambda: _listening(self.port), START_TIMEOUT_S, f"redis-server on port {self.port} starting")

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGCONT)  # a paused server cannot act on SIGTERM
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        self.process = None


def _postgres_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    if on_path is None:
        pytest.skip("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    return Path(on_path).parent


class PostgresServer:
    """A PostgreSQL cluster of its own (``initdb``) served on a port of its own (``pg_ctl``), trust auth on loopback."""

    def __init__(self) -> None:
        self.bin = _postgres_bin()
        self.as_postgres: list[str] = []
        self.dir = Path(tempfile.mkdtemp(prefix="qc-fault-pg-"))
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                pytest.skip("running as root without runuser: PostgreSQL cannot be started as another user")
            self.as_postgres = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.dir, "postgres")
        self.port = free_port()
        self.data = self.dir / "data"
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@{HOST}:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        completed = subprocess.run([*self.as_postgres, str(self.bin / tool), *args], capture_output=True, text=True,
                                   timeout=START_TIMEOUT_S, check=False)
        assert completed.returncode == 0, f"{tool} failed: {completed.stdout}\n{completed.stderr}"

    def _options(self) -> str:
        # fsync off: the tests restart the server cleanly and need no durability against power loss.
        return f"-p {self.port} -k {self.dir} -c listen_addresses={HOST} -c fsync=off -c max_connections=100"

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-o", self._options(), "-l", str(self.dir / "postgres.log"),
                  "-w", "-t", str(START_TIMEOUT_S), "start")

    def stop(self) -> None:
        """Stops the server at once (fast shutdown: open transactions are rolled back, clients cut off)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def service_env(database_url: str, instance: Path, config: dict[str, Any]) -> dict[str, str]:
    """Returns the environment of a service process: this test's database, instance folder and settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUOTECHECK_")}
    env.update({"QUOTECHECK_DATABASE_URL": database_url, "QUOTECHECK_INSTANCE_PATH": str(instance),
                "PYTHONPATH": str(ROOT)})
    env.update({f"QUOTECHECK_{key}": value if isinstance(value, str) else json.dumps(value)
                for key, value in config.items()})
    return env


class Worker(Pausable):
    """``celery -A workers.worker worker`` (prefork: a main process and its children) in a session of its own."""

    def __init__(self, env: dict[str, str], queue: str, log: Path, step_delay_s: float = 0,
                 app: str = "workers.worker") -> None:
        self.env, self.queue, self.log = {**env, "QC_FAULT_STEP_DELAY_S": str(step_delay_s)}, queue, log
        # The Celery app (-A): workers.worker, or workers.webhook_worker for the webhook queue.
        self.app = app
        self.process: subprocess.Popen | None = None

    def start(self, concurrency: int = 1, as_deployed: bool = False, pool: str = "prefork") -> None:
        """Starts the worker and waits until it is ready. ``as_deployed``: with the options of
        deploy/quotecheck-worker.service (gossip, mingle and heartbeats on, --max-tasks-per-child) rather than the
        fault tests' quieter ones."""
        quiet = ["--max-tasks-per-child=200"] if as_deployed else ["--without-gossip", "--without-mingle",
                                                                      "--without-heartbeat"]
        command = [sys.executable, str(SLOW_WORKER), "-A", self.app, "worker", f"--pool={pool}",
                   f"--concurrency={concurrency}", "-Q", self.queue, "-n", f"{self.log.stem}@%h", *quiet,
                   "--loglevel=INFO"]
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=output,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        offset = self.log.stat().st_size if self.log.exists() else 0
        wait_until(lambda: " ready." in self.text()[offset:] or self.process.poll() is not None, 60,
                   f"worker {self.log.stem} starting")
        assert self.process.poll() is None, self.tail()

    def kill(self) -> None:
        """SIGKILLs the worker and every process of its session (its pool's children) at once."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        wait_until(lambda: not _session_alive(self.process.pid), 10, "the worker's children dying")  # type: ignore
        self.process = None

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGCONT)  # a paused worker cannot act on SIGTERM
        self.process.terminate()  # warm shutdown
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        if _session_alive(self.process.pid):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=5)
        self.process = None

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.text().splitlines()[-lines:])

    def succeeded(self, task_name: str) -> int:
        """Returns how many tasks named ``task_name`` this worker's log says succeeded."""
        return sum(1 for line in self.text().splitlines() if f"{task_name}[" in line and "] succeeded in " in line)


def _session_alive(session_id: int) -> bool:
    """Returns whether a process of session ``session_id`` is still running (zombies excepted)."""
    for status in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(status).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == session_id:
            return True
    return False
