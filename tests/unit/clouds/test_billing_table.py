"""Each cloud room's billing table (Cloud.billing) read by the one reader (base.billed_as): what an
instance, a data disk and the shared file system bill as, from the values Terraform plans or keeps
in its state. One row per case: spot, subscription and on-demand by each cloud's own values, a
billing not known yet (None: the cost model fills it in from the spec), the max price read only for
spot, nested blocks (AWS market options, root volume) empty or missing, and a type no table lists."""

from __future__ import annotations

import pytest

from trainkit import clouds
from trainkit.clouds.base import value_at

CASES = [
    (
        "alicloud",
        "alicloud_instance",
        {
            "instance_type": "ecs.gn7i-c8g1.2xlarge",
            "spot_strategy": "SpotWithPriceLimit",
            "spot_price_limit": 2.5,
            "system_disk_category": "cloud_essd",
            "system_disk_size": 100,
        },
        {"node": "ecs.gn7i-c8g1.2xlarge", "billing": "spot", "max_price": 2.5, "system_disk": ("cloud_essd", 100)},
    ),
    (
        "alicloud",
        "alicloud_instance",
        {
            "instance_type": "ecs.gn7i",
            "spot_strategy": "NoSpot",
            "instance_charge_type": "PostPaid",
            "spot_price_limit": 2.5,
        },
        {"node": "ecs.gn7i", "billing": "on_demand", "max_price": None, "system_disk": (None, None)},
    ),
    (
        "alicloud",
        "alicloud_instance",
        {
            "instance_type": "ecs.gn7i",
            "instance_charge_type": "PrePaid",
            "spot_strategy": "SpotAsPriceGo",
            "spot_price_limit": 3,
        },
        {"node": "ecs.gn7i", "billing": "subscription", "max_price": 3, "system_disk": (None, None)},
    ),
    (
        "alicloud",
        "alicloud_instance",
        {"instance_type": "ecs.gn7i", "spot_strategy": None},
        {"node": "ecs.gn7i", "billing": "on_demand", "max_price": None, "system_disk": (None, None)},
    ),
    (
        "alicloud",
        "alicloud_instance",
        {"instance_type": "ecs.gn7i"},
        {"node": "ecs.gn7i", "billing": None, "max_price": None, "system_disk": (None, None)},
    ),
    (
        "alicloud",
        "alicloud_instance",
        {"spot_strategy": "SpotAsPriceGo", "spot_price_limit": 0},
        {"node": None, "billing": "spot", "max_price": None, "system_disk": (None, None)},
    ),
    ("alicloud", "alicloud_ecs_disk", {"category": "cloud_essd", "size": 500}, {"disk": ("cloud_essd", 500)}),
    ("alicloud", "alicloud_disk", {"category": "cloud_efficiency"}, {"disk": ("cloud_efficiency", None)}),
    ("alicloud", "alicloud_nas_file_system", {}, {"nas": True}),
    ("alicloud", "alicloud_vpc", {}, None),
    (
        "aws",
        "aws_instance",
        {
            "instance_type": "g5.xlarge",
            "instance_market_options": [{"market_type": "spot", "spot_options": [{"max_price": "0.75"}]}],
            "root_block_device": [{"volume_type": "gp3", "volume_size": 100}],
        },
        {"node": "g5.xlarge", "billing": "spot", "max_price": 0.75, "system_disk": ("gp3", 100)},
    ),
    (
        "aws",
        "aws_instance",
        {"instance_type": "g5.xlarge", "instance_lifecycle": "spot"},
        {"node": "g5.xlarge", "billing": "spot", "max_price": None, "system_disk": (None, None)},
    ),
    (
        "aws",
        "aws_instance",
        {"instance_type": "g5.xlarge", "instance_market_options": [], "root_block_device": []},
        {"node": "g5.xlarge", "billing": "on_demand", "max_price": None, "system_disk": (None, None)},
    ),
    (
        "aws",
        "aws_instance",
        {"instance_type": "g5.xlarge", "instance_lifecycle": None, "instance_market_options": [None]},
        {"node": "g5.xlarge", "billing": "on_demand", "max_price": None, "system_disk": (None, None)},
    ),
    (
        "aws",
        "aws_instance",
        {"instance_type": "g5.xlarge"},
        {"node": "g5.xlarge", "billing": None, "max_price": None, "system_disk": (None, None)},
    ),
    (
        "aws",
        "aws_instance",
        {"instance_market_options": [{"market_type": "spot", "spot_options": [{"max_price": ""}]}]},
        {"node": None, "billing": "spot", "max_price": None, "system_disk": (None, None)},
    ),
    ("aws", "aws_ebs_volume", {"type": "gp3", "size": 200}, {"disk": ("gp3", 200)}),
    ("aws", "aws_efs_file_system", {}, {"nas": True}),
    ("aws", "aws_vpc", {}, None),
    (
        "huaweicloud",
        "huaweicloud_compute_instance",
        {
            "flavor_id": "p2s.2xlarge.8",
            "charging_mode": "spot",
            "spot_maximum_price": "4.5",
            "system_disk_type": "SSD",
            "system_disk_size": 100,
        },
        {"node": "p2s.2xlarge.8", "billing": "spot", "max_price": 4.5, "system_disk": ("SSD", 100)},
    ),
    (
        "huaweicloud",
        "huaweicloud_compute_instance",
        {"flavor_id": "p2s.2xlarge.8", "charging_mode": "prePaid", "spot_maximum_price": "4.5"},
        {"node": "p2s.2xlarge.8", "billing": "subscription", "max_price": None, "system_disk": (None, None)},
    ),
    (
        "huaweicloud",
        "huaweicloud_compute_instance",
        {"flavor_id": "p2s", "charging_mode": "postPaid"},
        {"node": "p2s", "billing": "on_demand", "max_price": None, "system_disk": (None, None)},
    ),
    (
        "huaweicloud",
        "huaweicloud_compute_instance",
        {"flavor_id": "p2s", "charging_mode": None},
        {"node": "p2s", "billing": None, "max_price": None, "system_disk": (None, None)},
    ),
    (
        "huaweicloud",
        "huaweicloud_compute_instance",
        {"flavor_id": "p2s"},
        {"node": "p2s", "billing": None, "max_price": None, "system_disk": (None, None)},
    ),
    ("huaweicloud", "huaweicloud_evs_volume", {"volume_type": "SSD", "size": 100}, {"disk": ("SSD", 100)}),
    ("huaweicloud", "huaweicloud_sfs_turbo", {}, {"nas": True}),
    ("huaweicloud", "huaweicloud_vpc", {}, None),
    (
        "tencentcloud",
        "tencentcloud_instance",
        {
            "instance_type": "GN7.2XLARGE32",
            "instance_charge_type": "SPOTPAID",
            "spot_max_price": "1.2",
            "system_disk_type": "CLOUD_HSSD",
            "system_disk_size": 50,
        },
        {"node": "GN7.2XLARGE32", "billing": "spot", "max_price": 1.2, "system_disk": ("CLOUD_HSSD", 50)},
    ),
    (
        "tencentcloud",
        "tencentcloud_instance",
        {"instance_type": "GN7", "instance_charge_type": "PREPAID"},
        {"node": "GN7", "billing": "subscription", "max_price": None, "system_disk": (None, None)},
    ),
    (
        "tencentcloud",
        "tencentcloud_instance",
        {"instance_type": "GN7", "instance_charge_type": "POSTPAID_BY_HOUR", "spot_max_price": "1.2"},
        {"node": "GN7", "billing": "on_demand", "max_price": None, "system_disk": (None, None)},
    ),
    (
        "tencentcloud",
        "tencentcloud_instance",
        {"instance_type": "GN7", "instance_charge_type": ""},
        {"node": "GN7", "billing": None, "max_price": None, "system_disk": (None, None)},
    ),
    (
        "tencentcloud",
        "tencentcloud_instance",
        {"instance_type": "GN7"},
        {"node": "GN7", "billing": None, "max_price": None, "system_disk": (None, None)},
    ),
    (
        "tencentcloud",
        "tencentcloud_cbs_storage",
        {"storage_type": "CLOUD_PREMIUM", "storage_size": 100},
        {"disk": ("CLOUD_PREMIUM", 100)},
    ),
    ("tencentcloud", "tencentcloud_cfs_file_system", {}, {"nas": True}),
    ("tencentcloud", "tencentcloud_vpc", {}, None),
]


@pytest.mark.parametrize("cloud,rtype,values,expected", CASES)
def test_a_room_reads_what_a_resource_bills_as_from_its_table(cloud, rtype, values, expected):
    assert clouds.get(cloud).billed({"type": rtype, "values": values}) == expected


def test_a_value_path_reads_keys_and_list_indexes_and_gives_none_where_a_step_is_missing():
    values = {"a": [{"b": 1}], "c": None, "d": []}
    assert value_at(values, ("a", 0, "b")) == 1
    assert value_at(values, ("a", 1, "b")) is None and value_at(values, ("d", 0, "b")) is None
    assert value_at(values, ("c", "x")) is None and value_at(values, ("missing",)) is None
