"""A terraform provider served from schema data: plugin protocol v6 over gRPC, go-plugin handshake.

    python -m standin.server alicloud                  # started by terraform (filesystem mirror)
    python -m standin.server --reattach FILE alicloud tencentcloud huaweicloud
                                                       # started once; FILE gets TF_REATTACH_PROVIDERS

Started by terraform, it follows HashiCorp go-plugin's handshake (github.com/hashicorp/go-plugin,
docs/internals.md and server.go): the magic cookie TF_PLUGIN_MAGIC_COOKIE must be set, the server
listens on a unix socket, serves TLS with a fresh certificate (AutoMTLS), and prints one line
`1|6|unix|<socket>|grpc|<base64 DER certificate>`. With --reattach it serves plain gRPC (go-plugin's
ReattachConfig carries no certificate) and writes the JSON terraform reads from
TF_REATTACH_PROVIDERS, so one process serves every terraform command of a test.

The stand-in cloud behind it is chosen by TRAINKIT_STANDIN_CLOUD (a folder, cloud.py). Runs under
.venv-standin (grpcio and protobuf 5 from PyPI `tf`, whose generated tfplugin6 stubs it uses).
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import signal
import sys
import tempfile
import threading
from concurrent import futures
from pathlib import Path

import grpc
from tf.gen import grpc_controller_pb2 as controller_pb
from tf.gen import grpc_controller_pb2_grpc as controller_rpc
from tf.gen import grpc_stdio_pb2_grpc as stdio_rpc
from tf.gen import tfplugin_pb2 as pb
from tf.gen import tfplugin_pb2_grpc as rpc

from . import cloud as cloud_mod
from . import sdk
from .schema import PROVIDERS, conform_block, load
from .values import decode, encode

# go-plugin's handshake cookie for terraform providers (terraform internal/plugin6/serve.go).
MAGIC_COOKIE = ("TF_PLUGIN_MAGIC_COOKIE",
                "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2")


# Providers built on terraform-plugin-sdk (v1 and v2) answer with LegacyTypeSystem set: terraform
# then accepts planned values for non-computed attributes (the SDK plans Default that way) and logs,
# instead of failing, small differences between plan and apply. The stand-ins answer as they do.
LEGACY = True


def _path(steps: list) -> pb.AttributePath:
    return pb.AttributePath(steps=[pb.AttributePath.Step(element_key_int=s) if isinstance(s, int)
                                   else pb.AttributePath.Step(attribute_name=s) for s in steps])


def _diags(items: list[dict]) -> list[pb.Diagnostic]:
    out = []
    for d in items:
        sev = pb.Diagnostic.ERROR if d["severity"] == "error" else pb.Diagnostic.WARNING
        out.append(pb.Diagnostic(severity=sev, summary=d["summary"], detail=d.get("detail", ""),
                                 attribute=_path(d["path"]) if d.get("path") else None))
    return out


def _block_pb(block: dict) -> pb.Schema.Block:
    attrs = [pb.Schema.Attribute(name=name, type=json.dumps(a["type"]).encode(),
                                 required=bool(a.get("required")), optional=bool(a.get("optional")),
                                 computed=bool(a.get("computed")), sensitive=bool(a.get("sensitive")),
                                 deprecated=bool(a.get("deprecated")))
             for name, a in sorted(block.get("attributes", {}).items())]
    nesting = {"list": pb.Schema.NestedBlock.LIST, "set": pb.Schema.NestedBlock.SET,
               "single": pb.Schema.NestedBlock.SINGLE}
    nested = [pb.Schema.NestedBlock(type_name=name, block=_block_pb(n["block"]), nesting=nesting[n["nesting"]],
                                    min_items=n.get("min_items") or 0, max_items=n.get("max_items") or 0)
              for name, n in sorted(block.get("blocks", {}).items())]
    return pb.Schema.Block(attributes=attrs, block_types=nested)


class Provider(rpc.ProviderServicer):
    """One provider's RPCs: schema from data, checks from sdk.py, effects in the stand-in cloud."""

    def __init__(self, name: str):
        self.name = name
        self.schema = load(name)
        self.cloud = cloud_mod.for_provider(name, os.environ.get("TRAINKIT_STANDIN_CLOUD"))
        self._schema_pb = pb.GetProviderSchema.Response(
            provider=pb.Schema(block=_block_pb(self.schema["provider"])),
            resource_schemas={t: pb.Schema(block=_block_pb(e["block"])) for t, e in self.schema["resources"].items()},
            data_source_schemas={t: pb.Schema(block=_block_pb(e["block"]))
                                 for t, e in self.schema["data_sources"].items()},
            server_capabilities=pb.ServerCapabilities(plan_destroy=False))

    def _block(self, type_name: str, kind: str = "resources") -> dict:
        return self.schema[kind][type_name]["block"]

    # ------------------------------------------------------------------ schema and configuration
    def GetMetadata(self, request, context):
        return pb.GetMetadata.Response(
            resources=[pb.GetMetadata.ResourceMetadata(type_name=t) for t in self.schema["resources"]],
            data_sources=[pb.GetMetadata.DataSourceMetadata(type_name=t) for t in self.schema["data_sources"]])

    def GetProviderSchema(self, request, context):
        return self._schema_pb

    def GetFunctions(self, request, context):
        return pb.GetFunctions.Response()

    def ValidateProviderConfig(self, request, context):
        config = decode(request.config.msgpack)
        return pb.ValidateProviderConfig.Response(diagnostics=_diags(sdk.validate(self.schema["provider"], config)))

    def ConfigureProvider(self, request, context):
        problems = self.cloud.configure(decode(request.config.msgpack) or {}, dict(os.environ))
        return pb.ConfigureProvider.Response(diagnostics=_diags(problems))

    def ValidateResourceConfig(self, request, context):
        diags = sdk.validate(self._block(request.type_name), decode(request.config.msgpack))
        return pb.ValidateResourceConfig.Response(diagnostics=_diags(diags))

    def ValidateDataResourceConfig(self, request, context):
        diags = sdk.validate(self._block(request.type_name, "data_sources"), decode(request.config.msgpack))
        return pb.ValidateDataResourceConfig.Response(diagnostics=_diags(diags))

    def UpgradeResourceState(self, request, context):
        state = json.loads(request.raw_state.json or b"null")
        upgraded = conform_block(state, self._block(request.type_name))
        return pb.UpgradeResourceState.Response(upgraded_state=pb.DynamicValue(msgpack=encode(upgraded)))

    # ------------------------------------------------------------------ resources
    def ReadResource(self, request, context):
        block = self._block(request.type_name)
        current = decode(request.current_state.msgpack)
        state, problems = self.cloud.call("read", request.type_name, current)
        return pb.ReadResource.Response(new_state=pb.DynamicValue(msgpack=encode(conform_block(state, block))),
                                        diagnostics=_diags(problems), private=request.private)

    def PlanResourceChange(self, request, context):
        block = self._block(request.type_name)
        prior = decode(request.prior_state.msgpack)
        proposed = decode(request.proposed_new_state.msgpack)
        config = decode(request.config.msgpack)
        planned, replace = sdk.plan(block, prior, proposed, config)
        problems = self.cloud.plan_problems(request.type_name, prior, planned) if planned is not None else []
        return pb.PlanResourceChange.Response(
            planned_state=pb.DynamicValue(msgpack=encode(conform_block(planned, block))),
            requires_replace=[_path(p) for p in replace], diagnostics=_diags(problems),
            planned_private=request.prior_private, legacy_type_system=LEGACY)

    def ApplyResourceChange(self, request, context):
        block = self._block(request.type_name)
        prior = decode(request.prior_state.msgpack)
        planned = decode(request.planned_state.msgpack)
        config = decode(request.config.msgpack)
        new, problems = self.cloud.apply(request.type_name, prior, planned, config)
        return pb.ApplyResourceChange.Response(new_state=pb.DynamicValue(msgpack=encode(conform_block(new, block))),
                                               diagnostics=_diags(problems), private=request.planned_private,
                                               legacy_type_system=LEGACY)

    def ImportResourceState(self, request, context):
        state, problems = self.cloud.call("import_", request.type_name, request.id)
        found = [] if state is None else [pb.ImportResourceState.ImportedResource(
            type_name=request.type_name,
            state=pb.DynamicValue(msgpack=encode(conform_block(state, self._block(request.type_name)))))]
        if state is None and not problems:
            problems = [{"severity": "error", "summary": "Cannot import non-existent remote object",
                         "detail": f"{request.type_name} {request.id} does not exist", "path": []}]
        return pb.ImportResourceState.Response(imported_resources=found, diagnostics=_diags(problems))

    def ReadDataSource(self, request, context):
        block = self._block(request.type_name, "data_sources")
        state, problems = self.cloud.call("read_data", request.type_name, decode(request.config.msgpack))
        return pb.ReadDataSource.Response(state=pb.DynamicValue(msgpack=encode(conform_block(state, block))),
                                          diagnostics=_diags(problems))

    def StopProvider(self, request, context):
        return pb.StopProvider.Response()


def _tls_credentials() -> tuple[grpc.ServerCredentials, str]:
    """A fresh self-signed server certificate (go-plugin AutoMTLS)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    # Client authentication stays off: terraform's AutoMTLS client certificate is ECDSA P-521 with
    # SHA-512 (go-plugin mtls.go), which gRPC's BoringSSL does not ask for, so Go sends none. The
    # server socket is in a private temporary folder; terraform still verifies this certificate.
    creds = grpc.ssl_server_credentials([(key_pem, cert_pem)], require_client_auth=False)
    der = cert.public_bytes(serialization.Encoding.DER)
    return creds, base64.b64encode(der).decode().rstrip("=")


def _server(provider: Provider, stop: threading.Event) -> grpc.Server:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    rpc.add_ProviderServicer_to_server(provider, server)

    class Controller(controller_rpc.GRPCControllerServicer):
        def Shutdown(self, request, context):
            stop.set()
            return controller_pb.Empty()

    class Stdio(stdio_rpc.GRPCStdioServicer):
        def StreamStdio(self, request, context):
            return iter(())

    controller_rpc.add_GRPCControllerServicer_to_server(Controller(), server)
    stdio_rpc.add_GRPCStdioServicer_to_server(Stdio(), server)
    return server


def serve_managed(name: str) -> int:
    """Run as terraform's child: handshake on stdout, serve until terraform shuts us down."""
    if os.environ.get(MAGIC_COOKIE[0]) != MAGIC_COOKIE[1]:
        print("This binary is a plugin. These are not meant to be executed directly.", file=sys.stderr)
        return 1
    stop = threading.Event()
    with tempfile.TemporaryDirectory(prefix="tk-standin-") as tmp:
        sock = f"{tmp}/plugin.sock"
        server = _server(Provider(name), stop)
        creds, cert = _tls_credentials()
        server.add_secure_port(f"unix:{sock}", creds)
        server.start()
        print(f"1|6|unix|{sock}|grpc|{cert}", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        stop.wait()
        server.stop(grace=0.2).wait()
    return 0


def serve_reattach(out_file: str, names: list[str]) -> int:
    """Serve `names` from this process until SIGTERM; write the TF_REATTACH_PROVIDERS JSON."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with tempfile.TemporaryDirectory(prefix="tk-standin-") as tmp:
        servers, reattach = [], {}
        for name in names:
            sock = f"{tmp}/{name}.sock"
            server = _server(Provider(name), threading.Event())  # a client's Shutdown must not end us
            server.add_insecure_port(f"unix:{sock}")
            server.start()
            servers.append(server)
            reattach[f"registry.terraform.io/{PROVIDERS[name][0]}"] = {
                "Protocol": "grpc", "ProtocolVersion": 6, "Pid": os.getpid(), "Test": True,
                "Addr": {"Network": "unix", "String": sock}}
        Path(out_file + ".tmp").write_text(json.dumps(reattach))
        os.replace(out_file + ".tmp", out_file)
        stop.wait()
        for server in servers:
            server.stop(grace=0.2).wait()
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--reattach"]:
        return serve_reattach(argv[1], argv[2:])
    return serve_managed(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
