"""Every argv trainkit builds for a process on a node hands each value over as that value, never as
an option: property tests (hypothesis) build each one from arbitrary text, then parse it with the
very parser the node process uses (the supervisor's, the doctor probe's, the bench's, torchrun's and
`trainkit run`'s) and get the value back. A --notice-url is an http(s) URL with a host or exit 2."""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
from pathlib import Path

import pytest
from cli_run import run_cli as run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainkit.errors import InputError
from trainkit.provision.node import Node, Paths
from trainkit.runs import launch, remote
from trainkit.util.nodeargs import http_url

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
OPTIONISH = st.sampled_from(["--help", "-h", "--", "-", "--notice-url=x", "--hard-stop", "-oProxyCommand=x"])
TEXT = st.one_of(OPTIONISH, st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                                    min_size=1, max_size=40))
HOST = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z]{2,6})?", fullmatch=True)
URL = st.builds(lambda scheme, host, port, path: f"{scheme}://{host}{port}/{path}",
                st.sampled_from(["http", "https"]), HOST, st.sampled_from(["", ":80", ":8080"]),
                st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=30))
PATH = st.builds(lambda t: "/" + t, st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30))


def words(script: str) -> list[str]:
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    return list(lexer)


@FAST
@given(url=st.one_of(URL, TEXT))
def test_the_supervisor_reads_back_the_notice_url_it_was_given_or_trainkit_refuses_it(url):
    from trainkit.node import supervise

    node, lay = Node("n0", 0), remote.Layout(work="/w", root="/r", run_id="r1")
    try:
        script = launch.start_script(node, lay, 1, url, 5.0, True)
    except InputError as err:
        assert err.exit_code == 2 and f"--notice-url {url!r}: not an http:// or https:// URL" in err.message
        return
    argv = words(script)
    start = argv.index(f"{lay.node_dir(0)}/supervise.py") + 1
    args, job = supervise.parse(argv[start:argv.index("--", start) + 3])
    assert args.notice_url == url and args.state_file == lay.state_file(0, 1)
    assert job == ["bash", f"{lay.node_dir(0)}/launch.sh"]


@FAST
@given(work=PATH, run_id=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True))
def test_the_supervisor_reads_back_its_files_wherever_the_run_lives(work, run_id):
    from trainkit.clouds import get
    from trainkit.node import supervise

    aws = get("aws")
    node, lay = Node("n0", 2), remote.Layout(work=work, root="/r", run_id=run_id)
    argv = words(launch.start_script(node, lay, 3, aws.spot_notice_url, 5.0, False, aws.spot_notice_token))
    start = argv.index(f"{lay.node_dir(2)}/supervise.py") + 1
    args, _ = supervise.parse(argv[start:argv.index("--", start) + 3])
    assert (args.state_file, args.status_file, args.exit_file) == (
        lay.state_file(2, 3), f"{lay.node_dir(2)}/status", lay.exit_file(2, 3))
    assert (args.notice_token_url, args.notice_ttl_header) == (aws.spot_notice_token.url,
                                                               aws.spot_notice_token.ttl_header)


@FAST
@given(url=URL)
def test_an_http_url_with_a_host_is_accepted_as_written(url):
    assert http_url(url, "--notice-url") == url


@pytest.mark.parametrize("url", ["--help", "-h", "", "ftp://h/x", "http://", "http:///x", "http://h x/",
                                 "169.254.169.254/latest", "http://h:99999/", "javascript:alert(1)"])
def test_a_notice_url_that_is_not_http_with_a_host_is_refused(url):
    with pytest.raises(InputError) as err:
        http_url(url, "--notice-url")
    assert err.value.exit_code == 2 and "--notice-url" in err.value.message and "http://" in err.value.fix


def test_train_refuses_a_notice_url_that_is_an_option_before_anything_starts(capsys, repo, tmp_path):
    code, err = run(capsys, "train", str(repo / "examples/clusters/local.yaml"), "--workdir", str(tmp_path / "ws"),
                    "--notice-url=--help", "--detach")
    assert code == 2, err  # it reached the supervisor's argv: no supervisor, the run "reclaimed" 70 s later
    assert "--notice-url '--help': not an http:// or https:// URL with a host" in err
    assert not (tmp_path / "ws" / "runs").exists()


@dataclasses.dataclass(frozen=True)
class Recorder(Node):
    """A node whose `sh` records the script and answers with one JSON line."""

    scripts: list = dataclasses.field(default_factory=list, compare=False)

    def sh(self, script, data=None, timeout=0):
        self.scripts.append(script)
        return subprocess.CompletedProcess([], 0, b'{"ok": true}\n', b"")


def _after_dash(script: str) -> list[str]:
    """The argv the node's Python gets: what follows `exec "$py" -`."""
    argv = words(script)
    at = max(i for i, w in enumerate(argv) if w == "$py" and argv[i + 1] == "-")
    return argv[at + 2:]


@FAST
@given(data=st.one_of(PATH, OPTIONISH), shared=st.one_of(PATH, OPTIONISH), tag=TEXT)
def test_the_doctor_probe_reads_back_its_paths_and_tag(data, shared, tag):
    from trainkit.cluster import doctor
    from trainkit.node import doctor_probe

    node = Recorder("n0", 0, paths=Paths(disk=data, shared_mount=shared))
    if "--" in (data, shared, tag):  # argparse drops `--x=--`' value: refused, never passed on
        with pytest.raises(ValueError):
            doctor.probe_node(node, tag)
        return
    doctor.probe_node(node, tag)
    args = doctor_probe.parser().parse_args(_after_dash(node.scripts[0]))
    assert (args.data, args.shared, args.tag, args.mark) == (data, shared, tag, "node-0")


@FAST
@given(size=st.integers(1, 2**40), iters=st.integers(1, 10**6), n=st.integers(1, 5))
def test_the_allreduce_bench_reads_back_its_numbers(size, iters, n):
    from trainkit.cluster import doctor
    from trainkit.node import allreduce_bench

    nodes = [Recorder(f"n{i}", i) for i in range(n)]
    doctor.run_bench(nodes, "gloo", size, iters)
    for node in nodes:
        args = allreduce_bench.parser().parse_args(_after_dash(node.scripts[0]))
        assert (args.backend, args.bytes, args.iters) == ("gloo", size, iters)


KEY = st.from_regex(r"[a-z_][a-z0-9_]{0,10}(\.[a-z_][a-z0-9_]{0,10}){0,2}", fullmatch=True)


@FAST
@given(overrides=st.lists(st.builds(lambda k, v: f"{k}={v}", KEY, st.one_of(OPTIONISH, TEXT)), max_size=4),
       work=PATH)
def test_torchrun_and_trainkit_run_read_back_every_override(overrides, work):
    from torch.distributed.run import get_args_parser

    from trainkit.commands.run import run as run_command

    job = launch.Job(name="digits", source=Path("digits.yaml"), engine_config={"epochs": 1},
                     overrides=tuple(overrides))
    nodes = [Node("n0", 0), Node("n1", 1)]
    lay = remote.Layout(work=work, root="/r", run_id="r1")
    argv = words(launch.launch_script(job, nodes[1], nodes, lay, 1).replace("$TRAINKIT_", "TRAINKIT_"))
    start = argv.index("torch.distributed.run") + 1
    argv = argv[start:argv.index("||", start)]
    torchrun = get_args_parser().parse_args(argv)
    assert torchrun.training_script == "trainkit" and torchrun.training_script_args[0] == "run"
    ctx = run_command.make_context("run", list(torchrun.training_script_args[1:]))
    assert ctx.params["config"] == f"{lay.node_dir(1)}/config.yaml"
    assert list(ctx.params["overrides"]) == [f"run_dir={lay.run_dir}", f"checkpoint.dir={lay.checkpoint_dir}",
                                             "resume=true", *overrides]


@FAST
@given(item=st.one_of(TEXT, st.builds(lambda t: t + "=1", TEXT)))
def test_an_override_key_that_is_not_dotted_names_is_refused(tmp_path_factory, item):
    from trainkit.runs.record import load_job
    from trainkit.train.config import LAUNCH_KEYS

    config = tmp_path_factory.getbasetemp() / "override-config.yaml"
    config.write_text("epochs: 1\n")
    key, sep, _ = item.partition("=")
    dotted = bool(sep) and all(p.isascii() and p and all(c.isalnum() or c == "_" for c in p) for p in key.split("."))
    try:
        job = load_job(config, [item])
    except InputError as err:
        launch_key = dotted and key.split(".")[0] in LAUNCH_KEYS
        assert f"override {item!r}" in err.message and (launch_key or not dotted), err.message
        return
    assert dotted and job.overrides == (item,)


@FAST
@given(work=st.one_of(PATH, OPTIONISH), data=st.one_of(PATH, OPTIONISH))
def test_the_top_sampler_reads_back_its_paths(work, data):
    from trainkit.cluster import top

    node = Recorder("n0", 0, address="h", user="u", python="/opt/py", paths=Paths(work_dir=work, disk=data))
    top.sample_node(node, 1.0)
    argv = words(node.scripts[-1])
    assert argv[:2] == ["/opt/py", "-"] and argv[2:5] == [work, data, "1.0"]  # positional, after `-`


@FAST
@given(work=PATH, attempt=st.integers(1, 10**6))
def test_the_hard_stop_reads_back_the_state_file(work, attempt):
    from trainkit.node import supervise

    node, lay = Recorder("n0", 1), remote.Layout(work=work, root="/r", run_id="r1")
    remote.signal_nodes([node], lay, attempt, "KILL")
    argv = words(node.scripts[0])
    start = argv.index(f"{lay.node_dir(1)}/supervise.py") + 1
    args, _ = supervise.parse(argv[start:argv.index("2>/dev/null", start)])
    assert args.hard_stop and args.state_file == lay.state_file(1, attempt)
