"""The quotecheck command line: one group, whose commands live in a module per concern.

A command's module is imported when the command runs (or when ``--help`` lists them all), so that
``quotecheck validate`` loads the rules engine only, not the web service and its database.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from service.cli.common import EXIT_CODES

# Command name → "module:attribute" of the click command or group.
COMMANDS = {
    "validate": "service.cli.evaluation:validate",
    "evaluate": "service.cli.evaluation:evaluate",
    "parse": "service.cli.parse:parse",
    "search": "service.cli.search:search",
    "remedies": "service.cli.remedies:remedies",
    "serve": "service.cli.server:serve",
    "db": "service.cli.server:db",
    "user": "service.cli.accounts:user",
    "token": "service.cli.accounts:token",
    "audit": "service.cli.audit:audit",
    "webhook": "service.cli.webhooks:webhook",
    "tasks": "service.cli.tasks:tasks",
    "worker": "service.cli.workers:worker",
    # signed records
    "verify": "service.record.cli:verify",
    "sign": "service.record.cli:sign",
    "pdf": "service.record.cli:pdf",
    "keys": "service.record.cli:keys",
    "records": "service.cli.records:records",
}


class CommandGroup(click.Group):
    """A click group whose commands are named in COMMANDS and imported on first use (click's "lazy" group)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, _, attribute = COMMANDS[cmd_name].partition(":")
        command: Any = getattr(importlib.import_module(module), attribute)
        return command


@click.group(cls=CommandGroup,
             help="Check an AI-server quote against its workload and issue a commissioning record.\n\n" + EXIT_CODES)
@click.version_option(package_name="quotecheck")
def main() -> None:
    pass
