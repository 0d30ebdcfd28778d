# Outbound internet for the nodes without a public IP (they install packages while provisioning):
# an enhanced Internet NAT gateway in the nodes' vSwitch, an EIP bound to it, and one SNAT entry
# for the whole vSwitch. On creation the enhanced gateway adds the 0.0.0.0/0 route to itself in
# the VPC route table (provider docs, r/nat_gateway). A node's own public IP should take precedence
# over SNAT (Alibaba NAT docs; not re-checked for this module): the head node stays reachable.

resource "alicloud_nat_gateway" "this" {
  count = var.nat_gateway ? 1 : 0

  nat_gateway_name     = var.name
  description          = "trainkit ${var.name}: outbound internet for nodes without a public IP"
  vpc_id               = alicloud_vpc.this.id
  vswitch_id           = alicloud_vswitch.this.id
  nat_type             = "Enhanced"
  network_type         = "internet"
  payment_type         = "PayAsYouGo"
  internet_charge_type = "PayByLcu"

  tags = var.tags
}

resource "alicloud_eip_address" "nat" {
  count = var.nat_gateway ? 1 : 0

  address_name         = "${var.name}-nat"
  payment_type         = "PayAsYouGo"
  internet_charge_type = "PayByTraffic"
  bandwidth            = tostring(local.public_bandwidth_mbps)

  tags = var.tags
}

resource "alicloud_eip_association" "nat" {
  count = var.nat_gateway ? 1 : 0

  allocation_id = alicloud_eip_address.nat[0].id
  instance_id   = alicloud_nat_gateway.this[0].id
  instance_type = "Nat"
}

resource "alicloud_snat_entry" "this" {
  count = var.nat_gateway ? 1 : 0

  snat_entry_name   = var.name
  snat_table_id     = alicloud_nat_gateway.this[0].snat_table_ids
  source_vswitch_id = alicloud_vswitch.this.id
  snat_ip           = alicloud_eip_address.nat[0].ip_address

  depends_on = [alicloud_eip_association.nat]
}
