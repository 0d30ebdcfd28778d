terraform {
  required_version = ">= 1.6.3"

  required_providers {
    alicloud = {
      source  = "aliyun/alicloud"
      version = "~> 1.289"
    }
  }
}
