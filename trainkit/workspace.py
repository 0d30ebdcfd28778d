"""The per-cluster working folder: `.trainkit/<cluster>/` (or `--workdir`), its lock and its files.

Layout (docs/design.md): terraform/, plan.bin, plan.json, plan.fingerprint, review.md,
outputs.json, applied.json, inventory.yml, ssh/ (per-cluster key pair, 0600), ansible/, node/
(the `local` target's files), runs/<run-id>/, terraform.log (+ the previous few commands' logs),
lock, .trainkit-workspace (marks the folder as trainkit's and names its cluster). This class is
the only place that names them. Outputs and inventory are caches of the state backend, the one
truth about what exists. Credentials are never written here.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from trainkit import records
from trainkit.errors import InputError, LockedError, MissingToolError
from trainkit.records import REAPPLY, REPLAN, load_text, read_json  # noqa: F401 - read_json: callers import it here
from trainkit.util.links import link_below, links_under, refuse_link
from trainkit.util.paths import check_workdir, local_path

DEFAULT_BASE = Path(".trainkit")
LOGS_KEPT = 3  # terraform.log of this command plus the two before it


@dataclass(frozen=True)
class Workspace:
    root: Path
    cluster: str = ""  # the cluster it belongs to ("" = not checked); the marker records it

    @classmethod
    def for_cluster(cls, name: str, workdir: str | Path | None = None) -> "Workspace":
        """`workdir` if given (a quoted `~` expanded, as the spec's key paths are; a literal `~`
        folder invites `rm -rf ~`), else `.trainkit/<name>` under the current directory.
        InputError for a workdir of /, the home folder or a folder at or above the current one."""
        if not workdir:
            return cls((DEFAULT_BASE / name).absolute(), name)
        root = local_path(workdir)
        check_workdir(root, workdir)
        return cls(root, name)

    terraform_dir = property(lambda self: self.root / "terraform")
    plan_bin = property(lambda self: self.root / "plan.bin")
    plan_json = property(lambda self: self.root / "plan.json")
    review_md = property(lambda self: self.root / "review.md")
    outputs_json = property(lambda self: self.root / "outputs.json")
    inventory_yml = property(lambda self: self.root / "inventory.yml")
    ssh_dir = property(lambda self: self.root / "ssh")
    munge_key = property(lambda self: self.root / "ssh" / "munge.key")   # scheduler: slurm (roles/slurm)
    runs_dir = property(lambda self: self.root / "runs")
    ansible_dir = property(lambda self: self.root / "ansible")
    lock_path = property(lambda self: self.root / "lock")
    ssh_private_key = property(lambda self: self.ssh_dir / "id_ed25519")
    ssh_public_key = property(lambda self: self.ssh_dir / "id_ed25519.pub")
    terraform_log = property(lambda self: self.root / "terraform.log")
    plan_fingerprint = property(lambda self: self.root / "plan.fingerprint")
    refresh_bin = property(lambda self: self.root / "refresh.bin")
    applied_json = property(lambda self: self.root / "applied.json")
    node_dir = property(lambda self: self.root / "node")
    doctor_json = property(lambda self: self.root / "doctor.json")  # the last `trainkit doctor` report
    hosts_json = property(lambda self: self.root / "hosts.json")    # `hosts`: the active hosts (cluster.replace)

    def controller_dir(self) -> Path | None:
        """The controller folder this is the loop's workspace of (`<dir>/ws`, beside `<dir>/ssh/`, the
        key pair made there: runs/controller.HandOff), else None. The layout, in one place."""
        return self.root.parent if self.root.name == "ws" else None

    def controller_public_key(self) -> Path | None:
        """`<dir>/ssh/id_ed25519.pub` of controller_dir() (the hand-off's key pair), else None."""
        d = self.controller_dir()
        return d / "ssh" / "id_ed25519.pub" if d is not None else None

    # What destroy removes once the cluster is gone (terraform.log* too); runs/ and review.md stay.
    CLUSTER_FILES = ("plan.bin", "plan.json", "plan.fingerprint", "refresh.bin", "outputs.json",
                     "inventory.yml", "applied.json", "placement.json", "ssh", "ansible", "node", "terraform",
                     "doctor.json", "hosts.json")
    # (hosts.json: the active hosts of an applied `hosts` cluster; it ends with the cluster, so that
    # the next apply starts from the spec and writes the one list every reader uses.)
    # Everything else trainkit (or a tool it runs) writes here: names in a workspace outside
    # these are someone else's, and no command runs there.
    KEPT_FILES = ("runs", "review.md", "lock", ".trainkit-workspace", "group_vars", "host_vars",
                  "capacity-refusals.json")
    # The user's own Ansible variables (docs/hosts.md): may be put in a folder before trainkit makes
    # it its workspace, and are never deleted.
    USER_FILES = ("group_vars", "host_vars")
    SUBTREES = {  # folder -> what trainkit, terraform, ssh and ansible-runner write in it
        "ssh": ("id_ed25519", "id_ed25519.pub", "known_hosts", "known_hosts.old", "munge.key"),
        "ansible": ("artifacts", "env", "inventory", "project", "wheels"),
        "terraform": (".terraform", ".terraform.lock.hcl", "terraform.tfstate", "terraform.tfstate.backup",
                      ".trainkit-rendered"),
    }

    marker = property(lambda self: self.root / ".trainkit-workspace")

    def _known(self, name: str) -> bool:
        return (name in self.CLUSTER_FILES or name in self.KEPT_FILES or name.startswith("terraform.log")
                or re.fullmatch(r"\..+\.tmp[0-9]+", name) is not None)  # write_atomic's temporary files

    def _rendered(self) -> set[str]:
        """The files under terraform/ that render wrote (its manifest; InputError when damaged)."""
        text = load_text(self.terraform_dir / ".trainkit-rendered", REMANIFEST, required=False)
        return set((text or "").split())

    def foreign_files(self) -> list[str]:
        """Files and folders here that trainkit did not write (relative names, sorted). In a
        folder without trainkit's marker that is everything in it: a workspace is a folder
        trainkit made, never one guessed from the names of the files it holds."""
        if not self.root.is_dir():
            return []
        names = sorted(os.listdir(self.root))
        if not self.marker.is_file():
            order = {n: i for i, n in enumerate(self.CLUSTER_FILES)}
            unmarked = [n for n in names if n not in self.USER_FILES]
            return sorted(unmarked, key=lambda n: (order.get(n, len(order)), n))
        foreign = [n for n in names if not self._known(n)]
        for folder, known in self.SUBTREES.items():
            sub = self.root / folder
            if not sub.is_dir():
                continue
            extra = set(known) | (self._rendered() if folder == "terraform" else set())
            for path in sorted(sub.rglob("*")):
                rel = path.relative_to(sub)
                if (rel.parts[0] in known or path.is_dir() or rel.as_posix() in extra
                        or (folder == "terraform" and rel.name.startswith((".terraform.tfstate", "terraform.tfstate")))):
                    continue
                foreign.append(f"{folder}/{rel.as_posix()}")
        return foreign

    def owner(self) -> str:
        """The cluster named in the marker ("" when unmarked or marked by an older trainkit);
        InputError naming the marker when it is not UTF-8 text."""
        if not self.marker.is_file():
            return ""
        fix = f"write the cluster's name (one line) into {self.marker}"
        return (load_text(self.marker, fix, required=False) or "").strip()

    def check_ours(self) -> None:
        """InputError naming the folder and the files trainkit would overwrite or delete there, or
        the other cluster the folder belongs to (its stack, state and keys would be replaced)."""
        owner = self.owner()
        if self.cluster and owner and owner != self.cluster:
            raise InputError(f"workspace {self.root} belongs to cluster {owner!r}, not {self.cluster!r}; "
                             f"using it would replace {owner}'s Terraform stack, state and keys",
                             fix=f"give {self.cluster} its own --workdir (or drop --workdir for "
                                 f".trainkit/{self.cluster})")
        self.check_links()
        self.check_runs_dir()
        foreign = self.foreign_files()
        if foreign and all(f.startswith("terraform/") for f in foreign) and not self._rendered():
            raise InputError(f"workspace {self.root}: terraform/.trainkit-rendered, render's list of the files "
                             f"it wrote, is missing or empty, so {', '.join(foreign[:6])} cannot be told "
                             "from files of yours", fix=REMANIFEST)
        if foreign:
            shown = ", ".join(foreign[:12]) + (f" and {len(foreign) - 12} more" if len(foreign) > 12 else "")
            if not self.marker.is_file():
                raise InputError(f"workspace {self.root}: {shown} here were not written by trainkit "
                                 f"(the folder has no {self.marker.name} marker, so trainkit did not "
                                 "make it); render would overwrite them and destroy would delete them",
                                 fix="use a new or empty folder for --workdir (or drop --workdir for "
                                     ".trainkit/<cluster name>); if an older trainkit made this folder, "
                                     f"write the cluster's name into {self.marker}")
            raise InputError(f"workspace {self.root}: {shown} here were not written by trainkit; "
                             "trainkit does not run in, or delete from, a folder holding your files",
                             fix=f"move them out of {self.root}, then run the command again")

    def check_links(self) -> None:
        """InputError (exit 2) naming the first symbolic link in the workspace: trainkit makes none,
        and writing or deleting there would reach what it points to (terraform's own `.terraform/`,
        where a plugin cache links providers, is not looked in)."""
        found = links_under(self.root, skip=(".terraform",))
        if found:
            rel = found[0].relative_to(self.root)
            refuse_link(self.root, rel, f"trainkit writes and deletes files in its workspace {self.root}")

    def check_runs_dir(self) -> None:
        """InputError when runs/ is there but not a folder (every run command lists or writes it)."""
        if self.runs_dir.exists() and not self.runs_dir.is_dir():
            raise InputError(f"{self.runs_dir} is a file, where trainkit keeps its runs (a folder)",
                             fix=f"move it out of {self.root}, then run the command again")

    def ensure(self) -> "Workspace":
        """Create the folder (and its marker); InputError when it is not trainkit's or cannot be made."""
        self.check_ours()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if not self.owner():
                self.marker.write_text(f"{self.cluster}\n" if self.cluster else "")
        except OSError as err:
            raise InputError(f"workspace {self.root}: cannot create it ({err.strerror}: {err.filename})",
                             fix="give --workdir a folder you can write, whose parents are folders, "
                                 "not files") from None
        return self

    def ensure_ssh_key(self, comment: str = "trainkit") -> str:
        """The cluster's public key text; generates an ed25519 pair (0600) on first use."""
        if not self.ssh_private_key.exists():
            if not shutil.which("ssh-keygen"):
                raise MissingToolError("ssh-keygen is not installed",
                                       fix="install OpenSSH (Debian/Ubuntu: apt-get install openssh-client)")
            self.ensure().ssh_dir.mkdir(exist_ok=True)
            os.chmod(self.ssh_dir, 0o700)
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                            "-f", str(self.ssh_private_key)], check=True)
        os.chmod(self.ssh_private_key, 0o600)
        return self.ssh_public_key.read_text().strip()

    def generated_public_key(self) -> str | None:
        """The public key generated in this workspace earlier, or None (never generates)."""
        return self.ssh_public_key.read_text().strip() if self.ssh_public_key.is_file() else None

    def rotate_log(self) -> Path:
        """Start a fresh terraform.log for one command; keep the last LOGS_KEPT (terraform.log.1, ...)."""
        self.ensure()
        logs = [self.terraform_log] + [self.root / f"terraform.log.{i}" for i in range(1, LOGS_KEPT)]
        logs[-1].unlink(missing_ok=True)
        for older, newer in zip(reversed(logs[1:]), reversed(logs[:-1])):
            if newer.exists():
                newer.replace(older)
        return self.terraform_log

    def remove_logs(self) -> None:
        """Delete terraform.log and its rotated copies (they hold IPs and resource ids)."""
        for path in self.root.glob("terraform.log*"):
            path.unlink()

    def remove_cluster_files(self) -> None:
        """Remove what trainkit wrote of CLUSTER_FILES and the terraform logs (after destroy);
        runs/ and review.md stay. InputError, deleting nothing, in a folder trainkit did not make
        or one holding files it did not write (check_ours)."""
        self.check_ours()
        rendered = self._rendered()
        for name in self.CLUSTER_FILES:
            path = self.root / name
            if name == "terraform" and path.is_dir() and not path.is_symlink():
                self._remove_stack(rendered)
            elif path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        self.remove_logs()

    def _remove_stack(self, rendered: set[str]) -> None:
        """terraform/: the rendered files (its manifest), terraform's own files, then empty folders."""
        root = self.terraform_dir
        for rel in sorted(rendered | set(self.SUBTREES["terraform"])):
            path = root / rel
            if rel.startswith("/") or ".." in Path(rel).parts or link_below(root, Path(rel).parent):
                continue  # never through a link (check_ours refuses one before this runs)
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        for folder in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                folder.rmdir()
        with contextlib.suppress(OSError):
            root.rmdir()

    def stack_fingerprint(self) -> str:
        """Hash of every rendered file under terraform/ (not .terraform/, the state or the lock
        file): a saved plan is for exactly these files."""
        h = hashlib.sha256()
        for path in sorted(self.terraform_dir.rglob("*")):
            rel = path.relative_to(self.terraform_dir)
            if path.is_file() and rel.parts[0] != ".terraform" and not rel.name.startswith("terraform.tfstate") \
                    and rel.name != ".terraform.lock.hcl":
                h.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
        return h.hexdigest()

    def save_plan(self, plan_data: dict, fingerprint: str) -> None:
        """plan.json (terraform show -json of plan.bin) and the fingerprint of the files it is for."""
        write_atomic(self.plan_json, json.dumps(plan_data, indent=1, sort_keys=True))
        write_atomic(self.plan_fingerprint, fingerprint)

    def saved_plan(self) -> tuple[str, dict] | None:
        """(fingerprint, plan.json data) of the plan `trainkit plan` saved, or None if incomplete."""
        if not (self.plan_bin.exists() and self.plan_json.exists() and self.plan_fingerprint.exists()):
            return None
        return load_text(self.plan_fingerprint, REPLAN).strip(), read_json(self.plan_json, REPLAN)

    def drop_saved_plan(self) -> None:
        """Forget plan.bin (a saved plan applies once) so the next apply plans again."""
        self.plan_bin.unlink(missing_ok=True)
        self.plan_fingerprint.unlink(missing_ok=True)

    def write_outputs(self, outputs: dict[str, Any]) -> None:
        """Cache the state backend's outputs (`{name: value}`) in outputs.json."""
        write_atomic(self.outputs_json, records.dump(outputs, indent=2, sort_keys=True))

    def mark_applied(self, when: float) -> None:
        """Record the time of the last successful apply (the TTL and cost-so-far start there)."""
        write_atomic(self.applied_json, records.dump({"applied_at": when}))

    def applied_at(self) -> float | None:
        """When this workspace last applied the cluster, or None."""
        record = records.load(self.applied_json, records.Applied, REAPPLY)
        return record.applied_at if record else None

    def node_placement(self) -> dict[str, dict[str, Any]]:
        """Nodes placed apart from the cluster (placement.json's "nodes", written by a recovery
        whose replacement failed over): {"1": {zone, subnet_cidr, instance_type, spot}}; {} when
        there are none; InputError naming placement.json when it is damaged (rendering the nodes
        back at the cluster's placement would move them)."""
        record = records.load(self.root / "placement.json", records.Placement, REPLACE_PLACEMENT)
        fields = ("zone", "subnet_cidr", "instance_type", "spot")
        return {k: {f: v.model_dump()[f] for f in fields if f in v.model_fields_set}
                for k, v in (record.nodes if record else {}).items() if k.isdigit()}

    def write_inventory(self, inventory: dict) -> Path:
        """Write an inventory built by `trainkit.provision.inventory.inventory_for` to inventory.yml."""

        self.ensure()
        header = "# Written by trainkit from the cluster spec and the module outputs; regenerated on apply.\n"
        write_atomic(self.inventory_yml, header + yaml.safe_dump(inventory, sort_keys=False))
        return self.inventory_yml

    def new_run_dir(self) -> Path:
        """A fresh `runs/<run-id>/`; run ids sort by start time."""
        run_id = time.strftime("%Y%m%d-%H%M%S")
        path = self.runs_dir / run_id
        n = 1
        while path.exists():
            n += 1
            path = self.runs_dir / f"{run_id}-{n}"
        path.mkdir(parents=True)
        return path

    def read_outputs(self) -> dict[str, Any]:
        """outputs.json as `{name: value}` (terraform's `{name: {value: ...}}` unwrapped)."""
        raw = read_json(self.outputs_json, REAPPLY)
        if not isinstance(raw, dict):
            raise InputError(f"{self.outputs_json}: not the outputs mapping trainkit writes", fix=REAPPLY)
        outputs = {k: (v["value"] if isinstance(v, dict) and "value" in v else v) for k, v in raw.items()}
        records.check(outputs, self.outputs_json, records.Outputs, REAPPLY)
        outputs.pop("version", None)  # the record's, not a module output
        return outputs

    @contextlib.contextmanager
    def lock(self, command: str) -> Iterator[None]:
        """Hold the workspace lock for one command; LockedError if another holds it."""
        self.ensure()
        try:
            fh = open(self.lock_path, "a+")
        except OSError as err:
            raise InputError(f"{self.lock_path}: cannot open the workspace lock ({err.strerror})",
                             fix="remove it: trainkit's lock is a plain file, and no command holds "
                                 "a folder or an unreadable file") from None
        with fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = self.lock_path.read_bytes().decode(errors="replace").strip() or "another trainkit command"
                raise LockedError(f"workspace {self.root} is in use by {holder}",
                                  fix="wait for it to finish; the lock is released when it exits") from None
            try:
                fh.seek(0)
                fh.truncate()
                fh.write(f"`trainkit {command}` (pid {os.getpid()})\n")
                fh.flush()
            except OSError as err:  # a full disk: say which file
                raise OSError(err.errno, err.strerror, str(self.lock_path)) from None
            try:
                yield
            finally:
                fh.seek(0)
                fh.truncate()
                fcntl.flock(fh, fcntl.LOCK_UN)


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file renamed over it: an interrupt (Ctrl-C, a full
    disk) leaves the old file or the new one under the final name, never half of one."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)  # a leftover of that name (a link, say) is replaced, never written through
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as err:  # ENOSPC from a write names no file: name it
        raise OSError(err.errno, err.strerror, str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)


REMANIFEST = ("terraform/.trainkit-rendered lists the files render wrote: move your own files out of terraform/, "
              "delete the rendered ones (*.tf, terraform.tfvars.json, modules/, the list itself; never "
              "terraform.tfstate*), then run `trainkit render SPEC` again")
REPLACE_PLACEMENT = ("trainkit writes it when an apply or a recovery places nodes: restore it from a backup, "
                     "or delete it to place every node as the spec says (the next plan shows any node it moves)")


def read_public_key(path: str | Path, field: str = "ssh.public_key") -> str:
    """The one-line public key in the user's file `path`; InputError (exit 2) naming `field` if unusable."""
    file = Path(path).expanduser()
    try:
        text = file.read_text().strip()
    except OSError as err:
        raise InputError(f"{field}: cannot read {file}: {err.strerror or err}",
                         fix="point it at your public key file, e.g. ~/.ssh/id_ed25519.pub") from None
    if len(text.splitlines()) != 1 or not text.startswith(("ssh-", "ecdsa-")):
        raise InputError(f"{field}: {file} is not an OpenSSH public key (one line, 'ssh-ed25519 AAAA...')",
                         fix="give the .pub file, not the private key")
    return text
