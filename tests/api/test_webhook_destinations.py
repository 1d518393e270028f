"""Where a webhook may go (service/webhooks/addresses.py): public addresses, and the networks WEBHOOK_ALLOWED_NETWORKS
lists; never a metadata service. Refused when the URL is accepted and again, after name resolution, at each attempt.

No test here registers a destination off this machine: the private and public cases are checked on addresses alone,
so that a broken rule cannot send traffic anywhere."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest
from api_support import token_for

from service.webhooks.addresses import refusal, resolved_refusal

HOOKS = "/api/v1/webhooks"


@pytest.mark.parametrize("target", [
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",  # AWS, GCP and Azure metadata
    "http://[fd00:ec2::254]/latest/api/token",  # AWS metadata over IPv6
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://127.0.0.1:6379/", "http://localhost:5432/", "http://[::1]/hooks", "http://[::ffff:127.0.0.1]/hooks",
    "http://0.0.0.0/hooks", "http://[fe80::1]/hooks", "https://LOCALHOST./hooks"])
def test_a_webhook_to_this_host_or_a_metadata_service_is_refused_naming_the_url(app, target):
    admin = token_for(app, "ada", "admin")
    response = admin.post(HOOKS, json={"url": target, "events": ["submission.approved"]})
    assert response.status_code == 422 and response.mimetype == "application/problem+json"
    problem = response.get_json()
    assert [e["pointer"] for e in problem["errors"]] == ["/url"], problem
    assert "server-side request forgery" in problem["errors"][0]["message"]
    assert admin.get(HOOKS).get_json()["items"] == []  # nothing stored


@pytest.mark.parametrize(("address", "refused"), [
    ("10.20.30.40", True), ("172.16.0.1", True), ("192.168.1.10", True), ("fc00::1", True), ("100.64.0.1", True),
    ("192.0.2.10", True), ("93.184.216.34", False), ("2606:2800:220:1:248:1893:25c8:1946", False)])
def test_only_public_addresses_by_default_and_a_listed_network_too(address, refused):
    from service.webhooks.addresses import allowed_networks

    assert (refusal(ipaddress.ip_address(address)) is not None) == refused
    listed = allowed_networks(["10.20.0.0/16", "fc00::/7", "192.168.1.0/24"])
    assert refusal(ipaddress.ip_address(address), listed) is None or address in ("172.16.0.1", "100.64.0.1",
                                                                                 "192.0.2.10")


def test_a_listed_network_never_admits_a_metadata_service():
    from service.webhooks.addresses import allowed_networks

    everything = allowed_networks(["0.0.0.0/0", "::/0"])
    assert refusal(ipaddress.ip_address("169.254.169.254"), everything) == "a cloud metadata service"
    assert refusal(ipaddress.ip_address("fd00:ec2::254"), everything) == "a cloud metadata service"


def _resolves_to(*addresses: str) -> Any:
    def resolve(host: str, port: int, **_: Any) -> list[tuple]:
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in addresses]
    return resolve


def test_a_name_that_resolves_to_a_refused_address_is_refused_at_the_attempt():
    # A name accepted when subscribed can point at the metadata service later (DNS rebinding): checked per attempt
    from service.webhooks.addresses import allowed_networks

    assert resolved_refusal("hooks.example", 443, (), _resolves_to("93.184.216.34")) is None
    why = resolved_refusal("hooks.example", 443, (), _resolves_to("93.184.216.34", "169.254.169.254"))
    assert why == "hooks.example resolves to 169.254.169.254, a cloud metadata service"
    assert "loopback" in resolved_refusal("hooks.example", 80, (), _resolves_to("127.0.0.2"))
    assert "private" in resolved_refusal("hooks.example", 80, (), _resolves_to("10.0.0.7"))
    # loopback only where the setting lists it
    assert resolved_refusal("hooks.example", 80, allowed_networks(["127.0.0.0/8"]), _resolves_to("127.0.0.2")) is None


def test_an_attempt_to_a_refused_address_is_not_sent_and_the_log_says_why(make_app, submission_document):
    from service.persistence.db import get_db
    from service.webhooks.delivery import Outbox

    # Given a webhook to loopback, subscribed while the setting allowed it, then disallowed
    app = make_app(WEBHOOK_ALLOWED_NETWORKS=["127.0.0.0/8"])
    admin = token_for(app, "ada", "admin")
    hook = admin.post(HOOKS, json={"url": "http://127.0.0.1:9/hooks", "events": ["submission.submitted"]}).get_json()
    app.config["WEBHOOK_ALLOWED_NETWORKS"] = []
    # When a quote is submitted and the outbox drained
    assert token_for(app, "sam", "submitter").post("/api/v1/submissions", json=submission_document).status_code == 201
    with app.app_context():
        Outbox(get_db(app), app.config).drain()
    # Then nothing was sent, and the delivery log says why
    [delivery] = admin.get(hook["links"]["deliveries"]).get_json()["items"]
    assert delivery["last_error"] == "not sent: loopback (this host)", delivery
