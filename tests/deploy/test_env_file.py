"""deploy/quotecheck.env.example loads the way deploy/README.md says, and the app reads what arrives."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from deploy_support import DEPLOY
from flask import Config

from service.config import ENV_PREFIX

README = DEPLOY / "README.md"
EXAMPLE = DEPLOY / "quotecheck.env.example"
# Where the README and the systemd units keep the settings.
INSTALLED_ENV_FILE = "/etc/quotecheck/quotecheck.env"
ASSIGNMENT = re.compile(r"^(QUOTECHECK_[A-Z0-9_]+)=")
# What systemd's EnvironmentFile=, Docker Compose's env_file and a POSIX shell all read alike: a bare value
# without quotes, $, backslashes or blanks, or a single-quoted one without $ or backslashes.
PORTABLE_LINE = re.compile(r"^QUOTECHECK_[A-Z0-9_]+=([^'\"$\\\s]*|'[^'$\\]*')$")
DUMP_ENVIRONMENT = ("import json, os; print(json.dumps({k: v for k, v in os.environ.items() "
                    "if k.startswith('QUOTECHECK_')}))")


def loading_commands() -> list[list[str]]:
    """Returns the README's commands that read the env file into a shell, each split into its words."""
    return [shlex.split(line.strip()) for line in README.read_text(encoding="utf-8").splitlines()
            if "set -a;" in line]


def every_setting_enabled() -> str:
    """Returns the example with its commented-out settings enabled, so that every line of it is loaded."""
    return re.sub(r"^#(QUOTECHECK_)", r"\1", EXAMPLE.read_text(encoding="utf-8"), flags=re.MULTILINE)


def load_as_the_readme_says(command: list[str], env_file: Path) -> dict[str, str]:
    """Runs the README's loading script with bash on ``env_file``; returns the QUOTECHECK_ variables that arrive.

    The command is ``sudo -u quotecheck bash -c SCRIPT NAME PROGRAM…``: SCRIPT runs as written, with the
    installed file's path replaced by ``env_file``, and a Python program that prints its environment in
    place of PROGRAM.
    """
    bash = command.index("bash")
    assert command[bash + 1] == "-c", command
    script, name = command[bash + 2], command[bash + 3]
    assert script.count(INSTALLED_ENV_FILE) == 1, script
    script = script.replace(INSTALLED_ENV_FILE, shlex.quote(str(env_file)))
    done = subprocess.run(["bash", "-c", script, name, sys.executable, "-c", DUMP_ENVIRONMENT],
                          capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_readme_reads_the_env_file_one_way_everywhere():
    commands = loading_commands()

    assert len(commands) >= 2  # a quotecheck command and a worker, by hand
    scripts = {command[command.index("bash") + 2] for command in commands}
    assert len(scripts) == 1, scripts
    assert not any("xargs" in command for command in commands)


def test_the_systemd_units_read_the_file_the_readme_loads():
    for unit in ("quotecheck-api.service", "quotecheck-worker.service", "quotecheck-webhooks.service"):
        assert f"EnvironmentFile={INSTALLED_ENV_FILE}" in (DEPLOY / unit).read_text(encoding="utf-8").splitlines()


def test_every_line_of_the_example_is_in_the_form_every_reader_agrees_on():
    lines = [line for line in every_setting_enabled().splitlines() if line and not line.startswith("#")]

    assert lines and all(PORTABLE_LINE.match(line) for line in lines), \
        [line for line in lines if not PORTABLE_LINE.match(line)]


@pytest.mark.parametrize("command", loading_commands(), ids=lambda command: command[-1])
def test_the_example_loads_as_the_readme_says_with_every_setting_enabled(command, tmp_path):
    env_file = tmp_path / "quotecheck.env"
    env_file.write_text(every_setting_enabled(), encoding="utf-8")

    arrived = load_as_the_readme_says(command, env_file)

    assigned = {ASSIGNMENT.match(line)[1] for line in env_file.read_text().splitlines() if ASSIGNMENT.match(line)}
    assert set(arrived) == assigned and "QUOTECHECK_CELERY" in arrived
    assert arrived["QUOTECHECK_DATABASE_URL"] == "postgresql://quotecheck@db.internal:5432/quotecheck"
    # The quotes around the JSON are gone; the JSON is whole.
    celery = json.loads(arrived["QUOTECHECK_CELERY"])
    assert celery["broker_transport_options"] == {"global_keyprefix": "qc-prod:"}
    assert celery["result_backend_transport_options"] == {"global_keyprefix": "qc-prod:"}


def test_the_app_reads_the_loaded_values_as_the_settings_reference_says(tmp_path, monkeypatch):
    env_file = tmp_path / "quotecheck.env"
    env_file.write_text(every_setting_enabled(), encoding="utf-8")
    arrived = load_as_the_readme_says(loading_commands()[0], env_file)
    for name in [name for name in os.environ if name.startswith(f"{ENV_PREFIX}_")]:
        monkeypatch.delenv(name)
    for name, value in arrived.items():
        monkeypatch.setenv(name, value)

    config = Config(str(tmp_path))
    config.from_prefixed_env(ENV_PREFIX)  # as create_app does

    assert config["AUTO_MIGRATE"] is False
    assert config["CELERY_TASK_SOFT_TIME_LIMIT_S"] == 120 and config["CELERY_TASK_TIME_LIMIT_S"] == 150
    assert config["CELERY"]["broker_transport_options"]["global_keyprefix"] == "qc-prod:"
    assert config["SIGNING_KEY_PASSWORD"] == "the key password"
    assert config["CELERY_QUEUE"] == "quotecheck"
