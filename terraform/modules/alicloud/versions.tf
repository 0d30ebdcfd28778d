terraform {
  required_version = ">= 1.9.0" # validation rules that name other variables (node_placement): Terraform 1.9 release notes

  required_providers {
    alicloud = {
      source  = "aliyun/alicloud"
      version = "~> 1.289"
    }
  }
}
