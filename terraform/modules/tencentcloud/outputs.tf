output "nodes" {
  description = "Nodes in order (node 0 is the head): name, id, private_ip, public_ip (null when none), data_disk_serial (the end of the data disk's /dev/disk/by-id link, or null)"
  value = [
    for i, node in tencentcloud_instance.node : {
      name             = node.instance_name
      id               = node.id
      private_ip       = node.private_ip
      public_ip        = node.public_ip == "" ? null : node.public_ip
      data_disk_serial = try(local.data_disk_serials[i], null)
    }
  ]
}

output "nas" {
  description = "Shared NFS file system (server, export_path, mount_options), or null when nas is disabled"
  value = try({
    server        = tencentcloud_cfs_file_system.this[0].mount_ip
    export_path   = "/${tencentcloud_cfs_file_system.this[0].fs_id}"
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
    id         = tencentcloud_instance.controller[0].id
    private_ip = tencentcloud_instance.controller[0].private_ip
    public_ip  = tencentcloud_instance.controller[0].public_ip != "" ? tencentcloud_instance.controller[0].public_ip : null
    role       = tencentcloud_cam_role.controller[0].name
  }, null)
}

output "controller_policy" {
  description = "The controller's policy document (JSON), or null when there is no controller"
  value       = var.controller == null ? null : local.controller_policy
}
