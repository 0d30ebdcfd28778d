terraform {
  required_version = ">= 1.9.0" # validation rules that name other variables (node_placement): Terraform 1.9 release notes

  required_providers {
    huaweicloud = {
      source  = "huaweicloud/huaweicloud"
      version = "~> 1.97"
    }
  }
}
