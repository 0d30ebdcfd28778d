"""The corpus of bad inputs: specs, hosts entries, key files and train configs. Each goes through the
real CLI entry point (`trainkit validate`), exits 2, names its field (or file) and prints no
traceback. Issue #9 lists most of these; every one used to be accepted or to crash with exit 1."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from trainkit.cli import main

HOSTS = {"name": "lab", "cloud": "hosts", "ssh": {"user": "ops"},
         "storage": {"data_disk": {"enabled": False}},
         "hosts": [{"name": "a", "address": "10.0.0.1"}, {"name": "b", "address": "10.0.0.2"}]}
LOCAL = {"name": "local-demo", "cloud": "local", "storage": {"data_disk": {"enabled": False}}}
ALI = {"name": "demo", "cloud": "alicloud", "region": "cn-hangzhou", "zone": "cn-hangzhou-i",
       "instance": {"type": "ecs.gn7i-c8g1.2xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]}}
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))
PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"


def merged(base: dict, path: str, value) -> dict:
    """A deep copy of `base` with `path` (dots, [i] for list items) set to `value`."""
    out = yaml.safe_load(yaml.safe_dump(base))
    node, parts = out, path.split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        key = int(part[1:-1]) if part.startswith("[") else part
        if last:
            node[key] = value
        else:
            node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
    return out


def host(field: str, value) -> dict:
    return merged(HOSTS, f"hosts.[0].{field}", value)


# (id, spec dict or raw bytes/str, text that must appear in stderr: the field or file problem)
SPECS = [
    ("address-newline", host("address", "10.0.0.1\n10.0.0.9 evil"), "hosts[0].address"),
    ("private-ip-newline", host("private_ip", "10.0.0.1\n10.0.0.9 evil"), "hosts[0].private_ip"),
    ("address-ssh-option", host("address", "-oProxyCommand=touch /tmp/pwned"), "hosts[0].address"),
    ("address-semicolon", host("address", "a;rm -rf /"), "hosts[0].address"),
    ("address-subshell", host("address", "$(reboot)"), "hosts[0].address"),
    ("address-backtick", host("address", "`id`"), "hosts[0].address"),
    ("address-empty", host("address", ""), "hosts[0].address"),
    ("address-ipv6-zone", host("address", "fe80::1%eth0;id"), "hosts[0].address"),
    ("address-space", host("address", "gpu a"), "hosts[0].address"),
    ("address-non-ascii", host("address", "gpü.example.com"), "hosts[0].address"),
    ("address-long-label", host("address", "a" * 64 + ".example.com"), "hosts[0].address"),
    ("address-empty-label", host("address", "gpu..example.com"), "hosts[0].address"),
    ("address-quote", host("address", "gpu'a"), "hosts[0].address"),
    ("private-ip-two-words", host("private_ip", "10.0.0.1 extra"), "hosts[0].private_ip"),
    ("private-ip-control", host("private_ip", "10.0.0.1\x1b[2J"), "hosts[0].private_ip"),
    ("host-user-semicolon", host("user", "a;rm -rf /"), "hosts[0].user"),
    ("host-user-option", host("user", "-oProxyCommand=x"), "hosts[0].user"),
    ("ssh-user-semicolon", merged(HOSTS, "ssh.user", "root;id"), "ssh.user"),
    ("ssh-user-subshell", merged(HOSTS, "ssh.user", "$(id)"), "ssh.user"),
    ("ssh-user-space", merged(HOSTS, "ssh.user", "john smith"), "ssh.user"),
    ("ssh-user-newline", merged(HOSTS, "ssh.user", "ops\nroot"), "ssh.user"),
    ("ssh-user-too-long", merged(HOSTS, "ssh.user", "u" * 40), "ssh.user"),
    ("ssh-user-proxy-quote", merged(ALI, "ssh.user", "ops' -oProxyCommand='id"), "ssh.user"),
    ("duplicate-address", host("address", "10.0.0.2"), "hosts[1].address"),
    ("nas-size-on-hosts", merged(HOSTS, "storage.nas", {"enabled": True, "size_gb": 100}),
     "storage.nas.size_gb"),
    ("nas-on-local", merged(LOCAL, "storage.nas.enabled", True), "storage.nas.enabled"),
    ("data-on-a-missing-nas", merged(LOCAL, "data.target", "nas"), "data.target: nas"),
    ("python-relative", merged(LOCAL, "launch.python", "python3"), "launch.python"),
    ("python-semicolon", merged(LOCAL, "launch.python", "/usr/bin/python3; rm -rf /"), "launch.python"),
    ("python-subshell", merged(LOCAL, "launch.python", "/usr/bin/$(id)"), "launch.python"),
    ("root-space", merged(LOCAL, "launch.root", "/opt/train kit"), "launch.root"),
    ("root-dotdot", merged(LOCAL, "launch.root", "/opt/../etc"), "launch.root"),
    ("root-slash", merged(LOCAL, "launch.root", "/"), "launch.root"),
    ("root-system-dir", merged(LOCAL, "launch.root", "/usr"), "launch.root"),
    ("root-newline", merged(LOCAL, "launch.root", "/opt/x\n/etc"), "launch.root"),
    ("root-backtick", merged(LOCAL, "launch.root", "/opt/`id`"), "launch.root"),
    ("disk-mount-semicolon", merged(ALI, "storage.data_disk.mount_point", "/data;reboot"),
     "storage.data_disk.mount_point"),
    ("disk-mount-root", merged(ALI, "storage.data_disk.mount_point", "/"), "storage.data_disk.mount_point"),
    ("disk-mount-etc", merged(ALI, "storage.data_disk.mount_point", "/etc/"), "storage.data_disk.mount_point"),
    ("nas-mount-space", merged(ALI, "storage.nas.mount_point", "/mnt/sh ared"), "storage.nas.mount_point"),
    ("nas-mount-relative", merged(ALI, "storage.nas.mount_point", "mnt/shared"), "storage.nas.mount_point"),
    ("nas-mount-quote", merged(ALI, "storage.nas.mount_point", "/mnt/it's"), "storage.nas.mount_point"),
    ("key-path-subshell", merged(HOSTS, "ssh.private_key", "~/.ssh/$(id)"), "ssh.private_key"),
    ("key-path-percent", merged(HOSTS, "ssh.private_key", "/keys/%h"), "ssh.private_key"),
    ("subnet-ipv6-in-ipv4-vpc", merged(ALI, "network.subnet_cidr", "2001:db8::/64"), "network.subnet_cidr"),
    ("vpc-whole-internet", merged(ALI, "network.vpc_cidr", "0.0.0.0/0"), "network.vpc_cidr"),
    ("vpc-ipv6", merged(ALI, "network.vpc_cidr", "2001:db8::/56"), "network.vpc_cidr"),
    ("ssh-world-ipv6", merged(ALI, "network.admin_cidrs", ["::/0"]), "network.admin_cidrs"),
    ("ssh-world-two-halves", merged(ALI, "network.admin_cidrs", ["0.0.0.0/1", "128.0.0.0/1"]),
     "network.admin_cidrs"),
    ("duplicate-key", "name: demo\ncloud: local\nname: other\n", "line 3: duplicate key 'name' (first given on line 1)"),
    ("binary-file", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "binary file"),
    ("utf16-with-bom", "name: demo\ncloud: local\n".encode("utf-16"), "UTF-16"),
    ("utf16-no-bom", "name: demo\ncloud: local\n".encode("utf-16-le"), "UTF-16"),
    ("latin1", "name: démo\ncloud: local\n".encode("latin-1"), "line 1: byte 0xe9 is not UTF-8"),
    ("alias-bomb", "name: demo\ncloud: local\n" + BOMB, "aliases (*name) expand to more than"),
    ("recursive-alias", "name: demo\ncloud: local\ntags: &t {a: *t}\n", "recursive alias"),
    ("huge-file", "name: demo\ncloud: local\n" + "# padding\n" * 250_000, "bytes; at most"),
    ("junk-keys", "name: demo\ncloud: local\n" + "".join(f"junk{i}: {i}\n" for i in range(500)),
     "junk0: unknown field"),
    ("not-a-mapping", "- name: demo\n", "must be a YAML mapping"),
    ("nodes-true", "name: local-demo\ncloud: local\nnodes: true\n", "nodes: expected a number, got true"),
    ("host-port-true", host("port", True), "hosts[0].port: expected a number, got true"),
    ("disk-size-false", merged(ALI, "storage.data_disk.size_gb", False),
     "storage.data_disk.size_gb: expected a number, got false"),
    ("max-price-inf", merged(ALI, "spot", {"enabled": True, "max_price": float("inf")}),
     "spot.max_price: Input should be a finite number"),
    ("budget-nan", merged(ALI, "budget.max_per_hour", float("nan")), "budget.max_per_hour: Input should be a finite"),
    ("data-chunk-inf", merged(LOCAL, "data.chunk_mb", float("inf")), "data.chunk_mb: Input should be a finite"),
    *((f"name-{case}", merged(LOCAL, "name", name), f"name: {name!r} is not a valid name (3-30 lowercase")
      for case, name in [("emoji", "gpu-🚀"), ("uppercase", "MyCluster"), ("dotdot", "../x"), ("dot", "."),
                         ("leading-digit", "1abc"), ("underscore", "a_bc"), ("too-short", "ab"),
                         ("too-long", "a" * 31), ("trailing-dash", "abc-"), ("nul", "ab\x00c")]),
    ("ttl-overflow", merged(ALI, "ttl", "9" * 320 + "h"), "is more than 3650d; write the time you mean"),
    ("idle-eleven-years", merged(ALI, "idle", "4100d"), "idle: '4100d' is more than 3650d"),
    ("ttl-past-alibaba-max", merged(ALI, "ttl", "1100d"), "ttl: Alibaba Cloud releases an instance at most 1095 days"),
    ("host-name-path", host("name", "../../etc"), "hosts[0].name: '../../etc' is not a valid name (1-63"),
    ("storage-null", "name: local-demo\ncloud: local\nstorage: null\n",
     "storage: expected a mapping (key: value lines), got nothing (null)"),
    ("admin-cidrs-a-string", merged(ALI, "network.admin_cidrs", "203.0.113.0/24"),
     "network.admin_cidrs: expected a list ([a, b], or one '- item' per line), got '203.0.113.0/24'"),
    ("cloud-a-list", merged(LOCAL, "cloud", ["local"]), "cloud: expected text, got a list"),
    ("cloud-uppercase", merged(LOCAL, "cloud", "AWS"), "cloud: 'AWS' is not one of alicloud, tencentcloud, "
     "huaweicloud, aws, hosts, slurm, local; did you mean 'aws'?"),
    ("backend-region-unknown", merged(ALI, "backend", {"type": "oss", "bucket": "b", "region": "cn-hangzou"}),
     "backend.region: 'cn-hangzou' is not a region of Alibaba Cloud (did you mean cn-hangzhou"),
    ("tab-indent", "name: demo\ncloud: local\nlaunch:\n\troot: /opt/x\n", "not valid YAML"),
]


@pytest.mark.parametrize("case,content,expected", SPECS, ids=[s[0] for s in SPECS])
def test_bad_spec_exits_2_naming_the_field(tmp_path, capsys, case, content, expected):
    path = tmp_path / "cluster.yaml"
    if isinstance(content, dict):
        content = yaml.safe_dump(content, allow_unicode=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, err = _validate(capsys, str(path))
    assert code == 2, err
    assert expected in err, err
    assert str(path) in err


def test_problem_list_is_capped_at_50_with_a_count(tmp_path, capsys):
    path = tmp_path / "cluster.yaml"
    path.write_text("name: demo\ncloud: local\n" + "".join(f"junk{i}: {i}\n" for i in range(500)))
    _, err = _validate(capsys, str(path))
    assert "500 problem(s)" in err and "... and 450 more problem(s) not shown" in err
    assert len(err.splitlines()) < 60


@pytest.fixture
def keys(tmp_path):
    """A real-looking public key, a private key, and a public key file that holds garbage."""
    d = tmp_path / "keys"
    d.mkdir()
    (d / "id.pub").write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me\n")
    (d / "id").write_text(PRIVATE_KEY)
    (d / "lonely.pub").write_text((d / "id.pub").read_text())
    (d / "priv-as-pub").write_text(PRIVATE_KEY)
    (d / "garbage.pub").write_text("hello world\n")
    (d / "empty").write_text("")
    return d


KEY_CASES = [
    ("public-key-missing", lambda d: merged(ALI, "ssh.public_key", str(d / "nope.pub")), "ssh.public_key"),
    ("private-key-missing", lambda d: merged(HOSTS, "ssh.private_key", str(d / "nope")), "ssh.private_key"),
    ("public-key-is-private", lambda d: merged(ALI, "ssh", {"public_key": str(d / "priv-as-pub"),
                                                           "private_key": str(d / "id")}),
     "ssh.public_key: " + "{d}/priv-as-pub is a PRIVATE key"),
    ("public-key-garbage", lambda d: merged(ALI, "ssh", {"public_key": str(d / "garbage.pub"),
                                                        "private_key": str(d / "id")}),
     "is not one OpenSSH public key line"),
    ("private-key-empty", lambda d: merged(HOSTS, "ssh.private_key", str(d / "empty")),
     "ssh.private_key: {d}/empty is empty"),
    ("private-key-is-public", lambda d: merged(HOSTS, "ssh.private_key", str(d / "id.pub")),
     "ssh.private_key: {d}/id.pub is a public key"),
    ("private-key-folder", lambda d: merged(HOSTS, "ssh.private_key", str(d)), "ssh.private_key: {d} is a folder"),
    ("public-key-without-private", lambda d: merged(ALI, "ssh.public_key", str(d / "lonely.pub")),
     "ssh.private_key: not given"),
]


@pytest.mark.parametrize("case,make,expected", KEY_CASES, ids=[k[0] for k in KEY_CASES])
def test_bad_key_files_exit_2_naming_the_ssh_field(tmp_path, capsys, keys, case, make, expected):
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(make(keys)))
    code, err = _validate(capsys, str(path))
    assert code == 2, err
    assert expected.format(d=keys) in err, err


TRAIN = [
    ("epochs-zero", "epochs: 0\n", "epochs: expected greater than or equal to 1"),
    ("epochs-word", "epochs: ten\n", "epochs: expected a valid integer"),
    ("lr0-zero", "lr0: 0\n", "lr0: expected greater than 0"),
    ("lr0-negative-exponent", "lr0: -1e-4\n", "lr0: expected greater than 0"),
    ("batch-zero", "batch: 0\n", "batch: expected greater than or equal to 1"),
    ("grad-accum-zero", "grad_accum: 0\n", "grad_accum: expected greater than or equal to 1"),
    ("grad-accum-not-dividing", "batch: 64\ngrad_accum: 3\n", "grad_accum: grad_accum=3 does not divide"),
    ("micro-batch-too-small", "batch: 64\ngrad_accum: 2\nmicro_batch: 8\n", "micro_batch: micro-batch 32 exceeds"),
    ("keep-one", "checkpoint: {keep: 1}\n", "checkpoint.keep: expected greater than or equal to 2"),
    ("learning-rate", "learning_rate: 1e-3\n", "learning_rate: unknown key; did you mean 'lr0'?"),
    ("lr", "lr: 1e-3\n", "lr: unknown key; did you mean 'lr0'?"),
    ("batch-size", "batch_size: 32\n", "batch_size: unknown key; did you mean 'batch'?"),
    ("num-workers", "num_workers: 4\n", "num_workers: unknown key; did you mean 'workers'?"),
    ("max-epochs", "max_epochs: 4\n", "max_epochs: unknown key; did you mean 'epochs'?"),
    ("nested-typo", "checkpoint: {kep: 3}\n", "checkpoint.kep: unknown key; did you mean 'checkpoint.keep'?"),
    ("model-args-typo", "model_args: {chanels: 8}\n", "model_args.chanels: digits_cnn has no parameter"),
    ("model-args-type", "model_args: {channels: abc}\n", "model_args.channels: digits_cnn takes int (got 'abc')"),
    ("model-args-bool", "model_args: {num_classes: yes}\n", "model_args.num_classes: digits_cnn takes int (got True)"),
    ("data-args-unknown", "data_args: {n: 8}\n", "data_args.n: digits has no parameter 'n'"),
    ("data-args-seed", "data_args: {seed: 3}\n", "data_args.seed: trainkit passes seed itself"),
    ("model-module-missing", "model: nosuchpkg.models:build\n", "model: module 'nosuchpkg.models' is not found"),
    ("model-builtin-typo", "model: digits_cn\n", "did you mean 'digits_cnn'?"),
    ("model-bad-path", "model: 'my model:build'\n", "model: 'my model:build' is not an import path"),
    ("data-attr-missing", "data: json:no_such_builder\n", "data: module 'json' has no 'no_such_builder'"),
    ("train-duplicate-key", "epochs: 3\nbatch: 8\nepochs: 4\n", "line 3: duplicate key 'epochs'"),
    ("train-alias-bomb", BOMB, "aliases (*name) expand to more than"),
    ("train-binary", b"\x7fELF\x02\x01\x01\x00" + bytes(64), "binary file"),
    ("train-utf16", "epochs: 3\n".encode("utf-16"), "UTF-16"),
    ("train-junk", "".join(f"junk{i}: {i}\n" for i in range(300)), "... and 250 more problem(s) not shown"),
    ("lr0-inf", "lr0: .inf\n", "lr0: expected a finite number (got inf)"),
    ("mtbf-nan", "checkpoint: {mtbf_hours: .nan}\n", "checkpoint.mtbf_hours: expected a finite number"),
    ("train-not-mapping", "[1, 2]\n", "a train config is a mapping"),
    ("stage-scheme", "stage:\n  sources:\n    - {url: 'ftp://x/y'}\n", "stage.sources.0.url"),
    ("stage-connections", "stage: {connections: 0, sources: [{url: 'https://x/y'}]}\n", "stage.connections"),
    ("env-reserved", "command: python t.py\nenv: {TRAINKIT_RUN_ID: x}\n", "env.TRAINKIT_RUN_ID"),
    ("run-name", "name: 'my run'\n", "name: 'my run' is not a run name"),
]


@pytest.mark.parametrize("case,text,expected", TRAIN, ids=[t[0] for t in TRAIN])
def test_bad_train_config_exits_2_naming_the_key(tmp_path, capsys, case, text, expected):
    path = tmp_path / "train.yaml"
    path.write_bytes(text if isinstance(text, bytes) else textwrap.dedent(text).encode())
    code, err = _validate(capsys, "--config", str(path))
    assert code == 2, err
    assert expected in err, err
    assert str(path) in err


def test_batch_that_does_not_split_over_the_clusters_ranks_exits_2(tmp_path, capsys, repo):
    path = tmp_path / "train.yaml"
    path.write_text("batch: 63\n")
    code, err = _validate(capsys, str(repo / "examples/clusters/local.yaml"), "--config", str(path))
    assert code == 2
    assert "batch: batch=63 (global) is not divisible by world size 2" in err


def _validate(capsys, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(["validate", *args])
    _, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return exc.value.code, err


def test_a_spec_that_is_not_a_regular_file_says_what_it_is(tmp_path, capsys):
    import os

    os.mkfifo(tmp_path / "fifo.yaml")  # a FIFO would block a reader forever; it is refused unread
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    for name, expected in [("fifo.yaml", "is not a regular file (a FIFO, socket or device)"),
                           ("a.yaml", "is a symbolic link to nothing (dangling, or a loop of links)"),
                           ("empty.yaml", "the file is empty (or only comments)")]:
        for args in ([str(tmp_path / name)], ["--config", str(tmp_path / name)])[:1 if "empty" in name else 2]:
            code, err = _validate(capsys, *args)  # (an empty train config is all defaults: valid)
            assert code == 2, err
            assert str(tmp_path / name) in err and expected in err, err


def test_validate_config_takes_a_built_in_name_as_train_does(capsys):
    code, err = _validate(capsys, "--config", "digts")
    assert code == 2 and "--config digts: no such file and no built-in training config" in err
    assert "digits" in err  # the fix lists the built-in names
    with pytest.raises(SystemExit) as exc:
        main(["validate", "--config", "digits"])
    assert exc.value.code == 0
