"""People, not tokens: four-eyes compares users, tokens expire and rotate, and scope ``own`` sees only its own.

Every test runs on SQLite and on PostgreSQL (tests/api/conftest.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from api_support import Caller, token_for, url, waive_all
from flask import Flask
from sqlmodel import select
from task_support import example, three_variants

from rules.policy import default_policy
from service.accounts.auth import create_token
from service.accounts.users import name_key
from service.persistence.db import get_db
from service.persistence.models import ApiToken, User


def submit(caller: Caller, document: dict[str, Any]) -> dict[str, Any]:
    response = caller.post("/api/v1/submissions", json=document)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def approve(caller: Caller, view: dict[str, Any]) -> Any:
    return caller.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])


def users_of(app: Flask) -> list[User]:
    with get_db(app).session() as session:
        return list(session.exec(select(User)).all())


# --- four eyes are two people ----------------------------------------------------------------------------

def test_two_tokens_of_one_user_cannot_submit_and_approve_the_same_quote(app, submission_document):
    # Given alice submits with her submitter token, and holds an approver token too
    alice_submits = token_for(app, "alice", "submitter")
    alice_approves = token_for(app, "alice", "approver")
    view = waive_all(token_for(app, "rita", "reviewer"), submit(alice_submits, submission_document))

    # When she approves with her second token
    response = approve(alice_approves, view)

    # Then the four-eyes rule refuses: it is the same person
    assert response.status_code == 403, response.get_json()
    assert response.mimetype == "application/problem+json"
    assert "four-eyes" in response.get_json()["detail"] and "alice" in response.get_json()["detail"]
    # and someone else may
    assert approve(token_for(app, "bob", "approver"), view).get_json()["state"] == "approved"


def test_a_waiver_author_cannot_approve_with_another_token(app, submission_document):
    # Given rita waived the blocking checks with her reviewer token
    view = waive_all(token_for(app, "rita", "reviewer"), submit(token_for(app, "sam", "submitter"),
                                                                submission_document))
    assert view["waivers"] and {w["author"] for w in view["waivers"]} == {"rita"}

    # When she approves as an approver (another token of hers)
    response = approve(token_for(app, "rita", "approver"), view)

    # Then she is refused
    assert response.status_code == 403
    assert "waived" in response.get_json()["detail"]


def test_the_submitter_cannot_waive_checks_of_their_own_quote(app, submission_document):
    view = submit(token_for(app, "sam", "submitter"), submission_document)

    response = token_for(app, "Sam", "reviewer").post(url(view["id"], "checks", "training-objective", "waivers"),
                                                       json={"justification": "x" * 30}, if_match=view["etag"])

    assert response.status_code == 403 and "four-eyes" in response.get_json()["detail"]


def test_name_variants_are_one_user(app, submission_document):
    # Given tokens made out to "Alice", "alice " and "alice."
    submitter = token_for(app, "Alice", "submitter")
    reviewer = token_for(app, "alice ", "reviewer")
    approver = token_for(app, "alice.", "approver")

    # Then there is one user, shown as first named
    assert [(u.name, u.name_key) for u in users_of(app)] == [("Alice", "alice")]
    assert name_key("ＡＬＩＣＥ") == "alice"  # fullwidth letters fold under NFKC too

    # and none of the variants may approve what another submitted or waived
    view = submit(submitter, submission_document)
    assert view["submitter"] == "Alice"
    waiver = reviewer.post(url(view["id"], "checks", "training-objective", "waivers"),
                           json={"justification": "x" * 30}, if_match=view["etag"])
    assert waiver.status_code == 403
    view = waive_all(token_for(app, "rita", "reviewer"), view)
    assert approve(approver, view).status_code == 403


@pytest.mark.parametrize("lookalike", ["\u0430lice", "al\u0131ce", "Al\u0130ce", "\u13aalice", "ａｌｉｃｅ"],
                         ids=["cyrillic-a", "dotless-i", "capital-i-with-dot", "cherokee-a", "fullwidth"])
def test_names_that_read_alike_are_one_user_and_cannot_approve_each_other(app, submission_document, lookalike):
    # Given alice submits, and an approver token is made out to a name that reads as hers (UTS #39 skeleton)
    view = waive_all(token_for(app, "rita", "reviewer"), submit(token_for(app, "alice", "submitter"),
                                                                submission_document))
    approver = token_for(app, lookalike, "approver")
    # Then it is her token (one user), and her approval of her own quote is refused by the four-eyes rule
    assert [u.name_key for u in users_of(app) if u.name_key.startswith("al")] == ["alice"]
    response = approve(approver, view)
    assert response.status_code == 403 and "four-eyes" in response.get_json()["detail"]


@pytest.mark.parametrize("invisible", ["\u3164", "\u115f", "\u034f", "\ufe0f", "\u17b4"])
def test_a_user_name_with_an_invisible_letter_is_refused(app, invisible):
    from service.accounts.users import check_name
    from service.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match=f"U\\+{ord(invisible):04X}"):
        check_name(f"alice{invisible}")


def test_approvals_required_two_needs_two_distinct_users(make_app, tmp_path, submission_document):
    # Given a policy that requires two approvals
    document = json.loads(json.dumps(default_policy().document))
    document["approval"]["required_approvers"] = 2
    (tmp_path / "policy.json").write_text(json.dumps(document))
    app = make_app(POLICY_FILE=str(tmp_path / "policy.json"))
    view = waive_all(token_for(app, "rita", "reviewer"), submit(token_for(app, "sam", "submitter"),
                                                                submission_document))

    # When ann approves with one token, and again with a second token of hers
    first = approve(token_for(app, "ann", "approver"), view)
    assert first.status_code == 201 and first.get_json()["state"] == "evaluated"
    again = token_for(app, "Ann", "admin").post(url(view["id"], "decisions"), json={"action": "approve"},
                                                if_match=first.headers["ETag"])

    # Then the second approval of the same person is refused and the state still awaits approval
    assert again.status_code == 409, again.get_json()
    assert "already approved" in again.get_json()["detail"]
    assert token_for(app, "rita", "reviewer").get(url(view["id"])).get_json()["state"] == "evaluated"

    # and a second person's approval approves it
    second = approve(token_for(app, "bob", "approver"), first.get_json())
    assert second.status_code == 201 and second.get_json()["state"] == "approved"
    assert second.get_json()["approval"]["approvers"] == ["ann", "bob"]


# --- tokens expire, rotate, and die with their user -------------------------------------------------------

def test_an_expired_token_gets_401_saying_it_expired(app, clock):
    caller = token_for(app, "tess", "reviewer", days=1)
    assert caller.get("/api/v1/submissions").status_code == 200

    clock.advance(days=1, seconds=1)
    response = caller.get("/api/v1/submissions")

    assert response.status_code == 401
    assert response.mimetype == "application/problem+json"
    assert "expired" in response.get_json()["detail"]
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]


def test_the_default_lifetime_comes_from_the_config(make_app, clock):
    app = make_app(TOKEN_LIFETIME_DAYS=7)
    from click.testing import CliRunner

    from service.cli import main

    result = CliRunner().invoke(main, ["token", "create", "--user", "nobody", "--role", "admin"], obj={"app": app})
    assert result.exit_code == 2 and "no user 'nobody'" in result.stderr
    assert CliRunner().invoke(main, ["user", "create", "Vera"], obj={"app": app}).exit_code == 0
    result = CliRunner().invoke(main, ["token", "create", "--user", "vera", "--role", "admin"], obj={"app": app})
    assert result.exit_code == 0, result.output
    caller = Caller(app, "Vera", "admin", result.stdout.strip())
    clock.advance(days=6)
    assert caller.get("/api/v1/submissions").status_code == 200
    clock.advance(days=1, seconds=1)
    assert caller.get("/api/v1/submissions").status_code == 401


def test_a_disabled_users_tokens_get_401(app):
    from click.testing import CliRunner

    from service.cli import main

    first, second = token_for(app, "dora", "reviewer"), token_for(app, "Dora", "approver")
    result = CliRunner().invoke(main, ["user", "disable", "DORA"], obj={"app": app})

    assert result.exit_code == 0, result.output
    for caller in (first, second):
        response = caller.get("/api/v1/submissions")
        assert response.status_code == 401 and "disabled" in response.get_json()["detail"]


def test_rotation_keeps_the_user_and_the_old_secret_stops_working(app, submission_document):
    from click.testing import CliRunner

    from service.cli import main

    # Given sam submitted with a token, which he then rotates
    old = token_for(app, "sam", "submitter", scope="own")
    view = submit(old, submission_document)
    prefix = old.token.split("_")[1]
    result = CliRunner().invoke(main, ["token", "rotate", prefix, "--expires", "30d"], obj={"app": app})
    assert result.exit_code == 0, result.output
    new = Caller(app, "sam", "submitter", result.stdout.strip())

    # Then the old secret gets 401 naming its replacement, the new one works as the same user and scope
    refused = old.get("/api/v1/submissions")
    assert refused.status_code == 401 and "rotated" in refused.get_json()["detail"]
    assert new.get(url(view["id"])).status_code == 200
    assert new.post(url(view["id"], "revisions"), json=submission_document, if_match=view["etag"]).status_code == 201
    with get_db(app).session() as session:
        rows = session.exec(select(ApiToken).order_by(ApiToken.id)).all()
    assert [r.user_id for r in rows] == [rows[0].user_id] * 2
    assert rows[1].rotated_from_id == rows[0].id and rows[1].scope == "own" and rows[0].revoked_at is not None
    history = CliRunner().invoke(main, ["token", "list", "--all"], obj={"app": app})
    assert f"rotated to {rows[1].prefix}" in history.output


# --- who sees what -----------------------------------------------------------------------------------------

def test_a_vendor_scoped_token_sees_only_its_own_submissions(app, submission_document):
    # Given two vendors with scoped tokens, each of whom submitted a quote
    acme, other = token_for(app, "acme", "submitter", scope="own"), token_for(app, "globex", "submitter", scope="own")
    mine = submit(acme, submission_document)
    submission_document["quote"]["vendor"] = "Globex"
    theirs = submit(other, submission_document)
    reviewer = token_for(app, "rita", "reviewer")

    # Then the list shows each vendor its own only, and a reviewer both
    listed = acme.get("/api/v1/submissions").get_json()
    assert [i["id"] for i in listed["items"]] == [mine["id"]] and listed["total"] == 1
    assert acme.get("/api/v1/submissions?vendor=globex").get_json()["total"] == 0
    assert reviewer.get("/api/v1/submissions").get_json()["total"] == 2

    # and everything of the other vendor's is 404, as if it did not exist
    record = theirs["evaluation"]["record_id"]
    for path in (url(theirs["id"]), url(theirs["id"], "audit"), f"/api/v1/records/{record}.json",
                 f"/api/v1/records/{record}.pdf"):
        response = acme.get(path)
        assert response.status_code == 404, path
        assert response.mimetype == "application/problem+json"
        assert reviewer.get(path).status_code == 200, path
    revision = acme.post(url(theirs["id"], "revisions"), json=submission_document, if_match=theirs["etag"])
    assert revision.status_code == 404
    assert acme.get(url("no-such-id")).get_json()["detail"] == \
        acme.get(url(theirs["id"])).get_json()["detail"].replace(theirs["id"], "no-such-id")

    # while its own stays readable
    assert acme.get(url(mine["id"])).status_code == 200
    assert acme.get(url(mine["id"], "audit")).status_code == 200
    assert acme.get(f"/api/v1/records/{mine['evaluation']['record_id']}.json").status_code == 200


def test_a_vendor_scoped_token_reads_only_its_own_tasks(app):
    # Given a vendor (scope own) and an in-house submitter who each asked for the same comparison
    acme, sam = token_for(app, "acme", "submitter", scope="own"), token_for(app, "sam", "submitter")
    body = {"submission": example(), "variants": three_variants(example())}
    vendors = acme.post("/api/v1/comparisons", json=body)
    in_house = sam.post("/api/v1/comparisons", json=body)
    assert vendors.status_code == in_house.status_code == 202

    # Then the vendor's is a task of its own, which it and a reviewer read; the in-house one is 404 to it
    assert vendors.get_json()["id"] != in_house.get_json()["id"]
    assert acme.get(vendors.headers["Location"]).get_json()["state"] == "SUCCESS"
    assert token_for(app, "rita", "reviewer").get(vendors.headers["Location"]).status_code == 200
    hidden = acme.get(in_house.headers["Location"])
    assert hidden.status_code == 404 and hidden.mimetype == "application/problem+json"
    assert sam.get(in_house.headers["Location"]).status_code == 200


def test_a_vendor_reads_its_approved_record_and_pdf_task_and_no_other_vendor_does(app, submission_document):
    # Given acme's quote, approved, and a second vendor
    acme, globex = token_for(app, "acme", "submitter", scope="own"), token_for(app, "globex", "submitter", scope="own")
    view = waive_all(token_for(app, "rita", "reviewer"), submit(acme, submission_document))
    final = approve(token_for(app, "bob", "approver"), view).get_json()["final_record_id"]
    record = f"/api/v1/records/{final}"

    # When acme asks for the signed PDF in the background
    task = acme.get(f"{record}.pdf", headers={"Prefer": "respond-async"})
    assert task.status_code == 202, task.get_json()

    # Then acme reads the signed record, the task and the PDF; the other vendor gets 404 for each
    assert acme.get(f"{record}.json").headers["Record-Status"] == "signed"
    assert acme.get(task.headers["Location"]).get_json()["state"] == "SUCCESS"
    assert acme.get(f"{record}.pdf").mimetype == "application/pdf"
    for path in (f"{record}.json", f"{record}.pdf", task.headers["Location"]):
        assert globex.get(path).status_code == 404, path


@pytest.mark.parametrize("lookalike", ["\u0430lice", "alice\u034f", "\u3164alice"],
                         ids=["cyrillic-a", "combining-grapheme-joiner", "hangul-filler"])
def test_cli_user_create_of_a_name_that_reads_as_alice_exits_2_naming_alice(app, lookalike):
    from click.testing import CliRunner

    from service.cli import main

    assert CliRunner().invoke(main, ["user", "create", "alice"], obj={"app": app}).exit_code == 0
    refused = CliRunner().invoke(main, ["user", "create", lookalike], obj={"app": app})
    assert refused.exit_code == 2 and "a user 'alice' exists already" in refused.stderr, refused.stderr


def test_cli_users_and_tokens(app):
    from click.testing import CliRunner

    from service.cli import main

    def cli(*args: str) -> Any:
        return CliRunner().invoke(main, list(args), obj={"app": app})

    # users: created once per identity, listed, disabled
    assert cli("user", "create", " Ada  Lovelace ").output == "created user Ada Lovelace\n"
    taken = cli("user", "create", "ada.lovelace")
    assert taken.exit_code == 2 and "exists already" in taken.stderr and "'Ada Lovelace'" in taken.stderr
    bidi = cli("user", "create", "eve\u202e")
    assert bidi.exit_code == 2 and "U+202E" in bidi.stderr
    # tokens: for an existing user, with a lifetime and a scope; bad input is exit 2 naming the option
    first = cli("token", "create", "--user", "ada lovelace", "--role", "submitter", "--expires", "30d",
                "--scope", "own")
    assert first.exit_code == 0, first.output
    assert "scope own" in first.stderr and first.stdout.startswith("qc_")
    second = cli("token", "create", "--user", "Ada Lovelace", "--role", "reviewer")
    assert second.exit_code == 0, second.output
    assert "--expires '3 days'" in cli("token", "create", "--user", "ada", "--role", "admin",
                                        "--expires", "3 days").stderr
    assert "for submitters" in cli("token", "create", "--user", "Ada Lovelace", "--role", "admin",
                                   "--scope", "own").stderr
    assert cli("token", "create", "--role", "admin").exit_code == 2
    listed = cli("token", "list", "--user", "ADA LOVELACE").output.splitlines()
    assert listed[0].split() == ["PREFIX", "USER", "ROLE", "SCOPE", "CREATED", "EXPIRES", "STATUS"]
    assert [line.split()[3:5] for line in listed[1:]] == [["submitter", "own"], ["reviewer", "all"]]
    assert "2" in cli("user", "list").output.splitlines()[1].split()
    # revoke: by prefix, or by user when that user has a single unrevoked token
    ambiguous = cli("token", "revoke", "--name", "Ada Lovelace")
    assert ambiguous.exit_code == 2 and "2 unrevoked tokens" in ambiguous.stderr
    prefix = first.stdout.strip().split("_")[1]
    assert cli("token", "revoke", prefix).exit_code == 0
    assert cli("token", "revoke", "--name", "ada lovelace").exit_code == 0
    assert cli("token", "list").output.splitlines()[1:] == []
    assert [line.split()[-1] for line in cli("token", "list", "--all").output.splitlines()[1:]] == ["revoked"] * 2
    assert cli("token", "rotate", prefix).exit_code == 2
    assert cli("user", "disable", "ada").exit_code == 2
    assert cli("user", "disable", "ada-lovelace").exit_code == 0
    assert "user disabled" in cli("token", "list", "--all").output
    refused = cli("token", "create", "--name", "Ada Lovelace", "--role", "admin")
    assert refused.exit_code == 2 and "disabled" in refused.stderr


@pytest.mark.parametrize("role", ["reviewer", "approver", "admin"])
def test_scope_own_is_for_submitters_only(app, role):
    from service.errors import InvalidRequest

    with get_db(app).session() as session, pytest.raises(InvalidRequest, match="for submitters"):
        create_token(session, "olga", role, datetime.now(UTC), scope="own")
