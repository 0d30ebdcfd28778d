"""Which zones of a region offer each EC2 instance type, through boto3: EC2
DescribeInstanceTypeOfferings with LocationType=availability-zone and a filter on the types (EC2 API
reference, "DescribeInstanceTypeOfferings"; the offerings are per zone).

EC2 publishes no stock: a type offered in a zone may still be refused with
InsufficientInstanceCapacity at launch (apply then moves on, cluster/failover.py). Every zone listed
is OFFER_LISTED. Credentials and endpoints follow boto3's settings; the spec's `endpoints: {ec2:}`
(an emulator) is ENDPOINT_KEY.
"""

from __future__ import annotations

from typing import Any

import boto3

from trainkit.clouds.base import OFFER_LISTED

ENDPOINT_KEY = "ec2"   # the spec's `endpoints:` entry this API is reached through
SOURCE = "EC2 DescribeInstanceTypeOfferings (per availability zone; EC2 reports no stock)"


def offers(region: str, types: list[str], spot: bool, endpoint: str | None = None, **_: Any
           ) -> dict[tuple[str, str], str]:
    """{(zone, type): OFFER_LISTED} for every zone of `region` offering each of `types` (spot
    or not: EC2 offers a type for both in the same zones)."""
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint)
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": list(types)}])
    return {(o["Location"], o["InstanceType"]): OFFER_LISTED
            for page in pages for o in page.get("InstanceTypeOfferings", [])}
