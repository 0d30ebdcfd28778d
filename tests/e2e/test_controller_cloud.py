"""Issue 42 on a cloud: `train --recover --detach` on the AWS target hands the recovery loop
to the controller instance the module rendered, and the controller acts through its instance
profile only.

The AWS module is applied for real against a moto server (controller.enabled: true, the s3 backend
on moto). moto's instances are records, not machines, so two namespace hosts (netns.py) stand in
for them at the addresses moto gave: h1 takes the controller's private IP, h2 node-0's (a /32 each
on its link, routed from here and from the other host), and sshd answers there. moto's elastic IPs
are in 127.0.0.0/8, which no namespace can take, so the spec has no public IPs (public_ip: none,
a NAT gateway): the controller is reached at its private_ip (the public_ip branch is unit-tested). h1 also
runs an IMDSv2 stand-in on 169.254.169.254:80 (imds_standin.py) serving the role of the output
`controller`. The moto server listens on the namespaces' bridge, so both sides reach it.

What runs for real: the apply (and the site play on h2 at node-0's address), the digits run on h2,
the hand-off (ansible/controller.yml through ansible-runner on h1, the key pair made there and
authorized on h2, the shipped workspace, the restart loop), the loop on h1 under `env -i`, and at
the end, in the loop's own environment (read from its /proc/PID/environ) and workspace, `trainkit
status`: terraform on h1 reads the s3 state on moto with the credentials the metadata stand-in
handed out (that environment has no key, so it could not have read it otherwise). `--down` is
refused for a cloud's controller (runs/controller_host.py problem_of): also checked here. Not
covered: a reclaim and replacement (h2 is not killed: moto would start a replacement record no
host stands in for), systemd, real IAM evaluation (moto checks no policy).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import boto3
import pytest
import yaml
from netns import NetnsCluster, missing_tools, names_for, sh
from ports import free_port
from test_controller_hosts import _until
from test_hosts_multinode import SITE_VARS, _kill_group

pytestmark = pytest.mark.usefixtures("tf_cli_config")   # the offline aws provider mirror (tests/conftest.py)
PREFIX, SUBNET = names_for(__name__)
REPO = Path(__file__).resolve().parents[2]
TRAINKIT = Path(sys.executable).parent / "trainkit"
IMDS = Path(__file__).with_name("imds_standin.py")
NAME = "aws-ctl"
# The user's keys: values no file of the repo or the emulator holds, so a hit anywhere is a leak
# (moto accepts any key).
KEY_ID, SECRET = "AKIACTLRCLOUDPROBE42", "cloud/ctl+probe/secret/value/issue42abc"
KEY_NAMES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
# digits, each step slowed (the engine's TRAINKIT_FAULT_STEP_SLEEP hook) so the run outlives the
# hand-off (the controller play and the loop's start-up) on a loaded machine
STEP_SLEEP_S = 0.25
DIGITS = ["epochs=6", "export.onnx=false", "plot=false", "tensorboard=false", "checkpoint.interval=null",
          "checkpoint.every_n_steps=10", "log_every=1", "workers=0"]


@pytest.fixture
def duo(request, tmp_path_factory) -> NetnsCluster:
    missing = missing_tools()
    if missing:
        pytest.fail("namespace hosts need: " + ", ".join(missing))
    base = tmp_path_factory.mktemp("cc")
    cluster = NetnsCluster(base, count=2, prefix=PREFIX, local_root=base / "node-local", subnet=SUBNET,
                           listen_any=True)
    request.addfinalizer(cluster.stop)
    return cluster.start()


@pytest.fixture
def moto_bridge(duo):
    """A moto server on the namespaces' bridge address: the user's side and the controller reach it."""
    url = f"http://{SUBNET}.1:{free_port()}"
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", f"{SUBNET}.1", "-p", url.rsplit(":", 1)[1]],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120   # its imports take seconds on a loaded machine
    while True:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1)
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "moto server did not start"
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def _env(duo: NetnsCluster, moto: str) -> dict:
    return {**os.environ, **duo.ansible_env(), "OMP_NUM_THREADS": "1", "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1",
            "NO_PROXY": f"{SUBNET}.1,127.0.0.1,localhost", "CHECKPOINT_DISABLE": "1"}


def tk(duo, moto, *args, timeout=400) -> subprocess.CompletedProcess:
    env = _env(duo, moto)
    env.pop("CHECKOV", None)   # checkov's findings are test_aws_controller's
    proc = subprocess.Popen([str(TRAINKIT), *map(str, args)], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        _kill_group(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _aws(moto: str, service: str):
    return boto3.client(service, endpoint_url=moto, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x")


def _spec(duo: NetnsCluster, moto: str, path: Path) -> Path:
    spec = yaml.safe_load((REPO / "examples/clusters/aws-moto.yaml").read_text())
    # the API is on the bridge, not 127.0.0.1 (placeholders.is_emulator): admin_cidrs a real range, ours
    # moto gives elastic IPs in 127.0.0.0/8, which no namespace can take from this machine's lo: no
    # public IPs (a NAT gateway, so the controller gets no EIP either), everything at its private IP
    spec["network"].update(admin_cidrs=[f"{SUBNET}.0/24"], public_ip="none", nat_gateway=True)
    spec.update(name=NAME, nodes=1, endpoints={k: moto for k in spec["endpoints"]}, controller={"enabled": True},
                backend={"type": "s3", "bucket": "tfstate", "region": "us-east-1"},
                ssh={"user": "root", "private_key": str(duo.key), "public_key": f"{duo.key}.pub"},
                storage={"system_disk": {"size_gb": 30}, "data_disk": {"enabled": False}, "nas": {"enabled": False}},
                launch={"nproc_per_node": 1, "python": sys.executable, "root": str(duo.local_root / "trainkit")})
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _stand_in(duo: NetnsCluster, outputs: dict, imds_log: Path) -> subprocess.Popen:
    """h1 at the controller's IPs with the metadata stand-in, h2 at node-0's."""
    h1, h2 = duo.hosts
    ctl, node = outputs["controller"], outputs["nodes"][0]
    for host, ips in ((h1, (ctl["public_ip"], ctl["private_ip"])), (h2, (node["public_ip"], node["private_ip"]))):
        for ip in ips:
            if ip:
                duo.add_address(host, ip)
    sh("ip", "-n", h1.netns, "addr", "add", "169.254.169.254/32", "dev", "lo")
    return subprocess.Popen(["ip", "netns", "exec", h1.netns, sys.executable, str(IMDS), "--role", ctl["role"],
                             "--log", str(imds_log)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _imds(duo: NetnsCluster, script: str) -> str:
    """Python run inside h1 (where 169.254.169.254 is), its stdout."""
    return subprocess.run(["ip", "netns", "exec", duo.hosts[0].netns, sys.executable, "-c", script],
                          capture_output=True, text=True, timeout=30).stdout.strip()


TOKENLESS = """import urllib.request, urllib.error, time
for _ in range(100):
    try:
        urllib.request.urlopen("http://169.254.169.254/latest/meta-data/iam/security-credentials/", timeout=2)
        print(200); break
    except urllib.error.HTTPError as e:
        print(e.code); break
    except OSError:
        time.sleep(0.2)
"""


def test_the_cloud_controller_runs_the_loop_with_the_instance_profile_only(duo, moto_bridge, tmp_path):
    moto, (h1, h2) = moto_bridge, duo.hosts
    _aws(moto, "s3").create_bucket(Bucket="tfstate")
    spec, ws = _spec(duo, moto, tmp_path / "cluster.yaml"), tmp_path / "ws"
    (ws / "group_vars").mkdir(parents=True)
    (ws / "group_vars" / "all.yml").write_text(yaml.safe_dump(
        {**SITE_VARS, "trainkit_authorized_keys_file": str(duo.local_root / "authorized_keys")}))
    common = [spec, "--workdir", ws]
    applied = tk(duo, moto, "apply", *common, "--yes", "--no-provision")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    outputs = json.loads((ws / "outputs.json").read_text())
    role = outputs["controller"]["role"]
    imds_log = tmp_path / "imds.jsonl"
    imds = _stand_in(duo, outputs, imds_log)
    try:
        assert _imds(duo, TOKENLESS) == "401"   # IMDSv2 required: a GET without a token is refused
        provisioned = tk(duo, moto, "apply", *common, "--yes")   # no change: the site play on h2
        assert provisioned.returncode == 0, provisioned.stdout + provisioned.stderr
        config = {**yaml.safe_load((REPO / "examples/train/digits.yaml").read_text()),
                  "env": {"TRAINKIT_FAULT_STEP_SLEEP": str(STEP_SLEEP_S)}}
        (tmp_path / "digits-slow.yaml").write_text(yaml.safe_dump(config))
        train = ["train", *common, "--config", tmp_path / "digits-slow.yaml", *DIGITS, "--poll", "1",
                 "--backoff", "1", "--no-doctor", "--recover", "--detach"]
        refused = tk(duo, moto, *train, "--down")   # the controller would destroy the instance it runs on
        assert refused.returncode == 2 and "down: a cloud's controller cannot yet destroy" in refused.stderr, \
            refused.stdout + refused.stderr
        assert not (ws / "runs").is_dir() or not list((ws / "runs").iterdir())   # refused before anything started
        started = tk(duo, moto, *train)
        assert started.returncode == 0, started.stdout + started.stderr
        run_id = started.stdout.strip()
        assert "controller.yml" in started.stderr and "runs on the controller" in started.stderr, started.stderr
        record = json.loads((ws / "runs" / run_id / "run.json").read_text())
        assert record["controller"]["host"] == "controller" and record["controller"]["service"] == "loop"
        assert record["controller"]["address"] == outputs["controller"]["private_ip"]

        ctl_dir = h1.dir / "local" / "trainkit-controller" / run_id   # h1's node-local folder, seen from here
        assert (h1.dir / "local" / "trainkit-controller" / "bin" / "terraform").is_file()   # the play put it there
        public = (ctl_dir / "ssh" / "id_ed25519.pub").read_text().strip()   # made there, authorized on the node
        assert public in (h2.dir / "local" / "authorized_keys").read_text().splitlines()
        log = ctl_dir / "controller.log"
        pid = _until("the loop's train process", lambda: (ctl_dir / "child.pid").is_file()
                     and int((ctl_dir / "child.pid").read_text()), 120, lambda: log.read_text() if log.is_file() else "")
        assert pid in h1.pids()   # on the controller
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        python = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        names = {e.split(b"=", 1)[0].decode() for e in environ if e}
        assert not names & set(KEY_NAMES) and not [e for e in environ if KEY_ID.encode() in e or SECRET.encode() in e]
        assert "TRAINKIT_TERRAFORM" in names

        # while the run goes on (its key pair goes with the loop's end), in the loop's own environment
        # and workspace on h1 (its mount namespace: ssh): terraform reads the s3 state with the role's
        # credentials (the stand-in's log is emptied first: what it serves now is this read's)
        imds_log.write_text("")
        loop_env = [e.decode() for e in environ if e]
        where = record["controller"]["dir"]
        status = duo.ssh(h1, f"cd {shlex.quote(where)} && env -i {shlex.join(loop_env)} {shlex.quote(python)} -m "
                             "trainkit status cluster.yaml --workdir ws --json", check=False, timeout=300)
        assert status.returncode == 0, status.stdout + status.stderr
        seen = json.loads(status.stdout)
        assert seen["exists"] and [n["private_ip"] for n in seen["nodes"]] == [outputs["nodes"][0]["private_ip"]], seen
        served = [json.loads(x) for x in imds_log.read_text().splitlines()]
        assert {"method": "GET", "path": "/latest/meta-data/iam/security-credentials/" + role, "status": 200} in served

        # the run completes and the loop ends (exit 0: not restarted)
        _until("the run completes on the controller", lambda: "controller: exit 0" in
               (log.read_text() if log.is_file() else ""), 420, lambda: log.read_text()[-4000:])
        done = json.loads((ctl_dir / "ws" / "runs" / run_id / "run.json").read_text())
        assert done["status"] == "completed", done
        served = [json.loads(x) for x in imds_log.read_text().splitlines()]
        creds = "/latest/meta-data/iam/security-credentials/" + role
        assert {"method": "GET", "path": creds, "status": 200} in served, served
        assert {"method": "PUT", "path": "/latest/api/token", "status": 200} in served
        leaked = [str(p) for p in (h1.dir / "local").rglob("*") if p.is_file() and not p.is_symlink()
                  and (KEY_ID.encode() in p.read_bytes() or SECRET.encode() in p.read_bytes())]
        assert leaked == []
    finally:
        imds.terminate()
        imds.wait(timeout=10)
