# The image every node boots from: var.image_id, or (null) the newest Huawei public Ubuntu 22.04
# image that the flavor can boot (huaweicloud_images_image docs: name_regex, visibility,
# most_recent, flavor_id). The nvidia role installs the GPU driver (the ascend role the Ascend stack).

data "huaweicloud_images_image" "default" {
  count = var.image_id == null ? 1 : 0

  name_regex  = "^Ubuntu 22\\.04 server 64bit"
  visibility  = "public"
  flavor_id   = var.instance_type
  most_recent = true
}

# A node placed on another flavor (node_placement) gets the newest image that flavor can boot: the
# lookup above is per flavor. var.image_id, when set, is the image of every node.
data "huaweicloud_images_image" "type" {
  for_each = var.image_id == null ? toset([for t in local.node_type : t if t != var.instance_type]) : toset([])

  name_regex  = "^Ubuntu 22\\.04 server 64bit"
  visibility  = "public"
  flavor_id   = each.key
  most_recent = true
}

locals {
  image_id      = var.image_id != null ? var.image_id : data.huaweicloud_images_image.default[0].id
  node_image_id = [for t in local.node_type : var.image_id != null || t == var.instance_type ? local.image_id : data.huaweicloud_images_image.type[t].id]
}
