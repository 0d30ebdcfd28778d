"""ttl / idle: parsing, what the review says each cloud does, what Terraform and the guard get."""

from __future__ import annotations

import pytest

from trainkit.cluster import lifecycle
from trainkit.provision.inventory import guard_vars
from trainkit.spec.resolve import module_variables, resolve
from trainkit.spec.safety import parse_minutes
from trainkit.spec.schema import ClusterSpec
from trainkit.stack.review import review

BASE = {"alicloud": ("cn-hangzhou", "cn-hangzhou-i", "ecs.gn7i-c8g1.2xlarge"),
        "huaweicloud": ("cn-north-4", "cn-north-4a", "p2s.2xlarge.8"),
        "tencentcloud": ("ap-guangzhou", "ap-guangzhou-3", "GN7.2XLARGE32"),
        "aws": ("us-east-1", "us-east-1a", "g5.xlarge")}


def cluster(cloud: str, **over):
    region, zone, type_ = BASE[cloud]
    data = {"name": "demo", "cloud": cloud, "region": region, "zone": zone, "instance": {"type": type_},
            "image": "img-1", "network": {"admin_cidrs": ["203.0.113.0/24"]}, **over}
    return resolve(ClusterSpec.model_validate(data))


def test_durations_parse_and_bad_ones_name_the_field():
    assert (parse_minutes("90m"), parse_minutes("12h"), parse_minutes("2d")) == (90, 720, 2880)
    with pytest.raises(Exception) as err:
        ClusterSpec.model_validate({"name": "demo", "cloud": "local", "ttl": "soon"})
    assert "ttl" in str(err.value) and "12h" in str(err.value)


@pytest.mark.parametrize("cloud,words,ttl_var,guard_ttl", [
    ("alicloud", "Terraform `auto_release_time`", 720, 0),
    ("huaweicloud", "Terraform `auto_terminate_time`", 720, 0),
    ("aws", "shutdown terminates the instance", None, 720),
    ("tencentcloud", "may still bill for disks", None, 720)])
def test_each_cloud_says_what_it_will_do_and_renders_it(cloud, words, ttl_var, guard_ttl):
    c = cluster(cloud, ttl="12h", idle="30m")
    rev = review({"resource_changes": []}, c)
    assert any(words in line for line in rev["safety"]), rev["safety"]
    assert any("idle 30m" in line for line in rev["safety"])
    variables = module_variables(c, "ssh-ed25519 AAAA test")
    assert variables["ttl_minutes"] == ttl_var
    assert variables["node_shutdown_terminates"] is (cloud == "aws")
    assert guard_vars(c) == {"guard_ttl_minutes": guard_ttl, "guard_idle_minutes": 30}


def test_no_ttl_is_said_loudly_and_local_refuses_ttl():
    rev = review({"resource_changes": []}, cluster("aws"))
    assert rev["safety"][0].startswith("no ttl: the cluster bills until `trainkit destroy`")
    with pytest.raises(Exception) as err:
        ClusterSpec.model_validate({"name": "demo", "cloud": "local", "idle": "30m"})
    assert "local target is this machine" in str(err.value)


def test_status_shows_the_ttl_deadline_from_the_apply_time():
    out = lifecycle.safety_status(cluster("aws", ttl="2h", idle="45m"), applied_at=0.0, now=1800.0)
    assert out == {"ttl_deadline": "1970-01-01T02:00:00Z", "ttl_left_hours": 1.5, "idle_after_minutes": 45}


def test_status_reads_the_deadline_each_node_carries_in_the_state():
    """Issue 37 item 5: where the cloud releases nodes at a time (Alibaba auto_release_time), the
    state is the truth: the earliest node's release time, whatever the spec's ttl says now."""
    nodes = [{"type": "alicloud_instance", "index": i, "address": f"module.cluster.alicloud_instance.node[{i}]",
              "values": {"instance_type": "ecs.gn7i-c8g1.2xlarge", "auto_release_time": when}}
             for i, when in enumerate(["1970-01-01T05:00:00Z", "1970-01-01T03:00:00Z"])]
    out = lifecycle.safety_status(cluster("alicloud", ttl="12h"), applied_at=0.0, now=1800.0, resources=nodes)
    assert out["ttl_deadline"] == "1970-01-01T03:00:00Z" and out["ttl_source"] == "state"
    assert out["ttl_left_hours"] == 2.5
    out = lifecycle.safety_status(cluster("alicloud", ttl="2h"), applied_at=0.0, now=1800.0, resources=[])
    assert out["ttl_deadline"] == "1970-01-01T02:00:00Z" and "ttl_source" not in out


def test_apply_refuses_a_review_with_a_blocking_finding():
    rev = {"findings": [{"code": "budget-exceeded", "severity": "block", "message": "12 USD/h exceeds 10"}]}
    with pytest.raises(lifecycle.TrainkitError) as err:
        lifecycle.refuse_blocking(rev)
    assert err.value.exit_code == 11 and "budget-exceeded" in err.value.message
    lifecycle.refuse_blocking({"findings": [{"code": "x", "severity": "warn", "message": "m"}]})


def test_alibaba_refuses_a_ttl_shorter_than_its_minimum_with_the_plan_to_create_margin(tmp_path):
    from trainkit.spec.resolve import load_cluster

    path = tmp_path / "c.yaml"
    path.write_text("name: demo\ncloud: alicloud\nregion: cn-hangzhou\nzone: cn-hangzhou-i\n"
                    "instance: {type: ecs.gn7i-c8g1.2xlarge}\nnetwork: {admin_cidrs: [203.0.113.0/24]}\n"
                    "ttl: 30m\n")  # ECS's own minimum, but the release time is fixed at plan, before the create
    with pytest.raises(Exception) as err:
        load_cluster(path)
    assert "ttl" in str(err.value) and "60 minutes" in str(err.value)
    assert cluster("aws", ttl="20m").spec.ttl == "20m"  # the node-side timer has no minimum
