# Rendered by trainkit from huaweicloud.yaml; edit the spec and re-render, not this file.
# The module under ./modules/huaweicloud is a copy of trainkit's, so this folder is self-contained.

module "cluster" {
  source = "./modules/huaweicloud"

  name                     = "huawei-demo"
  zone                     = "cn-north-4a"
  vpc_cidr                 = "10.42.0.0/16"
  subnet_cidr              = "10.42.1.0/24"
  admin_cidrs              = ["203.0.113.0/24"]
  node_count               = 2
  instance_type            = "p2s.4xlarge.8"
  image_id                 = null
  ssh_public_key           = var.ssh_public_key
  ssh_user                 = "root"
  public_ip                = "head"
  nat_gateway              = true
  placement_group          = true
  spot                     = { "enabled" : true, "max_price" : 20.0 }
  system_disk              = { "category" : "GPSSD", "size_gb" : 200 }
  data_disk                = { "enabled" : true, "category" : "GPSSD", "performance_level" : null, "size_gb" : 500, "encrypted" : true, "kms_key_id" : null }
  nas                      = { "enabled" : true, "type" : "STANDARD", "size_gb" : 500 }
  nfs_mount_options        = "vers=3,timeo=600,noresvport,nolock,tcp"
  tags                     = { "team" : "ml-platform", "trainkit-cluster" : "huawei-demo" }
  node_placement           = var.node_placement
  ttl_minutes              = null
  node_shutdown_terminates = false
}
