"""Shared test fixtures. Each test directory is a tier and gets its pytest marker automatically."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Callable, Iterator
from urllib.parse import parse_qs, urlparse

import pytest
from ports import free_port
from standin import mirror as standin_mirror

from trainkit.stack import terraform

REPO = Path(__file__).resolve().parent.parent
TIERS = ("unit", "dist", "infra", "e2e", "gpu")


def pytest_configure(config):
    """Ctrl-C reaches the processes the tests start, however pytest itself was started. A shell
    starts a background command (`make test &`, a CI runner's job without a terminal) with SIGINT
    ignored, and an ignored signal stays ignored across fork and exec (signal(7)): every test that
    presses Ctrl-C on trainkit, terraform or the engine then saw its run end normally instead. Runs
    in each xdist worker too."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO / "tests").parts
        if parts and parts[0] in TIERS:
            item.add_marker(getattr(pytest.mark, parts[0]))
    if hasattr(config, "workerinput"):  # an xdist worker: longest chains first (xdist_groups.py)
        from xdist_groups import rank

        items.sort(key=lambda item: rank(str(item.fspath)))  # stable: a module keeps its order


# Every test, whatever its tier, leaves the machine as it found it outside its temp folders: the
# folders a wrong path would hit first (/, /opt, the real home, the repository) gain and lose no
# entry. Watched as they are when the tests start (the unit tier then moves HOME to a temp folder).
WATCHED = ("/", "/opt", os.path.expanduser("~"), str(REPO))
# pytest, hypothesis and coverage write their caches into the repository on purpose
TOOL_CACHES = (".pytest", ".coverage", ".hypothesis")
# What the tools the process tiers run (with the real HOME) keep in it, made once, by them:
# Ansible's ~/.ansible/tmp, ssh's ~/.ssh, pip's and others' ~/.cache, Terraform's ~/.terraform.d.
HOME_TOOL_STATE = (".ansible", ".ssh", ".cache", ".terraform.d")


def _listing() -> dict[str, set[str]]:
    return {f: set(os.listdir(f)) if os.path.isdir(f) else set() for f in WATCHED}


@pytest.fixture(autouse=True)
def nothing_outside_tmp_is_touched(request):
    """Fails a test that created or deleted an entry of a WATCHED folder (a tool's own cache aside)."""
    before = _listing()
    yield
    after = _listing()
    real_home = request.node.get_closest_marker("unit") is None  # the unit tier's HOME is a temp folder
    for folder in WATCHED:
        tools = TOOL_CACHES + (HOME_TOOL_STATE if real_home and folder == WATCHED[2] else ())
        created = {n for n in after[folder] - before[folder] if not n.startswith(tools)}
        deleted = before[folder] - after[folder]
        assert not created and not deleted, f"{folder}: created {sorted(created)}, deleted {sorted(deleted)}"


@pytest.fixture(autouse=True, scope="session")
def own_state_dir(tmp_path_factory):
    """Every tier keeps trainkit's list of known clusters (trainkit/cluster/registry.py) in a temp
    folder: the process tiers run with the real HOME, whose ~/.local/state is the user's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRAINKIT_STATE_DIR", str(tmp_path_factory.mktemp("trainkit-state")))
        yield


def _cpu_s() -> float:
    """CPU seconds of this process, of the children it has waited for, and of its live
    descendants (a session's moto server, sshd hosts) with what they waited for: proc(5)'s
    utime + stime + cutime + cstime. A descendant that ends meanwhile moves from the last term
    into its parent's, so a difference of two readings is what ran in between."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    children, ticks = {}, {}
    # os.listdir, not Path.glob: a glob stats each entry as it goes, and raised ProcessLookupError
    # for a process that ended between the listing and the stat (seen once in .ci/run)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = Path("/proc", name, "stat").read_text().rsplit(")", 1)[1].split()   # after "pid (comm)"
        except (OSError, IndexError):   # it ended meanwhile
            continue
        pid = int(name)
        children.setdefault(int(fields[1]), []).append(pid)
        ticks[pid] = sum(int(f) for f in fields[11:15])
    mine, todo = [], [os.getpid()]
    while todo:
        kids_of = children.get(todo.pop(), [])
        mine += kids_of
        todo += kids_of
    return total + sum(ticks[p] for p in mine) / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With TRAINKIT_TEST_CPU_LOG=FILE, append {"test", "cpu_s", "wall_s"} per test (its fixtures'
    setup and teardown included) to FILE: `make test` on 2 cores is bound by CPU, not by waits
    (measured: 96-100% busy through the process tiers), so CPU seconds, not --durations' wall
    seconds, say which tests to make cheaper."""
    log = os.environ.get("TRAINKIT_TEST_CPU_LOG")
    if not log:   # no /proc walk per test unless asked
        yield
        return
    cpu, wall = _cpu_s(), time.monotonic()
    yield
    with open(log, "a") as f:
        f.write(json.dumps({"test": item.nodeid, "cpu_s": round(_cpu_s() - cpu, 1),
                            "wall_s": round(time.monotonic() - wall, 1)}) + "\n")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile`, longest chains first (xdist_groups.py)."""
    if config.getvalue("dist") == "loadfile":
        from xdist_groups import LongestFirstScheduling

        return LongestFirstScheduling(config, log)
    return None


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def tf_cli_config(tmp_path_factory) -> Path:
    """A Terraform CLI config using the machine's offline hashicorp/aws mirror and the provider
    stand-ins of the three seed clouds (tests/standin/mirror.py).

    The mirror root comes from TRAINKIT_TF_MIRROR, else it is discovered on disk (the folder
    two levels above `registry.terraform.io/hashicorp/aws`). Sets TF_CLI_CONFIG_FILE for the session.
    """
    mirror = os.environ.get("TRAINKIT_TF_MIRROR") or _find_mirror()
    assert mirror, ("no offline terraform provider mirror found: set TRAINKIT_TF_MIRROR to the folder "
                    "that holds registry.terraform.io/hashicorp/aws")
    folder = tmp_path_factory.mktemp("tfcli")
    path, cache = folder / "terraformrc", folder / "plugin-cache"
    cache.mkdir()
    # The three seed clouds' providers are the schema-served stand-ins (tests/standin), installed
    # under their real source addresses from a mirror of launchers made for this session.
    standins = standin_mirror.install(folder / "standin-mirror")
    excluded = ", ".join(f'"{a}"' for a in ["registry.terraform.io/hashicorp/*", *standin_mirror.direct_excludes()])
    # One provider copy for the session, linked into each stack's .terraform (init copied the
    # 675 MB aws provider every time). Lock files written here hold only this platform's hash.
    path.write_text(
        f'plugin_cache_dir = "{cache}"\nplugin_cache_may_break_dependency_lock_file = true\n'
        "disable_checkpoint = true\n"
        "provider_installation {\n"
        f'  filesystem_mirror {{\n    path    = "{mirror}"\n'
        '    include = ["registry.terraform.io/hashicorp/*"]\n  }\n'
        + standin_mirror.mirror_block(standins) +
        f'  direct {{\n    exclude = [{excluded}]\n  }}\n}}\n')
    os.environ["TF_CLI_CONFIG_FILE"] = str(path)
    os.environ["CHECKPOINT_DISABLE"] = "1"
    # terraform run by the tests themselves gets the GC target trainkit runs it with
    os.environ.setdefault("GOGC", terraform.GOGC)
    return path


def _find_mirror() -> str | None:
    for base in ("/opt", "/usr/share", "/usr/local/share", "/root", "/var/lib"):
        for hit in Path(base).glob("**/registry.terraform.io/hashicorp/aws") if Path(base).exists() else []:
            return str(hit.parent.parent.parent)
    return None


@pytest.fixture(scope="session")
def terraform_bin() -> str:
    path = shutil.which("terraform")
    assert path, "terraform is not on PATH (.ci/run checks for it)"
    return path


@contextlib.contextmanager
def running_moto() -> Iterator[str]:
    """A real moto server (the AWS API emulator) on a free 127.0.0.1 port; yields its base URL.

    Stands in for AWS, which cannot be reached from here. Killed when the block ends.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120  # its imports take seconds, many more on a loaded machine
        while True:
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=1)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def moto_server():
    with running_moto() as url:
        yield url


# The emulator's dummy keys: set in the environment like real keys (custom `endpoints:` read
# credentials from the environment; nothing is written into the rendered files).
MOTO_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}


@pytest.fixture
def moto(moto_server, monkeypatch):
    """The moto server, reset to empty before the test; its dummy keys set in the environment."""
    urllib.request.urlopen(urllib.request.Request(moto_server + "/moto-api/reset", method="POST"), timeout=5)
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    for name, value in MOTO_ENV.items():
        monkeypatch.setenv(name, value)
    return moto_server


# ---------------------------------------------------------------- cloud price API stand-ins
# The clouds' price APIs cannot be reached from the test machines; each adapter test points the
# cloud's official SDK at this server on 127.0.0.1 (through the SDK's endpoint setting), which
# answers with the response shape from the API's documentation.

@contextlib.contextmanager
def running_price_stub(answer: Callable[[dict], dict]) -> Iterator[tuple[str, list[dict]]]:
    """Serve `answer(request) -> JSON dict` (or `(HTTP status, JSON dict)` for an API error);
    yields (base URL, list of requests seen).

    A request is {method, path, query, headers, body (parsed JSON or form, else text)}.
    """
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def _serve(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            url = urlparse(self.path)
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {k: v[0] for k, v in parse_qs(raw).items()}
            req = {"method": self.command, "path": url.path,
                   "query": {k: v[0] for k, v in parse_qs(url.query).items()},
                   "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
            seen.append(req)
            got = answer(req)
            status, body = got if isinstance(got, tuple) else (200, got)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _serve

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def range_http(tmp_path):
    """A 127.0.0.1 file server with HTTP Range support over tmp_path/www; yields (folder, base URL)."""
    from http_range import serve

    www = tmp_path / "www"
    www.mkdir()
    server, url = serve(www)
    try:
        yield www, url
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def price_stub():
    """`with price_stub(answer) as (url, requests_seen):` a local price API stand-in."""
    return running_price_stub


@pytest.fixture
def s3_data(moto, monkeypatch):
    """The moto S3 server with bucket `data` holding a multi-object prefix (`set/`) and a 5 MiB
    object (`big.bin`, fetched in ranges). Yields (boto3 client, {key: bytes})."""
    import boto3

    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": moto}.items():
        monkeypatch.setenv(key, value)
    client = boto3.client("s3", endpoint_url=moto, region_name="us-east-1")
    client.create_bucket(Bucket="data")
    blobs = {"set/a.txt": b"alpha\n" * 1000, "set/b.txt": b"beta\n" * 3000,
             "set/sub/c.bin": os.urandom(70_000), "big.bin": os.urandom(5 * 2**20 + 123)}
    for key, body in blobs.items():
        client.put_object(Bucket="data", Key=key, Body=body)
    yield client, blobs
