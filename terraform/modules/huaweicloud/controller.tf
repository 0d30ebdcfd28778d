# The controller (issue 42): one small pay-per-use ECS (never spot) in the cluster's subnet that
# runs the recovery loop of `train --recover --detach`. It acts through an IAM agency delegated to
# the ECS service (agency_name; temporary AK/SK/token from
# http://169.254.169.254/openstack/latest/securitykey), so no access key is copied to it.
#
# Huawei's v3 custom policies (huaweicloud_identity_role) offer only a few condition keys and no
# resource-tag key (ECS product docs, "Permissions Management": tag keys g:ResourceTag/g:RequestTag
# exist only for v5 identity policies): this policy is scoped by action and by the agency's
# project (the cluster's region), not by the cluster's tag.

locals {
  controller = var.controller == null ? [] : [var.controller]
  hw_bucket  = try(coalesce(var.controller.state_bucket), "")
  hw_prefix  = try(coalesce(var.controller.state_prefix), "")
  # Action names are service:resource:operation (ECS API reference, "Permissions and Supported Actions").
  controller_policy = jsonencode({
    Version = "1.1"
    Statement = [{
      Effect = "Allow"
      Action = ["ecs:cloudServers:list", "ecs:cloudServers:get", "ecs:cloudServers:createServers",
        "ecs:cloudServers:delete", "ecs:cloudServers:start", "ecs:cloudServers:stop", "ecs:cloudServers:attach",
        "ecs:cloudServers:detachVolume", "ecs:serverKeypairs:get", "ecs:serverGroups:get", "ecs:flavors:get",
        "evs:volumes:list", "evs:volumes:get", "evs:volumes:create", "evs:volumes:delete", "evs:volumes:use",
      "vpc:vpcs:get", "vpc:subnets:get", "vpc:securityGroups:get", "vpc:ports:get", "vpc:publicIps:get", "ims:images:list"]
    }]
  })
  # The s3 backend pointed at OBS (huaweicloud provider guide, remote_state_backend): objects under
  # the spec's prefix and the bucket's listing. OBS is a global service, so its own AX-type policy.
  controller_state_policy = jsonencode({
    Version = "1.1"
    Statement = [
      { Effect = "Allow", Action = ["obs:object:GetObject", "obs:object:PutObject", "obs:object:DeleteObject"],
      Resource = ["OBS:*:*:object:${local.hw_bucket}/${local.hw_prefix}/*"] },
      { Effect = "Allow", Action = ["obs:bucket:ListBucket"], Resource = ["OBS:*:*:bucket:${local.hw_bucket}"] },
    ]
  })
  controller_state = var.controller != null && local.hw_bucket != "" ? 1 : 0
  # A project is named after its region, and an AZ is its region plus a letter (cn-north-4a;
  # Huawei "Regions and Endpoints").
  hw_region = try(regex("^(.*[0-9])[a-z]+$", var.zone)[0], var.zone)
}

resource "huaweicloud_identity_role" "controller" {
  count = length(local.controller)

  name        = "${var.name}-controller"
  description = "trainkit ${var.name}: what the controller may do (ECS, EVS, VPC in the cluster's project)"
  type        = "XA" # project-level services (identity_role docs: XA project, AX global)
  policy      = local.controller_policy
}

resource "huaweicloud_identity_role" "controller_state" {
  count = local.controller_state

  name        = "${var.name}-controller-state"
  description = "trainkit ${var.name}: the controller's access to the Terraform state on OBS"
  type        = "AX"
  policy      = local.controller_state_policy
}

# Delegated to the ECS service (delegated_service_name op_svc_ecs; the provider accepts it as an
# internal argument, ExactlyOneOf delegated_domain_name): an instance with agency_name gets its
# temporary credentials. Roles: the cluster's project (its region) only, OBS globally.
resource "huaweicloud_identity_agency" "controller" {
  count = length(local.controller)

  name                   = "${var.name}-controller"
  description            = "trainkit ${var.name}: the controller instance (recovery loop), this cluster only"
  delegated_service_name = "op_svc_ecs"
  duration               = "FOREVER"
  all_resources_roles    = local.controller_state == 1 ? [huaweicloud_identity_role.controller_state[0].name] : null

  project_role {
    project = local.hw_region
    roles   = [huaweicloud_identity_role.controller[0].name]
  }
}

# Pay-per-use always (charging_mode postPaid): a reclaimed controller would stop the loop that
# replaces reclaimed nodes. Without a NAT gateway it gets an EIP, its only way to the APIs.
resource "huaweicloud_compute_instance" "controller" {
  count = length(local.controller)

  name               = "${var.name}-controller"
  flavor_id          = var.controller.instance_type
  image_id           = local.image_id
  availability_zone  = var.zone
  key_pair           = huaweicloud_kps_keypair.this.name
  security_group_ids = [huaweicloud_networking_secgroup.this.id]
  system_disk_type   = var.system_disk.category
  system_disk_size   = var.system_disk.size_gb
  charging_mode      = "postPaid"
  eip_type           = var.nat_gateway ? null : "5_bgp"
  agency_name        = huaweicloud_identity_agency.controller[0].name

  network {
    uuid = huaweicloud_vpc_subnet.this.id
  }

  dynamic "bandwidth" {
    for_each = var.nat_gateway ? [] : [local.public_bandwidth_mbps]

    content {
      share_type  = "PER"
      size        = bandwidth.value
      charge_mode = "traffic"
    }
  }

  tags = merge(var.tags, { Name = "${var.name}-controller" })

  lifecycle {
    ignore_changes = [image_id] # as the nodes (main.tf): a newer image never replaces it
  }
}
