"""The stand-in clouds' create refusals that need no terraform: a release time too close to now
(Alibaba auto_release_time, Huawei auto_terminate_time: at least 30 minutes ahead) and Alibaba
spot in a deployment set."""

from __future__ import annotations

import time

import pytest
from standin import rules_alicloud, rules_huaweicloud
from standin.cloud import CloudError
from standin.rules_common import too_soon


class _View:
    faults: dict = {}

    def get(self, type_name, object_id):
        return {"zone_id": "cn-hangzhou-i"}


def _at(seconds_from_now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds_from_now))


def test_a_release_time_needs_thirty_minutes_of_margin():
    assert too_soon(_at(29 * 60)) and not too_soon(_at(31 * 60)) and not too_soon(None)
    with pytest.raises(CloudError, match="InvalidAutoReleaseTime"):
        rules_alicloud.create_check("alicloud_instance", {"auto_release_time": _at(60)}, _View())
    with pytest.raises(CloudError, match="auto_terminate_time"):
        rules_huaweicloud.create_check("huaweicloud_compute_instance", {"auto_terminate_time": _at(60)}, _View())
    rules_alicloud.create_check("alicloud_instance", {"auto_release_time": _at(3600)}, _View())


def test_alibaba_refuses_spot_in_a_deployment_set():
    with pytest.raises(CloudError, match="deployment set"):
        rules_alicloud.create_check("alicloud_instance", {"deployment_set_id": "ds-1",
                                                          "spot_strategy": "SpotAsPriceGo"}, _View())
    rules_alicloud.create_check("alicloud_instance", {"deployment_set_id": "ds-1", "spot_strategy": "NoSpot"}, _View())
