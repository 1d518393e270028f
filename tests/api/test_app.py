"""The app factory's configuration layers, health and readiness, and the WSGI entry point."""

from __future__ import annotations

import importlib
import json

from service import create_app
from service.persistence.db import get_db


def test_config_layers_defaults_instance_file_environment_then_test_config(tmp_path, monkeypatch):
    instance = tmp_path / "instance"
    instance.mkdir()
    (instance / "config.json").write_text(json.dumps({"MAX_CONTENT_LENGTH": 111, "DEFAULT_PAGE_SIZE": 7,
                                                      "MAX_PAGE_SIZE": 50}))
    monkeypatch.setenv("QUOTECHECK_INSTANCE_PATH", str(instance))
    monkeypatch.setenv("QUOTECHECK_MAX_CONTENT_LENGTH", "222")
    monkeypatch.setenv("QUOTECHECK_MAX_PAGE_SIZE", "60")

    app = create_app({"MAX_PAGE_SIZE": 70})

    assert app.config["PROBLEM_TYPE_BASE"].startswith("https://")  # default
    assert app.config["DEFAULT_PAGE_SIZE"] == 7  # instance file
    assert app.config["MAX_CONTENT_LENGTH"] == 222  # environment over the file
    assert app.config["MAX_PAGE_SIZE"] == 70  # test_config over the environment
    assert str(get_db(app).engine.url).endswith(str(instance / "quotecheck.sqlite3"))
    get_db(app).engine.dispose()


def test_environment_is_read_when_the_app_is_created_not_at_import(tmp_path, monkeypatch):
    monkeypatch.setenv("QUOTECHECK_DEFAULT_PAGE_SIZE", "3")
    app = create_app({"INSTANCE_PATH": str(tmp_path)})
    assert app.config["DEFAULT_PAGE_SIZE"] == 3
    monkeypatch.setenv("QUOTECHECK_DEFAULT_PAGE_SIZE", "4")
    assert create_app({"INSTANCE_PATH": str(tmp_path)}).config["DEFAULT_PAGE_SIZE"] == 4


def test_postgres_urls_use_psycopg_3():
    from service.persistence.db import normalise_url

    assert normalise_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalise_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"


def test_health_and_readiness(client):
    assert client.get("/healthz").get_json() == {"status": "ok"}
    # No broker: tasks run in this process, so there is no broker or worker to check.
    assert client.get("/readyz").get_json() == {"status": "ready", "checks": {"database": {"status": "ok"}}}


def test_readiness_fails_when_the_database_is_unreachable(tmp_path):
    app = create_app({"INSTANCE_PATH": str(tmp_path), "AUTO_MIGRATE": False,
                      "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"})
    response = app.test_client().get("/readyz")
    assert response.status_code == 503 and response.mimetype == "application/problem+json"
    assert app.test_client().get("/healthz").status_code == 200


def test_wsgi_module_exposes_an_app(tmp_path, monkeypatch):
    monkeypatch.setenv("QUOTECHECK_INSTANCE_PATH", str(tmp_path))
    import service.wsgi

    module = importlib.reload(service.wsgi)
    assert module.app.name == "service"
    assert "submissions.create_submission" in module.app.view_functions
