"""Each node's billing record decides its billing where the instance cannot tell (issue 37 item 9):
a node recovered on-demand is priced and placed on-demand, not as its cluster's spot."""

from __future__ import annotations

from trainkit.money.cost import billing_records, node_spot


def _record(address: str, index, spot: bool, max_price=None) -> dict:
    return {"type": "terraform_data", "address": address, "index": index,
            "values": {"input": {"spot": spot, "max_price": max_price}}}


def test_a_node_record_wins_over_the_cluster_record_and_the_instance_reading():
    records = billing_records([_record("module.cluster.terraform_data.node[0]", 0, True, 3.5),
                               _record("module.cluster.terraform_data.node[1]", 1, False),
                               {"type": "aws_instance", "address": "module.cluster.aws_instance.node[0]", "index": 0,
                                "values": {}}])
    assert records == {0: {"spot": True, "max_price": 3.5}, 1: {"spot": False, "max_price": None}}
    assert node_spot(records, 0, "on_demand") is True      # the emulator omits the market type
    assert node_spot(records, 1, "spot") is False          # recovered on-demand: its own record


def test_a_state_from_before_the_node_records_reads_the_cluster_record():
    records = billing_records([_record("module.cluster.terraform_data.billing", None, True)])
    assert node_spot(records, 0, "on_demand") is True and node_spot(records, 5, None) is True
    assert node_spot({}, 0, "spot") is True and node_spot({}, 0, "on_demand") is False
