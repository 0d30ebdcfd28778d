terraform {
  required_version = ">= 1.6.3"

  # State stays in this folder; set `backend:` in the spec to share and lock it.
  backend "local" {
    path = "terraform.tfstate"
  }
}
