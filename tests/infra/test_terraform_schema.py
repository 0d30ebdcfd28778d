"""Contract: every resource in every rendered stack against the provider schema snapshot.

The snapshot (provider-schemas.json beside this file; provenance in its `_meta` and in README.md
here: provider, release, commit) lists each resource's arguments and blocks as parsed from the
providers' Go code. For each
resource we check: the type exists, every argument and block is known and not deprecated, every
argument the code requires is set, plus the arguments the docs require although the code does not
(DOCS_REQUIRED, from the snapshot's notes and docs/cloud-facts.md section 8.1), and literal values are
within the code's enums. hashicorp/aws is not in the snapshot: `terraform validate` checks it
against the real provider schema (test_terraform_render.py).

The snapshot is read-only here; resources it lacks (the NAT gateways) are in the supplement
provider-schemas-extra.json beside this file, same structure, each with its `source`. The two are
merged with the snapshot winning, and the supplement may not redefine a snapshot resource.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import hcl2
import pytest

from trainkit import clouds
from trainkit.catalog import load_catalog
from trainkit.spec.resolve import load_cluster
from trainkit.stack.render import render_stack

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "clusters"
SCHEMAS = Path(__file__).with_name("provider-schemas.json")
EXTRA_SCHEMAS = Path(__file__).with_name("provider-schemas-extra.json")
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBkRh4VOcYwCqMTmS1w1tJmXbH3v0xJ7lK0Zq2yC5FQK trainkit-test"
CLOUDS = clouds.TERRAFORM_TARGETS   # the shipped rooms with a Terraform module
META_ARGS = {"count", "for_each", "depends_on", "lifecycle", "provider", "provisioner", "connection"}
# Required by the docs (or by AtLeastOneOf without a launch template) but Optional in the code.
DOCS_REQUIRED = {
    "alicloud_vswitch": {"vpc_id", "cidr_block", "zone_id"},
    "alicloud_instance": {"image_id", "instance_type"},
    "alicloud_ecs_disk": {"zone_id", "size"},
    "tencentcloud_instance": {"image_id", "availability_zone"},
    "huaweicloud_compute_instance": {"flavor_id", "image_id"},
    "huaweicloud_compute_servergroup": {"policies"},
    "huaweicloud_evs_volume": {"size"},
}


def cloud_examples() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.yaml") if load_cluster(p).spec.cloud in CLOUDS)


@pytest.fixture(scope="module")
def snapshot() -> dict:
    if not SCHEMAS.exists():
        pytest.fail(f"provider schema snapshot not found at {SCHEMAS}")
    return json.loads(SCHEMAS.read_text())


@pytest.fixture(scope="module")
def extra() -> dict:
    return json.loads(EXTRA_SCHEMAS.read_text())


@pytest.fixture(scope="module")
def schemas(snapshot, extra) -> dict:
    """The snapshot plus the supplement's resources; the snapshot wins where both define one."""
    return {**extra, **snapshot}


def test_the_supplement_adds_resources_without_redefining_the_snapshot(snapshot, extra):
    resources = {k: v for k, v in extra.items() if not k.startswith("_")}
    assert resources
    assert not set(resources) & set(snapshot), "supplement redefines snapshot resources"
    for rtype, schema in resources.items():
        assert {"required", "optional", "source"} <= set(schema), rtype
        assert {"repo", "path", "commit"} <= set(schema["source"]), rtype
        assert len(schema["source"]["commit"]) == 40, rtype
        provider = schema["source"]["repo"]
        assert schema["source"]["commit"] == snapshot["_meta"]["providers"][
            {"aliyun/terraform-provider-alicloud": "aliyun/alicloud",
             "tencentcloudstack/terraform-provider-tencentcloud": "tencentcloudstack/tencentcloud",
             "huaweicloud/terraform-provider-huaweicloud": "huaweicloud/huaweicloud"}[provider]
        ]["commit_read"], f"{rtype}: read at a different commit than the snapshot"
        assert set(schema.get("deprecated", [])) <= set(schema["optional"]), rtype
        for block in (schema.get("blocks") or {}):
            assert block in schema["required"] + schema["optional"], f"{rtype}.{block}"


# Resources built into Terraform itself (provider terraform.io/builtin/terraform): their arguments
# from the Terraform language docs, "The terraform_data Managed Resource Type" (Terraform 1.4+).
BUILTIN = {"terraform_data": {"required": [], "optional": ["input", "triggers_replace"]}}


def resources(files: dict[str, str], kind: str = "resource"):
    """(file, type, name, body) for every `kind` block (resource or data) in the rendered .tf files."""
    for rel, text in sorted(files.items()):
        if rel.endswith(".tf"):
            for item in hcl2.loads(text).get(kind, []):
                for rtype, named in item.items():
                    for name, body in named.items():
                        yield rel, rtype.strip('"'), name.strip('"'), body


def is_block(value) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(v, dict) and v.get("__is_block__") for v in value)


def fields(body: dict) -> dict:
    """Arguments and blocks of a body; `dynamic "x" { content {...} }` counts as block x."""
    out = {k: v for k, v in body.items() if not k.startswith("__") and k != "dynamic"}
    for dyn in body.get("dynamic", []):
        for name, spec in dyn.items():
            out[name.strip('"')] = spec.get("content", [])
    return out


def problems_in(body: dict, schema: dict, where: str, required_extra=frozenset()) -> list[str]:
    known = set(schema.get("required", [])) | set(schema.get("optional", []))
    blocks = schema.get("blocks") or {}
    got = fields(body)
    out = []
    for key, value in got.items():
        if key in META_ARGS:
            continue
        if key not in known and key not in blocks:
            out.append(f"{where}: unknown argument or block `{key}`")
        elif key in (schema.get("deprecated") or []):
            out.append(f"{where}: `{key}` is deprecated")
        elif key in blocks and is_block(value):
            for i, inner in enumerate(value):
                out += problems_in(inner, blocks[key], f"{where}.{key}[{i}]")
        else:
            out += enum_problems(key, value, schema, where)
    for key in set(schema.get("required", [])) | set(required_extra):
        if key not in got:
            out.append(f"{where}: required `{key}` is not set")
    return out


def enum_problems(key: str, value, schema: dict, where: str) -> list[str]:
    allowed = (schema.get("enums") or {}).get(key)
    if not isinstance(allowed, list) or not isinstance(value, str) or "${" in value:
        return []
    literal = value.strip('"')
    if literal not in [str(a) for a in allowed]:
        return [f"{where}: `{key}` = {literal!r} is not one of {allowed}"]
    return []


@pytest.mark.parametrize("name", cloud_examples())
def test_every_rendered_resource_matches_the_provider_schema(schemas, name):
    files = render_stack(load_cluster(EXAMPLES / f"{name}.yaml"), SSH_KEY)
    problems, checked = [], 0
    for rel, rtype, rname, body in resources(files):
        where = f"{rel}: {rtype}.{rname}"
        if rtype.startswith("aws_"):
            continue  # validated against the real provider by `terraform validate`
        if rtype in BUILTIN:  # Terraform's own resources (no provider; the terraform binary's schema)
            problems += problems_in(body, BUILTIN[rtype], where)
            checked += 1
            continue
        if rtype not in schemas:
            problems.append(f"{where}: resource type not in the provider schema snapshot")
            continue
        problems += problems_in(body, schemas[rtype], where, DOCS_REQUIRED.get(rtype, set()))
        checked += 1
    assert not problems, "\n".join(problems)
    assert checked or name.startswith("aws")


@pytest.mark.parametrize("name", cloud_examples())
def test_every_rendered_data_source_matches_the_provider_schema(schemas, name):
    """The image lookups (image.tf) when `image` is unset; keyed `data.<type>` in the supplement."""
    files = render_stack(load_cluster(EXAMPLES / f"{name}.yaml"), SSH_KEY)
    problems, checked = [], 0
    for rel, dtype, dname, body in resources(files, "data"):
        if dtype.startswith("aws_"):
            continue  # validated against the real provider by `terraform validate`
        where = f"{rel}: data.{dtype}.{dname}"
        if f"data.{dtype}" not in schemas:
            problems.append(f"{where}: data source not in the provider schema snapshot")
            continue
        problems += problems_in(body, schemas[f"data.{dtype}"], where)
        checked += 1
    assert not problems, "\n".join(problems)
    assert checked or name.startswith("aws")


@pytest.mark.parametrize("name", cloud_examples())
def test_every_taggable_resource_carries_the_tags(schemas, name):
    files = render_stack(load_cluster(EXAMPLES / f"{name}.yaml"), SSH_KEY)
    missing = []
    for rel, rtype, rname, body in resources(files):
        schema = schemas.get(rtype)
        taggable = "tags" in (schema or {}).get("optional", []) if schema else None
        if rtype.startswith("aws_"):
            # aws_iam_role_policy: an inline policy is part of its role and has no tags argument
            taggable = rtype not in {"aws_security_group_rule", "aws_route_table_association",
                                     "aws_volume_attachment", "aws_efs_mount_target", "aws_iam_role_policy"}
        if taggable and "var.tags" not in str(body.get("tags", "")):
            missing.append(f"{rel}: {rtype}.{rname}")
    assert not missing, "resources without var.tags:\n" + "\n".join(missing)


def test_the_checker_catches_unknown_deprecated_missing_and_out_of_enum_arguments(schemas):
    text = ('resource "huaweicloud_compute_instance" "x" {\n  name = "a"\n  flavor = "x"\n'
            '  charging_mode = "spotty"\n  auto_pay = true\n'
            '  dynamic "bandwidth" {\n    for_each = [1]\n    content {\n      size = 1\n    }\n  }\n}\n')
    (_, rtype, _, body), = resources({"x.tf": text})
    found = "\n".join(problems_in(body, schemas[rtype], "x", DOCS_REQUIRED[rtype]))
    for expected in ("unknown argument or block `flavor`", "`charging_mode` = 'spotty'",
                     "`auto_pay` is deprecated", "required `share_type`", "required `flavor_id`",
                     "required `network`"):
        assert expected in found


# Catalog `choices` key -> the module variable whose value the module passes to a provider argument.
CHOICE_VARIABLES = {"system_disk_categories": "var.system_disk.category",
                    "data_disk_categories": "var.data_disk.category",
                    "performance_levels": "var.data_disk.performance_level",
                    "nas_types": "var.nas.type"}


def arguments_fed_by(cloud: str, variable: str) -> list[tuple[str, str]]:
    """(resource type, argument) of every argument of the cloud's module set from `variable`,
    directly or through a local that can take its value (`cond ? var.x : null`)."""
    folder = REPO / "terraform" / "modules" / cloud
    files = {p.name: p.read_text() for p in sorted(folder.glob("*.tf"))}
    as_value = re.compile(rf"(^\$\{{|\?|:)\s*{re.escape(variable)}\s*(\}}|:|$)")  # not in a condition
    names = [variable] + [f"local.{k}" for text in files.values()
                          for item in hcl2.loads(text).get("locals", [])
                          for k, v in item.items() if as_value.search(str(v))]
    return [(rtype, key) for _, rtype, _, body in resources(files)
            for key, value in fields(body).items()
            if isinstance(value, str) and any(re.search(rf"{re.escape(n)}\b", value) for n in names)]


@pytest.mark.parametrize("cloud", [c for c in CLOUDS if c != "aws"])
def test_every_catalog_choice_is_a_value_the_provider_accepts(schemas, cloud):
    """The catalog's choices (= the module's enum lists, tests/unit/stack/test_module_catalog.py) are within
    the provider's enum, from the code or, where the code does not validate, from its docs."""
    choices = load_catalog(clouds.get(cloud)).choices
    problems, checked = [], 0
    for key, variable in CHOICE_VARIABLES.items():
        fed = arguments_fed_by(cloud, variable)
        assert fed or not choices[key], f"{cloud}: no provider argument takes {variable}"
        for rtype, argument in fed:
            schema = schemas[rtype]
            allowed = (schema.get("enums") or {}).get(argument) or \
                (schema.get("enums_from_docs") or {}).get(argument)
            assert allowed, f"{cloud}: {rtype}.{argument} has no enum in the snapshot"
            problems += [f"{cloud}: {key} {v!r} is not a {rtype}.{argument} ({allowed})"
                         for v in choices[key] if v not in allowed]
            checked += 1
    assert not problems, "\n".join(problems)
    assert checked >= 3


# The schema data the provider stand-ins serve (tests/standin/schemas, read from the providers' Go
# source): attribute names of every resource, nested blocks included.
STANDIN_SCHEMAS = REPO / "tests" / "standin" / "schemas"
BUILTIN_ATTRIBUTES = {"terraform_data": {"id", "input", "output", "triggers_replace"}}


def standin_attributes(cloud: str) -> dict[str, set[str]]:
    """resource type -> its attribute and block names (plus the SDK's `id`)."""
    data = json.loads((STANDIN_SCHEMAS / f"{cloud}.json").read_text())
    return {rtype: {"id", *entry["block"].get("attributes", {}), *entry["block"].get("blocks", {})}
            for rtype, entry in data["resources"].items()}


def lifecycle_problems(files: dict[str, str], attributes: dict[str, set[str]] | None) -> list[str]:
    """Every `replace_triggered_by` entry names a resource the module declares (and, where the
    schema is known, an attribute it has); every `ignore_changes` entry is an attribute of its own
    resource. Terraform core checks neither attribute name (an unknown one never triggers)."""
    declared = {(rtype, name): rtype for _, rtype, name, _ in resources(files)}
    known = {**BUILTIN_ATTRIBUTES, **(attributes or {})}
    out = []
    for rel, rtype, name, body in resources(files):
        for lifecycle in body.get("lifecycle", []):
            for ref in lifecycle.get("replace_triggered_by", []):
                target, *path = re.sub(r"\[[^]]*\]", "", ref.strip("${}")).split(".")
                key = (target, path[0] if path else "")
                if key not in declared:
                    out.append(f"{rel}: {rtype}.{name}: replace_triggered_by names undeclared {target}.{key[1]}")
                elif len(path) > 1 and target in known and path[1] not in known[target]:
                    out.append(f"{rel}: {rtype}.{name}: replace_triggered_by names {target} attribute {path[1]!r}, "
                               "which it does not have")
            for attr in lifecycle.get("ignore_changes", []):
                attr = attr.strip("${}").split(".")[0].split("[")[0]
                if rtype in known and attr not in known[rtype]:
                    out.append(f"{rel}: {rtype}.{name}: ignore_changes names {attr!r}, which it does not have")
    return out


@pytest.mark.parametrize("cloud", CLOUDS)
def test_lifecycle_references_name_declared_resources_and_real_attributes(cloud):
    folder = REPO / "terraform" / "modules" / cloud
    files = {p.name: p.read_text() for p in sorted(folder.glob("*.tf"))}
    attributes = standin_attributes(cloud) if cloud != "aws" else None
    assert not lifecycle_problems(files, attributes), "\n".join(lifecycle_problems(files, attributes))


def test_the_lifecycle_check_catches_an_undeclared_resource_and_an_unknown_attribute():
    text = ('resource "terraform_data" "billing" {\n  input = 1\n}\n'
            'resource "huaweicloud_compute_instance" "node" {\n  name = "a"\n  lifecycle {\n'
            '    replace_triggered_by = [terraform_data.biling, terraform_data.billing.inputs,'
            ' huaweicloud_compute_instance.node[0].flavor_id]\n'
            '    ignore_changes = [auto_terminate_time, image]\n  }\n}\n')
    found = "\n".join(lifecycle_problems({"x.tf": text}, standin_attributes("huaweicloud")))
    assert "undeclared terraform_data.biling" in found
    assert "terraform_data attribute 'inputs'" in found
    assert "ignore_changes names 'image'" in found
    assert "flavor_id" not in found and "auto_terminate_time" not in found
