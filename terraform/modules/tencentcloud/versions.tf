terraform {
  required_version = ">= 1.9.0" # validation rules that name other variables (node_placement): Terraform 1.9 release notes

  required_providers {
    tencentcloud = {
      source  = "tencentcloudstack/tencentcloud"
      version = "~> 1.83"
    }
  }
}
