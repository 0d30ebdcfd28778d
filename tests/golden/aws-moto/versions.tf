terraform {
  required_version = ">= 1.10.0"

  # State stays in this folder; set `backend:` in the spec to share and lock it.
  backend "local" {
    path = "terraform.tfstate"
  }
}
