output "nodes" {
  description = "Nodes in order (node 0 is the head): name, id, private_ip, public_ip (null when none), data_disk_serial (the end of the data disk's /dev/disk/by-id link, or null)"
  value = [
    for i, node in aws_instance.node : {
      name             = node.tags["Name"]
      id               = node.id
      private_ip       = node.private_ip
      public_ip        = contains(local.public_indices, i) ? try(aws_eip.node[index(local.public_indices, i)].public_ip, null) : null # try: an apply stopped before the EIP
      data_disk_serial = try(local.data_disk_serials[i], null)
    }
  ]
}

output "nas" {
  description = "Shared NFS file system (server, export_path, mount_options), or null when nas is disabled"
  value = try({
    server        = aws_efs_mount_target.this[0].ip_address
    export_path   = "/"
    mount_options = var.nfs_mount_options
  }, null)
}

output "data_disk_device" {
  description = "Block device of the data disk on every node, or null when data_disk is disabled"
  value       = var.data_disk.enabled ? local.data_disk_device : null
}

output "ssh_user" {
  description = "Login user of the nodes"
  value       = var.ssh_user
}

output "ssh_public_key" {
  description = "The cluster's SSH public key, so every workspace of the cluster renders the same key"
  value       = var.ssh_public_key
}

output "controller" {
  description = "The controller instance (id, private_ip, public_ip, role), or null when there is none"
  value = try({
    id         = aws_instance.controller[0].id
    private_ip = aws_instance.controller[0].private_ip
    public_ip  = try(aws_eip.controller[0].public_ip, null)
    role       = aws_iam_role.controller[0].name
  }, null)
}

output "controller_policy" {
  description = "The controller role's policy document (JSON), or null when there is no controller"
  value       = var.controller == null ? null : local.controller_policy
}
