# Rendered by trainkit from aws-moto.yaml; edit the spec and re-render, not this file.
# The module under ./modules/aws is a copy of trainkit's, so this folder is self-contained.

module "cluster" {
  source = "./modules/aws"

  name                     = "aws-moto"
  zone                     = "us-east-1a"
  vpc_cidr                 = "10.42.0.0/16"
  subnet_cidr              = "10.42.1.0/24"
  admin_cidrs              = ["203.0.113.0/24"]
  node_count               = 2
  instance_type            = "g5.12xlarge"
  image_id                 = "ami-1e749f67"
  ssh_public_key           = var.ssh_public_key
  ssh_user                 = "ubuntu"
  public_ip                = "head"
  nat_gateway              = true
  placement_group          = false
  spot                     = { "enabled" : true, "max_price" : 3.5 }
  system_disk              = { "category" : "gp3", "size_gb" : 200 }
  data_disk                = { "enabled" : true, "category" : "gp3", "performance_level" : null, "size_gb" : 500, "encrypted" : true, "kms_key_id" : null }
  nas                      = { "enabled" : true, "type" : "generalPurpose", "size_gb" : null }
  nfs_mount_options        = "nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,_netdev"
  tags                     = { "team" : "ml-platform", "trainkit-cluster" : "aws-moto" }
  node_placement           = var.node_placement
  ttl_minutes              = null
  node_shutdown_terminates = false
}
