terraform {
  required_version = ">= 1.10.0"

  # Tencent COS, locked by the backend itself; credentials from TENCENTCLOUD_SECRET_ID / TENCENTCLOUD_SECRET_KEY.
  backend "cos" {
    bucket  = "tfstate-1250000000"
    prefix  = "tencent-demo"
    key     = "terraform.tfstate"
    region  = "ap-guangzhou"
    encrypt = true
  }
}
