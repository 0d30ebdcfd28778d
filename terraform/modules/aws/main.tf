# trainkit GPU cluster on AWS: VPC, one subnet in one zone (one more per zone of a node placed apart,
# node_placement), a security group (SSH from admin_cidrs,
# everything inside the group), a key pair, N GPU instances (spot optional) in a cluster placement
# group, one encrypted EBS data volume per node, optionally EFS (nas.tf), and optionally a NAT
# gateway for the nodes without a public IP (nat.tf).

locals {
  # cloud-init reads user data that starts with `#cloud-config` as YAML (cloud-init docs, "User
  # data formats"); yamlencode quotes each key line, so no line of it is read as anything else.
  node_user_data = length(var.extra_authorized_keys) == 0 ? null : "#cloud-config\n${yamlencode({ ssh_authorized_keys = var.extra_authorized_keys })}"

  # Each node's data disk is found by its serial, not a device name (NVMe types such as
  # gn8v or Nitro name disks differently). NVMe serial = the volume id without its dash (/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol...).
  data_disk_serials = [for d in aws_ebs_volume.data : replace(d.id, "-", "")]

  # Node 0 is the head node; it alone gets a public IP unless public_ip says otherwise.
  public = [for i in range(var.node_count) : var.public_ip == "all" || (var.public_ip == "head" && i == 0)]
  # Public IPs are Elastic IPs attached after launch (aws_eip.node), not associate_public_ip_address:
  # they survive a stop/start, and the AWS API emulator used in tests reports the launch-time
  # flag and security groups inconsistently, which would make every later plan replace the nodes.
  public_indices = [for i, p in local.public : i if p]

  # With public_ip = "head", the head node lives in the public subnet (nat.tf), with or without a
  # NAT gateway: an Elastic IP only answers from a subnet whose default route is the internet
  # gateway, and a head that moved subnet when nat_gateway is switched would be replaced.
  node_subnet_ids = [for i, p in local.public : (
    local.node_zone[i] != var.zone ? (p && local.public_subnet ? aws_subnet.zone_public[local.node_zone[i]].id : aws_subnet.zone[local.node_zone[i]].id)
    : p ? try(aws_subnet.public[0].id, aws_subnet.this.id) : aws_subnet.this.id
  )]

  # Per-node placement (var.node_placement): a node replaced at recovery may land in another zone,
  # on another type or billing; every other node keeps the cluster's.
  node_zone = [for i in range(var.node_count) : coalesce(try(var.node_placement[tostring(i)].zone, null), var.zone)]
  node_type = [for i in range(var.node_count) : coalesce(try(var.node_placement[tostring(i)].instance_type, null), var.instance_type)]
  node_spot = [for i in range(var.node_count) : coalesce(try(var.node_placement[tostring(i)].spot, null), var.spot.enabled)]
  # One subnet per other zone (subnets are zonal in a VPC: AWS VPC user guide, "Subnets for your VPC").
  zone_subnets = { for z, cidrs in { for p in values(var.node_placement) : p.zone => p.subnet_cidr... if p.zone != null && p.zone != var.zone } : z => cidrs[0] }
  # Another zone that holds the head (public_ip = "head", the only public node when the cluster has a
  # public subnet, nat.tf) gets a public subnet of its own, as the cluster's zone does: the head's
  # Elastic IP answers only from a subnet routed to the internet gateway, while the zone's nodes
  # without a public IP go out through the NAT gateway (a zone subnet routed to the internet gateway
  # left them with no way out). Its CIDR is the /28 below the cluster's public one (the last /28
  # of vpc_cidr); trainkit's zone subnets keep clear of both (cluster/placement.py zone_subnet_cidr).
  zone_public_zones   = distinct([for i, p in local.public : local.node_zone[i] if p && local.public_subnet && local.node_zone[i] != var.zone])
  zone_public_cidr    = try(cidrsubnet(var.vpc_cidr, 28 - local.vpc_prefix, pow(2, 28 - local.vpc_prefix) - 2), null)
  zone_public_subnets = { for z in local.zone_public_zones : z => local.zone_public_cidr }
  # Whether that /28 overlaps subnet_cidr or a zone subnet (as public_subnet_overlaps in nat.tf).
  zone_public_overlaps = try(anytrue([for c in concat([var.subnet_cidr], values(local.zone_subnets)) : (
    tonumber(split("/", c)[1]) <= 28
    ? cidrhost("${cidrhost(local.zone_public_cidr, 0)}/${split("/", c)[1]}", 0) == cidrhost(c, 0)
    : cidrhost("${cidrhost(c, 0)}/28", 0) == cidrhost(local.zone_public_cidr, 0)
  )]), true)

  # g5/p4d/p5 are Nitro instances: the first EBS data volume shows up as an NVMe device, whatever
  # device_name says (AWS EC2 user guide, "Amazon EBS and NVMe"). Instance-store NVMe disks may
  # come first on some types; the disks role matches the volume serial to be sure.
  data_disk_device      = "/dev/nvme1n1"
  data_disk_device_name = "/dev/sdf"
}

resource "aws_vpc" "this" {
  #checkov:skip=CKV2_AWS_11:VPC flow logs need a log group and an IAM role; a short-lived training cluster does not keep them
  cidr_block           = var.vpc_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true

  tags = merge(var.tags, { Name = var.name })
}

# Take over the VPC's default security group and leave it with no rules (nothing uses it).
resource "aws_default_security_group" "this" {
  vpc_id = aws_vpc.this.id

  tags = merge(var.tags, { Name = "${var.name}-default" })
}

resource "aws_subnet" "this" {
  vpc_id                  = aws_vpc.this.id
  cidr_block              = var.subnet_cidr
  availability_zone       = var.zone
  map_public_ip_on_launch = false

  tags = merge(var.tags, { Name = var.name })
}

resource "aws_subnet" "zone" {
  for_each = local.zone_subnets

  vpc_id                  = aws_vpc.this.id
  cidr_block              = each.value
  availability_zone       = each.key
  map_public_ip_on_launch = false

  tags = merge(var.tags, { Name = "${var.name}-${each.key}" })
}

# Another zone's nodes without a public IP go out as the cluster's do: through the NAT gateway when
# there is one, else the internet gateway.
resource "aws_route_table_association" "zone" {
  for_each = local.zone_subnets

  subnet_id      = aws_subnet.zone[each.key].id
  route_table_id = try(aws_route_table.nat[0].id, aws_route_table.this.id)
}

resource "aws_subnet" "zone_public" {
  for_each = local.zone_public_subnets

  vpc_id                  = aws_vpc.this.id
  cidr_block              = each.value
  availability_zone       = each.key
  map_public_ip_on_launch = false

  tags = merge(var.tags, { Name = "${var.name}-${each.key}-public" })

  lifecycle {
    precondition {
      condition     = !local.zone_public_overlaps
      error_message = "the head node placed in ${each.key} gets the second-last /28 of vpc_cidr (${coalesce(local.zone_public_cidr, "none: vpc_cidr is smaller than a /27")}) as its public subnet; subnet_cidr and the other zones' subnets must not overlap it."
    }
  }
}

resource "aws_route_table_association" "zone_public" {
  for_each = local.zone_public_subnets

  subnet_id      = aws_subnet.zone_public[each.key].id
  route_table_id = aws_route_table.this.id
}

resource "aws_internet_gateway" "this" {
  vpc_id = aws_vpc.this.id

  tags = merge(var.tags, { Name = var.name })
}

resource "aws_route_table" "this" {
  vpc_id = aws_vpc.this.id

  route {
    cidr_block = "0.0.0.0/0"
    gateway_id = aws_internet_gateway.this.id
  }

  tags = merge(var.tags, { Name = var.name })
}

# The nodes' subnet goes out through the NAT gateway when there is one (nat.tf), else straight
# through the internet gateway.
resource "aws_route_table_association" "this" {
  subnet_id      = aws_subnet.this.id
  route_table_id = try(aws_route_table.nat[0].id, aws_route_table.this.id)
}

resource "aws_security_group" "this" {
  name        = var.name
  description = "trainkit ${var.name}: SSH from admin CIDRs, all traffic between nodes"
  vpc_id      = aws_vpc.this.id

  tags = merge(var.tags, { Name = var.name })
}

resource "aws_security_group_rule" "ssh" {
  security_group_id = aws_security_group.this.id
  description       = "SSH from the admin CIDRs"
  type              = "ingress"
  protocol          = "tcp"
  from_port         = 22
  to_port           = 22
  cidr_blocks       = var.admin_cidrs
}

resource "aws_security_group_rule" "intra_cluster" {
  security_group_id = aws_security_group.this.id
  description       = "All traffic between cluster members (NCCL, gloo, rendezvous, NFS)"
  type              = "ingress"
  protocol          = "-1"
  from_port         = 0
  to_port           = 0
  self              = true
}

resource "aws_security_group_rule" "egress" {
  #checkov:skip=CKV_AWS_382:nodes download packages, containers and datasets; egress is not limited
  security_group_id = aws_security_group.this.id
  description       = "All outbound traffic (packages, datasets)"
  type              = "egress"
  protocol          = "-1"
  from_port         = 0
  to_port           = 0
  cidr_blocks       = ["0.0.0.0/0"]
}

resource "aws_key_pair" "this" {
  key_name   = var.name
  public_key = var.ssh_public_key

  tags = merge(var.tags, { Name = var.name })
}

# Cluster strategy packs the nodes close together (low-latency network for all-reduce).
resource "aws_placement_group" "this" {
  count = var.placement_group ? 1 : 0

  name     = var.name
  strategy = "cluster"

  tags = merge(var.tags, { Name = var.name })
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

resource "aws_instance" "node" {
  #checkov:skip=CKV_AWS_88:the head node is the SSH entry point and carries a public IP by design (public_ip = "head")
  #checkov:skip=CKV2_AWS_41:nodes call no AWS API; an instance profile would only widen what a compromised node can do
  #checkov:skip=CKV_AWS_126:detailed (1-minute) monitoring is billed extra; trainkit logs GPU use and throughput itself
  count = var.node_count

  ami                    = local.image_id
  instance_type          = local.node_type[count.index]
  subnet_id              = local.node_subnet_ids[count.index]
  vpc_security_group_ids = [aws_security_group.this.id]
  key_name               = aws_key_pair.this.key_name
  # A cluster placement group lives in one zone (EC2 user guide, "Placement strategies"): a node
  # placed in another zone runs outside it.
  placement_group = local.node_zone[count.index] == var.zone ? try(aws_placement_group.this[0].id, null) : null
  ebs_optimized   = true
  # EC2 has no release-at argument: the node-side guard shuts down, and this makes that terminate.
  # null keeps EC2's default (stop) without a perpetual diff where the API omits the attribute.
  instance_initiated_shutdown_behavior = var.node_shutdown_terminates ? "terminate" : null

  dynamic "instance_market_options" {
    for_each = local.node_spot[count.index] ? [var.spot] : []

    content {
      market_type = "spot"

      spot_options {
        max_price                      = instance_market_options.value.max_price == null ? null : tostring(instance_market_options.value.max_price)
        spot_instance_type             = "one-time"
        instance_interruption_behavior = "terminate"
      }
    }
  }

  root_block_device {
    volume_type = var.system_disk.category
    volume_size = var.system_disk.size_gb
    encrypted   = true

    tags = merge(var.tags, { Name = "${var.name}-node-${count.index}-root" })
  }

  metadata_options {
    http_endpoint = "enabled"
    http_tokens   = "required"
  }

  # Keys beyond the key pair's (the cloud controller's: docs/runs.md) as cloud-init user data:
  # `ssh_authorized_keys` adds each line to the default user's authorized_keys (cloud-init docs,
  # module "SSH", cc_ssh). null when there are none, so nodes without it have no user data.
  user_data = local.node_user_data

  tags = merge(var.tags, { Name = "${var.name}-node-${count.index}" })

  lifecycle {
    # user_data: EC2 changes it only on a stopped instance (the provider stops and starts the
    # node: EC2 user guide, "Modify instance user data"), so a key added later reaches only the
    # nodes created after it (a replacement), never a running one.
    # The AWS API emulator used in tests keeps no spot request id, so a diff on
    # instance_market_options would replace spot nodes on every plan; a spot toggle or a new
    # max_price reaches the nodes through terraform_data.node instead (replaced, not ignored).
    # The image is fixed when the node is created: a newly published image (the data source in
    # image.tf picks the newest) or a changed `image` must not replace running nodes.
    # `trainkit apply --upgrade-image` replaces the nodes on purpose (terraform -replace).
    ignore_changes       = [ami, instance_market_options, user_data]
    replace_triggered_by = [terraform_data.node[count.index]]
  }
}

resource "aws_eip" "node" {
  count = length(local.public_indices)

  domain   = "vpc"
  instance = aws_instance.node[local.public_indices[count.index]].id

  tags = merge(var.tags, { Name = "${var.name}-node-${local.public_indices[count.index]}" })

  depends_on = [aws_internet_gateway.this]
}

resource "aws_ebs_volume" "data" {
  #checkov:skip=CKV_AWS_189:AWS-managed EBS key by default (a customer key would outlive the cluster); data_disk.kms_key_id names one
  count = var.data_disk.enabled ? var.node_count : 0

  availability_zone = local.node_zone[count.index] # attaches only to an instance in its zone
  type              = var.data_disk.category
  size              = var.data_disk.size_gb
  encrypted         = var.data_disk.encrypted
  kms_key_id        = var.data_disk.encrypted ? var.data_disk.kms_key_id : null

  tags = merge(var.tags, { Name = "${var.name}-data-${count.index}" })
}

# skip_destroy: destroying the attachment (a node replaced, or the cluster destroyed) removes it from
# the state without DetachVolume. The attachment is destroyed before its instance, while the volume
# is still mounted there and the job may be writing to it: a detach then pulls a mounted file system
# from under it, or hangs in "busy" until the provider's timeout (terraform-provider-aws #1991,
# #4770). The instance's termination, which comes next, shuts the OS down (unmounting it) and
# detaches the volume (EC2 user guide, "Terminate your instance": attached EBS volumes that are
# not deleted on termination are detached); the volume's own delete waits for that (VolumeInUse is
# retried). stop_instance_before_detaching is no answer: EC2 cannot stop a one-time spot instance.
resource "aws_volume_attachment" "data" {
  count = var.data_disk.enabled ? var.node_count : 0

  device_name  = local.data_disk_device_name
  volume_id    = aws_ebs_volume.data[count.index].id
  instance_id  = aws_instance.node[count.index].id
  skip_destroy = true
}
