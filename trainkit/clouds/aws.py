"""AWS: what trainkit's Python knows about it (provider hashicorp/aws ~> 5.100).

Sources: the AWS provider and SDK credential chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or
AWS_PROFILE with ~/.aws/credentials), Terraform's s3 backend, EC2 docs "Spot Instance interruption
notices" (`spot/instance-action`, IMDSv2). EC2 has no release-at argument: TTL uses the node-side
timer with `instance_initiated_shutdown_behavior = "terminate"`.
"""

from trainkit.clouds.base import Cloud, CredentialSet

_KEYS = (
    CredentialSet(label="access key", variables=(("AWS_ACCESS_KEY_ID",), ("AWS_SECRET_ACCESS_KEY",))),
    CredentialSet(label="profile", variables=(("AWS_PROFILE",),),
                  files=("~/.aws/credentials", "~/.aws/config")),
)

CLOUD = Cloud(
    name="aws",
    title="AWS",
    provider_source="hashicorp/aws",
    provider_version="~> 5.100",
    credentials=_KEYS,
    region_variables=("AWS_REGION", "AWS_DEFAULT_REGION"),
    backend_type="s3",
    backend_credentials=_KEYS,
    spot_notice_url="http://169.254.169.254/latest/meta-data/spot/instance-action",
    ttl_argument=None,
    # None: boto3 resolves Amazon S3's own endpoint, honouring AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL.
    object_store=("s3", None),
    # The module gives a node its public IP through aws_eip.node (an EIP per public node).
    public_ip_attrs={"aws_instance": ("associate_public_ip_address", lambda v: v is True)},
    unencrypted={"aws_ebs_volume": lambda v: v.get("encrypted") is False},
    supports_endpoints=True,
)
