# trainkit GPU cluster on Tencent Cloud: VPC, one subnet in one zone, a security group (SSH from
# admin_cidrs, all traffic between members), a key pair, N CVM GPU instances (spot optional) in
# a placement group, one encrypted CBS data disk per node, and optionally CFS (nas.tf). Nodes in
# node_placement may run in another zone (then in a subnet of their own there), type or billing.

locals {
  # cloud-init reads user data that starts with `#cloud-config` as YAML (cloud-init docs, "User
  # data formats"); yamlencode quotes each key line, so no line of it is read as anything else.
  node_user_data = length(var.extra_authorized_keys) == 0 ? null : "#cloud-config\n${yamlencode({ ssh_authorized_keys = var.extra_authorized_keys })}"

  # Each node's data disk is found by its serial, not a device name (NVMe types such as
  # gn8v or Nitro name disks differently). Virtio serial = the CBS disk id (/dev/disk/by-id/virtio-disk-...).
  data_disk_serials = [for d in tencentcloud_cbs_storage.data : d.id]

  # Node 0 is the head node; it alone gets a public IP unless public_ip says otherwise.
  public = [for i in range(var.node_count) : var.public_ip == "all" || (var.public_ip == "head" && i == 0)]

  # Key pair names allow letters, digits and underscores only, at most 25 characters
  # (provider ValidateKeyPairName); trainkit validate refuses longer cluster names for Tencent.
  key_name = substr(replace(var.name, "-", "_"), 0, 25)

  # Virtio block devices: the first data disk is vdb on current CVM images.
  data_disk_device = "/dev/vdb"

  # Public bandwidth cap in Mbit/s for nodes with a public IP.
  public_bandwidth_mbps = 100

  # Per-node placement (var.node_placement): a node replaced at recovery may land in another zone,
  # on another type or billing; every other node keeps the cluster's.
  node_zone = [for i in range(var.node_count) : coalesce(try(var.node_placement[tostring(i)].zone, null), var.zone)]
  node_type = [for i in range(var.node_count) : coalesce(try(var.node_placement[tostring(i)].instance_type, null), var.instance_type)]
  node_spot = [for i in range(var.node_count) : coalesce(try(var.node_placement[tostring(i)].spot, null), var.spot.enabled)]
  # One subnet per other zone: Tencent subnets are zonal (tencentcloud_subnet docs:
  # availability_zone is required), and an instance's subnet must be in its zone.
  zone_subnets    = { for z, cidrs in { for p in values(var.node_placement) : p.zone => p.subnet_cidr... if p.zone != null && p.zone != var.zone } : z => cidrs[0] }
  node_subnet_ids = [for z in local.node_zone : z == var.zone ? tencentcloud_subnet.this.id : tencentcloud_subnet.zone[z].id]
}

resource "tencentcloud_vpc" "this" {
  name       = var.name
  cidr_block = var.vpc_cidr

  tags = var.tags
}

resource "tencentcloud_subnet" "this" {
  name              = var.name
  vpc_id            = tencentcloud_vpc.this.id
  availability_zone = var.zone
  cidr_block        = var.subnet_cidr
  # With nat_gateway: the route table whose default route goes to the NAT gateway (nat.tf);
  # without: the VPC's default table, set explicitly (route_table_id is Optional+Computed, so
  # null would keep the custom table and turning the NAT gateway off could not delete it).
  route_table_id = try(tencentcloud_route_table.this[0].id, tencentcloud_vpc.this.default_route_table_id)

  tags = var.tags
}

# The subnets of the other zones in node_placement: same VPC, same route table as the cluster
# subnet (so the NAT route, when there is one, serves their nodes too). Routes inside one VPC reach
# every subnet whatever its zone (the VPC's local route), so the cluster talks across zones.
resource "tencentcloud_subnet" "zone" {
  for_each = local.zone_subnets

  name              = "${var.name}-${each.key}"
  vpc_id            = tencentcloud_vpc.this.id
  availability_zone = each.key
  cidr_block        = each.value
  route_table_id    = try(tencentcloud_route_table.this[0].id, tencentcloud_vpc.this.default_route_table_id)

  tags = var.tags
}

resource "tencentcloud_security_group" "this" {
  name        = var.name
  description = "trainkit ${var.name}: SSH from admin CIDRs, all traffic between nodes"

  tags = var.tags
}

resource "tencentcloud_security_group_rule_set" "this" {
  security_group_id = tencentcloud_security_group.this.id

  dynamic "ingress" {
    for_each = var.admin_cidrs

    content {
      action      = "ACCEPT"
      cidr_block  = ingress.value
      protocol    = "TCP"
      port        = "22"
      description = "SSH from an admin CIDR"
    }
  }

  ingress {
    action             = "ACCEPT"
    source_security_id = tencentcloud_security_group.this.id
    protocol           = "ALL"
    port               = "ALL"
    description        = "All traffic between cluster members (NCCL, gloo, rendezvous, NFS)"
  }

  egress {
    action      = "ACCEPT"
    cidr_block  = "0.0.0.0/0"
    protocol    = "ALL"
    port        = "ALL"
    description = "All outbound traffic (packages, datasets)"
  }
}

resource "tencentcloud_key_pair" "this" {
  key_name   = local.key_name
  public_key = var.ssh_public_key

  tags = var.tags
}

# Tencent placement groups spread nodes (one per host here); there is no co-location policy
# (cloud-facts.md 8.5). For RDMA models use an HCC cluster instead. A spread placement group is
# regional and may hold instances of several zones (CVM docs, "Placement Group"), so a node placed
# in another zone stays in it.
resource "tencentcloud_placement_group" "this" {
  count = var.placement_group ? 1 : 0

  name = var.name
  type = "HOST"

  tags = var.tags
}

# Whether the nodes are in the placement group. Leaving it replaces them (replace_triggered_by on
# the instances): the provider refuses to unset placement_group_id in place ("Deleting
# `placement_group_id` is not currently supported"), keeps it when it is null (Optional+Computed),
# and the cloud deletes only an empty placement group (CVM docs, "Placement Group"). Joining it
# replaces them too. A cluster applied before this record existed only creates it: a create
# triggers no replacement.
resource "terraform_data" "placement" {
  input = var.placement_group
}

# Zone, type and billing per node (local.node_zone/node_type/node_spot); spot nodes bid the
# cluster's spot.max_price. A node whose billing is set apart in node_placement is a replacement
# being created anyway, so it is created with it; its subnet is the one of its zone.
resource "tencentcloud_instance" "node" {
  #checkov:skip=CKV_TC_2:the head node is the SSH entry point and carries a public IP by design (public_ip = "head")
  count = var.node_count

  instance_name              = "${var.name}-node-${count.index}"
  hostname                   = "${var.name}-node-${count.index}"
  availability_zone          = local.node_zone[count.index]
  instance_type              = local.node_type[count.index]
  image_id                   = local.node_image_id[count.index]
  vpc_id                     = tencentcloud_vpc.this.id
  subnet_id                  = local.node_subnet_ids[count.index]
  orderly_security_groups    = [tencentcloud_security_group.this.id]
  key_ids                    = [tencentcloud_key_pair.this.id]
  system_disk_type           = var.system_disk.category
  system_disk_size           = var.system_disk.size_gb
  instance_charge_type       = local.node_spot[count.index] ? "SPOTPAID" : "POSTPAID_BY_HOUR"
  spot_instance_type         = local.node_spot[count.index] ? "ONE-TIME" : null
  spot_max_price             = local.node_spot[count.index] && var.spot.max_price != null ? format("%.2f", var.spot.max_price) : null
  allocate_public_ip         = local.public[count.index]
  internet_charge_type       = local.public[count.index] ? "TRAFFIC_POSTPAID_BY_HOUR" : null
  internet_max_bandwidth_out = local.public[count.index] ? local.public_bandwidth_mbps : 0
  placement_group_id         = try(tencentcloud_placement_group.this[0].id, null)

  # Keys beyond the key pair's (the cloud controller's: docs/runs.md) as cloud-init user data:
  # `ssh_authorized_keys` adds each line to the default user's authorized_keys (cloud-init docs,
  # module "SSH"). null when there are none. user_data_raw: plain text, the provider
  # base64-encodes it (user_data itself must be base64: tencentcloud_instance docs).
  user_data_raw = local.node_user_data

  tags = var.tags

  lifecycle {
    # The image is fixed when the node is created: a newly published image (the data source in
    # image.tf picks the newest) or a changed `image` must not reinstall or replace running nodes.
    # `trainkit apply --upgrade-image` replaces the nodes on purpose (terraform -replace).
    # user_data: a key added later reaches only the nodes created after it (a replacement); a
    # change on a running node would reinstall, restart or replace it, so it is never applied.
    ignore_changes = [image_id, user_data_raw]
    # Joining or leaving the placement group replaces the node (terraform_data.placement below).
    replace_triggered_by = [terraform_data.placement]

    precondition {
      condition     = !local.node_spot[count.index] || var.spot.max_price != null
      error_message = "Tencent spot instances (SPOTPAID) need spot.max_price."
    }
  }
}

# Each data disk in its node's zone: a CBS disk attaches only to an instance in the same zone (CBS
# docs, "Attaching Cloud Disks").
resource "tencentcloud_cbs_storage" "data" {
  count = var.data_disk.enabled ? var.node_count : 0

  storage_name      = "${var.name}-data-${count.index}"
  storage_type      = var.data_disk.category
  storage_size      = var.data_disk.size_gb
  availability_zone = local.node_zone[count.index]
  charge_type       = "POSTPAID_BY_HOUR"
  encrypt           = var.data_disk.encrypted
  kms_key_id        = var.data_disk.encrypted ? var.data_disk.kms_key_id : null

  tags = var.tags
}

resource "tencentcloud_cbs_storage_attachment" "data" {
  count = var.data_disk.enabled ? var.node_count : 0

  storage_id  = tencentcloud_cbs_storage.data[count.index].id
  instance_id = tencentcloud_instance.node[count.index].id
}
