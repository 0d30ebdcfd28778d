"""The spec's `slurm:` block (target `slurm`): the login node trainkit reaches by SSH and what the
batch job asks the scheduler for. Every value here reaches the batch script (runs/sbatch.py) as an
`#SBATCH` option or a quoted shell word, so each is held to a grammar narrower than Slurm's own:
nothing that could end a line, start a comment or split a word gets past the spec.

Sources (sbatch(1) and slurm.conf(5) of Slurm 22.05, the man pages Debian's slurm-client ships):
- `--time`: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
  "days-hours:minutes" and "days-hours:minutes:seconds"; 0 = no limit (and UNLIMITED/INFINITE,
  which slurm's time_str2mins also reads).
- `--partition` takes a comma-separated list, so a partition name holds no comma; names of nodes and
  partitions are case sensitive (slurm.conf(5)). Accounts and QOS are names in the accounting
  database (sacctmgr(1)); Slurm lower-cases account names. trainkit takes one name of letters,
  digits, '_', '-' and '.', at most 64 characters, for each of the three.
- `--constraint`: feature names joined by `&` (AND) or `|` (OR), a feature optionally `*count`,
  optionally one `[...]` group (matching OR); trainkit takes that subset (no spaces, no quotes).
- `--signal=B:USR1@<s>`: "sig_time must have an integer value between 0 and 65535"; "the signal may
  be sent up to 60 seconds earlier than specified" (hence the 60 s floor below).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from trainkit.util import grammar

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_FEATURE = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(?:\*[1-9][0-9]{0,3})?"
_CONSTRAINT = re.compile(rf"{_FEATURE}(?:[&|]{_FEATURE})*|\[{_FEATURE}(?:\|{_FEATURE})*\]")
# sbatch --time's six forms (groups: days, hours, minutes, seconds as written)
_TIME_FORMS = (
    (re.compile(r"(\d{1,7})"), ("m",)),
    (re.compile(r"(\d{1,7}):(\d{1,2})"), ("m", "s")),
    (re.compile(r"(\d{1,5}):(\d{1,2}):(\d{1,2})"), ("h", "m", "s")),
    (re.compile(r"(\d{1,4})-(\d{1,2})"), ("d", "h")),
    (re.compile(r"(\d{1,4})-(\d{1,2}):(\d{1,2})"), ("d", "h", "m")),
    (re.compile(r"(\d{1,4})-(\d{1,2}):(\d{1,2}):(\d{1,2})"), ("d", "h", "m", "s")),
)
_UNIT_S = {"d": 86400, "h": 3600, "m": 60, "s": 1}
UNLIMITED = ("0", "UNLIMITED", "INFINITE")
SIGNAL_MAX_S = 65535   # sbatch(1) --signal: sig_time between 0 and 65535
# What a `slurm:` block may set on a cluster trainkit provisions with `scheduler: slurm` (the rest
# comes from the cluster: cluster/scheduler.py's settings()).
PROVISIONED_FIELDS = ("partition", "time", "signal_s")
DEFAULT_PARTITION = "trainkit"   # the one partition ansible/roles/slurm makes (slurm_partition)
SIGNAL_MIN_S = 60      # sbatch(1): the signal may come up to 60 s early; less would be noise


def _shown(value: object) -> str:
    """The value as a message shows it: repr (control characters visible), at most 60 chars."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "...'"


def check_name(value: str, what: str) -> str:
    """A partition, account, QOS or GPU type name (see the module docstring)."""
    if isinstance(value, str) and _NAME.fullmatch(value):
        return value
    raise ValueError(f"{_shown(value)} is not a Slurm {what} name trainkit accepts: letters, digits, "
                     "'_', '-' and '.', starting with a letter, digit or '_', at most 64 characters "
                     "(e.g. gpu)")


def check_constraint(value: str) -> str:
    """A `--constraint` feature expression (the subset in the module docstring)."""
    if isinstance(value, str) and len(value) <= 512 and _CONSTRAINT.fullmatch(value):
        return value
    raise ValueError(f"{_shown(value)} is not a feature expression trainkit accepts: feature names "
                     "joined by & or |, a feature optionally *count, or one [a|b] group, no spaces "
                     "(e.g. a100&ib)")


def time_seconds(value: str) -> int | None:
    """Seconds of an sbatch `--time` value; None for no limit. ValueError for any other text."""
    if value in UNLIMITED:
        return None
    for pattern, units in _TIME_FORMS:
        found = pattern.fullmatch(value) if isinstance(value, str) else None
        if found:
            return sum(int(g) * _UNIT_S[u] for g, u in zip(found.groups(), units))
    raise ValueError(f"{_shown(value)} is not a time sbatch --time accepts: minutes, minutes:seconds, "
                     "hours:minutes:seconds, days-hours, days-hours:minutes or "
                     "days-hours:minutes:seconds (e.g. 4:00:00 or 1-12), or UNLIMITED")


class SlurmLogin(BaseModel):
    """The login node: where `sbatch`, `squeue` and `scancel` run, reached over SSH with a key
    the user has authorised already (trainkit installs none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str = Field(description="Where SSH connects (IP or DNS name)")
    port: int = Field(22, ge=1, le=65535)
    user: str | None = Field(None, description="Login user; default: whoever runs trainkit")
    key: str | None = Field(None, description="Private key file; default: ssh's own choice")

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        return grammar.check_address(v)

    @field_validator("user")
    @classmethod
    def _user(cls, v: str | None) -> str | None:
        return v if v is None else grammar.check_user(v)

    @field_validator("key")
    @classmethod
    def _key(cls, v: str | None) -> str | None:
        return v if v is None else grammar.check_key_path(v)


class SlurmSpec(BaseModel):
    """What the batch job asks the scheduler for (`#SBATCH` options), and where it runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # None only with `scheduler: slurm` (the head node is the login node: spec/target_rules.py)
    login: SlurmLogin | None = None
    partition: str | None = Field(None, description="--partition; default: the cluster's default partition")
    account: str | None = Field(None, description="--account; default: your default account")
    qos: str | None = Field(None, description="--qos; default: the association's default QOS")
    # None: no --time, so the partition's default time limit applies. Not UNLIMITED: a job asking
    # for more than the partition's limit stays PENDING, "possibly indefinitely" (sbatch(1) --time).
    time: str | None = Field(None, description="--time, as sbatch writes it (4:00:00, 1-12); default: "
                                               "the partition's default time limit")
    gpus_per_node: int = Field(0, ge=0, le=64, description="--gpus-per-node (gres gpu); 0 = none")
    gpu_type: str | None = Field(None, description="GPU gres type (--gpus-per-node=<type>:<n>), e.g. a100")
    constraint: str | None = Field(None, description="--constraint feature expression, e.g. a100&ib")
    signal_s: int = Field(300, ge=SIGNAL_MIN_S, le=SIGNAL_MAX_S,
                          description="Seconds before the time limit when the job is told to "
                                      "checkpoint and requeue itself (--signal=B:USR1@<s>)")
    workdir: str | None = Field(None, description="Folder on storage every compute node and the login "
                                                  "node share, where runs live (their checkpoints, logs, "
                                                  "the batch script); with scheduler: slurm, the "
                                                  "cluster's shared storage")
    python: str = Field("python3", description="Interpreter on the compute nodes with trainkit and "
                                               "torch installed (an absolute path, or python3)")

    @field_validator("partition", "account", "qos", "gpu_type")
    @classmethod
    def _names(cls, v: str | None, info) -> str | None:
        return v if v is None else check_name(v, info.field_name.replace("_", " "))

    @field_validator("constraint")
    @classmethod
    def _constraint(cls, v: str | None) -> str | None:
        return v if v is None else check_constraint(v)

    @field_validator("time")
    @classmethod
    def _time(cls, v: str | None) -> str | None:
        if v is not None:
            time_seconds(v)
        return v

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, v: str | None) -> str | None:
        return v if v is None else grammar.check_path(v)

    @field_validator("python")
    @classmethod
    def _python(cls, v: str) -> str:
        return v if v == "python3" else grammar.check_path(v)

    @model_validator(mode="after")
    def _signal_inside_time(self) -> "SlurmSpec":
        # A signal due before the job starts would arrive at once, every start: checkpoint, requeue,
        # again. Half the limit at most leaves the job at least as long to train as to wait.
        limit = self.time_limit_s
        if limit is not None and limit and self.signal_s > limit // 2:
            raise ValueError(f"signal_s: {self.signal_s} s before the end of a {limit} s time limit "
                             f"(slurm.time {self.time}) leaves too little time to train; give a "
                             f"signal_s of at most {limit // 2} or a longer time")
        return self

    @property
    def time_limit_s(self) -> int | None:
        """The time limit in seconds; None = no limit, or the partition's (not known here)."""
        return None if self.time is None else time_seconds(self.time)
