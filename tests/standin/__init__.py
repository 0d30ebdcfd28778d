"""Stand-ins for the three seed clouds' terraform providers and for the clouds behind them.

The providers aliyun/alicloud, tencentcloudstack/tencentcloud and huaweicloud/huaweicloud cannot be
installed here, so the real terraform binary runs against these: a plugin-protocol v6 server
(server.py) serving each provider's schema (schemas/, read from the provider's Go source), enforcing
what terraform-plugin-sdk enforces inside a real provider (sdk.py), and acting on a stateful
stand-in cloud (cloud.py) that refuses what the cloud's API refuses. mirror.py installs them where
terraform finds providers. README.md says what they model and what only a real account shows.

server.py needs grpcio/protobuf 5 (PyPI `tf`), which clash with trainkit's own venv: it runs under
.venv-standin (make standin); the other modules use only the standard library and msgpack.
"""
