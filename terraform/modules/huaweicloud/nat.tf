# Outbound internet for the nodes without a public IP (they install packages while provisioning):
# a public NAT gateway in the nodes' subnet, an EIP, and one SNAT rule for the subnet. On creation
# the gateway adds a 0.0.0.0/0 route to itself in the VPC's default route table (Huawei NAT docs,
# "buy a public NAT gateway"). An EIP bound to a node outranks that route (Huawei EIP FAQ, route
# priorities), so the head node keeps its own EIP for SSH.

resource "huaweicloud_vpc_eip" "nat" {
  count = var.nat_gateway ? 1 : 0

  name = "${var.name}-nat"

  publicip {
    type = "5_bgp"
  }

  bandwidth {
    share_type  = "PER"
    name        = "${var.name}-nat"
    size        = local.public_bandwidth_mbps
    charge_mode = "traffic"
  }

  tags = var.tags
}

# spec "1" = small, up to 10,000 SNAT connections (provider docs, r/nat_gateway): plenty for the
# package downloads of a training cluster.
resource "huaweicloud_nat_gateway" "this" {
  count = var.nat_gateway ? 1 : 0

  name        = var.name
  description = "trainkit ${var.name}: outbound internet for nodes without a public IP"
  spec        = "1"
  vpc_id      = huaweicloud_vpc.this.id
  subnet_id   = huaweicloud_vpc_subnet.this.id

  tags = var.tags
}

resource "huaweicloud_nat_snat_rule" "this" {
  count = var.nat_gateway ? 1 : 0

  nat_gateway_id = huaweicloud_nat_gateway.this[0].id
  subnet_id      = huaweicloud_vpc_subnet.this.id
  floating_ip_id = huaweicloud_vpc_eip.nat[0].id
  description    = "Outbound internet for the cluster subnet"
}
