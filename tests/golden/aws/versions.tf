terraform {
  required_version = ">= 1.10.0"

  # AWS S3; credentials from the usual AWS_* variables or profile.
  backend "s3" {
    bucket       = "my-tfstate-bucket"
    key          = "aws-demo/terraform.tfstate"
    region       = "us-east-1"
    encrypt      = true
    use_lockfile = true
  }
}
