terraform {
  required_providers {
    huaweicloud = {
      source  = "huaweicloud/huaweicloud"
      version = "~> 1.97"
    }
  }
}

# Credentials come from the environment (HW_ACCESS_KEY/HW_SECRET_KEY), never from this file.
provider "huaweicloud" {
  region = "cn-north-4"
}
