"""Tencent Cloud: what trainkit's Python knows about it (provider tencentcloudstack/tencentcloud ~> 1.83).

Sources: the provider's `tencentcloud/provider.go` (credential variables), Terraform's cos backend
(`internal/backend/remote-state/cos`), Tencent CVM docs "Spot instance reclamation" (metadata path
`spot/termination-time`). CVM has no release-at argument: TTL uses the node-side timer.
"""

from trainkit.clouds.base import Cloud, CredentialSet

_KEYS = CredentialSet(
    label="secret id and key",
    variables=(("TENCENTCLOUD_SECRET_ID",), ("TENCENTCLOUD_SECRET_KEY",)),
    files=("~/.tccli/default.credential",),
)

CLOUD = Cloud(
    name="tencentcloud",
    title="Tencent Cloud",
    provider_source="tencentcloudstack/tencentcloud",
    provider_version="~> 1.83",
    credentials=(_KEYS,),
    region_variables=("TENCENTCLOUD_REGION",),
    backend_type="cos",
    backend_credentials=(_KEYS,),
    spot_notice_url="http://metadata.tencentyun.com/latest/meta-data/spot/termination-time",
    ttl_argument=None,
    # COS docs, "Using AWS S3 SDK to Access COS": endpoint cos.<region>.myqcloud.com.
    object_store=("cos", "https://cos.{region}.myqcloud.com"),
    public_ip_attrs={"tencentcloud_instance": ("allocate_public_ip", lambda v: v is True)},
    unencrypted={"tencentcloud_cbs_storage": lambda v: v.get("encrypt") is False},
    spot_needs_max_price=True,
)
