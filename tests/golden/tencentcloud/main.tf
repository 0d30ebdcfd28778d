# Rendered by trainkit from tencentcloud.yaml; edit the spec and re-render, not this file.
# The module under ./modules/tencentcloud is a copy of trainkit's, so this folder is self-contained.

module "cluster" {
  source = "./modules/tencentcloud"

  name                     = "tencent-demo"
  zone                     = "ap-guangzhou-4"
  vpc_cidr                 = "10.42.0.0/16"
  subnet_cidr              = "10.42.1.0/24"
  admin_cidrs              = ["203.0.113.0/24"]
  node_count               = 2
  instance_type            = "GT4.8XLARGE192"
  image_id                 = null
  ssh_public_key           = var.ssh_public_key
  ssh_user                 = "ubuntu"
  public_ip                = "head"
  nat_gateway              = true
  placement_group          = true
  spot                     = { "enabled" : false, "max_price" : null }
  system_disk              = { "category" : "CLOUD_HSSD", "size_gb" : 200 }
  data_disk                = { "enabled" : true, "category" : "CLOUD_HSSD", "performance_level" : null, "size_gb" : 500, "encrypted" : true, "kms_key_id" : null }
  nas                      = { "enabled" : true, "type" : "SD", "size_gb" : null }
  nfs_mount_options        = "vers=3,nolock,proto=tcp,noresvport"
  tags                     = { "team" : "ml-platform", "trainkit-cluster" : "tencent-demo" }
  node_placement           = var.node_placement
  ttl_minutes              = null
  node_shutdown_terminates = false
}
