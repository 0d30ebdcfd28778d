# Outbound internet for the nodes without a public IP (they install packages while provisioning):
# a NAT gateway with its own EIP, and a route table for the nodes' subnet whose 0.0.0.0/0 goes to
# it (Tencent adds no such route by itself). A node's own public IP takes priority over a NAT
# gateway route (Tencent VPC docs, route tables), so the head node is still reached over SSH.

resource "tencentcloud_eip" "nat" {
  count = var.nat_gateway ? 1 : 0

  name                       = "${var.name}-nat"
  internet_charge_type       = "TRAFFIC_POSTPAID_BY_HOUR"
  internet_max_bandwidth_out = local.public_bandwidth_mbps

  tags = var.tags
}

resource "tencentcloud_nat_gateway" "this" {
  count = var.nat_gateway ? 1 : 0

  name             = var.name
  vpc_id           = tencentcloud_vpc.this.id
  assigned_eip_set = [tencentcloud_eip.nat[0].public_ip]

  tags = var.tags
}

resource "tencentcloud_route_table" "this" {
  count = var.nat_gateway ? 1 : 0

  name   = var.name
  vpc_id = tencentcloud_vpc.this.id

  tags = var.tags
}

resource "tencentcloud_route_table_entry" "nat" {
  count = var.nat_gateway ? 1 : 0

  route_table_id         = tencentcloud_route_table.this[0].id
  destination_cidr_block = "0.0.0.0/0"
  next_type              = "NAT"
  next_hub               = tencentcloud_nat_gateway.this[0].id
  description            = "Outbound internet through the NAT gateway"
}
