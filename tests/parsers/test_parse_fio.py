"""parsers.fio on real ``fio --output-format=json`` documents (tests/data/README.md names each source).

fio stat.c writes ``bw_bytes`` (B/s) = 1000 x io_bytes / runtime_ms and ``bw`` = bw_bytes / 1024 (KiB/s):
each expectation is recomputed from the sample's own io_bytes and runtime.
"""

import copy
import json
from pathlib import Path

import pytest

from parsers import ParseError, fio

DATA = Path(__file__).parents[1] / "data" / "fio"
SEQ_RW_333 = "seq_rw_4k_fio3.33_interrupted.json"
PM883_31 = "samsung_pm883_randread_4k_qd8_4jobs_fio3.1.json"


def sample(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def document(name: str) -> dict:
    text = sample(name)
    return json.loads(text[text.index("{") :])


def parse_error(text: str) -> str:
    with pytest.raises(ParseError) as caught:
        fio.parse(text)
    return str(caught.value)


def test_fio_3_33_read_and_write_bandwidth_from_bw_bytes_after_a_leading_signal_line():
    result = fio.parse(sample(SEQ_RW_333))

    # bw_bytes 31383676 and 161128721 B/s, as printed
    assert result["fio_version"] == "fio-3.33"
    assert result["read_gbs"] == pytest.approx(0.031383676)
    assert result["write_gbs"] == pytest.approx(0.161128721)
    # the same from the sample's io_bytes over runtime: 1511751680 B in 48170 ms, 7761248256 B in 48168 ms
    assert result["read_gbs"] == pytest.approx(1511751680 / 48.170 / 1e9, rel=1e-6)
    assert result["write_gbs"] == pytest.approx(7761248256 / 48.168 / 1e9, rel=1e-6)
    assert result["jobs"] == [
        {
            "name": "sequential_read",
            "groupid": 0,
            "error": 0,
            "rw": "rw",
            "bs": "4k",
            "numjobs": 1,
            "iodepth": 16,
            "read_gbs": pytest.approx(0.031383676),
            "write_gbs": pytest.approx(0.161128721),
        }
    ]


def test_fio_3_1_without_bw_bytes_converts_kib_per_second():
    result = fio.parse(sample(PM883_31))

    # bw 181044 KiB/s; io_bytes 11123564544 B over runtime 60001 ms gives the same to fio's rounding
    assert result["read_gbs"] == pytest.approx(181044 * 1024 / 1e9)
    assert result["read_gbs"] == pytest.approx(11123564544 / 60.001 / 1e9, rel=1e-5)
    assert result["write_gbs"] == 0.0
    (job,) = result["jobs"]
    assert (job["rw"], job["bs"], job["numjobs"], job["iodepth"]) == ("randread", "4k", 4, 8)
    assert result["groups"] == [{"groupid": 0, "read_gbs": pytest.approx(0.185389056), "write_gbs": 0.0}]


def test_jobs_of_one_group_add_up_and_separate_groups_do_not():
    # Given the fio-3.33 job twice in group 0 (run together) and once in group 1 (after a stonewall)
    base = document(SEQ_RW_333)
    job = base["jobs"][0]
    twin, later = copy.deepcopy(job), copy.deepcopy(job)
    twin["jobname"], later["jobname"], later["groupid"] = "twin", "after_stonewall", 1
    later["write"]["bw_bytes"] = 3 * job["write"]["bw_bytes"]
    base["jobs"] = [job, twin, later]

    result = fio.parse(json.dumps(base, indent=2))

    assert [g["groupid"] for g in result["groups"]] == [0, 1]
    assert result["groups"][0]["read_gbs"] == pytest.approx(2 * 0.031383676)
    # read: group 0's two jobs together; write: group 1's single job, three times one job's rate
    assert result["read_gbs"] == pytest.approx(2 * 0.031383676)
    assert result["write_gbs"] == pytest.approx(3 * 0.161128721)


def test_job_options_override_global_options():
    base = document(SEQ_RW_333)
    base["global options"]["iodepth"] = "64"
    base["global options"]["bs"] = "1m"
    del base["jobs"][0]["job options"]["bs"]

    (job,) = fio.parse(json.dumps(base))["jobs"]

    assert (job["bs"], job["iodepth"]) == ("1m", 16)


def test_document_cut_short_names_the_line_where_json_ends():
    lines = sample(SEQ_RW_333).splitlines()

    message = parse_error("\n".join(lines[:40]))

    assert message.startswith("line 40: expected fio JSON, found invalid JSON (")


def test_document_without_jobs_is_rejected():
    assert parse_error('{\n  "fio version" : "fio-3.33",\n  "jobs" : []\n}\n') == (
        "line 1: expected a fio JSON document with a non-empty 'jobs' list"
    )


def test_job_without_its_write_figures_names_the_job_line():
    base = document(PM883_31)
    del base["jobs"][0]["write"]
    text = json.dumps(base, indent=2)

    assert parse_error(text) == "line 8: expected a 'write' object in job 'iotest', found none"


def test_fio_error_text_without_json_is_rejected():
    # what fio printed in a run whose job file named a directory that did not exist
    text = 'fio: "C is not a directory\nfio: job global dropped\n'

    assert parse_error(text) == "line 3: expected a fio JSON document ('{' at the start of a line), found none"


def test_two_documents_from_one_output_file_are_rejected():
    text = sample(PM883_31) + "\n" + sample(PM883_31)

    assert parse_error(text).endswith("expected one fio JSON document, found a second one")
