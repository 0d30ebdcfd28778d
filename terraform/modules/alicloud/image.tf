# The image every node boots from: var.image_id, or (null) the newest Alibaba public ("system")
# Ubuntu 22.04 image that instance_type can boot (alicloud_images docs: name_regex, owners,
# most_recent, instance_type). Alibaba publishes no public image with the GPU driver baked in;
# the nvidia role installs it.

data "alicloud_images" "default" {
  count = var.image_id == null ? 1 : 0

  name_regex    = "^ubuntu_22_04_x64"
  owners        = "system"
  os_type       = "linux"
  instance_type = var.instance_type
  most_recent   = true
}

# A node placed on another instance type (node_placement) gets the newest image that type can boot:
# the lookup filters by instance type. var.image_id, when set, is the image of every node.
data "alicloud_images" "type" {
  for_each = var.image_id == null ? toset([for t in local.node_type : t if t != var.instance_type]) : toset([])

  name_regex    = "^ubuntu_22_04_x64"
  owners        = "system"
  os_type       = "linux"
  instance_type = each.key
  most_recent   = true
}

locals {
  image_id      = var.image_id != null ? var.image_id : data.alicloud_images.default[0].images[0].id
  node_image_id = [for t in local.node_type : var.image_id != null || t == var.instance_type ? local.image_id : data.alicloud_images.type[t].images[0].id]
}
