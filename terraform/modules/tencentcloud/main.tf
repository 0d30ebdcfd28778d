# trainkit GPU cluster on Tencent Cloud: VPC, one subnet in one zone, a security group (SSH from
# admin_cidrs, all traffic between members), a key pair, N CVM GPU instances (spot optional) in
# a placement group, one encrypted CBS data disk per node, and optionally CFS (nas.tf).

locals {
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
# (cloud-facts.md 8.5). For RDMA models use an HCC cluster instead.
resource "tencentcloud_placement_group" "this" {
  count = var.placement_group ? 1 : 0

  name = var.name
  type = "HOST"

  tags = var.tags
}

resource "tencentcloud_instance" "node" {
  #checkov:skip=CKV_TC_2:the head node is the SSH entry point and carries a public IP by design (public_ip = "head")
  count = var.node_count

  instance_name              = "${var.name}-node-${count.index}"
  hostname                   = "${var.name}-node-${count.index}"
  availability_zone          = var.zone
  instance_type              = var.instance_type
  image_id                   = local.image_id
  vpc_id                     = tencentcloud_vpc.this.id
  subnet_id                  = tencentcloud_subnet.this.id
  orderly_security_groups    = [tencentcloud_security_group.this.id]
  key_ids                    = [tencentcloud_key_pair.this.id]
  system_disk_type           = var.system_disk.category
  system_disk_size           = var.system_disk.size_gb
  instance_charge_type       = var.spot.enabled ? "SPOTPAID" : "POSTPAID_BY_HOUR"
  spot_instance_type         = var.spot.enabled ? "ONE-TIME" : null
  spot_max_price             = var.spot.enabled && var.spot.max_price != null ? format("%.2f", var.spot.max_price) : null
  allocate_public_ip         = local.public[count.index]
  internet_charge_type       = local.public[count.index] ? "TRAFFIC_POSTPAID_BY_HOUR" : null
  internet_max_bandwidth_out = local.public[count.index] ? local.public_bandwidth_mbps : 0
  placement_group_id         = try(tencentcloud_placement_group.this[0].id, null)

  tags = var.tags

  lifecycle {
    # The image is fixed when the node is created: a newly published image (the data source in
    # image.tf picks the newest) or a changed `image` must not reinstall or replace running nodes.
    # `trainkit apply --upgrade-image` replaces the nodes on purpose (terraform -replace).
    ignore_changes = [image_id]

    precondition {
      condition     = !var.spot.enabled || var.spot.max_price != null
      error_message = "Tencent spot instances (SPOTPAID) need spot.max_price."
    }
  }
}

resource "tencentcloud_cbs_storage" "data" {
  count = var.data_disk.enabled ? var.node_count : 0

  storage_name      = "${var.name}-data-${count.index}"
  storage_type      = var.data_disk.category
  storage_size      = var.data_disk.size_gb
  availability_zone = var.zone
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
