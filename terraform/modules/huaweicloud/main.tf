# trainkit GPU cluster on Huawei Cloud: VPC, one subnet in one zone, a security group (SSH from
# admin_cidrs, all traffic between members), a KPS key pair, N ECS GPU instances (spot optional)
# in a server group, one EVS data disk per node, and optionally SFS Turbo (nas.tf). Nodes named in
# node_placement may sit in another zone (with a subnet there), on another flavor or billing.

locals {
  # cloud-init reads user data that starts with `#cloud-config` as YAML (cloud-init docs, "User
  # data formats"); yamlencode quotes each key line, so no line of it is read as anything else.
  node_user_data = length(var.extra_authorized_keys) == 0 ? null : "#cloud-config\n${yamlencode({ ssh_authorized_keys = var.extra_authorized_keys })}"

  # Each node's data disk is found by its serial, not a device name (NVMe types such as
  # gn8v or Nitro name disks differently). Virtio serial = the first 20 characters of the EVS volume id (/dev/disk/by-id/virtio-<serial>).
  data_disk_serials = [for d in huaweicloud_evs_volume.data : substr(d.id, 0, 20)]

  # Node 0 is the head node; it alone gets a public IP (an EIP created with it) unless
  # public_ip says otherwise.
  public = [for i in range(var.node_count) : var.public_ip == "all" || (var.public_ip == "head" && i == 0)]

  # Virtio block devices: the first data disk is vdb on current ECS images.
  data_disk_device = "/dev/vdb"

  # EIP bandwidth in Mbit/s for nodes with a public IP.
  public_bandwidth_mbps = 100

  # Per-node placement (var.node_placement): a node replaced at recovery may land in another zone,
  # on another flavor or billing; every other node keeps the cluster's. With node_placement = {}
  # these are the cluster's values for every node, so the plan is what it was without them.
  node_zone = [for i in range(var.node_count) : coalesce(try(var.node_placement[tostring(i)].zone, null), var.zone)]
  node_type = [for i in range(var.node_count) : coalesce(try(var.node_placement[tostring(i)].instance_type, null), var.instance_type)]
  node_spot = [for i in range(var.node_count) : coalesce(try(var.node_placement[tostring(i)].spot, null), var.spot.enabled)]

  # One subnet per other zone (zone => subnet_cidr): the cluster subnet is pinned to var.zone, see
  # huaweicloud_vpc_subnet.zone. Nodes placed in var.zone itself keep the cluster subnet.
  zone_subnets    = { for z, cidrs in { for p in values(var.node_placement) : p.zone => p.subnet_cidr... if p.zone != null && p.zone != var.zone } : z => cidrs[0] }
  node_subnet_ids = [for z in local.node_zone : z == var.zone ? huaweicloud_vpc_subnet.this.id : huaweicloud_vpc_subnet.zone[z].id]
}

resource "huaweicloud_vpc" "this" {
  name = var.name
  cidr = var.vpc_cidr

  tags = var.tags
}

resource "huaweicloud_vpc_subnet" "this" {
  name              = var.name
  vpc_id            = huaweicloud_vpc.this.id
  cidr              = var.subnet_cidr
  gateway_ip        = cidrhost(var.subnet_cidr, 1)
  availability_zone = var.zone

  tags = var.tags
}

# The subnet above belongs to one AZ ("availability_zone - the availability zone (AZ) to which the
# subnet belongs", huaweicloud_vpc_subnet docs; ForceNew, so it cannot be widened in place), so a
# node placed in another zone gets a subnet of its own there rather than relying on a subnet of
# another AZ. ECSs in all subnets of one VPC communicate by default (VPC user guide, "Subnet"), so the nodes, the
# security group's member rule and SFS Turbo (nas.tf) work across them.
resource "huaweicloud_vpc_subnet" "zone" {
  for_each = local.zone_subnets

  name              = "${var.name}-${each.key}"
  vpc_id            = huaweicloud_vpc.this.id
  cidr              = each.value
  gateway_ip        = cidrhost(each.value, 1)
  availability_zone = each.key

  tags = var.tags
}

# With nat_gateway, the subnets of other zones go out through the same gateway (nat.tf): its route is
# in the VPC's default route table, and an SNAT rule names one subnet (provider docs, r/nat_snat_rule:
# subnet_id), so each gets its own rule on the gateway's EIP. Kept here, beside its subnets: nat.tf
# holds the gateway's single resources (count = var.nat_gateway ? 1 : 0).
resource "huaweicloud_nat_snat_rule" "zone" {
  for_each = { for z, subnet in huaweicloud_vpc_subnet.zone : z => subnet.id if var.nat_gateway }

  nat_gateway_id = huaweicloud_nat_gateway.this[0].id
  subnet_id      = each.value
  floating_ip_id = huaweicloud_vpc_eip.nat[0].id
  description    = "Outbound internet for the cluster subnet in ${each.key}"
}

# The default rules are removed and written out below, so the group holds exactly what it says.
resource "huaweicloud_networking_secgroup" "this" {
  name                 = var.name
  description          = "trainkit ${var.name}: SSH from admin CIDRs, all traffic between nodes"
  delete_default_rules = true

  tags = var.tags
}

resource "huaweicloud_networking_secgroup_rule" "ssh" {
  for_each = toset(var.admin_cidrs)

  security_group_id = huaweicloud_networking_secgroup.this.id
  description       = "SSH from an admin CIDR"
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  ports             = "22"
  remote_ip_prefix  = each.value
}

# No protocol = every protocol (NCCL, gloo, the rendezvous port, NFS to SFS Turbo).
resource "huaweicloud_networking_secgroup_rule" "intra_cluster" {
  security_group_id = huaweicloud_networking_secgroup.this.id
  description       = "All traffic between cluster members"
  direction         = "ingress"
  ethertype         = "IPv4"
  remote_group_id   = huaweicloud_networking_secgroup.this.id
}

resource "huaweicloud_networking_secgroup_rule" "egress" {
  security_group_id = huaweicloud_networking_secgroup.this.id
  description       = "All outbound traffic (packages, datasets)"
  direction         = "egress"
  ethertype         = "IPv4"
  remote_ip_prefix  = "0.0.0.0/0"
}

resource "huaweicloud_kps_keypair" "this" {
  name       = var.name
  public_key = var.ssh_public_key
}

# Huawei server groups only know anti-affinity (one node per host); there is no co-location
# policy (cloud-facts.md 8.5). Nodes placed in another zone stay out of it (scheduler_hints below):
# they are on other hosts by definition, and the group is made for the cluster's zone.
resource "huaweicloud_compute_servergroup" "this" {
  count = var.placement_group ? 1 : 0

  name     = var.name
  policies = ["anti-affinity"]
}

# How each node is billed: its spot, and its max_price while it is spot. The cloud cannot switch a
# running instance between spot and on-demand (EC2; Huawei ECS refuses to change charging_mode to or
# from spot in place), so a change of a node's record replaces that node (replace_triggered_by on
# the instances); the review names the record as the cause. Per node: a node recovered on-demand
# (node_placement) reads back on-demand, and a max_price edit with spot off replaces nothing. A
# cluster applied with the older cluster-level record (terraform_data.billing) only creates these:
# a create triggers no replacement.
resource "terraform_data" "node" {
  count = var.node_count

  input = { spot = local.node_spot[count.index], max_price = local.node_spot[count.index] ? var.spot.max_price : null }
}

# Each node's creation time, kept in the state: its terminate time is counted from it, so a ttl edit
# moves a running node's time in place (UpdateAutoTerminateTime, no stop: resourceComputeInstanceUpdate
# in resource_huaweicloud_compute_instance.go) and an unrelated apply leaves it. It is replaced with
# its node: by the node's ForceNew arguments that vary per node and its billing record (as the node),
# and by trainkit's -replace of node[i] (recovery, --upgrade-image), which names born[i] beside it.
resource "terraform_data" "born" {
  count = var.node_count

  input            = formatdate("YYYY-MM-DD'T'hh:mm:00Z", plantimestamp())
  triggers_replace = [local.node_zone[count.index], local.public[count.index]]

  lifecycle {
    ignore_changes       = [input]
    replace_triggered_by = [terraform_data.node[count.index]]
  }
}

resource "huaweicloud_compute_instance" "node" {
  count = var.node_count

  name               = "${var.name}-node-${count.index}"
  flavor_id          = local.node_type[count.index]
  image_id           = local.node_image_id[count.index]
  availability_zone  = local.node_zone[count.index]
  key_pair           = huaweicloud_kps_keypair.this.name
  security_group_ids = [huaweicloud_networking_secgroup.this.id]
  system_disk_type   = var.system_disk.category
  system_disk_size   = var.system_disk.size_gb
  charging_mode      = local.node_spot[count.index] ? "spot" : "postPaid"
  # Defaults to the pay-per-use price when null; conflicts with spot_duration (cloud-facts.md 8.2).
  spot_maximum_price = local.node_spot[count.index] && var.spot.max_price != null ? tostring(var.spot.max_price) : null
  eip_type           = local.public[count.index] ? "5_bgp" : null
  # TTL: yyyy-MM-ddTHH:mm:ssZ in UTC (huaweicloud_compute_instance docs), creation plus ttl_minutes.
  auto_terminate_time = var.ttl_minutes == null ? null : timeadd(terraform_data.born[count.index].output, "${var.ttl_minutes}m")

  network {
    uuid = local.node_subnet_ids[count.index]
  }

  dynamic "bandwidth" {
    for_each = local.public[count.index] ? [local.public_bandwidth_mbps] : []

    content {
      share_type  = "PER"
      size        = bandwidth.value
      charge_mode = "traffic"
    }
  }

  dynamic "scheduler_hints" {
    for_each = local.node_zone[count.index] == var.zone ? huaweicloud_compute_servergroup.this[*].id : []

    content {
      group = scheduler_hints.value
    }
  }

  # Keys beyond the key pair's (the cloud controller's: docs/runs.md) as cloud-init user data:
  # `ssh_authorized_keys` adds each line to the default user's authorized_keys (cloud-init docs,
  # module "SSH"). null when there are none.
  user_data = local.node_user_data

  tags = var.tags

  lifecycle {
    # The image is fixed when the node is created: a newly published image (the data source in
    # image.tf picks the newest) or a changed `image` must not reinstall or replace running nodes.
    # `trainkit apply --upgrade-image` replaces the nodes on purpose (terraform -replace).
    # user_data: a key added later reaches only the nodes created after it (a replacement); a
    # change on a running node would reinstall, restart or replace it, so it is never applied.
    ignore_changes       = [image_id, user_data]
    replace_triggered_by = [terraform_data.node[count.index]]
  }
}

# EVS encrypts only with a KMS key. Without data_disk.kms_key_id the account's default EVS key
# (alias "evs/default", which KMS creates the first time EVS encrypts in a region) is used. EVS
# reaches KMS through the EVSAccessKMS agency, which must exist (EVS docs, "Managing Encrypted EVS
# Disks": the console creates it when a user first encrypts a disk); see README.md.
data "huaweicloud_kms_key" "evs_default" {
  count = var.data_disk.enabled && var.data_disk.encrypted && var.data_disk.kms_key_id == null ? 1 : 0

  key_alias = "evs/default"
}

resource "huaweicloud_evs_volume" "data" {
  count = var.data_disk.enabled ? var.node_count : 0

  name = "${var.name}-data-${count.index}"
  # An EVS disk attaches only to an instance in its own AZ (EVS docs, "Attaching a Disk"): node i's
  # disk follows node i's zone (a moved node gets a new, empty disk; its old one was in the old AZ).
  availability_zone = local.node_zone[count.index]
  volume_type       = var.data_disk.category
  size              = var.data_disk.size_gb
  kms_id            = var.data_disk.encrypted ? coalesce(var.data_disk.kms_key_id, try(data.huaweicloud_kms_key.evs_default[0].id, null)) : null

  tags = var.tags
}

resource "huaweicloud_compute_volume_attach" "data" {
  count = var.data_disk.enabled ? var.node_count : 0

  instance_id = huaweicloud_compute_instance.node[count.index].id
  volume_id   = huaweicloud_evs_volume.data[count.index].id
}
