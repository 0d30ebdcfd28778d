"""Huawei Cloud: what trainkit's Python knows about it (provider huaweicloud/huaweicloud ~> 1.97).

Sources: the provider's `huaweicloud/provider.go` (credential variables), its guide
`docs/guides/remote_state_backend.md` (OBS through Terraform's s3 backend, with AWS_* variables
holding the Huawei keys), and the `huaweicloud_compute_instance` docs (`auto_terminate_time`).
"""

from trainkit.clouds.base import Cloud, CredentialSet

CLOUD = Cloud(
    name="huaweicloud",
    title="Huawei Cloud",
    provider_source="huaweicloud/huaweicloud",
    provider_version="~> 1.97",
    credentials=(CredentialSet(label="access key",
                               variables=(("HW_ACCESS_KEY", "OS_ACCESS_KEY"),
                                          ("HW_SECRET_KEY", "OS_SECRET_KEY"))),),
    region_variables=("HW_REGION_NAME", "OS_REGION_NAME"),
    backend_type="obs",
    # The OBS state backend is Terraform's s3 backend: it reads the Huawei keys from AWS_* names.
    backend_credentials=(CredentialSet(label="OBS keys (Huawei keys in AWS_* variables)",
                                       variables=(("AWS_ACCESS_KEY_ID",),
                                                  ("AWS_SECRET_ACCESS_KEY",))),),
    spot_notice_url=None,
    ttl_argument="auto_terminate_time",
    # OBS docs, "Regions and Endpoints": obs.<region>.myhuaweicloud.com (S3-compatible API).
    object_store=("obs", "https://obs.{region}.myhuaweicloud.com"),
    public_ip_attrs={"huaweicloud_compute_instance": ("eip_type", lambda v: bool(v))},
    # EVS encrypts only with a KMS key (`kms_id`).
    unencrypted={"huaweicloud_evs_volume": lambda v: not v.get("kms_id")},
)
