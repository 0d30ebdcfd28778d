terraform {
  required_providers {
    tencentcloud = {
      source  = "tencentcloudstack/tencentcloud"
      version = "~> 1.83"
    }
  }
}

# Credentials come from the environment (TENCENTCLOUD_SECRET_ID/TENCENTCLOUD_SECRET_KEY), never from this file.
provider "tencentcloud" {
  region = "ap-guangzhou"
}
