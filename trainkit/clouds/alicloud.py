"""Alibaba Cloud: what trainkit's Python knows about it (provider aliyun/alicloud ~> 1.289).

Sources: the provider's `alicloud/provider.go` (credential variables), Terraform's oss backend
(`internal/backend/remote-state/oss`), Alibaba ECS docs "Spot instance interruption events"
(metadata path `instance/spot/termination-time`) and the `alicloud_instance` docs (`auto_release_time`).
"""

from trainkit.clouds.base import Cloud, CredentialSet

_KEYS = CredentialSet(
    label="access key",
    variables=(("ALICLOUD_ACCESS_KEY", "ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABACLOUD_ACCESS_KEY_ID"),
               ("ALICLOUD_SECRET_KEY", "ALIBABA_CLOUD_ACCESS_KEY_SECRET",
                "ALIBABACLOUD_ACCESS_KEY_SECRET")),
    files=("~/.aliyun/config.json",),
)

CLOUD = Cloud(
    name="alicloud",
    title="Alibaba Cloud",
    provider_source="aliyun/alicloud",
    provider_version="~> 1.289",
    credentials=(_KEYS,),
    region_variables=("ALICLOUD_REGION", "ALIBABA_CLOUD_REGION"),
    backend_type="oss",
    backend_credentials=(_KEYS,),
    spot_notice_url="http://100.100.100.200/latest/meta-data/instance/spot/termination-time",
    ttl_argument="auto_release_time",
    # OSS docs, "Use Amazon S3 SDKs to access OSS": endpoint s3.oss-<region>.aliyuncs.com.
    object_store=("oss", "https://s3.oss-{region}.aliyuncs.com"),
    public_ip_attrs={"alicloud_instance": ("internet_max_bandwidth_out", lambda v: bool(v))},
    unencrypted={"alicloud_ecs_disk": lambda v: v.get("encrypted") is False},
)
