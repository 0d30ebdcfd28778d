"""Odd inputs, round two: what a workspace is (a folder trainkit made, never one guessed from file
names), paths judged after they are normalised, full-match grammars, one redaction rule for URLs,
one error boundary per outside library and prices files validated like specs. Each case goes
through the real CLI where a user would meet it and checks that nothing outside the test's own
temporary folder is created or deleted (the `outside_untouched` fixture)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_run import run_cli as run
from hypothesis import HealthCheck, given, settings  # noqa: F401  (used by the property tests below)
from hypothesis import strategies as st  # noqa: F401

from trainkit.errors import InputError
from trainkit.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "clusters"
PROPS = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture
def outside_untouched(tmp_path, monkeypatch):
    """Run the test in tmp_path/project with HOME at tmp_path/home. That nothing outside tmp_path
    is created or deleted (/, /opt, the real home, the repository) is checked for every unit test
    by tests/unit/conftest.py."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setenv("HOME", str(home))
    yield project


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# ---- 1. a workspace is a folder trainkit made ------------------------------------------------

@pytest.fixture
def users_folder(outside_untouched):
    """The user's own infra folder that also happens to hold a file named `lock`."""
    root = outside_untouched / "infra"
    for rel in ("lock", "terraform/main.tf", "ansible/site.yml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"the user's {rel}\n")
    return root


@pytest.mark.parametrize("command,spec", [("render", "aws.yaml"), ("destroy", "local.yaml"),
                                          ("apply", "local.yaml")])
def test_a_file_named_lock_does_not_make_a_folder_a_workspace(capsys, users_folder, command, spec):
    before = snapshot(users_folder)
    code, err = run(capsys, command, str(EXAMPLES / spec), "--workdir", str(users_folder),
                    *(["--yes"] if command != "render" else []))
    assert code == 2, err
    assert "were not written by trainkit" in err and "terraform" in err and "lock" in err
    assert snapshot(users_folder) == before


def test_user_files_later_put_in_a_workspace_are_named_and_kept_by_destroy(capsys, outside_untouched):
    ws = outside_untouched / "ws"
    code, err = run(capsys, "render", str(EXAMPLES / "aws.yaml"), "--workdir", str(ws))
    assert code == 0, err
    (ws / "notes.txt").write_text("mine\n")
    (ws / "terraform" / "extra.tf").write_text("# mine\n")
    (ws / "ssh" / "id_rsa").parent.mkdir(exist_ok=True)
    (ws / "ssh" / "id_rsa").write_text("mine\n")
    before = snapshot(ws)
    code, err = run(capsys, "destroy", str(EXAMPLES / "aws.yaml"), "--workdir", str(ws), "--yes")
    assert code == 2, err
    for name in ("notes.txt", "terraform/extra.tf", "ssh/id_rsa"):
        assert name in err, err
    assert "move them out" in err
    assert snapshot(ws) == before


def test_destroy_removes_only_what_trainkit_wrote(outside_untouched):
    from trainkit.stack.render import write_files

    ws = Workspace.for_cluster("demo", outside_untouched / "ws").ensure()
    write_files({"main.tf": "x", "modules/aws/main.tf": "y"}, ws.terraform_dir)
    (ws.terraform_dir / "terraform.tfstate").write_text("{}")
    (ws.terraform_dir / ".terraform" / "providers").mkdir(parents=True)
    ws.ssh_dir.mkdir()
    ws.ssh_private_key.write_text("k")
    (ws.runs_dir / "r1").mkdir(parents=True)
    ws.review_md.write_text("review")
    ws.outputs_json.write_text("{}")
    ws.remove_cluster_files()
    assert sorted(os.listdir(ws.root)) == [".trainkit-workspace", "review.md", "runs"]


def test_a_marker_naming_the_cluster_is_written_when_trainkit_makes_the_folder(outside_untouched):
    ws = Workspace.for_cluster("demo", outside_untouched / "new").ensure()
    assert ws.marker.read_text() == "demo\n"


@pytest.mark.parametrize("workdir", ["/", "/.", "//", "~", "~/", "..", ".", "../..", "{project}/../",
                                     "{project}/sub/.."])
def test_a_workdir_of_root_home_or_above_the_project_is_refused(capsys, outside_untouched, workdir):
    workdir = workdir.format(project=outside_untouched)
    code, err = run(capsys, "render", str(EXAMPLES / "aws.yaml"), "--workdir", workdir)
    assert code == 2, err
    assert f"--workdir {workdir}" in err and "a workspace must be a folder of its own" in err, err
    assert not (outside_untouched / "terraform").exists()


def test_a_workdir_through_a_symlink_to_home_is_refused(outside_untouched):
    link = outside_untouched / "link"
    link.symlink_to(outside_untouched.parent / "home")
    with pytest.raises(InputError) as err:
        Workspace.for_cluster("demo", link)
    assert "your home folder" in err.value.message


# ---- 2. paths are normalised before they are judged ------------------------------------------

def _hosts_spec(tmp_path: Path, extra: str) -> Path:
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: lab\ncloud: hosts\nssh: {user: ops}\nhosts: [{name: gpu-a, address: 10.0.0.1}]\n"
                    + extra)
    return spec


@pytest.mark.parametrize("field,yaml_text", [
    ("launch.root", "launch: {root: /./opt}\n"), ("launch.root", "launch: {root: //opt/}\n"),
    ("launch.root", "launch: {root: /opt/.}\n"), ("launch.root", "launch: {root: /usr//.}\n"),
    ("storage.data_disk.mount_point", "storage: {data_disk: {mount_point: //etc}}\n"),
    ("storage.data_disk.mount_point", "storage: {data_disk: {mount_point: /etc/.}}\n"),
    ("storage.nas.mount_point", "storage: {data_disk: {enabled: false}, nas: {mount_point: /./var/}}\n"),
])
def test_a_system_folder_spelled_another_way_is_refused(capsys, outside_untouched, field, yaml_text):
    code, err = run(capsys, "validate", str(_hosts_spec(outside_untouched, yaml_text)))
    assert code == 2, err
    assert field in err and "(= '/" in err, err


def test_a_path_is_kept_in_its_normal_spelling(outside_untouched):
    from trainkit.spec.schema import load_spec

    spec = load_spec(_hosts_spec(outside_untouched, "launch: {root: //srv//trainkit/./}\n"
                                 "storage: {data_disk: {mount_point: /data/}}\n"))
    assert spec.launch.root == "/srv/trainkit"
    assert spec.storage.data_disk.mount_point == "/data"


path_text = st.one_of(st.text(alphabet=st.sampled_from(list("/.abc-_ \n$")), max_size=24),
                      st.lists(st.sampled_from(["", ".", "..", "opt", "etc", "x"]), max_size=6).map("/".join))


@PROPS
@given(path_text)
def test_a_path_that_passes_is_normal_and_its_rules_hold_for_what_it_means(value):
    import posixpath

    from trainkit.util import grammar

    try:
        out = grammar.check_path(value)
    except ValueError:
        return
    assert out.startswith("/") and "//" not in out and out == grammar.check_path(out)
    assert out == "/" or not out.endswith("/")
    assert posixpath.normpath(out) == posixpath.normpath("/" + value.lstrip("/"))  # the same folder
    try:
        mount = grammar.check_mount_point(value)
    except ValueError:
        assert out in grammar.SYSTEM_DIRS
    else:
        assert mount not in grammar.SYSTEM_DIRS


# ---- 3. grammars match the whole value ----------------------------------------------------------

def _job(tmp_path: Path, text: str):
    from trainkit.runs import record

    cfg = tmp_path / "job.yaml"
    cfg.write_text(text)
    return record.load_job(cfg, ())


@pytest.mark.parametrize("text,field", [
    ('env: {"A\\n": "1"}\n', "env"), ('env: {"A\\nrm -rf /": "1"}\n', "env"),
    ('name: "digits\\n"\n', "name"), ('name: "digits\\necho x"\n', "name"),
    ('env: {A: "x\\0y"}\n', "env.A"), ("env: {A: " + "x" * 200_000 + "}\n", "env.A"),
])
def test_a_job_value_that_would_become_a_second_line_or_cannot_be_passed_is_refused(
        outside_untouched, text, field):
    with pytest.raises(InputError) as err:
        _job(outside_untouched, text)
    assert f"{field}" in err.value.message


env_key = st.text(alphabet=st.sampled_from(list("AZaz09_\n\r \t=-$;")), min_size=0, max_size=8)


@PROPS
@given(env_key)
def test_an_env_key_that_passes_is_one_shell_name(key):
    import re as regex

    from trainkit.runs import launch_keys

    try:
        out = launch_keys.env(Path("job.yaml"), {key: "1"})
    except InputError:
        return
    assert regex.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) and list(out) == [key] and "\n" not in key


@PROPS
@given(st.text(alphabet=st.sampled_from(list("az09._-\n/ ")), max_size=12))
def test_a_run_name_that_passes_is_one_word(name):
    from trainkit.runs import record

    if record.NAME_RE.fullmatch(name):
        assert "\n" not in name and "/" not in name and " " not in name and name


@pytest.mark.parametrize("run_id", ["", " ", "a/b"])
def test_an_empty_or_path_run_id_is_a_usage_error(outside_untouched, run_id):
    from trainkit.runs import record

    runs = outside_untouched / "runs"
    (runs / "only-1").mkdir(parents=True)
    (runs / "only-1" / "run.json").write_text('{"run_id": "only-1", "attempts": []}')
    with pytest.raises(InputError) as err:
        record.resolve_run(runs, run_id)
    assert err.value.exit_code == 2 and "not a run id" in err.value.message


@pytest.mark.parametrize("folder", ["my ws", "tab\tws", "100%ws"])
def test_a_workdir_with_a_space_is_one_known_hosts_file_for_ssh(outside_untouched, folder):
    import shlex

    from trainkit.provision.inventory import _proxy_command, _ssh_args

    known = outside_untouched / folder / "ssh" / "known_hosts"
    if "\t" in folder:
        with pytest.raises(InputError):
            _ssh_args(None, known)
        return
    args = shlex.split(_ssh_args(None, known))
    value = next(a for a in args if a.startswith("UserKnownHostsFile="))
    # ssh's own parser (argv_split in misc.c) reads a double-quoted value as one file
    assert shlex.split(value.removeprefix("UserKnownHostsFile=")) == [str(known).replace("%", "%%")]
    hop = shlex.split(shlex.split(_proxy_command("ops", "10.0.0.1", "/k", known))[1].removeprefix("ProxyCommand="))
    assert f'UserKnownHostsFile="{str(known).replace("%", "%%%%")}"' in hop


# ---- 4. one redaction rule for URLs -------------------------------------------------------------

PLANTED = ("PLANTPASS1", "PLANTSIG2", "PLANTCRED3", "PLANTKEY4", "PLANTSECRET5", "PLANTTOKEN6",
           "PLANTOSS7", "PLANTOSSSIG8")
STAGING_URLS = [
    "https://bob:PLANTPASS1@127.0.0.1:9/x.tar?X-Amz-Signature=PLANTSIG2&X-Amz-Credential=PLANTCRED3",
    "s3://PLANTKEY4:PLANTSECRET5@bucket/x",
    "https://127.0.0.1:9/x.bin?X-Amz-Security-Token=PLANTTOKEN6&part=1",
    "oss://bucket/o?OSSAccessKeyId=PLANTOSS7&Expires=1&Signature=PLANTOSSSIG8",
    "ftp://u:PLANTPASS1@h/x",
    "https://127.0.0.1:9/a b.tar?Signature=PLANTSIG2",
]


@pytest.mark.parametrize("url", STAGING_URLS)
@pytest.mark.parametrize("debug", [None, "0"])
def test_credentials_planted_in_a_staging_url_appear_in_no_output(capsys, caplog, monkeypatch,
                                                                  outside_untouched, url, debug):
    from trainkit.cli import main

    if debug is None:
        monkeypatch.delenv("TRAINKIT_DEBUG", raising=False)
    else:
        monkeypatch.setenv("TRAINKIT_DEBUG", debug)
    monkeypatch.setenv("OSS_REGION", "cn-hangzhou")
    spec = outside_untouched / "data.yaml"
    spec.write_text(f"data:\n  sources:\n    - {{url: {url!r}, endpoint: 'http://127.0.0.1:9'}}\n")
    with pytest.raises(SystemExit) as exc:
        main(["stage", str(spec), "--root", str(outside_untouched / "data")])
    out = capsys.readouterr()
    everything = out.out + out.err + caplog.text
    assert exc.value.code != 0 and "***" in everything, everything
    for secret in PLANTED:
        assert secret not in everything, everything
    assert "Traceback" not in everything


@pytest.mark.parametrize("url,expected", [
    ("https://u:p@h/x?a=1", "https://***@h/x?a=1"),
    ("https://token@h/x", "https://***@h/x"),
    ("https://h/x?X-Amz-Signature=s&X-Amz-Credential=c&X-Amz-Date=d",
     "https://h/x?X-Amz-Signature=***&X-Amz-Credential=***&X-Amz-Date=d"),
    ("oss://b/o?OSSAccessKeyId=a&Signature=s&Expires=9", "oss://b/o?OSSAccessKeyId=***&Signature=***&Expires=9"),
    ("https://h/plain/path", "https://h/plain/path"),
])
def test_redact_url_masks_userinfo_and_signature_parameters(url, expected):
    from trainkit.redact import redact_url

    assert redact_url(url) == expected


secret_text = st.text(alphabet=st.sampled_from(list("abcXYZ019")), min_size=6, max_size=12)


@PROPS
@given(secret=secret_text, where=st.sampled_from(["user", "password", "X-Amz-Signature", "Signature",
                                                   "X-Amz-Credential", "OSSAccessKeyId", "x-oss-security-token"]),
       scheme=st.sampled_from(["https", "http", "s3", "oss", "cos", "obs"]),
       around=st.sampled_from(["{}", "error: {}: boom", "'{}'", "({})", "data source {!r}"]))
def test_a_planted_secret_never_survives_redaction(secret, where, scheme, around):
    from trainkit.redact import redact

    secret = "S3CR" + secret
    if where == "user":
        url = f"{scheme}://{secret}@host/p"
    elif where == "password":
        url = f"{scheme}://bob:{secret}@host/p"
    else:
        url = f"{scheme}://host/p?a=1&{where}={secret}&b=2"
    shown = redact(around.format(url))
    assert secret not in shown and "host/p" in shown


# ---- 5. one error boundary per outside library --------------------------------------------------

@pytest.fixture
def header_server():
    """An HTTP server whose HEAD reply sends the Content-Length header the test sets (None: none)."""
    import http.server
    import threading

    state = {"length": None}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args):
            pass

        def do_HEAD(self):
            self.send_response(200)
            if state["length"] is not None:
                self.send_header("Content-Length", state["length"])
            self.end_headers()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}/file.bin"
    server.shutdown()


@pytest.mark.parametrize("length,words", [(None, "no Content-Length"), ("-5", "'-5'"),
                                          (str(10**18), "not a size"), ("12abc", "not a size")])
def test_a_bad_content_length_is_named(capsys, outside_untouched, header_server, length, words):
    state, url = header_server
    state["length"] = length
    spec = outside_untouched / "data.yaml"
    spec.write_text(f"data: {{sources: [{{url: '{url}'}}]}}\n")
    code, err = run(capsys, "stage", str(spec), "--root", str(outside_untouched / "data"))
    assert code != 0 and url in err and words in err and "fix:" in err, err
    assert not (outside_untouched / "data").exists() or not any((outside_untouched / "data").rglob("*.part"))


@pytest.mark.parametrize("yaml_text,field", [
    ("{url: 's3://bucket/x', endpoint: 'not a url'}", "endpoint"),
    ("{url: 's3://bucket/x', endpoint: 'ftp://h'}", "endpoint"),
    ("{url: 'https://h/a b.tar'}", "url"),
    ("{url: \"https://h/a\\tb\"}", "url"),
])
def test_a_source_url_or_endpoint_that_is_not_a_url_is_named(capsys, outside_untouched, yaml_text, field):
    spec = outside_untouched / "data.yaml"
    spec.write_text(f"data: {{sources: [{yaml_text}]}}\n")
    code, err = run(capsys, "stage", str(spec), "--root", str(outside_untouched / "data"))
    assert code == 2 and f"data.sources.0.{field}" in err, err


def test_an_unreachable_endpoint_is_named_not_an_internal_error(monkeypatch):
    pytest.importorskip("boto3")
    from trainkit import clouds
    from trainkit.staging.stores import S3Store

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    store = S3Store("s3://bucket/x", clouds.get("aws"), "http://127.0.0.1:9", "us-east-1")
    store.client.meta.config.retries = {"max_attempts": 0}
    from trainkit.errors import TrainkitError

    with pytest.raises(TrainkitError) as err:
        store.read("x", 0, 9)
    assert "data source s3://bucket/x" in err.value.message and err.value.fix


def _tar(path: Path, members: list) -> None:
    import io
    import tarfile

    with tarfile.open(path, "w") as t:
        for name, kind, target in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = 3
                t.addfile(info, io.BytesIO(b"abc"))
            else:
                info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
                info.linkname = target
                t.addfile(info)


class _OneFile:
    """A store that serves one local file (the archive under test)."""

    def __init__(self, path: Path):
        from trainkit.staging.stores import Remote

        self.path, self.remote = path, Remote(path.name, path.name, path.stat().st_size, None)

    def list(self):
        return [self.remote]

    def read(self, key, start, end):
        return self.path.read_bytes()[start:end + 1]


@pytest.mark.parametrize("kind,members", [
    ("tar-dotdot", [("../escaped.txt", "file", None)]),
    ("tar-abs-symlink", [("link", "symlink", "/etc/passwd")]),
    ("tar-hardlink-out", [("hard", "hardlink", "../../outside")]),
    ("zip-dotdot", [("../escaped.txt", "file", None)]),
    ("tar-corrupt", []),
])
def test_an_unsafe_or_broken_archive_is_named_and_nothing_escapes(outside_untouched, kind, members):
    """(An absolute member name is not in the list: tarfile's data filter unpacks it inside.)"""
    import zipfile

    from trainkit.staging.fetch import StageError, stage
    from trainkit.staging.section import load_section

    src_dir = outside_untouched / "src"
    src_dir.mkdir()
    archive = src_dir / ("a.zip" if kind.startswith("zip") else "a.tar")
    if kind.startswith("zip"):
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr(members[0][0], "abc")
    elif kind == "tar-corrupt":
        archive.write_bytes(b"not a tar at all" * 64)
    else:
        _tar(archive, members)
    root = outside_untouched / "data"
    before = set(outside_untouched.rglob("*"))
    section = load_section({"sources": [{"url": "https://h/" + archive.name, "name": "ds"}]})
    with pytest.raises(StageError) as err:
        stage(section, root, store_factory=lambda *a: _OneFile(archive))
    assert str(root / "ds" / archive.name) in err.value.message and err.value.fix
    after = set(outside_untouched.rglob("*"))
    assert {p for p in after - before if p != root and root not in p.parents} == set()  # nothing outside the data root
    assert not any(p.name.startswith(".unpack-") for p in after)


@pytest.mark.parametrize("value,on", [("1", True), ("true", True), ("YES", True), ("0", False),
                                      ("no", False), ("false", False), ("", False)])
def test_trainkit_debug_is_on_only_for_1_true_yes(monkeypatch, capsys, value, on):
    from trainkit import cli

    monkeypatch.setenv("TRAINKIT_DEBUG", value)
    if on:
        with pytest.raises(RuntimeError):
            cli._as_error(RuntimeError("boom"))
    else:
        err, show = cli._as_error(RuntimeError("boom"))
        show()
        assert err.exit_code == 1 and "internal error: RuntimeError: boom" in capsys.readouterr().err


def test_a_seed_past_64_bits_is_refused_at_validate(capsys, outside_untouched):
    code, err = run(capsys, "validate", "--config", "digits", f"seed={2**64}")
    assert code == 2 and "seed:" in err, err


ROOM_FIXTURE = REPO / "tests" / "unit" / "fixtures" / "fifth-cloud"


@pytest.mark.parametrize("text", ["regions: [\n", "regions: north-1\n", "- a\n", "regions: {north-1: 5}\n",
                                  "source: x\n"])
def test_a_broken_regions_file_in_a_room_is_named(capsys, outside_untouched, monkeypatch, text):
    import shutil

    from trainkit import clouds

    rooms = outside_untouched / "rooms"
    shutil.copytree(ROOM_FIXTURE, rooms / "fifthcloud")
    (rooms / "fifthcloud" / "regions.yaml").write_text(text)
    monkeypatch.setenv(clouds.PATH_VARIABLE, str(rooms))
    clouds._external.cache_clear()
    spec = outside_untouched / "c.yaml"
    spec.write_text("name: five\ncloud: fifthcloud\nregion: north-1\nzone: north-1b\n"
                    "instance: {gpu: A100}\nnetwork: {admin_cidrs: [203.0.113.0/24]}\n")
    try:
        code, err = run(capsys, "validate", str(spec))
    finally:
        clouds._external.cache_clear()
    assert code == 2 and str(rooms / "fifthcloud" / "regions.yaml") in err, err


# ---- 6. price files are validated like specs ----------------------------------------------------

@pytest.mark.parametrize("head,words", [
    ("currency: {code: USD}\n", "currency: must be an ISO 4217 code"),
    ("currency: usd\n", "currency: must be an ISO 4217 code"),
    ("currency: 840\n", "currency: must be an ISO 4217 code"),
    ("currency: EUR\n", "currency: EUR, but the aws catalog's prices are in USD"),
    ("source: [a, b]\n", "source: must be text"),
])
def test_a_price_file_header_is_checked(capsys, outside_untouched, head, words):
    prices = outside_untouched / "prices.yaml"
    prices.write_text(head + "prices:\n  g5.12xlarge: {on_demand: 5.6}\n")
    code, err = run(capsys, "catalog", "--cloud", "aws", "--prices", str(prices), "--json")
    assert code == 2 and str(prices) in err and words in err and "fix:" in err, err


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "-1", "'5'", "true", "[1]"])
def test_a_price_that_is_not_a_finite_number_at_least_zero_is_refused(capsys, outside_untouched, value):
    prices = outside_untouched / "prices.yaml"
    prices.write_text(f"currency: USD\nprices:\n  g5.12xlarge: {{on_demand: {value}}}\n")
    code, err = run(capsys, "catalog", "--cloud", "aws", "--prices", str(prices))
    assert code == 2 and "prices.g5.12xlarge.on_demand" in err, err


def test_an_unquoted_date_in_a_price_file_prints_as_json(capsys, outside_untouched):
    import json

    prices = outside_untouched / "prices.yaml"
    prices.write_text("currency: USD\ndate: 2024-05-01\nprices:\n  g5.12xlarge: {on_demand: 5.6}\n")
    from trainkit.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["catalog", "--cloud", "aws", "--prices", str(prices), "--json"])
    out = capsys.readouterr()
    assert exc.value.code == 0, out.err
    rows = json.loads(out.out)
    assert "2024-05-01" in {r["price_date"] for r in rows}


@PROPS
@given(st.recursive(st.one_of(st.floats(), st.integers(), st.text(max_size=4), st.none()),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(st.text(max_size=3), inner, max_size=3)),
                    max_leaves=10))
def test_json_output_is_strict_json_whatever_the_numbers(value):
    import json

    from trainkit.commands.options import dump_json

    text = dump_json(value)  # a key may be the text "NaN": only a bare constant is non-standard
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard constant {c}"))


# ---- 7. clear messages --------------------------------------------------------------------------

HOSTS_HEAD = "name: lab\ncloud: hosts\nssh: {user: ops}\nstorage: {data_disk: {enabled: false}}\n"


@pytest.mark.parametrize("body,words", [
    ("hosts: [{name: a, address: '2001:db8::1'}, {name: b, address: '2001:0db8:0:0::1'}]\n",
     "hosts[1].address: 2001:0db8:0:0::1:22 is also hosts[0]"),
    ("hosts: [{name: a, address: 10.0.0.1}, {name: b, address: 10.0.0.2}]\ntags: {on: x}\n",
     "key 'on' is read as the boolean true (YAML 1.1)"),
    ("hosts: [{name: a, address: 10.0.0.1, port: 0022}]\n", "0022 is read as 18 (a YAML 1.1 octal number)"),
    ("hosts: [{name: a, address: 10.0.0.1, port: 1:30}]\n", "1:30 is read as 90 (a YAML 1.1 base-60 number)"),
    ("hosts: [{name: a, address: 10.0.0.1}]\nnetwork: {admin_cidrs: 10.0.0.0/8}\n", "expected a list"),
])
def test_a_yaml_or_address_trap_gets_a_clear_message(capsys, outside_untouched, body, words):
    spec = outside_untouched / "spec.yaml"
    spec.write_text(HOSTS_HEAD + body)
    code, err = run(capsys, "validate", str(spec))
    assert code == 2 and words in err, err
    assert "[key]" not in err


@pytest.mark.parametrize("ttl", ["0.5m", "0.01h", "0.0001d"])
def test_a_ttl_under_a_minute_is_refused_not_taken_as_no_ttl(capsys, outside_untouched, ttl):
    spec = outside_untouched / "spec.yaml"
    spec.write_text(f"name: lab\ncloud: aws\nregion: us-east-1\nzone: us-east-1a\n"
                    f"network: {{admin_cidrs: [203.0.113.0/24]}}\nttl: {ttl}\n")
    code, err = run(capsys, "validate", str(spec))
    assert code == 2 and "under a minute" in err, err


def test_a_string_where_a_list_is_expected_is_named_not_read_by_character(outside_untouched):
    with pytest.raises(InputError) as err:
        _job(outside_untouched, "name: job\ncommand: echo hi\nexcludes: '*.pt'\n")
    assert "excludes: expected a list" in err.value.message and "['*.pt']" in err.value.fix


def test_quoted_yaml_11_lookalikes_are_kept_as_text():
    from trainkit.util import yamlload

    assert yamlload.load_text("'on': '0022'\nb: '1:30'\nc: 22\nd: 0x1F\ne: 0\nf: [1, -3]\n") == {
        "on": "0022", "b": "1:30", "c": 22, "d": 31, "e": 0, "f": [1, -3]}


@PROPS
@given(st.sampled_from(["2001:db8::1", "10.0.0.1", "fe80::1", "::ffff:10.0.0.1"]), st.data())
def test_one_ip_in_any_spelling_is_one_host(ip, data):
    import ipaddress

    from trainkit.util import grammar

    addr = ipaddress.ip_address(ip)
    spelling = data.draw(st.sampled_from([str(addr), addr.exploded, addr.exploded.upper(), str(addr).upper()]))
    assert grammar.address_key(spelling) == grammar.address_key(ip)


@PROPS
@given(st.integers(min_value=0, max_value=99999), st.integers(min_value=1, max_value=3))
def test_a_number_with_leading_zeros_is_refused_or_read_as_written(n, zeros):
    from trainkit.util import yamlload

    text = "0" * zeros + str(n)
    try:
        value = yamlload.load_text(f"port: {text}\n")["port"]
    except InputError as err:
        assert "YAML 1.1" in err.message
    else:
        assert str(value) == text or value == text  # never a silently different number


def test_the_users_group_vars_may_be_put_in_a_folder_before_it_is_a_workspace(tmp_path, outside_untouched):
    """docs/hosts.md: group_vars/all.yml (or host_vars/) in the workspace folder before the first apply."""
    from trainkit.workspace import Workspace

    ws = Workspace.for_cluster("lab", tmp_path / "ws")
    (ws.root / "group_vars").mkdir(parents=True)
    (ws.root / "group_vars" / "all.yml").write_text("base_packages: []\n")
    assert ws.foreign_files() == []
    ws.ensure()
    assert ws.owner() == "lab" and (ws.root / "group_vars" / "all.yml").read_text() == "base_packages: []\n"
    (ws.root / "notes.txt").write_text("mine\n")
    assert ws.foreign_files() == ["notes.txt"]
