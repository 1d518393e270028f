"""parsers.csv_series: scaling points and sustained power (mean, nearest-rank p95, max) per GPU or node.

No public capture was found (tests/data/README.md); the power input is written in the layout of
``nvidia-smi --query-gpu=timestamp,index,power.draw --format=csv -l 1`` (``2024/05/01 12:00:00.000, 0,
500.00 W``), and the expectations follow from the readings chosen: twenty readings 500, 510, ... 690 W
have mean 595 W, nearest-rank p95 the 19th smallest (680 W) and max 690 W.
"""

import pytest

from parsers import ParseError, csv_series

RAMP_W = [500 + 10 * i for i in range(20)]


def nvidia_smi_csv(readings: dict[int, list[float]]) -> str:
    lines = ["timestamp, index, power.draw [W]"]
    for second in range(len(next(iter(readings.values())))):
        for gpu, watts in readings.items():
            lines.append(f"2024/05/01 12:00:{second:02d}.000, {gpu}, {watts[second]:.2f} W")
    return "\n".join(lines) + "\n"


def parse_error(parser, text: str) -> str:
    with pytest.raises(ParseError) as caught:
        parser(text)
    return str(caught.value)


# ---------------------------------------------------------------- power


def test_nvidia_smi_power_csv_gives_sustained_figures_per_gpu():
    result = csv_series.parse_power(nvidia_smi_csv({0: RAMP_W, 1: [300.0] * 20}))

    assert result["scope"] == "gpu"
    assert result["entities"] == [
        {
            "name": "0",
            "samples": 20,
            "mean_w": 595.0,
            "p95_w": 680.0,
            "max_w": 690.0,
            "start": "2024/05/01 12:00:00.000",
            "end": "2024/05/01 12:00:19.000",
            "window_s": 19.0,
        },
        {
            "name": "1",
            "samples": 20,
            "mean_w": 300.0,
            "p95_w": 300.0,
            "max_w": 300.0,
            "start": "2024/05/01 12:00:00.000",
            "end": "2024/05/01 12:00:19.000",
            "window_s": 19.0,
        },
    ]


def test_node_power_export_with_epoch_seconds_and_a_host_column():
    text = "timestamp,host,watts\n1714564800,node-a,6500\n1714564830,node-a,6900\n1714564800,node-b,7100\n"

    result = csv_series.parse_power(text)

    assert result["scope"] == "node"
    assert [(e["name"], e["mean_w"], e["max_w"], e["window_s"]) for e in result["entities"]] == [
        ("node-a", 6700.0, 6900.0, 30.0),
        ("node-b", 7100.0, 7100.0, 0.0),
    ]


def test_single_series_without_an_entity_column_has_no_scope():
    text = "time;power_w\n2024-05-01T12:00:00+00:00;4200\n2024-05-01T12:01:00+00:00;4400\n"

    result = csv_series.parse_power(text)

    assert result["scope"] is None
    assert result["entities"][0]["name"] == "all"
    assert (result["entities"][0]["mean_w"], result["entities"][0]["window_s"]) == (4300.0, 60.0)


def test_nearest_rank_percentile_small_cases():
    assert csv_series.nearest_rank_percentile([7.0], 95) == 7.0
    assert csv_series.nearest_rank_percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert csv_series.nearest_rank_percentile([4.0, 1.0, 3.0, 2.0], 95) == 4.0


def test_unsupported_power_reading_names_the_line():
    text = nvidia_smi_csv({0: RAMP_W}).replace("520.00 W", "[N/A]")

    assert parse_error(csv_series.parse_power, text) == (
        "line 4: expected power.draw as watts (a number, optionally with ' W'), found '[N/A]'"
    )


def test_row_cut_short_names_the_expected_fields():
    text = nvidia_smi_csv({0: RAMP_W}) + "2024/05/01 12:00:20.000, 0\n"

    assert parse_error(csv_series.parse_power, text) == (
        "line 22: expected 3 fields (timestamp, index, power.draw), found 2"
    )


def test_power_csv_without_a_power_column_is_rejected():
    assert parse_error(csv_series.parse_power, "timestamp, index, temperature.gpu\nx, 0, 40\n") == (
        "line 1: expected a power column in W (watts, power.draw), found columns timestamp, index, temperature.gpu"
    )


def test_timestamp_that_does_not_parse_is_named():
    text = "timestamp,watts\nyesterday,500\n"

    assert parse_error(csv_series.parse_power, text) == (
        "line 2: expected a timestamp (epoch seconds, ISO 8601 or YYYY/MM/DD HH:MM:SS.fff), found 'yesterday'"
    )


def test_header_without_rows_is_truncated():
    assert parse_error(csv_series.parse_power, "timestamp, index, power.draw [W]\n") == (
        "line 2: expected rows after the header (timestamp, index, power.draw), found none"
    )


# ---------------------------------------------------------------- scaling


def test_scaling_points_in_file_order():
    text = "gpus,tokens_per_s\n8,125000\n16,241000.5\n64,902000\n"

    assert csv_series.parse_scaling(text) == {
        "points": [
            {"gpus": 8, "tokens_per_s": 125000.0},
            {"gpus": 16, "tokens_per_s": 241000.5},
            {"gpus": 64, "tokens_per_s": 902000.0},
        ]
    }


def test_scaling_column_names_are_matched_without_case_or_units():
    text = "# measured with torchtitan\nWorld_Size\tTokens_per_sec [tok/s]\n8\t125000\n"

    assert csv_series.parse_scaling(text)["points"] == [{"gpus": 8, "tokens_per_s": 125000.0}]


def test_gpu_count_given_twice_is_rejected():
    assert parse_error(csv_series.parse_scaling, "gpus,tokens_per_s\n8,1\n8,2\n") == (
        "line 3: expected each GPU count once, found 8 again (first on line 2)"
    )


def test_gpu_count_that_is_not_a_positive_integer_is_rejected():
    assert parse_error(csv_series.parse_scaling, "gpus,tokens_per_s\n8.5,1\n") == (
        "line 2: expected gpus as a positive integer, found '8.5'"
    )


def test_throughput_that_is_not_positive_is_rejected():
    assert parse_error(csv_series.parse_scaling, "gpus,tokens_per_s\n8,0\n") == (
        "line 2: expected tokens_per_s as a positive number, found '0'"
    )


def test_scaling_csv_without_a_throughput_column_is_rejected():
    assert parse_error(csv_series.parse_scaling, "gpus,samples_per_s\n8,10\n") == (
        "line 1: expected a throughput column (tokens_per_s), found columns gpus, samples_per_s"
    )


def test_empty_input_is_rejected():
    assert parse_error(csv_series.parse_scaling, "\n") == "line 2: expected a CSV header row, found empty input"
