output "nodes" {
  description = "Nodes in order (node 0 is the head): name, id, private_ip, public_ip (null when none), data_disk_serial"
  value       = module.cluster.nodes
}

output "nas" {
  description = "Shared NFS file system (server, export_path, mount_options), or null"
  value       = module.cluster.nas
}

output "data_disk_device" {
  description = "Block device of the data disk on every node, or null"
  value       = module.cluster.data_disk_device
}

output "ssh_user" {
  description = "Login user of the nodes"
  value       = module.cluster.ssh_user
}

output "ssh_public_key" {
  description = "The cluster's SSH public key: a second workspace renders this one, not a new key"
  value       = module.cluster.ssh_public_key
}

output "controller" {
  description = "The controller instance (id, private_ip, public_ip, role), or null when there is none"
  value       = module.cluster.controller
}

output "controller_policy" {
  description = "What the controller's instance identity may do (the policy document, JSON), or null"
  value       = module.cluster.controller_policy
}
