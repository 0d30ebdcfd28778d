"""The launcher: start a run on every node as a supervised, detached job, and look at it.

Side effects only (ssh, or bash on `local`); what to run comes from `runs.Job` and the
inventory. Node layout, under the node work dir W (the NAS when there is one):

    W/runs/<run-id>/nodes/node-R/   launch.sh, supervise.py, config.yaml | command.sh,
                                    attempt-K.json (state), attempt-K.events.jsonl
    W/runs/<run-id>/logs/           node-R.log (the job's stdout/stderr), rank-N.log (engine)
    W/checkpoints/<run-id>/         the job's checkpoints ($TRAINKIT_CHECKPOINT_DIR)
    <launch.root>/code/<run-id>/    the user's workdir (command mode), node-local

The supervisor (trainkit/node/supervise.py) is started with `setsid` so it survives the SSH
session, or with `systemd-run` (a transient unit, `trainkit-<run-id>-node-R`) where systemd is
PID 1 and we are root. The job's result travels as data: the state file, never a task name.
"""

from __future__ import annotations

import hashlib
import io
import shlex
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from fnmatch import fnmatch
from pathlib import Path

import yaml

from trainkit.clouds.base import MetadataToken
from trainkit.errors import TRAIN, InputError, TrainkitError
from trainkit.provision.node import Node, Paths
from trainkit.runs.record import Job
from trainkit.runs.remote import Layout
from trainkit.util.nodeargs import http_url, option

SUPERVISOR = Path(__file__).parents[1] / "node" / "supervise.py"
NODE_MODULES = ("notices.py", "jobstate.py")   # supervise.py imports them from its own folder
# Excluded from a synced workdir besides .gitignore's patterns (rsync's --cvs-exclude spirit).
DEFAULT_EXCLUDES = (".git", "__pycache__", "*.pyc", ".venv", "venv", ".trainkit", "runs", ".mypy_cache",
                    ".pytest_cache", "*.egg-info")
# The workdir tar is built in memory and copied to every node: code, not data (data goes through
# the `data:`/`stage:` sections). Past this, `workdir: .` has picked up a dataset or a home folder.
MAX_WORKDIR_BYTES = 256 * 2**20
# What torchrun logs when its rendezvous fails: RendezvousError and its subclasses (Timeout, Closed,
# Connection, State, GracefulExit) in torch/distributed/elastic/rendezvous/api.py.
RENDEZVOUS_ERROR = r"Rendezvous[A-Za-z]*Error"


# ------------------------------------------------------------------ what runs on a node

def job_env(job: Job, node: Node, nodes: list[Node], lay: Layout, attempt: int) -> dict[str, str]:
    """The launch environment every node gets (docs/runs.md lists it)."""
    head = nodes[0]
    port, nproc = str(node.rdzv_port), node.nproc
    env = {"TRAINKIT_RUN_ID": lay.run_id, "TRAINKIT_ATTEMPT": str(attempt),
           "TRAINKIT_NODE_RANK": str(node.rank), "TRAINKIT_NUM_NODES": str(len(nodes)),
           "TRAINKIT_HEAD_ADDR": head.private_ip, "TRAINKIT_RDZV_ENDPOINT": f"{head.private_ip}:{port}",
           "TRAINKIT_GPUS_PER_NODE": str(nproc), "TRAINKIT_CHECKPOINT_DIR": lay.checkpoint_dir,
           "TRAINKIT_RUN_DIR": lay.run_dir, "TRAINKIT_STATUS_FILE": f"{lay.node_dir(node.rank)}/status",
           "TRAINKIT_PRIVATE_IP": node.private_ip, "TRAINKIT_PYTHON": node.python,
           "TRAINKIT_DATA_ROOT": data_root(job, node.paths), "MASTER_ADDR": head.private_ip, "MASTER_PORT": port,
           "NNODES": str(len(nodes)), "NODE_RANK": str(node.rank), "NPROC_PER_NODE": str(nproc),
           "WORLD_SIZE": str(len(nodes) * nproc), "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    if job.workdir:
        env["TRAINKIT_CODE_DIR"] = lay.code_dir
    if job.command is not None:
        # a torchrun in the user's command writes each local rank's stdout/stderr to files of its
        # own (torchrun reads any option from PET_<OPTION>: torch/distributed/argparse_util.py;
        # --tee 3 = both streams, also to the console): `logs --rank N` reads them
        env.update(PET_LOG_DIR=command_rank_logs(lay, node.rank), PET_TEE="3")
    if job.command is not None and nproc == 1:
        # one process per node: it is global rank NODE_RANK, as torch.distributed's env:// init
        # reads RANK with WORLD_SIZE (under torchrun, torchrun sets both per worker itself)
        env.update(RANK=str(node.rank), LOCAL_RANK="0")
    return {**env, **job.env}


def command_rank_logs(lay: Layout, node_rank: int) -> str:
    """Where a torchrun inside a `command:` job on node `node_rank` keeps its per-rank logs:
    <this>/<rdzv id>_<random>/attempt_<n>/<local rank>/{stdout,stderr}.log (torchrun's layout,
    torch.distributed.elastic.multiprocessing.api.DefaultLogsSpecs)."""
    return f"{lay.run_dir}/logs/torchrun/node-{node_rank}"


def data_root(job: Job, paths: Paths) -> str:
    """Where the job's staged datasets are: its own `stage:` target's root, else the spec's."""
    if job.stage and paths.data_roots.get(job.stage.target):
        return paths.data_roots[job.stage.target]
    return paths.data_root or f"{paths.work_dir}/datasets"


def launch_script(job: Job, node: Node, nodes: list[Node], lay: Layout, attempt: int) -> str:
    """launch.sh for one node: exports (quoted literals), setup once, then the job in the
    foreground, and how it ended recorded (`_recorded`)."""
    nd = lay.node_dir(node.rank)
    q = shlex.quote
    lines = ["#!/usr/bin/env bash", f"# Written by trainkit: run {lay.run_id}, node {node.rank} of "
             f"{len(nodes)}, attempt {attempt}.", "set -euo pipefail"]
    lines += [f"export {k}={q(v)}" for k, v in job_env(job, node, nodes, lay, attempt).items()]
    log = f"{lay.run_dir}/logs/node-{node.rank}.log"
    lines += [f"exec </dev/null >>{q(log)} 2>&1", f"log_start=$(stat -c %s {q(log)} 2>/dev/null || echo 0)",
              'echo "trainkit: node $TRAINKIT_NODE_RANK attempt $TRAINKIT_ATTEMPT starting at $(date -Is) on $(hostname)"',
              # NCCL/gloo talk over the interface holding the node's private IP.
              "ifname=$(ip -o -4 addr show 2>/dev/null | awk -v ip=\"$TRAINKIT_PRIVATE_IP\" "
              "'index($4, ip \"/\") == 1 {print $2; exit}' || true)",
              'if [ -n "$ifname" ]; then export NCCL_SOCKET_IFNAME="$ifname" GLOO_SOCKET_IFNAME="$ifname"; fi',
              # the network role's NCCL settings (interface, RDMA devices, eRDMA), when it wrote them
              f"if [ -r {q(lay.root + '/nccl.env')} ]; then set -a; . {q(lay.root + '/nccl.env')}; set +a; fi",
              f"rm -f {q(nd + '/status')}"]
    status = f"{lay.run_dir}/summary.json" if job.command is None else f"{nd}/status"
    end = _recorded(lay.exit_file(node.rank, attempt), status, log)
    lines.append(f"rm -f {q(lay.exit_file(node.rank, attempt))}")
    lines.append("trap ':' TERM INT  # before the job starts: see _recorded")
    if job.command is None:  # a summary.json left by an earlier attempt must not speak for this one
        lines.append(f"rm -f {q(lay.run_dir + '/summary.json')}")
        lines.append(_torchrun(job, node, nodes, lay, attempt))
        return "\n".join(lines + end) + "\n"
    if job.setup:  # once per node and setup text: a marker keyed by the setup's hash
        marker = f"{lay.root}/code/.setup-{hashlib.sha256(job.setup.encode()).hexdigest()[:12]}.done"
        lines.append(f"if [ ! -e {q(marker)} ]; then (cd {q(lay.code_dir if job.workdir else lay.run_dir)} "
                     f"&& bash {q(nd + '/setup.sh')}) && mkdir -p {q(lay.root + '/code')} && touch {q(marker)}; fi")
    lines.append(f"cd {q(lay.code_dir if job.workdir else lay.run_dir)}")
    lines.append(f"rc=0; bash {q(nd + '/command.sh')} || rc=$?")
    return "\n".join(lines + end) + "\n"


def _recorded(exit_file: str, status_file: str, log: str) -> list[str]:
    """launch.sh's tail: record how the job ended (`exit=<rc> status=<preempted|rendezvous|>`) in
    `exit_file` (temp + rename), so the end is known even to a controller whose supervisor was killed
    (remote.ended_status reads it), and exit with the job's status. The job runs in the
    foreground, not by `exec`: it shares this shell's process group, so the supervisor's SIGTERM
    to the group reaches it, and the trap keeps this shell waiting for it meanwhile (bash runs a
    trap only after the foreground command ends)."""
    q = shlex.quote
    return [f"if grep -qs preempted {q(status_file)}; then st=preempted; "
            # torchrun's agent could not form (or keep) the rendezvous: a peer or the head is gone,
            # not the user's code failing (torch.distributed.elastic.rendezvous.api's error classes)
            f"elif [ \"$rc\" != 0 ] && tail -c +$((log_start + 1)) {q(log)} | grep -qE '{RENDEZVOUS_ERROR}'; "
            "then st=rendezvous; else st=; fi",
            f'printf \'exit=%s status=%s\\n\' "$rc" "$st" > {q(exit_file + ".tmp")} && '
            f"mv -f {q(exit_file + '.tmp')} {q(exit_file)}",
            'exit "$rc"']


def _torchrun(job: Job, node: Node, nodes: list[Node], lay: Layout, attempt: int) -> str:
    q = shlex.quote
    argv = [node.python, "-m", "torch.distributed.run"]
    if len(nodes) == 1:
        argv += ["--standalone"]
    else:  # a fresh rendezvous id per attempt: a relaunch never meets a stale round
        # --local-addr: the address rank 0's agent publishes as MASTER_ADDR is its private IP, not
        # its host name (torchrun's default, socket.getfqdn()), which a survivor cannot resolve when
        # the head was replaced by a spare its /etc/hosts has never heard of (torchrun --help).
        argv += ["--nnodes", str(len(nodes)), "--node-rank", str(node.rank), "--rdzv-backend", "c10d",
                 "--rdzv-endpoint", "$TRAINKIT_RDZV_ENDPOINT", "--rdzv-id", f"{lay.run_id}-a{attempt}",
                 "--local-addr", "$TRAINKIT_PRIVATE_IP"]
    # the overrides after `--`: `trainkit run` (click) reads them as KEY=VALUE words, never options
    argv += ["--nproc-per-node", "$TRAINKIT_GPUS_PER_NODE", "-m", "trainkit", "run",
             f"{lay.node_dir(node.rank)}/config.yaml", f"run_dir={lay.run_dir}",
             f"checkpoint.dir={lay.checkpoint_dir}", "resume=true", "--", *job.overrides]
    words = [a if a.startswith("$TRAINKIT_") else q(a) for a in argv]
    # SIGTERM reaches torchrun through the process group, and torchrun forwards it to the ranks,
    # giving them 30 s to checkpoint before SIGKILL (pytorch PR #61602); the engine writes
    # summary.json "preempted".
    return "cd " + q(lay.run_dir) + "\nrc=0; " + " ".join(words) + " || rc=$?"


def node_files(job: Job, node: Node, nodes: list[Node], lay: Layout, attempt: int) -> dict[str, bytes]:
    """Files for nodes/node-R/ (name -> content)."""
    files = {"launch.sh": launch_script(job, node, nodes, lay, attempt).encode(),
             "supervise.py": SUPERVISOR.read_bytes(),
             **{name: SUPERVISOR.with_name(name).read_bytes() for name in NODE_MODULES}}
    if job.command is None:
        files["config.yaml"] = yaml.safe_dump(job.engine_config, sort_keys=False).encode()
    else:
        files["command.sh"] = (job.command.rstrip("\n") + "\n").encode()
        if job.setup:
            files["setup.sh"] = (job.setup.rstrip("\n") + "\n").encode()
    return files


def tar_bytes(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o755 if name.endswith(".sh") else 0o644, time.time()
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def workdir_files(folder: Path, extra_excludes: tuple[str, ...] = ()) -> list[Path]:
    """What a workdir sync ships: everything but DEFAULT_EXCLUDES, .gitignore patterns and extras
    (fnmatch on each path part and on the relative path; `!` negations are not supported).
    InputError past MAX_WORKDIR_BYTES, naming the largest files."""
    patterns = list(DEFAULT_EXCLUDES) + list(extra_excludes)
    ignore = folder / ".gitignore"
    if ignore.is_file():
        patterns += [ln.strip().strip("/") for ln in ignore.read_text(errors="replace").splitlines()
                     if ln.strip() and not ln.startswith(("#", "!"))]

    def skip(rel: Path) -> bool:
        return any(fnmatch(part, p) for part in rel.parts for p in patterns) or \
            any(fnmatch(str(rel), p) for p in patterns)

    files, sizes = [], {}
    for p in folder.rglob("*"):  # stops at the bound, before a whole disk is walked
        if skip(p.relative_to(folder)) or p.is_symlink() or not (p.is_file() or p.is_dir()):
            continue
        try:
            sizes[p] = p.stat().st_size if p.is_file() else 0
        except OSError:  # gone since it was listed
            continue
        files.append(p)
        if sum(sizes.values()) > MAX_WORKDIR_BYTES:
            _too_big(folder, sizes)
    return sorted(files)


def workdir_tar(folder: Path, extra_excludes: tuple[str, ...] = ()) -> bytes:
    """The workdir as a tar stream of `workdir_files`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in workdir_files(folder, extra_excludes):
            tar.add(path, arcname=str(path.relative_to(folder)), recursive=False)
    return buf.getvalue()


def _too_big(folder: Path, sizes: dict[Path, int]) -> None:
    biggest = sorted(sizes, key=sizes.get, reverse=True)[:3]
    raise InputError(f"workdir {folder}: more than {MAX_WORKDIR_BYTES // 2**20} MiB to copy to every "
                     "node; largest: " + ", ".join(f"{p.relative_to(folder)} ({sizes[p] / 2**20:,.1f} MiB)"
                                                  for p in biggest),
                     fix="add data and outputs to `excludes:` or .gitignore, and stage data with a "
                         "`stage:`/`data:` section (`trainkit docs data`)")


def start_script(node: Node, lay: Layout, attempt: int, notice_url: str | None, notice_poll: float,
                 engine: bool = False, notice_token: MetadataToken | None = None) -> str:
    """Start the supervisor detached (systemd-run where systemd is PID 1, else setsid). The
    engine's status file is its summary.json (torchrun turns the ranks' exit 75 into 1).
    `notice_token`: the metadata host's session-token endpoint the supervisor must use before it
    polls `notice_url` (IMDSv2 and Alibaba's hardening mode answer a tokenless GET with 401)."""
    q = shlex.quote
    nd = lay.node_dir(node.rank)
    py = q(node.python)
    status = f"{lay.run_dir}/summary.json" if engine else f"{nd}/status"
    sup = [f"{nd}/supervise.py", lay.state_file(node.rank, attempt), option("status-file", status),
           option("exit-file", lay.exit_file(node.rank, attempt))]
    if notice_url:
        sup += [option("notice-url", http_url(notice_url, "--notice-url")), option("notice-poll", notice_poll)]
        if notice_token:
            sup += [option("notice-token-url", http_url(notice_token.url, "notice token URL")),
                    option("notice-ttl-header", notice_token.ttl_header),
                    option("notice-token-header", notice_token.token_header)]
    sup_cmd = py + " " + " ".join(q(a) for a in sup) + " -- bash " + q(f"{nd}/launch.sh")
    unit = q(f"trainkit-{lay.run_id}-node-{node.rank}-a{attempt}")
    out = q(f"{lay.run_dir}/logs/supervisor-node-{node.rank}.log")
    return (f"cd {q(lay.run_dir)} && if [ -d /run/systemd/system ] && [ \"$(id -u)\" = 0 ] && "
            f"command -v systemd-run >/dev/null; then systemd-run --quiet --collect --unit {unit} "
            f"-p WorkingDirectory={q(lay.run_dir)} {sup_cmd}; echo systemd; "
            f"else setsid nohup {sup_cmd} </dev/null >>{out} 2>&1 & echo setsid; fi")


# ------------------------------------------------------------------ launch / inspect


def launch(job: Job, nodes: list[Node], lay: Layout, attempt: int, *, notice_url: str | None = None,
           notice_poll: float = 5.0, notice_token: MetadataToken | None = None) -> dict[str, str]:
    """Copy files to every node and start its supervisor; returns {node: 'setsid'|'systemd'}.
    TrainkitError(TRAIN) naming the nodes where it failed."""
    code = workdir_tar(job.workdir, job.excludes) if job.workdir else None

    def one(node: Node) -> tuple[str, str]:
        q = shlex.quote
        nd = lay.node_dir(node.rank)
        prep = (f"mkdir -p {q(nd)} {q(lay.run_dir + '/logs')} {q(lay.checkpoint_dir)} "
                f"&& tar -xf - -C {q(nd)}")
        res = node.sh(prep, tar_bytes(node_files(job, node, nodes, lay, attempt)))
        if res.returncode == 0 and code is not None:
            res = node.sh(f"mkdir -p {q(lay.code_dir)} && tar -xf - -C {q(lay.code_dir)}", code)
        if res.returncode == 0:
            res = node.sh(start_script(node, lay, attempt, notice_url, notice_poll, job.command is None,
                                      notice_token))
        if res.returncode != 0:
            return node.name, "error: " + res.stderr.decode(errors="replace").strip()[-400:]
        return node.name, res.stdout.decode().strip().splitlines()[-1]

    if not nodes:
        raise TrainkitError("launch: the inventory lists no nodes", exit_code=TRAIN,
                            fix="run `trainkit apply` again to rewrite the inventory")
    with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
        results = dict(pool.map(one, nodes))
    bad = {n: r for n, r in results.items() if r.startswith("error")}
    if bad:
        raise LaunchError("launch failed on: " + "; ".join(f"{n}: {r}" for n, r in bad.items()),
                          failed=sorted(bad), started=sorted(set(results) - set(bad)))
    return results


class LaunchError(TrainkitError):
    """A launch that failed on `failed` nodes; on `started` it worked (their supervisors run and
    must be stopped: the caller rolls them back, trainkit/runs/attempt.py)."""

    def __init__(self, message: str, failed: list[str], started: list[str]):
        super().__init__(message, exit_code=TRAIN,
                         fix="check the node is reachable (`trainkit ssh`) and provisioned (`trainkit apply`)")
        self.failed, self.started = failed, started


