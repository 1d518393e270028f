"""A server process loads what evaluations read and freezes it out of the garbage collector's walks at start-up."""

import runpy
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent


def test_settling_after_start_up_freezes_what_the_process_holds():
    # Given a fresh process (a freeze here would keep the test run's objects from ever being collected)
    script = ("import gc; from service.startup import settle_after_start_up; settle_after_start_up(); "
              "import rules.evaluate as e; assert e._engine is not None; print(gc.get_freeze_count())")
    # When it settles, then every object it held is frozen
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True)
    assert int(run.stdout) > 10_000


def test_gunicorn_workers_settle_once_the_app_is_loaded(monkeypatch):
    called = []
    monkeypatch.setattr("service.startup.settle_after_start_up", lambda: called.append(True))
    settings = runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    settings["post_worker_init"](SimpleNamespace())
    assert called == [True]
