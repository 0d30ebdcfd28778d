variable "name" {
  description = "Cluster name; prefixes every resource name and is the value of the trainkit-cluster tag"
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,28}[a-z0-9]$", var.name))
    error_message = "name must be 3-30 lowercase letters, digits and dashes, starting with a letter."
  }
}

variable "zone" {
  description = "Availability zone every node, disk and file system is created in"
  type        = string

  validation {
    condition     = length(var.zone) > 0
    error_message = "zone must not be empty."
  }
}

variable "vpc_cidr" {
  description = "IPv4 CIDR of the cluster VPC"
  type        = string

  validation {
    condition     = can(cidrhost(var.vpc_cidr, 0))
    error_message = "vpc_cidr must be an IPv4 CIDR block such as 10.42.0.0/16."
  }
}

variable "subnet_cidr" {
  description = "IPv4 CIDR of the one subnet the nodes live in (inside vpc_cidr)"
  type        = string

  validation {
    condition     = can(cidrhost(var.subnet_cidr, 0))
    error_message = "subnet_cidr must be an IPv4 CIDR block such as 10.42.1.0/24."
  }
}

variable "admin_cidrs" {
  description = "CIDRs allowed to reach the nodes over SSH (port 22); there is no default on purpose"
  type        = list(string)

  validation {
    condition     = length(var.admin_cidrs) > 0 && alltrue([for c in var.admin_cidrs : can(cidrhost(c, 0))])
    error_message = "admin_cidrs must list at least one valid CIDR (your office or VPN range)."
  }
}

variable "node_count" {
  description = "Number of GPU nodes; node 0 is the head node"
  type        = number

  validation {
    condition     = var.node_count >= 1 && var.node_count <= 64 && floor(var.node_count) == var.node_count
    error_message = "node_count must be a whole number from 1 to 64."
  }
}

variable "instance_type" {
  description = "GPU instance type (flavor) of every node"
  type        = string

  validation {
    condition     = length(var.instance_type) > 0
    error_message = "instance_type must not be empty."
  }
}

variable "image_id" {
  description = "Image id every node boots from; null = look up the cloud's default image (image.tf)"
  type        = string
  default     = null

  validation {
    condition     = var.image_id == null ? true : length(var.image_id) > 0
    error_message = "image_id must be null (look up the default image) or a non-empty id."
  }
}

variable "ssh_public_key" {
  description = "OpenSSH public key installed for the login user on every node"
  type        = string

  validation {
    condition     = can(regex("^(ssh-(ed25519|rsa)|ecdsa-sha2-nistp(256|384|521)) ", var.ssh_public_key))
    error_message = "ssh_public_key must be an OpenSSH public key line (ssh-ed25519 ..., ssh-rsa ..., ecdsa-sha2-...)."
  }
}

variable "extra_authorized_keys" {
  description = "More OpenSSH public key lines for the login user of nodes created from now on (cloud-init user data; the cloud controller's own key). Running nodes keep theirs"
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for k in var.extra_authorized_keys : can(regex("^(ssh-(ed25519|rsa)|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+={0,3}( [^\\x00-\\x1f\\x7f]*)?$", k))])
    error_message = "extra_authorized_keys must be OpenSSH public key lines (ssh-ed25519 ..., ssh-rsa ..., ecdsa-sha2-...), one key each."
  }
}

variable "ssh_user" {
  description = "Login user of the image; passed through to the ssh_user output"
  type        = string
  default     = "ubuntu"

  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.ssh_user))
    error_message = "ssh_user must be a valid Linux user name."
  }
}

variable "public_ip" {
  description = "Which nodes get a public IP: head (node 0 only), all, or none"
  type        = string
  default     = "head"

  validation {
    condition     = contains(["head", "all", "none"], var.public_ip)
    error_message = "public_ip must be one of head, all, none."
  }
}

variable "nat_gateway" {
  description = "Create a NAT gateway (with its own public IP, billed hourly) so nodes without a public IP reach the internet"
  type        = bool
  default     = false
}

variable "placement_group" {
  description = "Create a placement group / deployment set for the nodes where the cloud has one"
  type        = bool
  default     = true
}

variable "spot" {
  description = "Spot (preemptible) nodes; max_price is per node-hour, null = up to the on-demand price"
  type = object({
    enabled   = bool
    max_price = optional(number)
  })
  default = { enabled = false }

  validation {
    condition     = var.spot.max_price == null ? true : var.spot.max_price > 0
    error_message = "spot.max_price must be positive (or null)."
  }
}

variable "system_disk" {
  description = "System (boot) disk of every node: category and size in GB"
  type = object({
    category = string
    size_gb  = number
  })

  validation {
    condition     = contains(["CLOUD_BSSD", "CLOUD_HSSD", "CLOUD_PREMIUM", "CLOUD_SSD", "CLOUD_TSSD"], var.system_disk.category)
    error_message = "system_disk.category must be one of CLOUD_BSSD, CLOUD_HSSD, CLOUD_PREMIUM, CLOUD_SSD, CLOUD_TSSD."
  }

  # The cloud's documented limits (any category), as in trainkit/clouds/tencentcloud.py DiskRules.
  validation {
    condition     = var.system_disk.size_gb >= 20 && var.system_disk.size_gb <= 1024
    error_message = "system_disk.size_gb must be from 20 to 1024."
  }
}

variable "data_disk" {
  description = "One data disk per node (for datasets and checkpoints), encrypted by default"
  type = object({
    enabled           = bool
    category          = string
    performance_level = optional(string)
    size_gb           = number
    encrypted         = optional(bool, true)
    kms_key_id        = optional(string)
  })

  validation {
    condition     = contains(["CLOUD_BSSD", "CLOUD_HSSD", "CLOUD_PREMIUM", "CLOUD_SSD", "CLOUD_TSSD"], var.data_disk.category)
    error_message = "data_disk.category must be one of CLOUD_BSSD, CLOUD_HSSD, CLOUD_PREMIUM, CLOUD_SSD, CLOUD_TSSD."
  }

  validation {
    condition     = var.data_disk.performance_level == null ? true : contains([], var.data_disk.performance_level)
    error_message = "data_disk.performance_level is not valid here (allowed: none, leave it null)."
  }

  # The cloud's documented limits (the widest over the categories), as in trainkit/clouds/tencentcloud.py DiskRules.
  validation {
    condition     = var.data_disk.size_gb >= 10 && var.data_disk.size_gb <= 32000
    error_message = "data_disk.size_gb must be from 10 to 32000."
  }
}

variable "nas" {
  description = "Shared NFS file system mounted on every node; size_gb only where the service needs one"
  type = object({
    enabled = bool
    type    = string
    size_gb = optional(number)
  })
  default = { enabled = false, type = "SD" }

  validation {
    condition     = contains(["SD", "HP"], var.nas.type)
    error_message = "nas.type must be one of SD, HP."
  }
}

variable "nfs_mount_options" {
  description = "NFS mount options returned in the nas output (the cloud's documented options)"
  type        = string
  default     = "vers=3,nolock,proto=tcp,noresvport"
}

variable "tags" {
  description = "Tags for every taggable resource (trainkit adds trainkit-cluster)"
  type        = map(string)
  default     = {}
}

variable "ttl_minutes" {
  description = "Release each node this many minutes after it is created, where the cloud has a release-at argument (alicloud auto_release_time, huaweicloud auto_terminate_time); null = never. Elsewhere the node-side guard timer does it."
  type        = number
  default     = null
}

variable "node_shutdown_terminates" {
  description = "Whether a shutdown from inside a node (the guard's ttl/idle timer) terminates the instance, where the cloud has that setting (aws instance_initiated_shutdown_behavior)."
  type        = bool
  default     = false
}

variable "node_placement" {
  description = "Nodes placed apart from zone / instance_type / spot, keyed by node index as a string (\"1\"); trainkit sets it when the replacement of a reclaimed node fails over to another zone, type or billing at recovery. subnet_cidr is the CIDR of that zone's subnet (inside vpc_cidr, not overlapping the others); null fields keep the cluster's value"
  type = map(object({
    zone          = optional(string)
    subnet_cidr   = optional(string)
    instance_type = optional(string)
    spot          = optional(bool)
  }))
  default = {}

  # Cross-variable conditions (var.node_count, var.zone) need Terraform >= 1.9; the rendered root
  # stack requires 1.10 (trainkit/stack/render.py TERRAFORM_MIN_VERSION).
  validation {
    condition     = alltrue([for k in keys(var.node_placement) : can(regex("^(0|[1-9][0-9]*)$", k)) && tonumber(k) < var.node_count])
    error_message = "node_placement keys must be node indexes below node_count (\"0\", \"1\", ...)."
  }

  # Tencent subnets are zonal (tencentcloud_subnet.availability_zone is required): a node in
  # another zone needs a subnet of its own there.
  validation {
    condition     = alltrue([for p in values(var.node_placement) : p.zone == null || p.zone == var.zone || can(cidrhost(p.subnet_cidr, 0))])
    error_message = "node_placement: a node in a zone other than zone needs subnet_cidr, the IPv4 CIDR of its subnet there."
  }

  validation {
    condition     = alltrue([for z, cidrs in { for p in values(var.node_placement) : p.zone => p.subnet_cidr... if p.zone != null && p.zone != var.zone } : length(distinct(cidrs)) == 1])
    error_message = "node_placement: nodes placed in the same zone must give the same subnet_cidr."
  }
}

variable "controller" {
  description = "The controller instance (issue 42), or null for none: instance_type (on demand, never spot); state_bucket, state_prefix and lock_table scope its policy to the remote state (null with a local backend)"
  type = object({
    instance_type = string
    state_bucket  = optional(string)
    state_prefix  = optional(string)
    lock_table    = optional(string)
  })
  default = null

  validation {
    condition     = var.controller == null ? true : length(var.controller.instance_type) > 0
    error_message = "controller.instance_type must not be empty."
  }

  validation {
    condition     = var.controller == null ? true : (var.controller.state_bucket == null) == (var.controller.state_prefix == null)
    error_message = "controller: state_bucket and state_prefix go together (both, or neither with a local backend)."
  }
}
