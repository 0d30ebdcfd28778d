# Shared file system: SFS Turbo (NFSv3) in the cluster subnet and security group. The group's
# intra-cluster rule already lets the nodes reach it, so the service adds no rules of its own
# (auto_create_security_group_rules = false; its default opens the NFS ports to the subnet).
# It stays in var.zone and the cluster subnet when node_placement puts a node in another zone: the
# subnets of one VPC reach each other (VPC user guide, "Subnet"), the file system is mounted by IP
# and the intra-cluster rule matches the group, not a subnet, so such a node mounts it unchanged
# (across AZs, with the latency between them). Moving it would replace it (availability_zone and
# subnet_id are ForceNew, huaweicloud_sfs_turbo docs) and lose the data.

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
