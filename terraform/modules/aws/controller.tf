# The controller (issue 42): one small on-demand instance in the cluster's subnet that runs the
# recovery loop of `train --recover --detach` once the user's machine lets go of it. It acts through
# an instance profile (temporary credentials from the instance metadata service, rotated by AWS), so
# no access key is ever copied to it; its role may do only what recovery needs, on this cluster's
# resources (tagged trainkit-cluster = var.name) where IAM can say so. Off (var.controller = null):
# nothing here is created.

locals {
  controller = var.controller == null ? [] : [var.controller]
  # ARNs: "arn:<partition>:ec2:<region>:<account>:<type>/<id>" (IAM user guide, "Amazon Resource
  # Names"); the account is left "*": the role can only ever act in its own account.
  ec2_arn = "arn:${data.aws_partition.this.partition}:ec2:${data.aws_region.this.name}:*"
  s3_arn  = "arn:${data.aws_partition.this.partition}:s3:::"
  # Tag conditions (IAM user guide, "Controlling access to AWS resources using tags"; EC2 user guide,
  # "Condition keys for Amazon EC2"): aws:ResourceTag/<key> matches a tag the resource already
  # carries, aws:RequestTag/<key> a tag the request creates it with.
  cluster_resource = { StringEquals = { "aws:ResourceTag/trainkit-cluster" = var.name } }
  cluster_request  = { StringEquals = { "aws:RequestTag/trainkit-cluster" = var.name } }
  # The remote state the policy reaches (placeholders where there is none: those statements are
  # then left out, and a for expression filters them without a conditional of two tuple types).
  state_bucket = try(coalesce(var.controller.state_bucket), "")
  state_prefix = try(coalesce(var.controller.state_prefix), "")
  lock_table   = try(coalesce(var.controller.lock_table), "")

  controller_statements = concat([
    {
      # Describe* supports no resource-level permissions (Service Authorization Reference, "Actions
      # defined by Amazon EC2": no resource type for Describe*): Resource "*" is the only form. A
      # plan refreshes every resource of the stack, hence EFS and the role's own reads below.
      Sid      = "ReadTheCluster"
      Effect   = "Allow"
      Action   = ["ec2:Describe*", "elasticfilesystem:Describe*"]
      Resource = "*"
    },
    {
      # RunInstances authorizes each resource of the launch (EC2 user guide, "Launch instances
      # (RunInstances)" policy examples): the instance only when created with the cluster's tag
      # (tag on create, aws:RequestTag), so every launch is a tagged cluster instance...
      Sid       = "LaunchOnlyTaggedInstances"
      Effect    = "Allow"
      Action    = ["ec2:RunInstances"]
      Resource  = "${local.ec2_arn}:instance/*"
      Condition = local.cluster_request
    },
    {
      # ...into the cluster's own subnets and security group (they carry the cluster tag)...
      Sid       = "LaunchIntoTheClusterNetwork"
      Effect    = "Allow"
      Action    = ["ec2:RunInstances"]
      Resource  = ["${local.ec2_arn}:subnet/*", "${local.ec2_arn}:security-group/*"]
      Condition = local.cluster_resource
    },
    {
      # ...from an image, with the key pair, placement group, root volume and a new network
      # interface: image/* (an Amazon AMI is not the account's to tag), volume/* and
      # network-interface/* (created by this same call, which the instance statement already
      # gates) carry no tag condition; the key pair and placement group are named by var.name.
      Sid    = "LaunchWithTheClusterParts"
      Effect = "Allow"
      Action = ["ec2:RunInstances"]
      Resource = ["arn:${data.aws_partition.this.partition}:ec2:${data.aws_region.this.name}::image/*",
        "${local.ec2_arn}:volume/*", "${local.ec2_arn}:network-interface/*", "${local.ec2_arn}:key-pair/${var.name}",
      "${local.ec2_arn}:placement-group/${var.name}"]
    },
    {
      # A node's data disk: CreateVolume only with the cluster's tag in the request.
      Sid       = "CreateOnlyTaggedVolumes"
      Effect    = "Allow"
      Action    = ["ec2:CreateVolume"]
      Resource  = "${local.ec2_arn}:volume/*"
      Condition = local.cluster_request
    },
    {
      # CreateTags as part of a create (ec2:CreateAction; EC2 user guide, "Grant permission to tag
      # Amazon EC2 resources during creation"): the role cannot re-tag an instance into the cluster.
      Sid       = "TagOnlyOnCreate"
      Effect    = "Allow"
      Action    = ["ec2:CreateTags"]
      Resource  = ["${local.ec2_arn}:instance/*", "${local.ec2_arn}:volume/*"]
      Condition = { StringEquals = { "ec2:CreateAction" = ["RunInstances", "CreateVolume"] } }
    },
    {
      # The aws provider tags a node's root volume (root_block_device.tags) with CreateTags after
      # RunInstances returns, not in it: volumes only, and only with the cluster's tag in the
      # request. The one widening IAM leaves: this could tag another untagged volume of the account
      # into the cluster (then deletable below); instances can never be.
      Sid       = "TagRootVolumesAfterLaunch"
      Effect    = "Allow"
      Action    = ["ec2:CreateTags"]
      Resource  = "${local.ec2_arn}:volume/*"
      Condition = local.cluster_request
    },
    {
      # Replace a reclaimed node: terminate it, move its data disk and Elastic IP, on resources
      # that carry the cluster's tag only (aws:ResourceTag is supported by these actions: Service
      # Authorization Reference, EC2 actions table, condition key column).
      Sid    = "ChangeOnlyTheClusterInstancesAndVolumes"
      Effect = "Allow"
      Action = ["ec2:TerminateInstances", "ec2:StopInstances", "ec2:StartInstances",
        "ec2:ModifyInstanceAttribute", "ec2:AttachVolume", "ec2:DetachVolume", "ec2:DeleteVolume",
      "ec2:AssociateAddress", "ec2:DisassociateAddress"]
      Resource  = ["${local.ec2_arn}:instance/*", "${local.ec2_arn}:volume/*", "${local.ec2_arn}:elastic-ip/*"]
      Condition = local.cluster_resource
    },
    {
      # Terraform refreshes the controller's own role and profile on every plan: reads on those
      # two ARNs only. Nodes carry no instance profile (main.tf), so there is no iam:PassRole here.
      Sid      = "ReadItsOwnRole"
      Effect   = "Allow"
      Action   = ["iam:GetRole", "iam:GetRolePolicy", "iam:ListRolePolicies", "iam:ListAttachedRolePolicies", "iam:GetInstanceProfile"]
      Resource = ["arn:${data.aws_partition.this.partition}:iam::*:role/${var.name}-controller", "arn:${data.aws_partition.this.partition}:iam::*:instance-profile/${var.name}-controller"]
    },
    ], [for st in [
      {
        # The s3 backend (Terraform docs, "Backend Type: s3", "S3 Bucket Permissions"): ListBucket on
        # the bucket, Get/PutObject on the state key, Get/Put/DeleteObject on the lock file
        # (<key>.tflock, use_lockfile); all under the spec's prefix.
        Sid       = "ListTheState"
        Effect    = "Allow"
        Action    = ["s3:ListBucket"]
        Resource  = "${local.s3_arn}${local.state_bucket}"
        Condition = { StringLike = { "s3:prefix" = ["${local.state_prefix}/*"] } }
      },
      {
        Sid      = "ReadWriteTheState"
        Effect   = "Allow"
        Action   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
        Resource = "${local.s3_arn}${local.state_bucket}/${local.state_prefix}/*"
      },
      ] : st if local.state_bucket != ""], [for st in [
      {
        # DynamoDB locking (same page, "DynamoDB Table Permissions"): these four on the table only.
        Sid      = "LockTheState"
        Effect   = "Allow"
        Action   = ["dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"]
        Resource = "arn:${data.aws_partition.this.partition}:dynamodb:${data.aws_region.this.name}:*:table/${local.lock_table}"
      },
  ] : st if local.lock_table != ""])
  controller_policy = jsonencode({ Version = "2012-10-17", Statement = local.controller_statements })
}

data "aws_partition" "this" {}

data "aws_region" "this" {}

resource "aws_iam_role" "controller" {
  count = length(local.controller)

  name        = "${var.name}-controller"
  description = "trainkit ${var.name}: the controller instance (recovery loop), this cluster only"
  # Only EC2 may assume it (IAM user guide, "Using an IAM role to grant permissions to applications
  # running on Amazon EC2 instances").
  assume_role_policy = jsonencode({
    Version   = "2012-10-17"
    Statement = [{ Effect = "Allow", Action = "sts:AssumeRole", Principal = { Service = "ec2.amazonaws.com" } }]
  })

  tags = merge(var.tags, { Name = "${var.name}-controller" })
}

resource "aws_iam_role_policy" "controller" {
  count = length(local.controller)

  name   = "${var.name}-controller"
  role   = aws_iam_role.controller[0].id
  policy = local.controller_policy
}

resource "aws_iam_instance_profile" "controller" {
  count = length(local.controller)

  name = "${var.name}-controller"
  role = aws_iam_role.controller[0].name

  tags = merge(var.tags, { Name = "${var.name}-controller" })
}

# On demand always: no instance_market_options (a reclaimed controller would stop the loop that
# replaces reclaimed nodes). With no NAT gateway the subnet's only way out is the internet gateway,
# which answers an instance with a public IP only: the controller then gets an Elastic IP.
resource "aws_instance" "controller" {
  #checkov:skip=CKV_AWS_126:detailed (1-minute) monitoring is billed extra; the controller logs its own loop
  #checkov:skip=CKV_AWS_88:without a NAT gateway the controller reaches the EC2 API through its public IP
  count = length(local.controller)

  ami                    = local.image_id
  instance_type          = var.controller.instance_type
  subnet_id              = aws_subnet.this.id
  vpc_security_group_ids = [aws_security_group.this.id]
  key_name               = aws_key_pair.this.key_name
  iam_instance_profile   = aws_iam_instance_profile.controller[0].name
  ebs_optimized          = true

  root_block_device {
    volume_type = var.system_disk.category
    volume_size = var.system_disk.size_gb
    encrypted   = true

    tags = merge(var.tags, { Name = "${var.name}-controller-root" })
  }

  # IMDSv2 only, one hop: the role's credentials answer the instance itself, not a container on it
  # (EC2 user guide, "Configure the instance metadata options").
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  tags = merge(var.tags, { Name = "${var.name}-controller" })

  lifecycle {
    ignore_changes = [ami] # as the nodes (main.tf): a newer image never replaces it
  }
}

resource "aws_eip" "controller" {
  count = var.controller != null && !var.nat_gateway ? 1 : 0

  domain   = "vpc"
  instance = aws_instance.controller[0].id

  tags = merge(var.tags, { Name = "${var.name}-controller" })

  depends_on = [aws_internet_gateway.this]
}
