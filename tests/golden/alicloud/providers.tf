terraform {
  required_providers {
    alicloud = {
      source  = "aliyun/alicloud"
      version = "~> 1.289"
    }
  }
}

# Credentials come from the environment (ALICLOUD_ACCESS_KEY/ALICLOUD_SECRET_KEY), never from this file.
provider "alicloud" {
  region = "cn-hangzhou"
}
