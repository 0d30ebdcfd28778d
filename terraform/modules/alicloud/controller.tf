# The controller (issue 42): one small pay-as-you-go instance (never spot) in the cluster's vSwitch
# that runs the recovery loop of `train --recover --detach`. It acts through a RAM role attached to
# the instance (temporary STS credentials from the metadata service, 100.100.100.200
# .../ram/security-credentials/<role>), so no AccessKey is copied to it. The role is attached with
# alicloud_ecs_ram_role_attachment: alicloud_instance.role_name is deprecated since provider 1.275.0.

locals {
  controller = var.controller == null ? [] : [var.controller]
  # Tag conditions (Alibaba Cloud RAM / Resource Management docs, "Use tags to control access to ECS
  # resources" and "Create a resource with a specific tag"): acs:RequestTag/<key> matches a tag
  # the request creates the resource with, acs:ResourceTag/<key> a tag it already carries.
  ali_request_tag  = { StringEquals = { "acs:RequestTag/trainkit-cluster" = var.name } }
  ali_resource_tag = { StringEquals = { "acs:ResourceTag/trainkit-cluster" = var.name } }
  ali_bucket       = try(coalesce(var.controller.state_bucket), "")
  ali_prefix       = try(coalesce(var.controller.state_prefix), "")
  ali_table        = try(coalesce(var.controller.lock_table), "")

  controller_statements = concat([
    {
      # Describe/list APIs take no tag condition (same docs: the examples leave Describe* on "*").
      Effect   = "Allow"
      Action   = ["ecs:Describe*", "vpc:Describe*", "nas:Describe*"]
      Resource = ["*"]
    },
    {
      # A node and its data disk only when created with the cluster's tag in the same request.
      Effect    = "Allow"
      Action    = ["ecs:RunInstances", "ecs:CreateInstance", "ecs:CreateDisk", "ecs:TagResources"]
      Resource  = ["*"]
      Condition = local.ali_request_tag
    },
    {
      # Replace a reclaimed node, on instances and disks that carry the cluster's tag only.
      Effect = "Allow"
      Action = ["ecs:DeleteInstance", "ecs:DeleteInstances", "ecs:StopInstance", "ecs:StartInstance",
        "ecs:ModifyInstanceAttribute", "ecs:ModifyInstanceAutoReleaseTime", "ecs:AttachDisk", "ecs:DetachDisk",
      "ecs:DeleteDisk", "ecs:ResizeDisk"]
      Resource  = ["acs:ecs:*:*:instance/*", "acs:ecs:*:*:disk/*"]
      Condition = local.ali_resource_tag
    },
    {
      # Terraform refreshes the controller's own role and policy on every plan: reads of those only.
      # Nodes carry no RAM role, so there is no ram:PassRole here.
      Effect   = "Allow"
      Action   = ["ram:GetRole", "ram:GetPolicy", "ram:ListPoliciesForRole"]
      Resource = ["acs:ram:*:*:role/${var.name}-controller", "acs:ram:*:*:policy/${var.name}-controller"]
    },
    ], [for st in [
      {
        # The oss backend (hashicorp/terraform internal/backend/remote-state/oss client.go): state
        # objects read, written and deleted under the spec's prefix, and listed in the bucket.
        Effect   = "Allow"
        Action   = ["oss:GetObject", "oss:PutObject", "oss:DeleteObject"]
        Resource = ["acs:oss:*:*:${local.ali_bucket}/${local.ali_prefix}/*"]
      },
      {
        Effect   = "Allow"
        Action   = ["oss:ListObjects"]
        Resource = ["acs:oss:*:*:${local.ali_bucket}"]
      },
      ] : st if local.ali_bucket != ""], [for st in [
      {
        # The oss backend's lock: Tablestore rows (client.go PutRow/GetRow/DeleteRow) in that table.
        Effect   = "Allow"
        Action   = ["ots:GetRow", "ots:PutRow", "ots:DeleteRow"]
        Resource = ["acs:ots:*:*:instance/*/table/${local.ali_table}"]
      },
  ] : st if local.ali_table != ""])
  controller_policy = jsonencode({ Version = "1", Statement = local.controller_statements })
}

resource "alicloud_ram_role" "controller" {
  count = length(local.controller)

  role_name   = "${var.name}-controller"
  description = "trainkit ${var.name}: the controller instance (recovery loop), this cluster only"
  # Only ECS may assume it (alicloud_ram_role docs, example "ecs.aliyuncs.com").
  assume_role_policy_document = jsonencode({
    Version   = "1"
    Statement = [{ Action = "sts:AssumeRole", Effect = "Allow", Principal = { Service = ["ecs.aliyuncs.com"] } }]
  })

  tags = merge(var.tags, { Name = "${var.name}-controller" })
}

resource "alicloud_ram_policy" "controller" {
  count = length(local.controller)

  policy_name     = "${var.name}-controller"
  description     = "trainkit ${var.name}: what the controller may do"
  policy_document = local.controller_policy

  tags = merge(var.tags, { Name = "${var.name}-controller" })
}

resource "alicloud_ram_role_policy_attachment" "controller" {
  count = length(local.controller)

  role_name   = alicloud_ram_role.controller[0].role_name
  policy_name = alicloud_ram_policy.controller[0].policy_name
  policy_type = "Custom"
}

# Pay-as-you-go always (spot_strategy NoSpot): a reclaimed controller would stop the loop that
# replaces reclaimed nodes. Without a NAT gateway it gets a public IP, its only way to the APIs.
resource "alicloud_instance" "controller" {
  count = length(local.controller)

  instance_name                 = "${var.name}-controller"
  host_name                     = "${var.name}-controller"
  instance_type                 = var.controller.instance_type
  image_id                      = local.image_id
  availability_zone             = var.zone
  vswitch_id                    = alicloud_vswitch.this.id
  security_groups               = [alicloud_security_group.this.id]
  key_name                      = alicloud_ecs_key_pair.this.key_pair_name
  system_disk_category          = var.system_disk.category
  system_disk_size              = var.system_disk.size_gb
  system_disk_encrypted         = true
  instance_charge_type          = "PostPaid"
  spot_strategy                 = "NoSpot"
  internet_charge_type          = "PayByTraffic"
  internet_max_bandwidth_out    = var.nat_gateway ? 0 : local.public_bandwidth_mbps
  http_tokens                   = "required"
  security_enhancement_strategy = "Active"

  tags        = merge(var.tags, { Name = "${var.name}-controller" })
  volume_tags = var.tags

  lifecycle {
    ignore_changes = [image_id] # as the nodes (main.tf): a newer image never replaces it
  }
}

resource "alicloud_ecs_ram_role_attachment" "controller" {
  count = length(local.controller)

  instance_id   = alicloud_instance.controller[0].id
  ram_role_name = alicloud_ram_role.controller[0].role_name
}
