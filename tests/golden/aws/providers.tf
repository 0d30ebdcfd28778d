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
}
