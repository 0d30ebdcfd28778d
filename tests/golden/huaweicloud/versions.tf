terraform {
  required_version = ">= 1.10.0"

  # Huawei OBS through the s3 backend (huaweicloud provider guide remote_state_backend).
  # Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY; OBS offers no state lock.
  backend "s3" {
    bucket                      = "my-tfstate-bucket"
    key                         = "huawei-demo/terraform.tfstate"
    region                      = "cn-north-4"
    endpoints                   = { "s3" : "https://obs.cn-north-4.myhuaweicloud.com" }
    skip_region_validation      = true
    skip_credentials_validation = true
    skip_metadata_api_check     = true
    skip_requesting_account_id  = true
    skip_s3_checksum            = true
  }
}
