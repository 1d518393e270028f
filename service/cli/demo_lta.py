"""`make demo-lta`: a record signed PAdES B-LTA against a real PKI, from submission to the downloaded files.

Starts the loopback test PKI (CA, OCSP, CRL and TSA over HTTP on 127.0.0.1; service/record/loopback_pki.py),
runs a service configured to sign against it (a fresh SQLite database and instance folder under OUT/), and
through its API: a submitter submits the demo quote, a reviewer waives every check that blocks approval, an
approver approves, and the approver downloads the record as JSON and as PDF. Writes OUT/record-lta.json,
OUT/record-lta.pdf and the PKI's root certificate OUT/pki-root.cert.pem (the one trust root that verifies
them), and stops the PKI. Exit codes: 0 written, 1 a step of the workflow failed, 2 bad input.

    python -m service.cli.demo_lta [SUBMISSION.json] --out DIR
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

DEMO = Path(__file__).resolve().parents[2] / "examples" / "dgx-h100-70b-finetune.json"
JUSTIFICATION = "Demo: the reviewer accepts this check's finding for the long-term-signature demonstration."


class _Caller:
    """The app's test client with one user's bearer token."""

    def __init__(self, app: Any, user: str, role: str) -> None:
        from service.app.accounts import create_token

        self.token = create_token(app, user, role, None, "all", create_user=True).secret
        self.client, self.user = app.test_client(), user

    def send(self, method: str, url: str, expected: int, **kwargs: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        response = self.client.open(url, method=method, headers=headers, **kwargs)
        if response.status_code != expected:
            raise RuntimeError(f"{self.user}: {method} {url} answered {response.status_code}, expected {expected}: "
                               f"{response.get_data(as_text=True)[:600]}")
        return response


def _blocking(view: dict[str, Any]) -> list[str]:
    return [c["id"] for c in view["evaluation"]["checks"]
            if c["status"] in ("fail", "insufficient-data") and c["effective_status"] != "waived"]


def run(submission: dict[str, Any], out: Path, work: Path) -> dict[str, Any]:
    """Returns what was written (paths, record id, timings) after running the demo with its state under ``work``."""
    from service import create_app
    from service.record.loopback_pki import LoopbackPki

    out.mkdir(parents=True, exist_ok=True)
    with LoopbackPki(work / "pki") as pki:
        app = create_app({"INSTANCE_PATH": str(work / "instance"), "DATABASE_URL": f"sqlite:///{work / 'demo.db'}",
                          "TASK_QUEUE": None, **pki.settings()})
        submitter = _Caller(app, "demo-submitter", "submitter")
        reviewer = _Caller(app, "demo-reviewer", "reviewer")
        approver = _Caller(app, "demo-approver", "approver")
        view = submitter.send("POST", "/api/v1/submissions", 201, json=submission).get_json()
        for check_id in _blocking(view):
            view = reviewer.send("POST", f"/api/v1/submissions/{view['id']}/checks/{check_id}/waivers", 201,
                                 json={"justification": JUSTIFICATION}, headers={"If-Match": view["etag"]}).get_json()
        decided = approver.send("POST", f"/api/v1/submissions/{view['id']}/decisions", 201, json={"action": "approve"},
                                headers={"If-Match": view["etag"]}).get_json()
        record_id = decided["final_record_id"]
        (out / "record-lta.json").write_bytes(approver.send("GET", f"/api/v1/records/{record_id}.json", 200).data)
        (out / "record-lta.pdf").write_bytes(approver.send("GET", f"/api/v1/records/{record_id}.pdf", 200).data)
        shutil.copyfile(pki.root_cert_file, out / "pki-root.cert.pem")
    return {"record_id": record_id, "out": str(out)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m service.cli.demo_lta", description=__doc__.splitlines()[0])
    parser.add_argument("submission", nargs="?", default=str(DEMO))
    parser.add_argument("--out", default="out")
    args = parser.parse_args(argv)
    try:
        submission = json.loads(Path(args.submission).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        print(f"error: cannot read {args.submission}: {error}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="quotecheck-demo-lta-") as work:
        try:
            written = run(submission, Path(args.out), Path(work))
        except RuntimeError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    out = written["out"]
    print(f"record {written['record_id']} approved and signed against the loopback PKI (stopped now):\n"
          f"  {out}/record-lta.pdf   PAdES B-LTA\n  {out}/record-lta.json  envelope with the TSA's timestamp\n"
          f"  {out}/pki-root.cert.pem  the trust root: quotecheck verify {out}/record-lta.pdf "
          f"--key {out}/pki-root.cert.pem")
    return 0


if __name__ == "__main__":
    sys.exit(main())
