# Shared file system: SFS Turbo (NFSv3) in the cluster subnet and security group. The group's
# intra-cluster rule already lets the nodes reach it, so the service adds no rules of its own
# (auto_create_security_group_rules = false; its default opens the NFS ports to the subnet).

resource "huaweicloud_sfs_turbo" "this" {
  count = var.nas.enabled ? 1 : 0

  name              = var.name
  size              = var.nas.size_gb
  share_proto       = "NFS"
  share_type        = var.nas.type
  availability_zone = var.zone
  vpc_id            = huaweicloud_vpc.this.id
  subnet_id         = huaweicloud_vpc_subnet.this.id
  security_group_id = huaweicloud_networking_secgroup.this.id

  auto_create_security_group_rules = false

  tags = var.tags
}
