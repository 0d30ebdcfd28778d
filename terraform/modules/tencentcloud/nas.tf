# Shared file system: CFS (NFS) in the cluster subnet, with an access group that lets the cluster
# subnet read and write.
#
# Nodes placed in another zone (node_placement) mount the same file system through the same mount
# point: a CFS mount point serves clients in the same VPC and region, whatever their zone (CFS FAQ,
# "What if a mount point is unavailable?": same VPC, same region), so no mount point is added per
# zone. The access group admits clients by source CIDR, though, so each extra zone's subnet gets a
# rule of its own (below).

resource "tencentcloud_cfs_access_group" "this" {
  count = var.nas.enabled ? 1 : 0

  name        = var.name
  description = "trainkit ${var.name}: cluster subnet"
}

resource "tencentcloud_cfs_access_rule" "this" {
  count = var.nas.enabled ? 1 : 0

  access_group_id = tencentcloud_cfs_access_group.this[0].id
  auth_client_ip  = var.subnet_cidr
  priority        = 1
  rw_permission   = "RW"
  user_permission = "no_root_squash"
}

# The subnets of the other zones in node_placement (main.tf tencentcloud_subnet.zone). The CIDRs do
# not overlap the cluster subnet's, so the priority orders nothing; 2 keeps the cluster subnet's
# rule first.
resource "tencentcloud_cfs_access_rule" "zone" {
  for_each = var.nas.enabled ? local.zone_subnets : {}

  access_group_id = tencentcloud_cfs_access_group.this[0].id
  auth_client_ip  = each.value
  priority        = 2
  rw_permission   = "RW"
  user_permission = "no_root_squash"
}

resource "tencentcloud_cfs_file_system" "this" {
  count = var.nas.enabled ? 1 : 0

  name              = var.name
  availability_zone = var.zone
  access_group_id   = tencentcloud_cfs_access_group.this[0].id
  protocol          = "NFS"
  storage_type      = var.nas.type
  vpc_id            = tencentcloud_vpc.this.id
  subnet_id         = tencentcloud_subnet.this.id

  tags = var.tags
}
