"""Defects injected into the seed clouds' modules are caught: the real terraform validates and plans a
copy of each rendered stack with one defect, against the providers' schema-served stand-ins.

Each row is a defect a module edit can bring in: a value of the wrong type or shape, an argument
the provider does not have (a typo, another cloud's name, a removed one), a value the provider's
validation refuses (enum, range, a value built in a local that only plan sees), arguments the
provider declares in conflict or as exactly-one-of, a computed-only attribute set, too many nested
blocks. Terraform core finds some (types, names, block counts); the provider stand-in finds the
rest, as terraform-plugin-sdk does inside the real provider. The untouched stacks plan cleanly
(the control row), so a row fails only through its defect.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from seed_clouds import CLOUDS, SEED_ENV, write_spec
from standin.mirror import Reattached

pytestmark = pytest.mark.usefixtures("tf_cli_config")

# (cloud, module file, text in it, replacement, a fragment of terraform's error)
MUTANTS = [
    ("alicloud", "main.tf", "zone_id      = var.zone\n", "zone_id      = [var.zone]\n", "Incorrect attribute value type"),
    ("alicloud", "main.tf", "  host_name ", "  host_nme ", "Unsupported argument"),
    ("alicloud", "main.tf", 'http_tokens                   = "required"',
     'http_tokens = "required"\n  subnet_id = "vsw-1"', "[REMOVED]"),
    ("alicloud", "main.tf", "system_disk_size              = var.system_disk.size_gb",
     'system_disk_size              = "two hundred"', "a number is required"),
    ("alicloud", "main.tf", ': "SpotWithPriceLimit")', ': "SpotWithPriceLimits")', "expected spot_strategy to be one of"),
    ("alicloud", "main.tf", 'http_tokens                   = "required"',
     'http_tokens = "required"\n  http_put_response_hop_limit = 65', "expected http_put_response_hop_limit to be in the range"),
    ("alicloud", "main.tf", 'security_enhancement_strategy = "Active"',
     'security_enhancement_strategy = "Active"\n  dedicated_host_id = "dh-1"', "conflicts with spot_strategy"),
    ("alicloud", "main.tf", 'http_tokens                   = "required"',
     'http_tokens = "required"\n  public_ip = "198.18.0.1"', "Computed attributes cannot be set"),
    ("tencentcloud", "main.tf", "  hostname ", "  host_name ", "Unsupported argument"),
    ("tencentcloud", "main.tf", "key_ids                    = [tencentcloud_key_pair.this.id]",
     "key_ids                    = tencentcloud_key_pair.this.id", "Incorrect attribute value type"),
    ("tencentcloud", "main.tf", "  user_data_raw = local.node_user_data", '  user_data = "eA=="\n  user_data_raw = "x"',
     "conflicts with user_data"),
    ("tencentcloud", "main.tf", '? "SPOTPAID" : "POSTPAID_BY_HOUR"', '? "SPOTPAID" : "POSTPAID_HOURLY"',
     "expected instance_charge_type to be one of"),
    ("tencentcloud", "main.tf", "subnet_id                  = local.node_subnet_ids[count.index]",
     "vswitch_id                 = local.node_subnet_ids[count.index]", "Unsupported argument"),
    ("tencentcloud", "main.tf", "  hostname ", '  keep_image_login = true\n  key_name = "skey-1"\n  hostname ',
     "conflicts with key_name"),
    ("tencentcloud", "main.tf", "  hostname ", "  partition_number = 31\n  hostname ",
     "expected partition_number to be in the range"),
    ("huaweicloud", "main.tf", "flavor_id          = local.node_type[count.index]",
     "instance_type      = local.node_type[count.index]", "Unsupported argument"),
    ("huaweicloud", "main.tf", "system_disk_size   = var.system_disk.size_gb",
     'system_disk_size   = ["200"]', "Incorrect attribute value type"),
    ("huaweicloud", "main.tf", '? "spot" : "postPaid"', '? "spot-price" : "postPaid"', "expected charging_mode to be one of"),
    ("huaweicloud", "nat.tf", "nat_gateway_id = huaweicloud_nat_gateway.this[0].id\n  subnet_id      = huaweicloud_vpc_subnet.this.id",
     'nat_gateway_id = huaweicloud_nat_gateway.this[0].id\n  cidr = "10.42.1.0/24"\n  network_id = "net-1"', "only one of"),
    ("huaweicloud", "main.tf", "      charge_mode = \"traffic\"\n    }\n  }",
     "      charge_mode = \"traffic\"\n    }\n  }\n  bandwidth {\n    share_type = \"PER\"\n    size = 5\n  }",
     "Too many bandwidth blocks"),
    ("huaweicloud", "main.tf", '  name               = "${var.name}-node-${count.index}"',
     '  name = "${var.name}-node-${count.index}"\n  eip_id = "eip-1"', "conflicts with eip_id"),
]


def _terraform(args: list[str], cwd, env) -> subprocess.CompletedProcess:
    return subprocess.run(["terraform", *args, "-no-color"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def stacks(repo, tmp_path_factory, tf_cli_config):
    """cloud -> an initialised rendered stack of the shipped example, and the environment that
    reaches the stand-ins (one reattached process for the module)."""
    folder = tmp_path_factory.mktemp("mutants")
    (folder / "standin").mkdir()
    with Reattached(folder / "standin", SEED_ENV) as served:
        env = {**os.environ, **SEED_ENV, **served.env}
        out = {}
        for cloud in CLOUDS:
            spec = write_spec(repo, folder, cloud)
            ws = folder / f"ws-{cloud}"
            render = subprocess.run([sys.executable, "-m", "trainkit", "render", str(spec), "--workdir", str(ws)],
                                    env=env, capture_output=True, text=True)
            assert render.returncode == 0, render.stderr
            init = _terraform(["init", "-input=false"], ws / "terraform", env)
            assert init.returncode == 0, init.stdout + init.stderr
            out[cloud] = ws / "terraform"
        yield out, env


def _check(stack, env) -> subprocess.CompletedProcess:
    """validate, then (when it passes) plan: a value built from variables is known only at plan."""
    checked = _terraform(["validate"], stack, env)
    return checked if checked.returncode else _terraform(["plan", "-input=false", "-lock=false"], stack, env)


@pytest.mark.parametrize("cloud", CLOUDS)
def test_the_shipped_stacks_validate_and_plan(stacks, cloud):
    folders, env = stacks
    checked = _check(folders[cloud], env)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("cloud, file, old, new, error", MUTANTS,
                         ids=[f"{m[0]}-{i}" for i, m in enumerate(MUTANTS)])
def test_an_injected_defect_fails_validate_or_plan(stacks, tmp_path, cloud, file, old, new, error):
    folders, env = stacks
    copy = tmp_path / "terraform"
    shutil.copytree(folders[cloud], copy, symlinks=True)
    module = copy / "modules" / cloud / file
    # runs of spaces match any run (terraform fmt realigns the `=` of a block when a line changes)
    pattern = re.compile(re.sub(r"(\\ )+", " +", re.escape(old)))
    text = module.read_text()
    assert pattern.search(text), f"the mutant's text is no longer in {file}: update the row"
    module.write_text(pattern.sub(lambda _: new, text, count=1))
    checked = _check(copy, env)
    assert checked.returncode != 0, checked.stdout
    assert error in " ".join((checked.stdout + checked.stderr).split()), checked.stderr
