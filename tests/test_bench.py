"""`make bench`'s judgements (issue 25): which figure each target reads, and what the references measure.

The timings themselves are `make bench`'s; here the figures are made up, so each test fails when a target
reads the wrong reference or the wrong part of an evaluation.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import api_path, evaluation
from bench.evaluation import EXCLUDED, excluded_callable, excluded_clock, judge_evaluation
from rules.evaluate import evaluate

ROOT = Path(__file__).resolve().parent.parent
NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
DGX = ROOT / "examples" / "dgx-h100-70b-finetune.json"
FAIL_70B = ROOT / "examples" / "fail-70b-ddp-one-rack.json"


# --- the evaluation without the simulation and searches -----------------------------------------------------

def test_each_excluded_function_is_called_where_the_clock_replaces_it() -> None:
    """A function that moved, or a call site that now reaches it under another name, would time nothing."""
    calls = {}
    for seam in EXCLUDED:
        with excluded_clock((seam,)) as clock:
            for path in (DGX, FAIL_70B):
                evaluate(json.loads(path.read_text()), now=NOW)
        calls[seam[1]] = clock.calls
    assert all(calls.values()), calls


def test_the_clock_leaves_the_record_unchanged_and_puts_every_function_back() -> None:
    document = json.loads(DGX.read_text())
    before = [excluded_callable(module, path) for module, path in EXCLUDED]
    plain = evaluate(document, now=NOW)
    with excluded_clock() as clock:
        timed = evaluate(document, now=NOW)
        assert [excluded_callable(module, path)[2] for module, path in EXCLUDED] != [f for _, _, f in before]
    assert timed == plain
    assert clock.seconds > 0
    assert [excluded_callable(module, path) for module, path in EXCLUDED] == before


def test_the_clock_counts_nested_excluded_calls_once() -> None:
    clock = evaluation.ExcludedClock()
    inner = clock.timed(lambda: None)
    outer = clock.timed(lambda: inner())
    outer()
    assert clock.calls == 1


def test_the_ratio_target_reads_the_evaluation_less_the_excluded_time() -> None:
    # 12 ms evaluations of which 6 in the simulation and searches, 4.5 ms validations: whole 2.67, rest 1.33.
    figures = judge_evaluation([(0.012, 0.006, 0.0045)] * 20)
    assert figures.whole_ratio == pytest.approx(12 / 4.5)
    assert figures.rest_ratio == pytest.approx(6 / 4.5)
    assert figures.verdicts == [True, True]
    assert judge_evaluation([(0.012, 0.002, 0.0045)] * 20).verdicts == [False, True]  # rest 2.22


def test_the_p95_target_reads_the_whole_evaluation() -> None:
    # the rest is 1 ms, far within its ratio; two of twenty whole evaluations take 60 ms.
    samples = [(0.010, 0.009, 0.004)] * 18 + [(0.060, 0.059, 0.004)] * 2
    figures = judge_evaluation(samples)
    assert figures.p95_ms > 50
    assert figures.verdicts == [True, False]


# --- POST /api/v1/submissions against the reference ---------------------------------------------------------

def _runs(service: float, reference: float, bare: float, failed: int = 0) -> api_path.Runs:
    def run(rps: float, failures: int = 0) -> dict[str, float]:
        return {"rps": rps, "p50_ms": 100.0, "p99_ms": 150.0, "failed": failures, "requests": rps * 10}

    every = {"service": (service, failed), "reference": (reference, 0), "bare": (bare, 0), "evaluate": (bare / 7, 0),
             "store": (bare / 2, 0)}
    return {label: {c: [run(*every[label]) for _ in range(3)] for c in counts}
            for label, (_, counts) in api_path.SERVERS.items()}


def test_the_api_target_is_the_service_against_the_reference_not_the_bare_endpoint(capsys) -> None:
    assert api_path.judge_api(_runs(service=60, reference=110, bare=2000)) == [True, True, True, True]
    out = capsys.readouterr().out
    assert "service ÷ reference 0.545" in out and "service ÷ bare 0.030" in out
    assert api_path.judge_api(_runs(service=60, reference=130, bare=100)) == [False, True, False, True]


def test_a_failed_request_misses_the_api_target() -> None:
    assert api_path.judge_api(_runs(service=60, reference=110, bare=2000, failed=1))[::2] == [False, False]


def test_the_reference_serves_every_connection_count_the_target_reads() -> None:
    assert api_path.SERVERS["reference"][1] == api_path.SERVERS["service"][1] == api_path.CONNECTIONS
    assert api_path.SERVERS["reference"][0] == "bench.reference_apps:reference_app()"


@pytest.mark.postgres
def test_the_reference_endpoint_stores_the_services_record_as_one_row(monkeypatch) -> None:
    psycopg = pytest.importorskip("psycopg")
    from bench import reference_apps

    try:
        psycopg.connect(**api_path.PG_ADMIN, connect_timeout=3).close()
    except psycopg.Error as error:
        pytest.skip(f"PostgreSQL on 127.0.0.1:5432 is unreachable: {error}")
    body = DGX.read_bytes()
    with api_path.postgres_database() as url:
        conninfo = url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(conninfo, autocommit=True) as connection:
            for ddl in reference_apps.STORE_TABLES_DDL:
                connection.execute(ddl)
            monkeypatch.setenv("BENCH_STORE_URL", conninfo)
            client = reference_apps.reference_app().test_client()
            answer = client.post("/api/v1/submissions", data=body, content_type="application/json")
            assert answer.status_code == 200 and answer.get_json() == {"id": 1}
            assert client.post("/api/v1/submissions", data=b"{}").status_code == 422
            rows = connection.execute(f"SELECT body FROM {reference_apps.RECORD_TABLE}").fetchall()
            assert connection.execute(f"SELECT count(*) FROM {reference_apps.STORE_TABLE}").fetchone() == (0,)
    assert len(rows) == 1
    stored = rows[0][0]
    expected = evaluate(json.loads(body), now=datetime.fromisoformat(stored["evaluated_at"]))
    assert stored == json.loads(json.dumps(expected))
