terraform {
  required_version = ">= 1.10.0"

  # Alibaba OSS; credentials from ALICLOUD_ACCESS_KEY / ALICLOUD_SECRET_KEY.
  backend "oss" {
    bucket              = "my-tfstate-bucket"
    prefix              = "ali-demo"
    key                 = "terraform.tfstate"
    region              = "cn-hangzhou"
    encrypt             = true
    tablestore_endpoint = "https://tf-lock.cn-hangzhou.ots.aliyuncs.com"
    tablestore_table    = "statelock"
  }
}
