# Shared file system: CFS (NFS) in the cluster subnet, with an access group that lets the cluster
# subnet read and write.

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
