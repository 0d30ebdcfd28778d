"""Cluster -> Terraform root stack: a pure function from data to files, plus one writer.

`render_stack(cluster, ssh_public_key)` returns `{relative path: file content}`: the root stack
(`versions.tf` with the backend, `providers.tf`, `main.tf` with the module call, `variables.tf`,
`outputs.tf`) and a copy of the cloud's module under `modules/<cloud>/`, so the folder is
self-contained and a reviewer reads everything in one place. Values that belong to one workspace
(WORKSPACE_VARIABLES: the key pair generated there) reach terraform through `terraform.tfvars.json`
(auto-loaded by terraform plan/apply; Terraform docs, "Variable Definitions (.tfvars) Files"),
never as literals, so every `*.tf` file is the same in every checkout of the spec; the same cluster
and key give byte-identical files, the tfvars file included.

`write_stack(cluster, ssh_public_key, terraform_dir)` renders and writes them, removing files an
earlier render wrote that this one no longer does (listed in `.trainkit-rendered`); state, `.terraform/` and anything else
in the folder is left alone. Python never builds HCL: templates do, and every value goes in
through the `hcl` filter, which writes literals only: a string can never become a template
(`${`, `%{`), an escape HCL rejects, or a second line. The cloud's room supplies the backend,
the provider template and the module folder.
"""

from __future__ import annotations

import json
import math
import os
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from trainkit import clouds
from trainkit.clouds.credentials import INSTANCE_IDENTITY
from trainkit.errors import InputError
from trainkit.spec.resolve import Cluster, module_variables
from trainkit.util import resources
from trainkit.util.links import link_below, refuse_link
from trainkit.workspace import write_atomic

# The root stack's minimum Terraform: the s3 backend's `use_lockfile` (S3-native state locking)
# arrived in Terraform 1.10 (Terraform docs, "Backend Type: s3", use_lockfile). `trainkit check`
# tests the installed terraform against this same value.
TERRAFORM_MIN_VERSION = "1.10.0"
MANIFEST = ".trainkit-rendered"
MODULE_DOC = "README.md"  # copied with the module's *.tf files (module_file_names)
VARS_FILE = "terraform.tfvars.json"  # per-workspace values; terraform loads it by this name
# Module inputs whose value differs from workspace to workspace: root variables set in VARS_FILE.
WORKSPACE_VARIABLES = {
    "ssh_public_key": "Public key of the cluster's key pair, generated in the trainkit workspace "
                      "(or the spec's ssh.public_key); set in terraform.tfvars.json",
    "node_placement": "Nodes placed apart from the cluster's zone, type or billing (where a replacement "
                      "at recovery came up); set in terraform.tfvars.json",
    # Only in the cloud controller's render (stack/state.controller_keys); absent elsewhere, so
    # every other render is byte-identical to one made before the variable existed.
    "extra_authorized_keys": "The cloud controller's public key, authorized on the nodes created from its "
                             "workspace (cloud-init user data); set in terraform.tfvars.json",
}


# HCL native syntax string escapes (hcl/v2 hclsyntax spec, "Template Literals"); every other
# control, format or separator character is written as \uNNNN / \UNNNNNNNN.
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HIDDEN = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def hcl_string(text: str) -> str:
    """`text` as an HCL quoted string that Terraform reads back as exactly `text`.

    Escapes backslashes, quotes and invisible characters, and doubles the template openers
    (`${` -> `$${`, `%{` -> `%%{`) so nothing in it is ever interpolated. HCL normalises strings
    to Unicode NFC, so only NFC text round-trips (trainkit.clouds.checks refuses the rest).
    """
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif unicodedata.category(ch) in _HIDDEN or (ch.isspace() and ch != " "):
            out.append(f"\\u{ord(ch):04X}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08X}")
        else:
            out.append(ch)
    return '"' + "".join(out).replace("${", "$${").replace("%{", "%%{") + '"'


def hcl(value: Any) -> str:
    """One value as an HCL literal, spaced the way `terraform fmt` leaves it.

    Strings (map keys included) go through `hcl_string`; numbers, bools and None are JSON
    literals; lists and maps are written inline and keep their order, so output is deterministic.
    """
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{hcl_string(str(k))} : {hcl(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(hcl(v) for v in value) + "]"
    if isinstance(value, str):
        return hcl_string(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} has no HCL literal")
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    raise TypeError(f"no HCL literal for {type(value).__name__}")


def _environment(room: clouds.Cloud) -> jinja2.Environment:
    folders = [str(resources.data_path("templates", "terraform"))]
    if room.provider_template is not None:
        folders.append(str(room.provider_template.parent))
    return _jinja(tuple(folders))


@lru_cache(maxsize=16)
def _jinja(folders: tuple[str, ...]) -> jinja2.Environment:
    """One environment per template search path (jinja re-reads a template when it changes)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(list(folders)),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.filters["hcl"] = hcl
    return env


# INSTANCE_IDENTITY (clouds/credentials.py), set by the cloud controller's hand-off: its credentials
# come from the metadata service, so a stack rendered there keeps the SDK's metadata lookup that
# custom `endpoints` switch off elsewhere (skip_metadata_api_check: Terraform docs, aws provider and
# "Backend Type: s3"). Unset anywhere else.
def instance_identity() -> bool:
    """Whether this process renders for a controller acting through its instance identity (the one
    environment read of this module: INSTANCE_IDENTITY)."""
    return os.environ.get(INSTANCE_IDENTITY) == "1"


def render_stack(cluster: Cluster, ssh_public_key: str, extra_keys: tuple[str, ...] = ()) -> dict[str, str]:
    """The root stack and module copy for a cloud cluster, as `{relative path: content}`.

    `extra_keys`: public key lines for the module's `extra_authorized_keys` (the cloud controller's
    own key, authorized on nodes created from now on); set through terraform.tfvars.json, never a
    literal. Empty (every render but the controller's): the variable is not rendered at all.
    Raises InputError for targets without Terraform (hosts, local).
    """
    require_terraform(cluster)
    spec, room = cluster.spec, cluster.room
    for service in spec.endpoints:  # attribute names in the provider block, never free text
        if not service.isidentifier() or not service.isascii():
            raise InputError(f"endpoints.{service}: not a service name", fix="e.g. ec2, s3")
    variables = module_variables(cluster, ssh_public_key)
    if extra_keys:
        variables["extra_authorized_keys"] = list(extra_keys)
    backend_type, backend_args, notes = backend_config(cluster)
    context = {
        "cloud": spec.cloud,
        "source": Path(cluster.source).name,
        "region": spec.region,
        "endpoints": dict(sorted(spec.endpoints.items())),
        "instance_identity": instance_identity(),
        "variables": variables,
        "backend_type": backend_type,
        "backend_args": backend_args,
        "backend_notes": notes,
        "terraform_min_version": TERRAFORM_MIN_VERSION,
        "workspace_variables": [k for k in WORKSPACE_VARIABLES if k in variables],
        "workspace_descriptions": WORKSPACE_VARIABLES,
    }
    env = _environment(room)
    provider = room.provider_template.name if room.provider_template else f"provider-{spec.cloud}.tf.j2"
    files = {
        "versions.tf": env.get_template("versions.tf.j2").render(context),
        "providers.tf": env.get_template(provider).render(context),
        "main.tf": env.get_template("main.tf.j2").render(context),
        "outputs.tf": env.get_template("outputs.tf.j2").render(context),
        "variables.tf": env.get_template("variables.tf.j2").render(context),
        VARS_FILE: json.dumps({k: variables[k] for k in context["workspace_variables"]}, indent=2) + "\n",
    }
    files.update(module_files(room))
    return dict(sorted(files.items()))


def require_terraform(cluster: Cluster) -> None:
    """InputError unless the cluster's target is provisioned with Terraform."""
    if not cluster.room.has_module:
        raise InputError(f"cloud {cluster.spec.cloud}: there is no Terraform to render for this target",
                         fix=f"render works for {', '.join(clouds.terraform_targets())} specs; "
                             f"`trainkit apply` handles {cluster.spec.cloud} directly")


def module_file_names(folder: Path) -> list[str]:
    """The files that make up a module folder: every `*.tf` plus README.md, sorted by name
    (so the render does not depend on directory order)."""
    return sorted(p.name for p in folder.iterdir()
                  if p.is_file() and (p.suffix == ".tf" or p.name == MODULE_DOC))


def module_files(room: clouds.Cloud) -> dict[str, str]:
    """The room's module as `{modules/<cloud>/<file>: content}`."""
    cloud, folder = room.name, room.module_dir
    if folder is None or not folder.is_dir():
        raise InputError(f"cloud {cloud}: no Terraform module at {folder}")
    versions = tuple((name, (folder / name).stat().st_mtime_ns) for name in module_file_names(folder))
    return dict(_read_module(cloud, str(folder), versions))


@lru_cache(maxsize=16)
def _read_module(cloud: str, folder: str, versions: tuple) -> tuple[tuple[str, str], ...]:
    """The module's files, read once per version of them."""
    return tuple((f"modules/{cloud}/{name}", (Path(folder) / name).read_text()) for name, _ in versions)


def backend_config(cluster: Cluster) -> tuple[str, dict[str, Any], list[str]]:
    """(backend type, its arguments in order, comment lines) from `spec.backend`; the cloud's
    room writes its own backend. Credentials are never arguments: backends read the environment.
    """
    spec, b = cluster.spec, cluster.spec.backend
    if b.type == "local":
        return "local", {"path": "terraform.tfstate"}, [
            "State stays in this folder; set `backend:` in the spec to share and lock it."]
    room = cluster.room
    if room.backend is None or b.type != room.backend_type:
        raise InputError(f"backend.type: {b.type!r} is not a backend of {room.title}",
                         fix=f"use {room.backend_type!r} or 'local'")
    kind, args, notes = room.backend(b, b.region or spec.region, b.prefix or spec.name, spec.endpoints)
    if instance_identity():   # the controller: its credentials from the metadata service (INSTANCE_IDENTITY)
        args = {k: v for k, v in args.items() if k != "skip_metadata_api_check"}
    return kind, args, notes


def write_stack(cluster: Cluster, ssh_public_key: str, terraform_dir: str | Path,
                extra_keys: tuple[str, ...] = ()) -> list[Path]:
    """Render the cluster's stack and write it into `terraform_dir` (see `render_stack`, `write_files`)."""
    return write_files(render_stack(cluster, ssh_public_key, extra_keys), terraform_dir)


def write_files(files: dict[str, str], terraform_dir: str | Path) -> list[Path]:
    """Write `files` under `terraform_dir`; delete files only an earlier render wrote.

    Returns the written paths. Terraform state, `.terraform/` and other files are never touched;
    unchanged files are not rewritten (their mtime stays). InputError (exit 2), writing nothing,
    when a path it would write goes through a symbolic link (`modules/` linked to the user's own
    module folder): a link is never written or deleted through.
    """
    root = Path(terraform_dir)
    root.mkdir(parents=True, exist_ok=True)
    manifest = root / MANIFEST
    for rel in [MANIFEST, *files]:
        refuse_link(root, rel, "render writes the Terraform stack's files there")
    previous = manifest.read_text().split() if manifest.exists() else []
    for rel in previous:
        if rel not in files and not rel.startswith("/") and ".." not in Path(rel).parts \
                and link_below(root, rel) is None:
            stale = root / rel
            if stale.is_file():
                stale.unlink()
            _prune_empty(stale.parent, root)
    written = []
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != content:
            write_atomic(path, content)
        written.append(path)
    write_atomic(manifest, "".join(f"{rel}\n" for rel in files))
    return written


def _prune_empty(folder: Path, root: Path) -> None:
    while folder != root and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent
