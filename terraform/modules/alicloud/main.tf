# trainkit GPU cluster on Alibaba Cloud: VPC, one vSwitch in one zone, a security group (SSH from
# admin_cidrs, members talk freely), a key pair, N ECS GPU instances (spot optional) in a
# LowLatency deployment set, one encrypted ESSD data disk per node, and optionally NAS (nas.tf).
# node_placement moves single nodes (a replacement at recovery) to another zone, type or billing:
# one more vSwitch per such zone; every other node keeps the cluster's zone, type and billing.

locals {
  # cloud-init reads user data that starts with `#cloud-config` as YAML (cloud-init docs, "User
  # data formats"); yamlencode quotes each key line, so no line of it is read as anything else.
  node_user_data = length(var.extra_authorized_keys) == 0 ? null : "#cloud-config\n${yamlencode({ ssh_authorized_keys = var.extra_authorized_keys })}"

  # Each node's data disk is found by its serial, not a device name (NVMe types such as
  # gn8v or Nitro name disks differently). Virtio serial = the disk id without "d-" (/dev/disk/by-id/virtio-<serial>, NVMe links end with it too).
  data_disk_serials = [for d in alicloud_ecs_disk.data : trimprefix(d.id, "d-")]

  # Node 0 is the head node; it alone gets a public IP unless public_ip says otherwise.
  public = [for i in range(var.node_count) : var.public_ip == "all" || (var.public_ip == "head" && i == 0)]

  # Per-node placement (var.node_placement): a node replaced at recovery may land in another zone,
  # on another type or billing; every other node keeps the cluster's.
  node_zone = [for i in range(var.node_count) : coalesce(try(var.node_placement[tostring(i)].zone, null), var.zone)]
  node_type = [for i in range(var.node_count) : coalesce(try(var.node_placement[tostring(i)].instance_type, null), var.instance_type)]
  node_spot = [for i in range(var.node_count) : coalesce(try(var.node_placement[tostring(i)].spot, null), var.spot.enabled)]

  # zone -> vSwitch CIDR of every zone other than var.zone that holds a placed node: a vSwitch
  # belongs to one zone (alicloud_vswitch zone_id, ForceNew) and an instance takes the zone of its
  # vSwitch, so such a node needs a vSwitch of its own zone in the same VPC.
  zone_vswitches = { for z, cidrs in { for p in values(var.node_placement) : p.zone => p.subnet_cidr... if p.zone != null && p.zone != var.zone } : z => cidrs[0] }

  node_vswitch_ids = [for z in local.node_zone : z == var.zone ? alicloud_vswitch.this.id : alicloud_vswitch.zone[z].id]

  # A LowLatency deployment set holds instances of one zone only (Alibaba ECS docs, "Deployment
  # set", Limitations: "For a deployment set with the low latency strategy, all instances must be in
  # the same zone"): a node placed in another zone runs outside it.
  node_deployment_set_ids = [for z in local.node_zone : z == var.zone ? try(alicloud_ecs_deployment_set.this[0].id, null) : null]

  # Elastic RDMA GPU types (prefixes; the cloud room lists the same, erdma_types, and
  # tests/unit/stack/test_module_catalog.py keeps the two equal): eRDMA needs the primary NIC in
  # HighPerformance traffic mode (ECS docs, "Configure eRDMA on an enterprise-level instance";
  # alicloud_instance network_interface_traffic_mode), and NCCL over eRDMA jumbo frames (the network
  # role sets MTU 8500 on those nodes: enable_jumbo_frame).
  erdma_type_prefixes = ["ecs.ebmgn7v.", "ecs.ebmgn8v.", "ecs.ebmgn8is.", "ecs.ebmgn8i.", "ecs.gn8is.", "ecs.gn8is-"]
  node_erdma          = [for t in local.node_type : anytrue([for p in local.erdma_type_prefixes : startswith(t, p)])]

  # Spot: a price cap when max_price is set, else pay the market price up to on-demand; per node,
  # one max_price for all (node_placement switches spot on or off, not the price).
  node_spot_strategy = [for s in local.node_spot : !s ? "NoSpot" : (var.spot.max_price == null ? "SpotAsPriceGo" : "SpotWithPriceLimit")]

  # Performance levels exist only for ESSD disks.
  data_disk_performance_level = var.data_disk.category == "cloud_essd" ? var.data_disk.performance_level : null

  # Virtio block devices: the first data disk is vdb on current ECS images.
  data_disk_device = "/dev/vdb"

  # Release time of each node: its creation (terraform_data.born) plus ttl_minutes, moved one minute
  # on where it would end in a 0 minute: the provider's DiffSuppressFunc on auto_release_time hides a
  # new value that starts with strings.Trim(old, ":00Z"), a character set (resource_alicloud_instance.go),
  # so after '...T10:00:00Z' (trimmed to '...T1') every new time from 10:00 to 19:59 that day would plan
  # nothing. Ending in 1-9, the old value trims to its own minute and every other time shows.
  node_release_at = [for b in terraform_data.born : var.ttl_minutes == null ? null : timeadd(b.output, "${var.ttl_minutes}m")]
  node_release    = [for t in local.node_release_at : t == null ? null : (substr(t, 15, 1) == "0" ? timeadd(t, "1m") : t)]

  # Public bandwidth cap in Mbit/s for nodes with a public IP (allowed range 0-100).
  public_bandwidth_mbps = 100
}

resource "alicloud_vpc" "this" {
  vpc_name   = var.name
  cidr_block = var.vpc_cidr

  tags = var.tags
}

resource "alicloud_vswitch" "this" {
  vswitch_name = var.name
  vpc_id       = alicloud_vpc.this.id
  cidr_block   = var.subnet_cidr
  zone_id      = var.zone

  tags = var.tags
}

# The vSwitch of each other zone a node is placed in (local.zone_vswitches); same VPC, so the
# security group, the VPC route table (NAT route) and the NAS mount target serve it too.
resource "alicloud_vswitch" "zone" {
  for_each = local.zone_vswitches

  vswitch_name = "${var.name}-${each.key}"
  vpc_id       = alicloud_vpc.this.id
  cidr_block   = each.value
  zone_id      = each.key

  tags = var.tags
}

# With nat_gateway, the vSwitch of each other zone gets its own SNAT entry on the gateway of nat.tf:
# a SNAT entry covers the one vSwitch it names (source_vswitch_id), while the gateway and the
# 0.0.0.0/0 route it adds serve the whole VPC (provider docs, r/snat_entry and r/nat_gateway).
# Kept here, beside the per-zone vSwitch, so nat.tf stays one of each resource (count 0/1).
resource "alicloud_snat_entry" "zone" {
  for_each = var.nat_gateway ? local.zone_vswitches : {}

  snat_entry_name   = "${var.name}-${each.key}"
  snat_table_id     = alicloud_nat_gateway.this[0].snat_table_ids
  source_vswitch_id = alicloud_vswitch.zone[each.key].id
  snat_ip           = alicloud_eip_address.nat[0].ip_address

  depends_on = [alicloud_eip_association.nat]
}

# inner_access_policy = "Accept": members of the group reach each other on every port (NCCL,
# gloo, the rendezvous port, NFS); nothing else gets in except the SSH rules below.
resource "alicloud_security_group" "this" {
  security_group_name = var.name
  description         = "trainkit ${var.name}: SSH from admin CIDRs, all traffic between nodes"
  vpc_id              = alicloud_vpc.this.id
  inner_access_policy = "Accept"

  tags = var.tags
}

resource "alicloud_security_group_rule" "ssh" {
  for_each = toset(var.admin_cidrs)

  security_group_id = alicloud_security_group.this.id
  description       = "SSH from an admin CIDR"
  type              = "ingress"
  ip_protocol       = "tcp"
  port_range        = "22/22"
  cidr_ip           = each.value
  nic_type          = "intranet"
  policy            = "accept"
  priority          = 1
}

resource "alicloud_ecs_key_pair" "this" {
  key_pair_name = var.name
  public_key    = var.ssh_public_key

  tags = var.tags
}

# LowLatency is Alibaba's co-location policy (cloud-facts.md 3.2 / 8.5).
resource "alicloud_ecs_deployment_set" "this" {
  count = var.placement_group ? 1 : 0

  deployment_set_name = var.name
  strategy            = "LowLatency"
}

# Each node's creation time (to the minute: ECS keeps release times to the minute, and the
# provider reads '2023-07-26T23:50Z' back as '2023-07-26T23:50:00Z', resource_alicloud_instance.go),
# kept in the state: its release time is counted from it, so a ttl edit moves a running node's time in
# place (ModifyInstanceAutoReleaseTime, no stop) and an unrelated apply leaves it. It is replaced with
# its node: by the node's ForceNew arguments that vary per node (triggers_replace), and by trainkit's
# -replace of node[i] (recovery, --upgrade-image), which names born[i] beside it.
resource "terraform_data" "born" {
  count = var.node_count

  input = formatdate("YYYY-MM-DD'T'hh:mm:00Z", plantimestamp())
  triggers_replace = [
    local.node_zone[count.index],
    local.node_spot_strategy[count.index],
    local.node_erdma[count.index],
    local.node_spot_strategy[count.index] == "SpotWithPriceLimit" ? var.spot.max_price : null,
  ]

  lifecycle {
    ignore_changes = [input]
  }
}

resource "alicloud_instance" "node" {
  count = var.node_count

  instance_name = "${var.name}-node-${count.index}"
  host_name     = "${var.name}-node-${count.index}"
  instance_type = local.node_type[count.index]
  image_id      = local.node_image_id[count.index]
  # Set, though Alibaba takes it from the vSwitch: availability_zone is ForceNew, so a node that
  # moves zone is replaced. Left unset, the move is an in-place vswitch_id change, which
  # ModifyInstanceVpcAttribute refuses across zones (InvalidVSwitchId.Mismatch, ECS API 2014-05-26).
  # An existing node reads back its vSwitch's zone, the same value: nothing changes for it.
  availability_zone              = local.node_zone[count.index]
  vswitch_id                     = local.node_vswitch_ids[count.index]
  security_groups                = [alicloud_security_group.this.id]
  key_name                       = alicloud_ecs_key_pair.this.key_pair_name
  system_disk_category           = var.system_disk.category
  system_disk_size               = var.system_disk.size_gb
  system_disk_encrypted          = true
  instance_charge_type           = "PostPaid"
  spot_strategy                  = local.node_spot_strategy[count.index]
  spot_price_limit               = local.node_spot_strategy[count.index] == "SpotWithPriceLimit" ? var.spot.max_price : null
  internet_charge_type           = "PayByTraffic"
  internet_max_bandwidth_out     = local.public[count.index] ? local.public_bandwidth_mbps : 0
  deployment_set_id              = local.node_deployment_set_ids[count.index]
  network_interface_traffic_mode = local.node_erdma[count.index] ? "HighPerformance" : null
  enable_jumbo_frame             = local.node_erdma[count.index] ? true : null
  http_tokens                    = "required"
  security_enhancement_strategy  = "Active"
  # TTL: yyyy-MM-ddTHH:mm:ssZ in UTC (alicloud_instance docs), the node's creation plus ttl_minutes.
  auto_release_time = local.node_release[count.index]

  # Keys beyond the key pair's (the cloud controller's: docs/runs.md) as cloud-init user data:
  # `ssh_authorized_keys` adds each line to the default user's authorized_keys (cloud-init docs,
  # module "SSH"). null when there are none.
  user_data = local.node_user_data

  tags        = merge(var.tags, { Name = "${var.name}-node-${count.index}" })
  volume_tags = var.tags

  lifecycle {
    # The image is fixed when the node is created: a newly published image (the data source in
    # image.tf picks the newest) or a changed `image` must not reinstall or replace running nodes.
    # `trainkit apply --upgrade-image` replaces the nodes on purpose (terraform -replace).
    # user_data: a key added later reaches only the nodes created after it (a replacement); a
    # change on a running node would reinstall, restart or replace it, so it is never applied.
    ignore_changes = [image_id, user_data]
  }
}

resource "alicloud_ecs_disk" "data" {
  count = var.data_disk.enabled ? var.node_count : 0

  disk_name         = "${var.name}-data-${count.index}"
  zone_id           = local.node_zone[count.index] # a disk attaches only to an instance in its zone
  category          = var.data_disk.category
  performance_level = local.data_disk_performance_level
  size              = var.data_disk.size_gb
  encrypted         = var.data_disk.encrypted
  kms_key_id        = var.data_disk.encrypted ? var.data_disk.kms_key_id : null

  tags = var.tags
}

resource "alicloud_ecs_disk_attachment" "data" {
  count = var.data_disk.enabled ? var.node_count : 0

  disk_id     = alicloud_ecs_disk.data[count.index].id
  instance_id = alicloud_instance.node[count.index].id
  # With a TTL (auto_release_time) or spot, the cloud releases the instance without terraform: the
  # data disk goes with it instead of billing on (delete_with_instance defaults to false). Per node:
  # a node whose billing node_placement changed is new, and so is its attachment (it names the
  # instance), so its own value is set when it is created.
  delete_with_instance = var.ttl_minutes != null || local.node_spot[count.index]
}
