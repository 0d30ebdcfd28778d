"""AWS: find and delete what still carries a cluster's tag after `terraform destroy` (boto3).

`find` asks the Resource Groups Tagging API (GetResources with a TagFilter; AWS docs, "Resource
Groups Tagging API Reference") and, since not every service reports there in every account or
emulator, EC2 directly for Elastic IPs and key pairs. Terminated instances and deleted NAT
gateways are gone already and are left out. `delete` removes what `find` returned in dependency
order (instances before their volumes and subnets, mount targets before file systems, NAT
gateways before their Elastic IPs, everything before the VPC). Credentials come from the usual
AWS environment variables or profile; custom `endpoints:` in the spec (an emulator) are used.
"""

from __future__ import annotations

from typing import Any

from trainkit.clouds.sweep_common import in_vpcs, state_ids, wait_gone
from trainkit.util.dist import pip_install

TAG = "trainkit-cluster"
# (type in the ARN, EC2/EFS delete order). Types not listed are reported but never deleted.
ORDER = ("instance", "natgateway", "file-system", "volume", "elastic-ip", "internet-gateway",
         "route-table", "subnet", "security-group", "vpc", "key-pair")
GONE = {"instance": ("terminated",), "natgateway": ("deleted",)}
# How long a deleted EFS mount target may stay "deleting": trainkit's own bound (the EFS docs give
# none), the 10 minutes the other rooms' sweepers allow an instance release.
MOUNT_TARGET_WAIT_S = 600


def _client(cluster, service: str, endpoint_key: str):
    try:
        import boto3  # boto3 (an SDK): imported only when an S3-compatible store is used
    except ImportError:
        raise RuntimeError(f"boto3 is not installed: {pip_install('aws')}") from None

    endpoints = cluster.spec.endpoints
    if endpoints and endpoint_key not in endpoints:
        raise ValueError(f"the spec sets custom endpoints but not endpoints.{endpoint_key}")
    from botocore.config import Config

    # Throttling (RequestLimitExceeded) is answered with retries and backoff ("Request throttling for
    # the Amazon EC2 API"); boto3's default 5 legacy attempts give up too soon under load, so the
    # SDK's "standard" mode with 10 attempts ("Retry behavior", AWS SDKs and Tools reference guide).
    return boto3.client(service, region_name=cluster.spec.region, endpoint_url=endpoints.get(endpoint_key),
                        config=Config(retries={"mode": "standard", "max_attempts": 10}))


def find(cluster) -> list[dict[str, Any]]:
    """Resources tagged trainkit-cluster=<name> that still exist: [{type, id, arn}], in ORDER."""
    tagging = _client(cluster, "resourcegroupstaggingapi", "resourcegroupstaggingapi")
    found: dict[tuple[str, str], dict] = {}
    for page in tagging.get_paginator("get_resources").paginate(
            TagFilters=[{"Key": TAG, "Values": [cluster.name]}]):
        for item in page["ResourceTagMappingList"]:
            kind, _, rid = item["ResourceARN"].split(":", 5)[5].partition("/")
            found[(kind, rid)] = {"type": kind, "id": rid, "arn": item["ResourceARN"]}
    ec2 = _client(cluster, "ec2", "ec2")
    tagged = [{"Name": f"tag:{TAG}", "Values": [cluster.name]}]
    for addr in ec2.describe_addresses(Filters=tagged)["Addresses"]:
        found.setdefault(("elastic-ip", addr["AllocationId"]),
                         {"type": "elastic-ip", "id": addr["AllocationId"], "arn": None})
    for pair in ec2.describe_key_pairs()["KeyPairs"]:
        if {"Key": TAG, "Value": cluster.name} in pair.get("Tags", []):
            found[("key-pair", pair["KeyPairId"])] = {"type": "key-pair", "id": pair["KeyPairId"],
                                                      "arn": None, "name": pair["KeyName"]}
    alive = [r for r in found.values() if r["type"] not in GONE or _state(ec2, r) not in GONE[r["type"]]]
    return sorted(alive, key=lambda r: (ORDER.index(r["type"]) if r["type"] in ORDER else len(ORDER), r["id"]))


def _vpcs_of(method: str, arg: str, key: str, id_key: str):
    """An `in_vpcs` ask: {id: {VPC ids}} from one EC2 describe call (its VpcId, or the VpcIds of
    its attachments, as an internet gateway has)."""
    def ask(cluster, ids: list[str]) -> dict[str, set]:
        items = getattr(_client(cluster, "ec2", "ec2"), method)(**{arg: ids})[key]
        return {i[id_key]: {i.get("VpcId")} | {a.get("VpcId") for a in i.get("Attachments") or []} for i in items}
    return ask


def _instance_vpcs(cluster, ids: list[str]) -> dict[str, set]:
    reservations = _client(cluster, "ec2", "ec2").describe_instances(InstanceIds=ids)["Reservations"]
    return {i["InstanceId"]: {i.get("VpcId")} for r in reservations for i in r["Instances"]}


# What lives in one VPC, and the EC2 call that says which: DeleteVpc fails with DependencyViolation
# while any of these is in it ("Delete your VPC", Amazon VPC user guide).
IN_VPC = {"instance": _instance_vpcs,
          "natgateway": _vpcs_of("describe_nat_gateways", "NatGatewayIds", "NatGateways", "NatGatewayId"),
          "route-table": _vpcs_of("describe_route_tables", "RouteTableIds", "RouteTables", "RouteTableId"),
          "subnet": _vpcs_of("describe_subnets", "SubnetIds", "Subnets", "SubnetId"),
          "security-group": _vpcs_of("describe_security_groups", "GroupIds", "SecurityGroups", "GroupId"),
          "internet-gateway": _vpcs_of("describe_internet_gateways", "InternetGatewayIds", "InternetGateways",
                                       "InternetGatewayId")}


def in_network(cluster, found: list[dict[str, Any]], state_values: dict) -> list[dict[str, Any]]:
    """The resources of `found` (from `find`) that sit in a VPC the state holds (`terraform show
    -json` values): instances, NAT and internet gateways, route tables, subnets, security groups.
    Those block the state's DeleteVpc; nothing outside those VPCs is returned."""
    return in_vpcs(cluster, found, state_values, "aws_vpc", IN_VPC)


def untracked_parts(cluster, state_values: dict) -> list[dict[str, Any]]:
    """EFS mount targets of the state's file systems that the state does not hold: a mount target
    takes no tags, so the tag API never finds one, yet it keeps its file system (DeleteFileSystem:
    FileSystemInUse, "Must delete all mount targets") and its subnet from being deleted. Only
    file systems the state holds are asked about, so every one returned is the cluster's."""
    file_systems = state_ids(state_values, "aws_efs_file_system")
    if not file_systems:
        return []
    held, efs = state_ids(state_values, "aws_efs_mount_target"), _client(cluster, "efs", "efs")
    return [{"type": "mount-target", "id": t["MountTargetId"], "arn": None, "file_system": fs}
            for fs in sorted(file_systems)
            for t in efs.describe_mount_targets(FileSystemId=fs)["MountTargets"] if t["MountTargetId"] not in held]


def _delete_mount_targets(efs, targets: list[dict]) -> None:
    """Delete mount targets ({id, file_system}) and wait until their file systems no longer list
    them: DeleteMountTarget returns while the target is still "deleting", and DeleteFileSystem
    refuses a file system that has one (Amazon EFS API reference, "DeleteMountTarget",
    "DeleteFileSystem")."""
    for t in targets:
        efs.delete_mount_target(MountTargetId=t["id"])

    def listed() -> bool:
        return any({t["id"] for t in targets if t["file_system"] == fs}
                   & {m["MountTargetId"] for m in efs.describe_mount_targets(FileSystemId=fs)["MountTargets"]}
                   for fs in sorted({t["file_system"] for t in targets}))

    wait_gone(listed, [t["id"] for t in targets], "DeleteMountTarget", MOUNT_TARGET_WAIT_S, what="EFS mount targets")


def _state(ec2, res: dict) -> str:
    if res["type"] == "instance":
        reservations = ec2.describe_instances(InstanceIds=[res["id"]])["Reservations"]
        return reservations[0]["Instances"][0]["State"]["Name"] if reservations else "terminated"
    gateways = ec2.describe_nat_gateways(NatGatewayIds=[res["id"]])["NatGateways"]
    return gateways[0]["State"] if gateways else "deleted"


def delete(cluster, found: list[dict[str, Any]]) -> None:
    """Delete `found` (from `find`) in dependency order; raises the SDK's error on the first failure."""
    ec2, efs = _client(cluster, "ec2", "ec2"), _client(cluster, "efs", "efs")
    ids = {kind: [r["id"] for r in found if r["type"] == kind] for kind in ORDER}
    pairs = [r for r in found if r["type"] == "key-pair"]
    if ids["instance"]:
        ec2.terminate_instances(InstanceIds=ids["instance"])
        ec2.get_waiter("instance_terminated").wait(InstanceIds=ids["instance"])
    for nat in ids["natgateway"]:
        ec2.delete_nat_gateway(NatGatewayId=nat)
    if ids["natgateway"]:
        ec2.get_waiter("nat_gateway_deleted").wait(NatGatewayIds=ids["natgateway"])
    targets = {r["id"]: r for r in found if r["type"] == "mount-target"}   # one delete per target
    targets.update({t["MountTargetId"]: {"id": t["MountTargetId"], "file_system": fs} for fs in ids["file-system"]
                    for t in efs.describe_mount_targets(FileSystemId=fs)["MountTargets"]})
    _delete_mount_targets(efs, list(targets.values()))
    for fs in ids["file-system"]:
        efs.delete_file_system(FileSystemId=fs)
    for vol in ids["volume"]:
        ec2.delete_volume(VolumeId=vol)
    for alloc in ids["elastic-ip"]:
        _release_address(ec2, alloc)
    _delete_network(ec2, ids)
    for pair in pairs:  # by name where known: not every EC2 API version takes KeyPairId
        ec2.delete_key_pair(**({"KeyName": pair["name"]} if pair.get("name") else {"KeyPairId": pair["id"]}))


def _release_address(ec2, allocation_id: str) -> None:
    addr = ec2.describe_addresses(AllocationIds=[allocation_id])["Addresses"][0]
    if addr.get("AssociationId"):
        ec2.disassociate_address(AssociationId=addr["AssociationId"])
    ec2.release_address(AllocationId=allocation_id)


def _delete_network(ec2, ids: dict[str, list[str]]) -> None:
    """Internet gateways (detached first), route tables, subnets, security groups, then VPCs."""
    for igw in ids["internet-gateway"]:
        for att in ec2.describe_internet_gateways(InternetGatewayIds=[igw])["InternetGateways"][0]["Attachments"]:
            ec2.detach_internet_gateway(InternetGatewayId=igw, VpcId=att["VpcId"])
        ec2.delete_internet_gateway(InternetGatewayId=igw)
    for rtb in ids["route-table"]:
        table = ec2.describe_route_tables(RouteTableIds=[rtb])["RouteTables"][0]
        if any(a.get("Main") for a in table.get("Associations", [])):
            continue  # the VPC's main table goes with the VPC
        for assoc in table.get("Associations", []):
            ec2.disassociate_route_table(AssociationId=assoc["RouteTableAssociationId"])
        ec2.delete_route_table(RouteTableId=rtb)
    for subnet in ids["subnet"]:
        ec2.delete_subnet(SubnetId=subnet)
    groups = ec2.describe_security_groups(GroupIds=ids["security-group"])["SecurityGroups"] \
        if ids["security-group"] else []
    for group in groups:  # rules may name other groups of the cluster: drop them all first
        if group["IpPermissions"]:
            ec2.revoke_security_group_ingress(GroupId=group["GroupId"], IpPermissions=group["IpPermissions"])
    for group in groups:
        if group["GroupName"] != "default":
            ec2.delete_security_group(GroupId=group["GroupId"])
    for vpc in ids["vpc"]:
        ec2.delete_vpc(VpcId=vpc)
