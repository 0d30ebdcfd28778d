# Rendered by trainkit from alicloud.yaml. Values that differ between workspaces (a key pair trainkit
# generated in this one) are variables, set in terraform.tfvars.json beside this file, so the *.tf
# files are the same in every checkout of the spec.

variable "ssh_public_key" {
  type        = string
  description = "Public key of the cluster's key pair, generated in the trainkit workspace (or the spec's ssh.public_key); set in terraform.tfvars.json"
}

variable "node_placement" {
  type = map(object({
    zone          = optional(string)
    subnet_cidr   = optional(string)
    instance_type = optional(string)
    spot          = optional(bool)
  }))
  default     = {}
  description = "Nodes placed apart from the cluster's zone, type or billing (where a replacement at recovery came up); set in terraform.tfvars.json"
}
