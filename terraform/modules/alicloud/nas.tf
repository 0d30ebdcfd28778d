# Shared file system: a general-purpose NAS file system, an access group that lets the cluster
# subnet read and write, and one mount target in the cluster vSwitch.
# Nodes placed in another zone (node_placement) mount the same mount target: it serves its VPC,
# and the zones of a region reach each other (Alibaba NAS API overview, "Terms": same zone is only
# recommended, to spare the cross-zone latency). No mount target per zone, then; but the access
# group admits source CIDRs only, so each other zone's vSwitch CIDR gets its own rule.
# vpc_id/vswitch_id are NOT set on the file system: for standard NAS they force replacement
# (cloud-facts.md 8.8).

resource "alicloud_nas_file_system" "this" {
  count = var.nas.enabled ? 1 : 0

  description      = var.name
  protocol_type    = "NFS"
  storage_type     = var.nas.type
  file_system_type = "standard"
  encrypt_type     = 1 # NAS-managed key
  # The cluster's zone (unset, Alibaba picks a random zone of the region).
  zone_id = var.zone

  tags = var.tags
}

resource "alicloud_nas_access_group" "this" {
  count = var.nas.enabled ? 1 : 0

  access_group_name = var.name
  access_group_type = "Vpc"
  file_system_type  = "standard"
  description       = "trainkit ${var.name}: cluster subnet"
}

resource "alicloud_nas_access_rule" "this" {
  count = var.nas.enabled ? 1 : 0

  access_group_name = alicloud_nas_access_group.this[0].access_group_name
  file_system_type  = "standard"
  source_cidr_ip    = var.subnet_cidr
  rw_access_type    = "RDWR"
  user_access_type  = "no_squash"
  priority          = 1
}

# Same rule for the vSwitch of each other zone a node is placed in (main.tf, alicloud_vswitch.zone).
resource "alicloud_nas_access_rule" "zone" {
  for_each = var.nas.enabled ? local.zone_vswitches : {}

  access_group_name = alicloud_nas_access_group.this[0].access_group_name
  file_system_type  = "standard"
  source_cidr_ip    = each.value
  rw_access_type    = "RDWR"
  user_access_type  = "no_squash"
  priority          = 1
}

resource "alicloud_nas_mount_target" "this" {
  count = var.nas.enabled ? 1 : 0

  file_system_id    = alicloud_nas_file_system.this[0].id
  access_group_name = alicloud_nas_access_group.this[0].access_group_name
  vswitch_id        = alicloud_vswitch.this.id
  vpc_id            = alicloud_vpc.this.id
  network_type      = "Vpc"
}
