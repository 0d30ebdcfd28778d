terraform {
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.100"
    }
  }
}

# Credentials come from the environment (AWS_ACCESS_KEY_ID, AWS_PROFILE, ...), never from this file.
provider "aws" {
  region = "us-east-1"

  # Custom API endpoints (spec `endpoints`, e.g. an emulator). Credentials still come from the
  # environment, like any other run (an emulator takes its own dummy keys there). No max_retries:
  # the provider default (25, hashicorp/aws provider docs, "max_retries") rides out throttling.
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  skip_region_validation      = true
  s3_use_path_style           = true

  endpoints {
    ec2                      = "http://127.0.0.1:5000"
    efs                      = "http://127.0.0.1:5000"
    iam                      = "http://127.0.0.1:5000"
    resourcegroupstaggingapi = "http://127.0.0.1:5000"
    s3                       = "http://127.0.0.1:5000"
    sts                      = "http://127.0.0.1:5000"
  }
}
