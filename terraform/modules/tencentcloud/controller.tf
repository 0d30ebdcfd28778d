# The controller (issue 42): one small pay-as-you-go CVM (never spot) in the cluster's subnet that
# runs the recovery loop of `train --recover --detach`. It acts through a CAM role bound to the
# instance (cam_role_name; temporary keys from metadata.tencentyun.com
# .../cam/security-credentials/<role>), so no SecretKey is copied to it.

locals {
  controller = var.controller == null ? [] : [var.controller]
  # Tag conditions (Tencent Cloud CAM docs, "Authorization by tag", product/598/47827 and
  # 598/58347): qcs:request_tag matches a tag in the request, qcs:resource_tag one the resource
  # carries, each value "key&value". List APIs are not tag-filtered (same docs). The provider wants
  # every JSON element that may be a string or an array as an array (cam_policy `document`).
  tc_tag          = ["trainkit-cluster&${var.name}"]
  tc_request_tag  = { "for_any_value:string_equal" = { "qcs:request_tag" = local.tc_tag } }
  tc_resource_tag = { "for_any_value:string_equal" = { "qcs:resource_tag" = local.tc_tag } }
  tc_bucket       = try(coalesce(var.controller.state_bucket), "")
  tc_prefix       = try(coalesce(var.controller.state_prefix), "")
  tc_appid        = try(regex("-([0-9]+)$", local.tc_bucket)[0], "*") # a COS bucket name ends with the APPID
  controller_statements = concat([
    {
      effect   = "allow"
      action   = ["name/cvm:Describe*", "name/vpc:Describe*", "name/cbs:Describe*", "name/cfs:Describe*"]
      resource = ["*"]
    },
    {
      # A node and its data disk only when created with the cluster's tag in the same request.
      effect    = "allow"
      action    = ["name/cvm:RunInstances", "name/cbs:CreateDisks"]
      resource  = ["*"]
      condition = local.tc_request_tag
    },
    {
      # Replace a reclaimed node, on instances and disks that carry the cluster's tag only.
      effect = "allow"
      action = ["name/cvm:TerminateInstances", "name/cvm:StopInstances", "name/cvm:StartInstances",
        "name/cvm:ModifyInstancesAttribute", "name/cbs:AttachDisks", "name/cbs:DetachDisks", "name/cbs:TerminateDisks",
      "name/cbs:ResizeDisk"]
      resource  = ["*"]
      condition = local.tc_resource_tag
    },
    {
      # Terraform refreshes the controller's own role and policy; nodes carry no CAM role (no cam:PassRole).
      effect   = "allow"
      action   = ["name/cam:GetRole", "name/cam:GetPolicy", "name/cam:ListAttachedRolePolicies"]
      resource = ["*"]
    },
    ], [for st in [
      {
        # The cos backend (Terraform docs, "Backend Type: cos"): Put/Get/Delete under the prefix...
        effect   = "allow"
        action   = ["name/cos:GetObject", "name/cos:PutObject", "name/cos:DeleteObject", "name/cos:HeadObject"]
        resource = ["qcs::cos::uid/${local.tc_appid}:${local.tc_bucket}/${local.tc_prefix}/*"]
      },
      {
        effect   = "allow"
        action   = ["name/cos:GetBucket"]
        resource = ["qcs::cos::uid/${local.tc_appid}:${local.tc_bucket}/*"]
      },
      {
        # ...and its lock, a tag on the bucket (same page: CreateTag, DeleteTag, DescribeTags).
        effect   = "allow"
        action   = ["name/tag:CreateTag", "name/tag:DeleteTag", "name/tag:DescribeTags", "name/tag:AddResourceTag", "name/tag:DeleteResourceTag", "name/tag:DescribeResourceTags"]
        resource = ["*"]
      },
  ] : st if local.tc_bucket != ""])
  controller_policy = jsonencode({ version = "2.0", statement = local.controller_statements })
}

resource "tencentcloud_cam_role" "controller" {
  count = length(local.controller)

  name        = "${var.name}-controller"
  description = "trainkit ${var.name}: the controller instance (recovery loop), this cluster only"
  # Only CVM may assume it (Tencent Cloud CVM docs, "Managing Instance Roles", product/213/45917).
  document = jsonencode({
    version   = "2.0"
    statement = [{ action = ["name/sts:AssumeRole"], effect = "allow", principal = { service = ["cvm.qcloud.com"] } }]
  })

  tags = var.tags
}

resource "tencentcloud_cam_policy" "controller" {
  count = length(local.controller)

  name        = "${var.name}-controller"
  description = "trainkit ${var.name}: what the controller may do"
  document    = local.controller_policy

  tags = var.tags
}

resource "tencentcloud_cam_role_policy_attachment" "controller" {
  count = length(local.controller)

  role_id   = tencentcloud_cam_role.controller[0].id
  policy_id = tencentcloud_cam_policy.controller[0].id
}

# Pay-as-you-go always (POSTPAID_BY_HOUR): a reclaimed controller would stop the loop that
# replaces reclaimed nodes. Without a NAT gateway it gets a public IP, its only way to the APIs.
resource "tencentcloud_instance" "controller" {
  #checkov:skip=CKV_TC_2:without a NAT gateway the controller reaches the cloud APIs through its public IP
  count = length(local.controller)

  instance_name              = "${var.name}-controller"
  hostname                   = "${var.name}-controller"
  availability_zone          = var.zone
  instance_type              = var.controller.instance_type
  image_id                   = local.image_id
  vpc_id                     = tencentcloud_vpc.this.id
  subnet_id                  = tencentcloud_subnet.this.id
  orderly_security_groups    = [tencentcloud_security_group.this.id]
  key_ids                    = [tencentcloud_key_pair.this.id]
  system_disk_type           = var.system_disk.category
  system_disk_size           = var.system_disk.size_gb
  instance_charge_type       = "POSTPAID_BY_HOUR"
  allocate_public_ip         = !var.nat_gateway
  internet_charge_type       = var.nat_gateway ? null : "TRAFFIC_POSTPAID_BY_HOUR"
  internet_max_bandwidth_out = var.nat_gateway ? 0 : local.public_bandwidth_mbps
  cam_role_name              = tencentcloud_cam_role.controller[0].name

  tags = var.tags

  lifecycle {
    ignore_changes = [image_id] # as the nodes (main.tf): a newer image never replaces it
  }
}
