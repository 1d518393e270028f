"""The blueprint of the reviewer pages: HTML rendered on the server from templates/ui/, its script and
stylesheet served from templates/ui/static/. Every view module of service/ui adds its routes to it."""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint

import templates

TEMPLATE_ROOT = Path(templates.__file__).resolve().parent

# No url_prefix: the landing page is "/", every other page lies under "/ui".
bp = Blueprint("ui", __name__, template_folder=str(TEMPLATE_ROOT), static_folder=str(TEMPLATE_ROOT / "ui" / "static"),
               static_url_path="/ui/static")
