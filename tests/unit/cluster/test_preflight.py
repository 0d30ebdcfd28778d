"""The placement preflight (issue 21): what the cloud says of each candidate decides which are
tried, the plan review shows every candidate with its status and price, and requirements expand to
every matching type. The adapters' requests are checked against stand-ins of each cloud's API in
tests/unit/clouds/test_offers_*.py, and on moto in tests/infra/test_aws_failover.py."""

from __future__ import annotations

import pytest

from trainkit import errors
from trainkit.clouds.base import OFFER_AVAILABLE, OFFER_LISTED, OFFER_SOLD_OUT
from trainkit.clouds.capacity import CapacityError
from trainkit.cluster import failover, preflight
from trainkit.spec.resolve import resolve
from trainkit.spec.schema import ClusterSpec
from trainkit.stack.review_render import placement_rows

pytestmark = pytest.mark.unit

A, B, C = "us-east-1a", "us-east-1b", "us-east-1c"


def cluster(**over):
    base = {"name": "demo", "cloud": "aws", "region": "us-east-1", "zone": [A, B, C],
            "instance": {"type": ["g5.12xlarge", "g5.24xlarge"]}, "network": {"admin_cidrs": ["203.0.113.0/24"]}}
    return resolve(ClusterSpec.model_validate({**base, **over}))


def test_sold_out_and_not_offered_candidates_are_skipped_in_order():
    c = cluster()
    order = failover.candidates(c)
    answers = {False: {(A, "g5.12xlarge"): OFFER_SOLD_OUT, (B, "g5.12xlarge"): OFFER_AVAILABLE,
                       (A, "g5.24xlarge"): OFFER_LISTED, (C, "g5.24xlarge"): OFFER_AVAILABLE}}
    kept, rows = preflight.screen(c, order, answers)
    assert kept == [(B, "g5.12xlarge", False), (A, "g5.24xlarge", False), (C, "g5.24xlarge", False)]
    assert [r["status"] for r in rows] == ["sold out", "available", "not offered", "offered", "not offered", "available"]
    # each row priced from the catalog (on-demand here), per node-hour
    assert rows[0]["price"] == c.catalog.get("g5.12xlarge").on_demand and rows[0]["billing"] == "on_demand"
    assert rows[3]["price"] == c.catalog.get("g5.24xlarge").on_demand


def test_without_an_answer_every_candidate_is_kept_and_marked_not_asked():
    c = cluster()
    order = failover.candidates(c)
    kept, rows = preflight.screen(c, order, None)
    assert kept == order and {r["status"] for r in rows} == {preflight.NOT_ASKED}
    # spot answers do not stand for on-demand ones: an on-demand candidate without its answer is not asked
    spot = cluster(spot={"enabled": True, "max_price": 3.5, "fallback": "on_demand"}, zone=A,
                   instance={"type": "g5.12xlarge"})
    kept, rows = preflight.screen(spot, failover.candidates(spot), {True: {(A, "g5.12xlarge"): OFFER_SOLD_OUT}})
    assert kept == [(A, "g5.12xlarge", False)] and [r["status"] for r in rows] == ["sold out", "not asked"]


def test_the_placement_the_nodes_run_on_is_never_skipped():
    c = cluster()
    order = [(B, "g5.12xlarge", False), (A, "g5.12xlarge", False)]
    kept, _ = preflight.screen(c, order, {False: {}}, keep=(B, "g5.12xlarge", False))
    assert kept == [(B, "g5.12xlarge", False)]


def test_nothing_offered_is_one_capacity_error_listing_each_candidate(capsys):
    c = cluster(zone=[A, B], instance={"type": "g5.12xlarge"})
    with pytest.raises(CapacityError) as err:
        preflight.screen(c, failover.candidates(c), {False: {(A, "g5.12xlarge"): OFFER_SOLD_OUT}})
    assert err.value.exit_code == errors.APPLY and "nothing was created" in err.value.fix
    assert "1. g5.12xlarge in us-east-1a (on-demand): sold out" in err.value.message
    assert "2. g5.12xlarge in us-east-1b (on-demand): not offered" in err.value.message


def test_an_adapter_that_cannot_ask_says_why_in_one_line(capsys, monkeypatch):
    """No credentials here: boto3 raises, the preflight says so and answers None."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    c = cluster()
    assert preflight.ask(c, failover.candidates(c)) is None
    err = capsys.readouterr().err
    assert "preflight: AWS was not asked which zones offer g5.12xlarge, g5.24xlarge on-demand (NoCredentialsError" in err
    assert "Traceback" not in err


def test_a_billing_the_cloud_cannot_answer_for_is_not_asked_and_the_other_is_kept(monkeypatch, capsys):
    """Huawei's sell policies are documented for spot only (its adapter raises for on-demand): the
    spot answer still skips what is sold out, the on-demand candidates go as the spec orders them."""
    from types import SimpleNamespace

    from trainkit.errors import InputError

    def offers(region, types, spot, endpoint=None):
        if not spot:
            raise InputError("lists no postPaid policy (documented as spot only)")
        return {(A, "g5.12xlarge"): OFFER_SOLD_OUT, (B, "g5.12xlarge"): OFFER_AVAILABLE}
    monkeypatch.setattr(preflight.importlib, "import_module", lambda name: SimpleNamespace(offers=offers))
    c = cluster(zone=[A, B], instance={"type": "g5.12xlarge"},
                spot={"enabled": True, "max_price": 3.5, "fallback": "on_demand"})
    order = failover.candidates(c)
    answers = preflight.ask(c, order)
    assert set(answers) == {True}
    kept, rows = preflight.screen(c, order, answers)
    assert kept == [(B, "g5.12xlarge", True), (A, "g5.12xlarge", False), (B, "g5.12xlarge", False)]
    assert [r["status"] for r in rows] == ["sold out", "available", "not asked", "not asked"]
    assert "g5.12xlarge on-demand (InputError: lists no postPaid policy" in capsys.readouterr().err


def test_the_review_lists_each_candidate_with_status_and_price_and_marks_the_chosen():
    c = cluster(zone=[A, B], instance={"type": "g5.12xlarge"})
    _, rows = preflight.screen(c, failover.candidates(c), {False: {(B, "g5.12xlarge"): OFFER_LISTED}})
    rev = {"placement": {"chosen": {"zone": B, "type": "g5.12xlarge", "billing": "on_demand"},
                         "currency": "USD", "candidates": rows}}
    assert placement_rows(rev) == [
        ("", "g5.12xlarge in us-east-1a (on-demand)", "not offered", "5.6720 USD"),
        ("->", "g5.12xlarge in us-east-1b (on-demand)", "offered", "5.6720 USD")]
    assert placement_rows({}) == []


def test_gpu_requirements_expand_to_every_matching_type_cheapest_first():
    c = cluster(zone=A, instance={"gpu": "A10G", "gpus_per_node": 4})
    kinds = c.spec.instance.type_candidates
    assert kinds[0] == c.instance.type  # the type picked is the first candidate
    prices = [c.catalog.get(k).on_demand for k in kinds]
    assert len(kinds) >= 2 and prices == sorted(prices)
    assert all(c.catalog.get(k).gpu == "A10G" and c.catalog.get(k).gpus >= 4 for k in kinds)
    assert [k for _, k, _ in failover.candidates(c)] == list(kinds)
    assert cluster(zone=A, instance={"type": "g5.12xlarge"}).spec.instance.type_candidates == ()
