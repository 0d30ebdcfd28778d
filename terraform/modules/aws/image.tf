# The image every node boots from: var.image_id, or (null) the newest AWS Deep Learning Base AMI
# with the NVIDIA driver on Ubuntu 22.04, published by Amazon (AWS Deep Learning AMI docs,
# "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)"; release notes list the name).

data "aws_ami" "default" {
  count = var.image_id == null ? 1 : 0

  owners      = ["amazon"]
  most_recent = true

  filter {
    name   = "name"
    values = ["Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) *"]
  }

  filter {
    name   = "architecture"
    values = ["x86_64"]
  }
}

locals {
  image_id = var.image_id != null ? var.image_id : data.aws_ami.default[0].id
}
