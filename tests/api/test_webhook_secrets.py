"""Webhook signing secrets encrypted at rest: the table holds no secret in plain text, deliveries still verify with
the secret shown at registration, a wrong or missing key fails saying which key it needs, keys rotate, and
migration 0016 seals the secrets stored before it.

The table is read with plain SQL, as anyone with a copy of the database would read it; the signatures are checked
by the receiver of webhook_support.py, written from the Standard Webhooks specification. Keys are made by each test
(os.urandom): none is in the repository.
"""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from api_support import Caller, token_for
from click.testing import CliRunner
from sqlalchemy import text
from webhook_support import signature_is_valid

from service.cli import main
from service.persistence.db import current_revision, get_db, make_engine, upgrade
from service.webhooks.secret_box import KEY_DIR, KEY_FILE, SecretBox, key_id_of, secret_box

HOOKS = "/api/v1/webhooks"


def _new_key() -> tuple[bytes, str]:
    key = os.urandom(32)
    return key, base64.b64encode(key).decode()


@pytest.fixture
def make_app(make_app: Any) -> Any:
    return lambda **config: make_app(**{"WEBHOOK_ALLOWED_NETWORKS": ["127.0.0.0/8"], **config})


def _subscribe(admin: Caller, target: str) -> dict[str, Any]:
    response = admin.post(HOOKS, json={"url": target, "events": ["submission.submitted"]})
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def _stored(app: Any) -> list[Any]:
    with get_db(app).engine.connect() as connection:
        return connection.execute(text("SELECT id, secret, secret_key_id FROM webhook_subscription ORDER BY id")).all()


def _log(admin: Caller, hook: dict[str, Any]) -> list[dict[str, Any]]:
    return admin.get(hook["links"]["deliveries"]).get_json()["items"]


def test_the_table_holds_no_plaintext_secret_and_deliveries_verify_with_the_secret_shown_at_registration(
        make_app, receiver, submission_document):
    # Given an app with a key from its configuration
    key, encoded = _new_key()
    app = make_app(WEBHOOK_SECRET_KEY=encoded)
    admin, submitter = token_for(app, "ada", "admin"), token_for(app, "sam", "submitter")

    # When an admin registers a webhook
    hook = _subscribe(admin, receiver.url)

    # Then the secret is in the registration's answer, and nowhere else: not in the row, not in a reading of it
    secret = hook["secret"]
    assert secret.startswith("whsec_")
    ((row_id, stored, key_id),) = _stored(app)
    key_part = secret.removeprefix("whsec_")
    assert secret not in stored and key_part not in stored and base64.b64decode(key_part).hex() not in stored
    assert stored.startswith("v1:") and key_id == key_id_of(key)
    assert "secret" not in admin.get(hook["links"]["self"]).get_json()
    assert all("secret" not in item for item in admin.get(HOOKS).get_json()["items"])
    assert SecretBox.of(key).open(key_id, stored) == secret

    # When a quote is submitted, the receiver gets the event signed with the secret shown at registration
    submitter.post("/api/v1/submissions", json=submission_document)
    (received,) = receiver.received
    assert signature_is_valid(secret, received) and row_id == hook["id"]


def test_a_wrong_key_sends_nothing_and_says_which_key_it_needs_and_the_old_key_opens_it_after_a_rotation(
        make_app, clock, receiver, submission_document):
    # Given a webhook registered under key A
    key_a, encoded_a = _new_key()
    _, encoded_b = _new_key()
    first = make_app(WEBHOOK_SECRET_KEY=encoded_a)
    hook = _subscribe(token_for(first, "ada", "admin"), receiver.url)

    # When the service runs with key B only and an event is sent
    wrong = make_app(WEBHOOK_SECRET_KEY=encoded_b)
    admin = token_for(wrong, "alan", "admin")
    token_for(wrong, "sam", "submitter").post("/api/v1/submissions", json=submission_document)

    # Then nothing is sent, and the delivery log says which key the secret needs and how to give it
    assert receiver.received == []
    (delivery,) = _log(admin, hook)
    assert delivery["state"] == "pending" and delivery["log"][0]["status_code"] is None
    error = delivery["last_error"]
    assert error.startswith(f"not sent: the secret of webhook {hook['id']} was encrypted with key "
                            f"{key_id_of(key_a)}, which is not configured")
    assert "WEBHOOK_SECRET_PREVIOUS_KEYS" in error and encoded_a not in error and encoded_b not in error

    # When key B is current and key A is listed as a previous key, the retry is delivered, signed as registered
    rotated = make_app(WEBHOOK_SECRET_KEY=encoded_b, WEBHOOK_SECRET_PREVIOUS_KEYS=[encoded_a])
    clock.advance(seconds=31)
    result = CliRunner().invoke(main, ["webhook", "deliver"], obj={"app": rotated})
    assert result.exit_code == 0 and "1 delivered" in result.output, result.output
    (received,) = receiver.received
    assert signature_is_valid(hook["secret"], received)

    # and `quotecheck webhook rekey` seals it under key B, after which key A is no longer needed
    result = CliRunner().invoke(main, ["webhook", "rekey"], obj={"app": rotated})
    assert result.exit_code == 0 and result.output.strip().endswith(": 1"), result.output
    ((_, stored, key_id),) = _stored(rotated)
    assert key_id == key_id_of(base64.b64decode(encoded_b))
    assert SecretBox.of(base64.b64decode(encoded_b)).open(key_id, stored) == hook["secret"]


def test_an_altered_ciphertext_does_not_open():
    box = SecretBox.of(os.urandom(32))
    key_id, sealed = box.seal("whsec_c2VjcmV0")
    other_id, _ = SecretBox.of(os.urandom(32)).seal("whsec_c2VjcmV0")
    flipped = sealed[:-6] + ("A" if sealed[-6] != "A" else "B") + sealed[-5:]

    with pytest.raises(Exception, match="does not decrypt with key .*altered"):
        box.open(key_id, flipped)
    with pytest.raises(Exception, match="not in the sealed form"):
        box.open(key_id, "whsec_c2VjcmV0")
    with pytest.raises(Exception, match=f"encrypted with key {other_id}, which is not configured"):
        box.open(other_id, sealed)


def test_with_a_broker_and_no_key_registering_a_webhook_is_refused_saying_which_setting_is_missing(make_app, receiver):
    # Given an app whose tasks go to a broker (the workers share no instance folder with the API) and no key
    app = make_app(CELERY_BROKER_URL="redis://127.0.0.1:9/0")
    admin = token_for(app, "ada", "admin")

    response = admin.post(HOOKS, json={"url": receiver.url, "events": ["submission.submitted"]})

    assert response.status_code == 500 and response.content_type == "application/problem+json"
    problem = response.get_json()
    assert problem["type"].endswith("/configuration-error") and "WEBHOOK_SECRET_KEY" in problem["detail"]
    assert admin.get(HOOKS).get_json()["items"] == [] and _stored(app) == []


@pytest.mark.parametrize("setting, value, says", [
    ("WEBHOOK_SECRET_KEY", "not a key!", "WEBHOOK_SECRET_KEY is not base64"),
    ("WEBHOOK_SECRET_KEY", base64.b64encode(b"16 bytes only...").decode(), "32 bytes in base64.*found 16 bytes"),
    ("WEBHOOK_SECRET_KEY", 1234, "must be a string"),
    ("WEBHOOK_SECRET_PREVIOUS_KEYS", "one key", "a JSON list"),
    ("WEBHOOK_SECRET_PREVIOUS_KEYS", ["AAAA"], r"PREVIOUS_KEYS\[0\] must be 32 bytes"),
])
def test_a_malformed_key_stops_the_start(make_app, setting, value, says):
    from service.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match=says):
        make_app(**{setting: value})


def test_without_a_broker_or_a_key_one_is_generated_in_the_instance_folder_for_the_owner_only(make_app, receiver,
                                                                                            tmp_path):
    app = make_app()
    hook = _subscribe(token_for(app, "ada", "admin"), receiver.url)

    path = Path(app.instance_path) / KEY_DIR / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = base64.b64decode(path.read_text().strip())
    ((_, stored, key_id),) = _stored(app)
    assert key_id == key_id_of(key) and SecretBox.of(key).open(key_id, stored) == hook["secret"]
    # another process on the same instance folder (a second app) reads the same key and opens it too
    assert secret_box(make_app()).open(key_id, stored) == hook["secret"]


def test_0016_seals_the_secrets_stored_before_it_and_downgrading_opens_them(empty_database_url):
    # Given a database at 0015 with a webhook whose secret is stored as it was then, in plain text
    secret = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    engine = make_engine(empty_database_url)
    upgrade(engine, "0015")
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO webhook_subscription (id, url, events, secret, created_by, created_at) "
                                "VALUES (1, 'https://hooks.example.com/q', '[\"submission.approved\"]', :secret, "
                                "'ada', CURRENT_TIMESTAMP)"), {"secret": secret})

    # When it is migrated without a key, it stops and stays at 0015, saying what it needs
    with pytest.raises(RuntimeError, match="encrypts the signing secrets of 1 webhook.*WEBHOOK_SECRET_KEY"):
        upgrade(engine)
    assert current_revision(engine) == "0015"

    # When it is migrated with a key, the row holds the sealed secret and the key's id, and no plain text
    box = SecretBox.of(os.urandom(32))
    upgrade(engine, secret_box=lambda: box)
    with engine.connect() as connection:
        ((stored, key_id),) = connection.execute(text("SELECT secret, secret_key_id FROM webhook_subscription")).all()
    assert current_revision(engine) == "0016" and key_id == box.current_id
    assert secret not in stored and secret.removeprefix("whsec_") not in stored
    assert box.open(key_id, stored) == secret

    # and downgrading opens it again
    from alembic import command

    from service.persistence.db import alembic_config

    config = alembic_config()
    with engine.begin() as connection:
        config.attributes.update(connection=connection, webhook_secret_box=lambda: box)
        command.downgrade(config, "0015")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT secret FROM webhook_subscription")).scalar_one() == secret
    engine.dispose()
