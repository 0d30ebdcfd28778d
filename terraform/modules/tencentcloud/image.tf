# The image every node boots from: var.image_id, or (null) a Tencent public Ubuntu Server 22.04
# image that instance_type can boot (tencentcloud_images docs: image_type, image_name_regex,
# instance_type). Tencent publishes no public image with the GPU driver baked in; the nvidia role
# installs it.

data "tencentcloud_images" "default" {
  count = var.image_id == null ? 1 : 0

  image_type       = ["PUBLIC_IMAGE"]
  image_name_regex = "^Ubuntu Server 22\\.04"
  instance_type    = var.instance_type
}

# A node placed on another instance type (node_placement) gets the newest image that type can boot:
# the lookup filters by instance type. var.image_id, when set, is the image of every node.
data "tencentcloud_images" "type" {
  for_each = var.image_id == null ? toset([for t in local.node_type : t if t != var.instance_type]) : toset([])

  image_type       = ["PUBLIC_IMAGE"]
  image_name_regex = "^Ubuntu Server 22\\.04"
  instance_type    = each.key
}

locals {
  image_id      = var.image_id != null ? var.image_id : data.tencentcloud_images.default[0].images[0].image_id
  node_image_id = [for t in local.node_type : var.image_id != null || t == var.instance_type ? local.image_id : data.tencentcloud_images.type[t].images[0].image_id]
}
