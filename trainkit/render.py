"""Cluster -> Terraform root stack: a pure function from data to files, plus one writer.

`render_stack(cluster, ssh_public_key)` returns `{relative path: file content}`: the root stack
(`versions.tf` with the backend, `providers.tf`, `main.tf` with the module call, `outputs.tf`) and
a copy of the cloud's module under `modules/<cloud>/`, so the folder is self-contained and a
reviewer reads everything in one place. Same cluster and key -> byte-identical files.

`write_stack(cluster, ssh_public_key, terraform_dir)` renders and writes them, removing files an
earlier render wrote that this one no longer does (listed in `.trainkit-rendered`); state, `.terraform/` and anything else
in the folder is left alone. Python never builds HCL: templates do, and values go in through the
`hcl` filter (JSON, which HCL accepts for strings, numbers, bools, null, lists and maps).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2

from trainkit import resources
from trainkit.errors import InputError
from trainkit.resolve import Cluster, module_variables
from trainkit.spec import CLOUD_TARGETS

# The root stack's minimum Terraform: the s3 backend's `use_lockfile` (S3-native state locking)
# arrived in Terraform 1.10 (Terraform docs, "Backend Type: s3", use_lockfile). `trainkit check`
# tests the installed terraform against this same value.
TERRAFORM_MIN_VERSION = "1.10.0"
MANIFEST = ".trainkit-rendered"
MODULE_FILES = ("versions.tf", "variables.tf", "main.tf", "image.tf", "nas.tf", "nat.tf", "outputs.tf",
                "README.md")


def hcl(value: Any) -> str:
    """One value as HCL in JSON syntax, spaced the way `terraform fmt` leaves it.

    Keys keep their order, so the output is deterministic. Scalars are plain `json.dumps`.
    """
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{json.dumps(str(k))} : {hcl(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(hcl(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _environment() -> jinja2.Environment:
    folder = resources.data_path("templates", "terraform")
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True, autoescape=False)


def render_stack(cluster: Cluster, ssh_public_key: str) -> dict[str, str]:
    """The root stack and module copy for a cloud cluster, as `{relative path: content}`.

    Raises InputError for targets without Terraform (hosts, local).
    """
    require_terraform(cluster)
    spec = cluster.spec
    variables = module_variables(cluster, ssh_public_key)
    backend_type, backend_args, notes = backend_config(cluster)
    context = {
        "cloud": spec.cloud,
        "source": Path(cluster.source).name,
        "region": spec.region,
        "endpoints": dict(sorted(spec.endpoints.items())),
        "variables": variables,
        "backend_type": backend_type,
        "backend_args": backend_args,
        "backend_notes": notes,
        "terraform_min_version": TERRAFORM_MIN_VERSION,
    }
    env = _environment()
    env.filters["hcl"] = hcl
    files = {
        "versions.tf": env.get_template("versions.tf.j2").render(context),
        "providers.tf": env.get_template(f"provider-{spec.cloud}.tf.j2").render(context),
        "main.tf": env.get_template("main.tf.j2").render(context),
        "outputs.tf": env.get_template("outputs.tf.j2").render(context),
    }
    files.update(module_files(spec.cloud))
    return dict(sorted(files.items()))


def require_terraform(cluster: Cluster) -> None:
    """InputError unless the cluster's target is provisioned with Terraform."""
    if cluster.spec.cloud not in CLOUD_TARGETS:
        raise InputError(f"cloud {cluster.spec.cloud}: there is no Terraform to render for this target",
                         fix=f"render works for {', '.join(CLOUD_TARGETS)} specs; "
                             f"`trainkit apply` handles {cluster.spec.cloud} directly")


def module_files(cloud: str) -> dict[str, str]:
    """The cloud's module as `{modules/<cloud>/<file>: content}`."""
    folder = resources.data_path("terraform", "modules") / cloud
    if not folder.is_dir():
        raise InputError(f"cloud {cloud}: no Terraform module at {folder}")
    return {f"modules/{cloud}/{name}": (folder / name).read_text()
            for name in MODULE_FILES if (folder / name).exists()}


def backend_config(cluster: Cluster) -> tuple[str, dict[str, Any], list[str]]:
    """(backend type, its arguments in order, comment lines) from `spec.backend`.

    Credentials are never arguments: each backend reads them from the environment.
    """
    spec, b = cluster.spec, cluster.spec.backend
    region = b.region or spec.region
    prefix = b.prefix or spec.name
    if b.type == "local":
        return "local", {"path": "terraform.tfstate"}, [
            "State stays in this folder; set `backend:` in the spec to share and lock it."]
    if b.type == "oss":
        args = {"bucket": b.bucket, "prefix": prefix, "key": b.key, "region": region,
                "encrypt": b.encrypt}
        args.update(_present(endpoint=b.endpoint, tablestore_endpoint=b.tablestore_endpoint,
                             tablestore_table=b.tablestore_table))
        notes = ["Alibaba OSS; credentials from ALICLOUD_ACCESS_KEY / ALICLOUD_SECRET_KEY."]
        if not b.tablestore_table:
            notes.append("No Tablestore table: this state is NOT locked (set backend.tablestore_table).")
        return "oss", args, notes
    if b.type == "cos":
        args = {"bucket": b.bucket, "prefix": prefix, "key": b.key, "region": region,
                "encrypt": b.encrypt, **_present(endpoint=b.endpoint)}
        return "cos", args, ["Tencent COS, locked by the backend itself; credentials from "
                             "TENCENTCLOUD_SECRET_ID / TENCENTCLOUD_SECRET_KEY."]
    if b.type == "obs":
        endpoint = b.endpoint or f"https://obs.{region}.myhuaweicloud.com"
        args = {"bucket": b.bucket, "key": f"{prefix}/{b.key}", "region": region,
                "endpoints": {"s3": endpoint}, "skip_region_validation": True,
                "skip_credentials_validation": True, "skip_metadata_api_check": True,
                "skip_requesting_account_id": True, "skip_s3_checksum": True}
        return "s3", args, [
            "Huawei OBS through the s3 backend (huaweicloud provider guide remote_state_backend).",
            "Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY; OBS offers no state lock."]
    args = {"bucket": b.bucket, "key": f"{prefix}/{b.key}", "region": region, "encrypt": b.encrypt}
    if b.dynamodb_table:
        args["dynamodb_table"] = b.dynamodb_table
    else:
        args["use_lockfile"] = True  # S3-native lock object (Terraform >= 1.10)
    if b.endpoint:
        args["endpoints"] = {"s3": b.endpoint}
    return "s3", args, ["AWS S3; credentials from the usual AWS_* variables or profile."]


def _present(**kwargs: Any) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if v is not None}


def write_stack(cluster: Cluster, ssh_public_key: str, terraform_dir: str | Path) -> list[Path]:
    """Render the cluster's stack and write it into `terraform_dir` (see `write_files`)."""
    return write_files(render_stack(cluster, ssh_public_key), terraform_dir)


def write_files(files: dict[str, str], terraform_dir: str | Path) -> list[Path]:
    """Write `files` under `terraform_dir`; delete files only an earlier render wrote.

    Returns the written paths. Terraform state, `.terraform/` and other files are never touched;
    unchanged files are not rewritten (their mtime stays).
    """
    root = Path(terraform_dir)
    root.mkdir(parents=True, exist_ok=True)
    manifest = root / MANIFEST
    previous = manifest.read_text().split() if manifest.exists() else []
    for rel in previous:
        if rel not in files and not rel.startswith("/") and ".." not in Path(rel).parts:
            stale = root / rel
            if stale.is_file():
                stale.unlink()
            _prune_empty(stale.parent, root)
    written = []
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != content:
            path.write_text(content)
        written.append(path)
    manifest.write_text("".join(f"{rel}\n" for rel in files))
    return written


def _prune_empty(folder: Path, root: Path) -> None:
    while folder != root and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent
