"""The review an infra engineer reads, as Atlantis + infracost write it: a header (cluster, cloud,
workspace, backend, commit, the apply command), replaced/destroyed first with their causes, every
change with its attributes before -> after (sensitive values masked) in a <details> block, cost
now / new / delta with the currency on each line and usage-priced items marked; the text format
carries the same facts as the markdown."""

from __future__ import annotations

import re

from trainkit.spec.resolve import resolve
from trainkit.spec.schema import ClusterSpec
from trainkit.stack.review import header, review
from trainkit.stack.review_render import to_markdown, to_text

SECRET = "s3cr3t-value-never-shown"


def cluster():
    return resolve(ClusterSpec.model_validate({
        "name": "demo", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "nodes": 2,
        "instance": {"type": "g5.12xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]},
        "storage": {"nas": {"enabled": True}}}))


def change(address, type_, actions, before, after, **more):
    return {"address": address, "type": type_, "mode": "managed", "index": 0,
            "change": {"actions": list(actions), "before": before, "after": after, **more}}


def a_plan():
    disk = change("module.cluster.aws_ebs_volume.data[0]", "aws_ebs_volume", ["update"],
                  {"size": 500, "type": "gp3", "tags": {"team": "ml"}},
                  {"size": 800, "type": "gp3", "tags": {"team": "ml"}})
    db = change("module.cluster.aws_instance.node[1]", "aws_instance", ["update"],
                {"user_data": SECRET, "instance_type": "g5.12xlarge"},
                {"user_data": SECRET + "2", "instance_type": "g5.12xlarge"},
                before_sensitive={"user_data": True}, after_sensitive={"user_data": True})
    gone = change("module.cluster.aws_instance.node[2]", "aws_instance", ["delete"],
                  {"instance_type": "g5.12xlarge", "id": "i-0abc"}, None)
    gone["action_reason"] = "delete_because_count_index"
    new = change("module.cluster.aws_instance.node[0]", "aws_instance", ["create"], None,
                 {"instance_type": "g5.12xlarge", "id": None}, after_unknown={"id": True})
    nat = change("module.cluster.aws_nat_gateway.this[0]", "aws_nat_gateway", ["no-op"], {}, {})
    return {"resource_changes": [disk, db, gone, new, nat]}


def reviewed():
    c = cluster()
    rev = review(a_plan(), c)
    rev["header"] = header(c, "/work/ws/demo", "s3 backend tk-state/demo/terraform.tfstate",
                           "0123456789abcdef0123456789abcdef01234567",
                           "trainkit apply cluster.yaml --workdir /work/ws/demo")
    return rev


def test_every_change_lists_its_attributes_before_and_after_with_sensitive_values_masked():
    rev = reviewed()
    by = {a["address"]: a for a in rev["changes"]["addresses"]}
    assert by["module.cluster.aws_ebs_volume.data[0]"]["attributes"] == [
        {"name": "size", "before": "500", "after": "800"}]
    assert by["module.cluster.aws_instance.node[1]"]["attributes"] == [
        {"name": "user_data", "before": "(sensitive)", "after": "(sensitive)"}]
    assert {"name": "id", "before": "null", "after": "(known after apply)"} in \
        by["module.cluster.aws_instance.node[0]"]["attributes"]
    assert {"name": "id", "before": '"i-0abc"', "after": "null"} in by["module.cluster.aws_instance.node[2]"]["attributes"]
    for text in (to_markdown(rev), to_text(rev)):
        assert SECRET not in text
        assert "size: 500 -> 800" in text and "user_data: (sensitive) -> (sensitive)" in text


def test_markdown_has_the_header_danger_first_and_changes_in_a_details_diff_block():
    md = to_markdown(reviewed())
    for fact in ("/work/ws/demo", "s3 backend tk-state/demo/terraform.tfstate",
                 "0123456789abcdef0123456789abcdef01234567",
                 "trainkit apply cluster.yaml --workdir /work/ws/demo", "us-east-1"):
        assert fact in md, fact
    assert md.index("apply with") < md.index("[!CAUTION]") < md.index("| role |") < md.index("<details>")
    details = md[md.index("<details>"):]
    assert "```diff" in details and "~ module.cluster.aws_ebs_volume.data[0] (update" in details
    assert "- module.cluster.aws_instance.node[2] (delete" in details


def test_cost_lines_say_now_new_delta_each_with_its_currency_and_mark_usage_priced_items():
    rev = reviewed()
    md, text = to_markdown(rev), to_text(rev)
    rows = [line for line in md.splitlines() if re.match(r"\| (now|new|delta) \|", line)]
    assert [r.split("|")[1].strip() for r in rows] == ["now", "new", "delta"]
    assert all(r.count("USD") == 2 for r in rows), rows  # per hour and per month, each with currency
    for label in ("now", "new", "delta"):
        line = next(x for x in text.splitlines() if x.strip().startswith(label + " "))
        assert line.count("USD") == 2, line
    assert "usage-priced" in md and "usage-priced" in text  # EFS without a size: billed by use
    assert all("USD" in x or "unknown" in x for x in text.splitlines() if " per hour (" in x)


def test_the_text_format_carries_the_same_facts_as_the_markdown():
    rev = reviewed()
    md, text = to_markdown(rev), to_text(rev)
    facts = ["/work/ws/demo", "s3 backend tk-state/demo/terraform.tfstate", "0123456789abcdef",
             "trainkit apply cluster.yaml --workdir /work/ws/demo", "DESTROY module.cluster.aws_instance.node[2]",
             "its count index is gone", "loses its local disks",
             "size: 500 -> 800", "id: null -> (known after apply)", "usage-priced"]
    facts += [item["item"] for item in rev["cost"]["items"]] + [item["basis"] for item in rev["cost"]["items"]]
    for fact in facts:
        assert fact in md.replace("**", "").replace("`", "") and fact in text, fact


def test_user_text_cannot_break_out_of_the_markdown():
    rev = reviewed()
    rev["header"]["workspace"] = "/tmp/x|</code></details>`\n# pwned"
    md = to_markdown(rev)
    assert "</code></details>" not in md.split("<details>")[0] and "\n# pwned" not in md
