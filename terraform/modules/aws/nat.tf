# Outbound internet for the nodes without a public IP (they install packages while provisioning).
# A NAT gateway must sit in a subnet routed to the internet gateway, and an Elastic IP only answers
# from such a subnet, so with nat_gateway or public_ip = "head" the VPC has two subnets in one zone:
#   public  = the last /28 of vpc_cidr -> internet gateway: the NAT gateway and the head node
#             (public_ip = "all" and nat_gateway exclude each other)
#   nodes   = subnet_cidr              -> the NAT gateway when there is one, else the internet
#             gateway: every node without a public IP
# The head node is in the public subnet whether or not there is a NAT gateway, so switching
# nat_gateway changes routes only and replaces no node.
# Both are in one VPC, zone and security group, so nodes reach each other as before (NCCL over TCP,
# gloo, the rendezvous port, NFS).

locals {
  vpc_prefix    = tonumber(split("/", var.vpc_cidr)[1])
  subnet_prefix = tonumber(split("/", var.subnet_cidr)[1])

  # The last /28 (16 addresses, 11 usable: AWS keeps 5 per subnet) of the VPC; null when the VPC is
  # smaller than a /28.
  public_subnet_cidr = try(cidrsubnet(var.vpc_cidr, 28 - local.vpc_prefix, pow(2, 28 - local.vpc_prefix) - 1), null)

  # Two CIDRs overlap when the shorter prefix, applied to the other's address, gives its network.
  public_subnet_overlaps = try(
    local.subnet_prefix <= 28
    ? cidrhost("${cidrhost(local.public_subnet_cidr, 0)}/${local.subnet_prefix}", 0) == cidrhost(var.subnet_cidr, 0)
    : cidrhost("${cidrhost(var.subnet_cidr, 0)}/28", 0) == cidrhost(local.public_subnet_cidr, 0),
  true)
}

locals {
  public_subnet = var.nat_gateway || var.public_ip == "head"
}

resource "aws_subnet" "public" {
  count = local.public_subnet ? 1 : 0

  vpc_id                  = aws_vpc.this.id
  cidr_block              = local.public_subnet_cidr
  availability_zone       = var.zone
  map_public_ip_on_launch = false

  tags = merge(var.tags, { Name = "${var.name}-public" })

  lifecycle {
    precondition {
      condition     = !local.public_subnet_overlaps
      error_message = "the head node and the NAT gateway live in the last /28 of vpc_cidr (${coalesce(local.public_subnet_cidr, "none: vpc_cidr is smaller than a /28")}); subnet_cidr must not overlap it."
    }

    precondition {
      condition     = !var.nat_gateway || var.public_ip != "all"
      error_message = "nat_gateway is for nodes without a public IP; with public_ip = \"all\" set nat_gateway = false."
    }
  }
}

resource "aws_route_table_association" "public" {
  count = local.public_subnet ? 1 : 0

  subnet_id      = aws_subnet.public[0].id
  route_table_id = aws_route_table.this.id
}

resource "aws_eip" "nat" {
  count = var.nat_gateway ? 1 : 0

  domain = "vpc"

  tags = merge(var.tags, { Name = "${var.name}-nat" })

  depends_on = [aws_internet_gateway.this]
}

resource "aws_nat_gateway" "this" {
  count = var.nat_gateway ? 1 : 0

  allocation_id = aws_eip.nat[0].id
  subnet_id     = aws_subnet.public[0].id

  tags = merge(var.tags, { Name = var.name })

  depends_on = [aws_internet_gateway.this]
}

resource "aws_route_table" "nat" {
  count = var.nat_gateway ? 1 : 0

  vpc_id = aws_vpc.this.id

  route {
    cidr_block     = "0.0.0.0/0"
    nat_gateway_id = aws_nat_gateway.this[0].id
  }

  tags = merge(var.tags, { Name = "${var.name}-nat" })
}
