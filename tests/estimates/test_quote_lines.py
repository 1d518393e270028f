"""Whether a quote adds up (rules/estimates/power_cost/quote_lines.py), on the bundled examples' own line items."""

from __future__ import annotations

import json
from pathlib import Path

from rules.estimates.power_cost.quote_lines import GroupLine, QuoteLine, lines_of, server_lines

EXAMPLES = Path(__file__).parent.parent.parent / "examples"


def _quote(name: str) -> tuple[list[GroupLine], list[QuoteLine]]:
    quote = json.loads((EXAMPLES / name).read_text())["quote"]
    groups = [GroupLine(g["name"], g.get("server_model"), g["count"], g.get("unit_price"))
              for g in quote["node_groups"]]
    lines = [QuoteLine(i, item.get("sku"), item.get("description"), item["quantity"], item.get("unit_price"))
             for i, item in enumerate(quote.get("line_items", []))]
    return groups, lines


def test_the_h200_example_adds_up_its_132_servers_are_one_line_for_two_groups():
    # Given examples/h200-128node-pretraining.json: groups h200 (128) and serve (4) of DGX-H200 at 385,000, and the line
    # 'DGXH-G1400+P2CMI36 "DGX H200 system" 132 at 385,000'
    groups, lines = _quote("h200-128node-pretraining.json")
    assert [line.index for line in lines_of("DGX-H200", lines)] == [0]
    [found] = server_lines(groups, lines)
    assert (found.line_quantity, found.group_count, found.price_gap, found.counts_differ) == (132, 132, 0.0, False)


def test_doubled_node_groups_without_their_line_items_are_set_against_them_naming_both():
    groups, lines = _quote("h200-128node-pretraining.json")
    doubled = [GroupLine(g.name, g.server_model, 2 * g.count, g.unit_price) for g in groups]  # 256 + 8
    [found] = server_lines(doubled, lines)
    assert found.server_model == "DGX-H200" and found.line_indices == (0,) and found.group_names == ("h200", "serve")
    assert (found.line_quantity, found.group_count, found.counts_differ) == (132, 264, True)
    assert found.text == ("line 0 (DGXH-G1400+P2CMI36 'DGX H200 system'): 132 at 385,000 against node groups h200 "
                          "(256 at 385,000) and serve (8 at 385,000)")


def test_a_line_priced_otherwise_than_its_group_gives_the_gap_as_a_share_of_the_groups_price():
    groups, lines = _quote("h200-128node-pretraining.json")
    cheaper = [GroupLine(g.name, g.server_model, g.count, 380000) for g in groups]
    [found] = server_lines(cheaper, lines)
    assert found.price_gap == (385000 - 380000) / 380000  # 1.3 %
    assert not found.counts_differ


def test_a_server_no_line_names_and_a_line_without_quantity_are_not_compared():
    groups = [GroupLine("gpu", "DGX-H100", 16, 289000)]
    assert server_lines(groups, [QuoteLine(0, "BUNDLE-1", "cluster, all in", 1, 5_000_000)]) == []
    assert server_lines(groups, [QuoteLine(0, None, "DGX H100", None, 289000)]) == []
    # separators and case are ignored: "HGX H100 8-GPU server" is a line for HGX-H100-8GPU
    assert lines_of("HGX-H100-8GPU", [QuoteLine(0, None, "HGX H100 8-GPU server", 4, None)])
