# Shared file system: EFS with one mount target in the cluster subnet, reached over NFSv4.1.
# The mount target sits in the cluster security group, whose intra-cluster rule opens 2049. A node
# placed in another zone (node_placement) mounts it by IP across zones (EFS user guide, "Mounting EFS
# file systems from a different Availability Zone").

resource "aws_efs_file_system" "this" {
  #checkov:skip=CKV_AWS_184:encrypted with the AWS-managed EFS key; a customer key would outlive the cluster
  count = var.nas.enabled ? 1 : 0

  creation_token   = var.name
  performance_mode = var.nas.type
  encrypted        = true

  tags = merge(var.tags, { Name = var.name })
}

resource "aws_efs_mount_target" "this" {
  count = var.nas.enabled ? 1 : 0

  file_system_id  = aws_efs_file_system.this[0].id
  subnet_id       = aws_subnet.this.id
  security_groups = [aws_security_group.this.id]
}
