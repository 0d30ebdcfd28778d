# trainkit GPU cluster on Alibaba Cloud: VPC, one vSwitch in one zone, a security group (SSH from
# admin_cidrs, members talk freely), a key pair, N ECS GPU instances (spot optional) in a
# LowLatency deployment set, one encrypted ESSD data disk per node, and optionally NAS (nas.tf).

locals {
  # Each node's data disk is found by its serial, not a device name (NVMe types such as
  # gn8v or Nitro name disks differently). Virtio serial = the disk id without "d-" (/dev/disk/by-id/virtio-<serial>, NVMe links end with it too).
  data_disk_serials = [for d in alicloud_ecs_disk.data : trimprefix(d.id, "d-")]

  # Node 0 is the head node; it alone gets a public IP unless public_ip says otherwise.
  public = [for i in range(var.node_count) : var.public_ip == "all" || (var.public_ip == "head" && i == 0)]

  # Spot: a price cap when max_price is set, else pay the market price up to on-demand.
  spot_strategy = !var.spot.enabled ? "NoSpot" : (var.spot.max_price == null ? "SpotAsPriceGo" : "SpotWithPriceLimit")

  # Performance levels exist only for ESSD disks.
  data_disk_performance_level = var.data_disk.category == "cloud_essd" ? var.data_disk.performance_level : null

  # Virtio block devices: the first data disk is vdb on current ECS images.
  data_disk_device = "/dev/vdb"

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

resource "alicloud_instance" "node" {
  count = var.node_count

  instance_name                 = "${var.name}-node-${count.index}"
  host_name                     = "${var.name}-node-${count.index}"
  instance_type                 = var.instance_type
  image_id                      = local.image_id
  vswitch_id                    = alicloud_vswitch.this.id
  security_groups               = [alicloud_security_group.this.id]
  key_name                      = alicloud_ecs_key_pair.this.key_pair_name
  system_disk_category          = var.system_disk.category
  system_disk_size              = var.system_disk.size_gb
  system_disk_encrypted         = true
  instance_charge_type          = "PostPaid"
  spot_strategy                 = local.spot_strategy
  spot_price_limit              = local.spot_strategy == "SpotWithPriceLimit" ? var.spot.max_price : null
  internet_charge_type          = "PayByTraffic"
  internet_max_bandwidth_out    = local.public[count.index] ? local.public_bandwidth_mbps : 0
  deployment_set_id             = try(alicloud_ecs_deployment_set.this[0].id, null)
  http_tokens                   = "required"
  security_enhancement_strategy = "Active"
  # TTL: yyyy-MM-ddTHH:mm:ssZ in UTC (alicloud_instance docs); fixed at creation, see lifecycle.
  auto_release_time = var.ttl_minutes == null ? null : timeadd(plantimestamp(), "${var.ttl_minutes}m")

  tags        = merge(var.tags, { Name = "${var.name}-node-${count.index}" })
  volume_tags = var.tags

  lifecycle {
    # plantimestamp() moves on every plan; the release time is set once, when the node is created.
    # The image is fixed when the node is created: a newly published image (the data source in
    # image.tf picks the newest) or a changed `image` must not reinstall or replace running nodes.
    # `trainkit apply --upgrade-image` replaces the nodes on purpose (terraform -replace).
    ignore_changes = [auto_release_time, image_id]
  }
}

resource "alicloud_ecs_disk" "data" {
  count = var.data_disk.enabled ? var.node_count : 0

  disk_name         = "${var.name}-data-${count.index}"
  zone_id           = var.zone
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
  # data disk goes with it instead of billing on (delete_with_instance defaults to false).
  delete_with_instance = var.ttl_minutes != null || var.spot.enabled
}
