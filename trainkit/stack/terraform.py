"""The only module that runs terraform.

python-terraform builds the command lines (its `generate_cmd_string`); this module runs them
itself so that output streams to a log file as it is written (progress on long applies) and
Ctrl-C is forwarded to terraform, which then stops cleanly and saves its state: a later
`destroy` can clean up whatever was created. Every run's output goes to `<workspace>/terraform.log`.

Known python-terraform 0.10.1 quirks avoided here (python-terraform 0.10.1 source, `Terraform.apply`
and `Terraform.destroy`):
`destroy()` passes `-force` (rejected by Terraform 1.x) and `apply()` without `skip_plan` waits
for approval; we pass `-auto-approve` / `-input=false` explicitly instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from python_terraform import IsFlagged, Terraform

from trainkit import errors
from trainkit.clouds import capacity
from trainkit.clouds.credentials import explain_failure
from trainkit.errors import CredentialsError, LockedError, MissingToolError, TrainkitError
from trainkit.stack.capacity_watch import CapacityWatch
from trainkit.stack.tfstate import check_state

INSTALL_HINT = ("install Terraform >= 1.10 (https://developer.hashicorp.com/terraform/install) "
                "and make sure `terraform` is on PATH, or set TRAINKIT_TERRAFORM to its path")
# Seconds to wait for terraform to save state after Ctrl-C before giving up on it.
INTERRUPT_GRACE_S = 120
# Go's garbage-collection target for terraform and the provider plugins it starts, which inherit
# its environment (Go `runtime` package docs, "GOGC"; Go's default is 100). Each terraform command
# starts the aws provider 1-3 times, and its start-up allocates heavily: measured on a 2-core
# machine (benchmarks/bench_cli.py), a plan of the moto stack took 10.4 s of CPU at 100 and 7.6 s
# at 400, with peak memory 620 -> 760 MB ("off" used 2.5 GB). A GOGC the user set wins.
GOGC = "400"


def command_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every terraform command runs with: the user's, GOGC unless set, no
    checkpoint calls, automation mode (shorter output), plus `extra`."""
    return {"GOGC": GOGC, **os.environ, "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1", **(extra or {})}


@dataclass(frozen=True)
class Result:
    returncode: int
    output: str


def terraform_path() -> str:
    """The terraform binary; MissingToolError with install instructions when there is none."""
    given = os.environ.get("TRAINKIT_TERRAFORM")
    path = given or shutil.which("terraform")
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        what = (f"TRAINKIT_TERRAFORM={given} is not an executable file" if given
                else "terraform is not installed (needed for cloud targets)")
        raise MissingToolError(what, fix=INSTALL_HINT)
    return path


def terraform_version(path: str) -> str | None:
    """`terraform version -json`'s terraform_version ("1.11.4"); None when it cannot be read."""
    try:
        proc = subprocess.run([path, "version", "-json", "-no-color"], capture_output=True, text=True, timeout=30,
                              env={**os.environ, "CHECKPOINT_DISABLE": "1"})
        return json.loads(proc.stdout).get("terraform_version")
    except (OSError, ValueError, subprocess.SubprocessError, AttributeError):
        return None


class TerraformRunner:
    """Runs terraform in one root-stack folder; every method raises TrainkitError on failure, and
    construction too when the folder's local state file is damaged (exit 3, stack/tfstate.py)."""

    def __init__(self, workdir: Path, log_path: Path, on_line: Callable[[str], None] | None = None,
                 cloud: str | None = None, placement: tuple[str | None, str | None] = (None, None)):
        self.cloud = cloud  # names the room whose credential and capacity errors explain a failure
        self.placement = placement  # (zone, instance type) a capacity message names when the cloud does not
        self.workdir = Path(workdir)
        self.log_path = Path(log_path)
        self.on_line = on_line
        check_state(self.workdir)  # python-terraform's constructor parses the state file itself
        self.tf = Terraform(working_dir=str(self.workdir), terraform_bin_path=terraform_path())
        self.failed_output = ""  # the whole output of the last command that failed (stack/adopt.py reads it)

    def init(self, phase: int = errors.PLAN) -> None:
        """`terraform init`: providers and the state backend (fails when the backend is unreachable)."""
        self._run("init", phase=phase, input=False, no_color=IsFlagged)

    def plan(self, out: Path, refresh_only: bool = False, phase: int = errors.PLAN,
             replace: list[str] | None = None) -> bool:
        """Write a saved plan to `out`; True when it holds changes (terraform's exit code 2).

        Every plan refreshes against the cloud first; `refresh_only` plans nothing else (what the
        cloud holds now, for `status`); `replace` addresses are planned as replaced (`-replace=A`).
        """
        res = self._run("plan", phase=phase, ok=(0, 2), input=False, no_color=IsFlagged,
                        detailed_exitcode=IsFlagged, out=str(out),
                        refresh_only=IsFlagged if refresh_only else None, replace=list(replace or ()) or None)
        return res.returncode == 2

    def show_json(self, plan: Path, phase: int = errors.PLAN) -> dict:
        res = self._run("show", str(plan), phase=phase, json=IsFlagged, no_color=IsFlagged, quiet=True)
        return _json_out(res.output)

    def state_json(self, phase: int = errors.PLAN) -> dict:
        """The backend's current state as `terraform show -json` shapes it ({"values": {outputs,
        root_module}}; {} when there is none), read with `terraform state pull`: that starts no
        provider, where `show -json` starts each one for its schema (about 2.4 s of CPU for
        hashicorp/aws on a 2-core machine), so destroy's and status's reads cost a fraction."""
        res = self._run("state pull", phase=phase, no_color=IsFlagged, quiet=True)
        return show_shape(_json_out(res.output))

    def apply_plan(self, plan: Path) -> None:
        self._run("apply", str(plan), phase=errors.APPLY, input=False, no_color=IsFlagged)

    def destroy(self) -> None:
        self._run("destroy", phase=errors.DESTROY, input=False, no_color=IsFlagged, auto_approve=IsFlagged)

    def outputs(self, phase: int = errors.APPLY) -> dict:
        """`terraform output -json` from the backend's state: `{name: {value, type, sensitive}}`."""
        res = self._run("output", phase=phase, json=IsFlagged, no_color=IsFlagged, quiet=True)
        return _json_out(res.output)

    def state_list(self) -> list[str]:
        """Resource addresses in the state; [] when there is no state yet (terraform's "No state
        file was found!", read uncoloured: with colour that line was taken for addresses)."""
        res = self._run("state list", phase=errors.DESTROY, ok=(0, 1), no_color=IsFlagged, quiet=True)
        if res.returncode == 1:
            if "No state file was found!" in res.output:  # and an explanation below it: no addresses
                return []
            raise TrainkitError(f"terraform state list failed:\n{_tail(res.output)}",
                                exit_code=errors.DESTROY)
        # stderr is merged in: a warning block (a CLI config it cannot open) is not addresses
        return [line for line in res.output.splitlines() if _ADDRESS.fullmatch(line)]

    def refresh(self) -> None:
        """`terraform apply -refresh-only`: drop from the state what the cloud no longer has."""
        self._run("apply", phase=errors.APPLY, input=False, no_color=IsFlagged, auto_approve=IsFlagged,
                  refresh_only=IsFlagged)

    def import_(self, address: str, resource_id: str) -> None:
        """`terraform import ADDRESS ID`: record in the state what the cloud holds under `resource_id`."""
        self._run("import", address, resource_id, phase=errors.APPLY, input=False, no_color=IsFlagged)

    def _run(self, cmd: str, *args: str, phase: int, ok: tuple[int, ...] = (0,), quiet: bool = False,
             **options) -> Result:
        """Run one terraform command, streaming stdout+stderr into the log; TrainkitError if rc not in ok.
        A damaged local state file stops it before terraform reads it (exit 3: stack/tfstate.py)."""
        check_state(self.workdir)
        argv = self.tf.generate_cmd_string(cmd, *args, **options)
        env = command_env()
        lines: list[str] = []
        watch = self._capacity_watch() if cmd == "apply" else None
        with open(self.log_path, "a") as log, watch or contextlib.nullcontext():
            log.write(f"\n$ {' '.join(argv[1:])}\n")
            log.flush()
            proc = subprocess.Popen(argv, cwd=self.workdir, env=watch.env(env) if watch else env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True)
            if watch:
                watch.attach(proc)
            try:
                for line in proc.stdout:
                    lines.append(line)
                    if watch:
                        watch.inflight.feed(line)
                    if not quiet:
                        log.write(line)
                        log.flush()
                        if self.on_line:
                            self.on_line(line.rstrip("\n"))
                proc.wait()
            except KeyboardInterrupt:
                _interrupt(proc)
                raise TrainkitError(f"interrupted: terraform {cmd} was stopped and saved its state",
                                    fix="run `trainkit destroy` to remove what was created, or "
                                        "`trainkit apply` to finish", exit_code=130) from None
        output = "".join(lines)
        if proc.returncode not in ok:
            self.failed_output = output
        if watch and watch.problem and proc.returncode not in ok:  # stopped on the cloud's refusal
            zone, kind = self.placement
            refused = dataclasses.replace(watch.problem, zone=watch.problem.zone or zone,
                                          instance_type=watch.problem.instance_type or kind)
            raise capacity.explain(self.cloud or "", refused, self.log_path, phase)
        if proc.returncode not in ok:
            if "Error acquiring the state lock" in output:
                raise self._locked(cmd, output)
            explained = explain_failure(self.cloud or "", output)
            if explained:  # one message naming the cloud's variables instead of the raw errors
                if not isinstance(explained, CredentialsError):  # one code for missing credentials
                    explained.exit_code = phase
                explained.fix = f"{explained.fix}; full log: {self.log_path}"
                raise explained
            refused = capacity.problem(self.cloud or "", output, *self.placement)
            if refused:  # capacity or quota: one message, the provider's text stays in the log
                raise capacity.explain(self.cloud or "", refused, self.log_path, phase)
            raise TrainkitError(f"terraform {cmd} failed (exit {proc.returncode}):\n{_tail(output)}",
                                fix=f"full log: {self.log_path}", exit_code=phase)
        return Result(proc.returncode, output)


    def _capacity_watch(self) -> CapacityWatch | None:
        """A watch on the provider's debug log for the room's capacity/quota refusals (None: the
        room reads none)."""
        reader = capacity.reader(self.cloud or "")
        if reader is None:
            return None
        # terraform.log.* is the workspace's (a stale pipe after a kill is removed with the logs)
        return CapacityWatch(self.log_path.parent / "terraform.log.provider-pipe", reader, self.log_path)

    def _locked(self, cmd: str, output: str) -> TrainkitError:
        """LockedError (exit 8): the state backend's lock is held by another terraform run."""
        found = re.search(r"^[\s│]*ID:\s+(\S+)", output, re.MULTILINE)
        lock_id = found.group(1) if found else "LOCK_ID"
        holder = re.search(r"^[\s│]*Who:\s+(.+)$", output, re.MULTILINE)
        return LockedError(f"terraform {cmd}: the cluster's state is locked by another run (another workspace, "
                           f"a colleague, CI){' held by ' + holder.group(1).strip() if holder else ''}; "
                           "nothing was changed",
                           fix=f"wait for it to finish and run the command again; only if it crashed: "
                               f"terraform -chdir={self.workdir} force-unlock {lock_id} (log: {self.log_path})")


_NAME, _KEY = r"[A-Za-z_][A-Za-z0-9_-]*", r'(\[(\d+|"(?:[^"\\]|\\.)*")\])?'
# A resource instance address as `terraform state list` prints it (Terraform docs, "Resource Addressing").
_ADDRESS = re.compile(rf"(module\.{_NAME}{_KEY}\.)*(data\.)?{_NAME}\.{_NAME}{_KEY}")


def _json_out(output: str) -> dict:
    """The JSON document of a command's output ({} when there is none). stderr is merged into it,
    and terraform writes its warnings there (a CLI config it cannot open, a deprecated backend
    argument): the document is the first line that starts with "{"."""
    lines = output.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("{"):
            try:
                found = json.JSONDecoder().raw_decode("".join(lines[i:]))[0]
            except ValueError as err:  # cut short, or not terraform's JSON
                raise TrainkitError(f"terraform printed JSON that cannot be read ({err}): {line[:120].strip()}",
                                    fix="run the same command with terraform yourself in the workspace's "
                                        "terraform/ folder to see what it says") from None
            return found if isinstance(found, dict) else {}
    return {}


def show_shape(raw: dict) -> dict:
    """A raw state (`terraform state pull`: format version 4, `resources[]` each with `module`,
    `mode`, `type`, `name`, `instances[]` of `index_key`, `attributes`) in the shape `terraform show
    -json` gives the same state: {"values": {"outputs", "root_module": {resources, child_modules}}},
    resources as {address, mode, type, name, index?, provider_name, values}, modules nested by
    address (terraform's internal/command/jsonstate). {} for an empty or missing state. Pure."""
    if not raw.get("resources") and not raw.get("outputs"):
        return {}
    root: dict[str, Any] = {"resources": [], "child_modules": []}
    modules = {"": root}

    def module(path: str) -> dict:
        if path not in modules:
            parent = module(path.rsplit(".module.", 1)[0] if ".module." in path else "")
            modules[path] = {"address": path, "resources": [], "child_modules": []}
            parent["child_modules"].append(modules[path])
        return modules[path]

    for res in raw.get("resources") or []:
        path = res.get("module") or ""
        kind = f"{'data.' if res.get('mode') == 'data' else ''}{res['type']}.{res['name']}"
        for inst in res.get("instances") or []:
            key = inst.get("index_key")
            index = "" if key is None else f"[{json.dumps(key)}]"
            item = {"address": f"{path + '.' if path else ''}{kind}{index}", "mode": res.get("mode", "managed"),
                    "type": res["type"], "name": res["name"], "provider_name": _provider_name(res.get("provider", "")),
                    "values": {k: _undynamic(v) for k, v in (inst.get("attributes") or {}).items()}}
            if key is not None:
                item["index"] = key
            if inst.get("deposed"):
                item["deposed_key"] = inst["deposed"]
            module(path)["resources"].append(item)
    outputs = {k: {"value": v.get("value"), "sensitive": bool(v.get("sensitive"))}
               for k, v in (raw.get("outputs") or {}).items()}
    return {"values": {"outputs": outputs, "root_module": root}}


def _undynamic(value: Any) -> Any:
    """An attribute of schema type `dynamic` (terraform_data's input and output) is stored as
    {"value": v, "type": <type constraint>}; show -json gives v. Anything else is returned as is."""
    if isinstance(value, dict) and value.keys() == {"value", "type"} and _is_type(value["type"]):
        return value["value"]
    return value


def _is_type(t: Any) -> bool:
    """A type constraint as terraform's JSON writes it: "string", ["list", "number"],
    ["object", {"a": "bool"}] (an optional third item lists optional attributes), ["tuple", [...]]."""
    if isinstance(t, str):
        return t in ("string", "number", "bool", "dynamic")
    if not isinstance(t, list) or len(t) < 2:
        return False
    kind, inner = t[0], t[1]
    if kind in ("list", "set", "map"):
        return len(t) == 2 and _is_type(inner)
    if kind == "object":
        return isinstance(inner, dict) and all(_is_type(v) for v in inner.values()) and len(t) <= 3
    return kind == "tuple" and len(t) == 2 and isinstance(inner, list) and all(_is_type(v) for v in inner)


def _provider_name(provider: str) -> str:
    """'provider["registry.terraform.io/hashicorp/aws"]' -> 'registry.terraform.io/hashicorp/aws'."""
    found = re.search(r'provider\["([^"]+)"\]', provider)
    return found.group(1) if found else provider


def _interrupt(proc: subprocess.Popen) -> None:
    """Forward Ctrl-C once (terraform then stops gracefully and writes state) and wait for it."""
    try:
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                continue
            except KeyboardInterrupt:
                continue  # a second Ctrl-C must not orphan terraform mid-write
    finally:
        if proc.poll() is None:
            proc.kill()


def _tail(text: str, lines: int = 25) -> str:
    """The part of terraform output worth showing: the Error blocks, else the last lines."""
    rows = text.strip().splitlines()
    errs = [i for i, row in enumerate(rows) if row.lstrip("│ ").startswith("Error")]
    keep = rows[errs[0]:] if errs else rows
    return "\n".join("  " + row for row in keep[-lines:])
