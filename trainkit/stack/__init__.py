"""The Terraform stack: render (spec -> root stack files), the terraform runner, state (init against
the backend, what exists, drift), the plan review and its renderers, plan rules, checkov."""
