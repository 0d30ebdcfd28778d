# Rendered by trainkit from alicloud.yaml; edit the spec and re-render, not this file.
# The module under ./modules/alicloud is a copy of trainkit's, so this folder is self-contained.

module "cluster" {
  source = "./modules/alicloud"

  name                     = "ali-demo"
  zone                     = "cn-hangzhou-i"
  vpc_cidr                 = "10.42.0.0/16"
  subnet_cidr              = "10.42.1.0/24"
  admin_cidrs              = ["203.0.113.0/24"]
  node_count               = 2
  instance_type            = "ecs.gn7i-c32g1.8xlarge"
  image_id                 = null
  ssh_public_key           = var.ssh_public_key
  ssh_user                 = "root"
  public_ip                = "head"
  nat_gateway              = true
  placement_group          = false
  spot                     = { "enabled" : true, "max_price" : 8.0 }
  system_disk              = { "category" : "cloud_essd", "size_gb" : 200 }
  data_disk                = { "enabled" : true, "category" : "cloud_essd", "performance_level" : "PL1", "size_gb" : 500, "encrypted" : true, "kms_key_id" : null }
  nas                      = { "enabled" : true, "type" : "Performance", "size_gb" : null }
  nfs_mount_options        = "vers=3,nolock,proto=tcp,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,_netdev,noresvport"
  tags                     = { "team" : "ml-platform", "trainkit-cluster" : "ali-demo" }
  node_placement           = var.node_placement
  ttl_minutes              = 720
  node_shutdown_terminates = false
}
