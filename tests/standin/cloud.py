"""A stateful stand-in for one cloud behind the provider stand-in: what apply creates is there until
destroy deletes it (or a test takes it away), and the cloud refuses what the real API refuses.

The store is one folder (TRAINKIT_STANDIN_CLOUD), shared by every provider process a terraform
command starts and by the test that reads it:

    store.json   {"objects": {"<type> <id>": {"type", "attrs", "region", "seq"}}, "seq": n,
                  "faults": {...}, "calls": [[op, type, id], ...]}

Faults a test sets (Store.set_faults), each answered as the cloud answers it (rules_*.py cite the
API documentation of each error):
    capacity: [{"zone", "type"}]        creating an instance of that type in that zone is refused
                                        (sold out: Alibaba OperationDenied.NoStock, Tencent
                                        ResourceInsufficient.SpecifiedInstanceType, Huawei Ecs.0319)
    quota: {"<resource type>": n}       at most n objects of that type (the account quota)
    lose: {"<resource type>": n}        the next n creates of that type are carried out, but the
                                        answer is lost (the provider reports a timeout; the object
                                        exists, untracked by the state)
    throttle: n                         the next n calls are refused as throttled; the SDKs retry
                                        throttling themselves (Alibaba Throttling.User, Tencent
                                        RequestLimitExceeded, Huawei APIGW.0308), so the provider
                                        waits and retries: the call succeeds, and the count shows
    gone: [id]                          objects the cloud released on its own (spot reclaim, TTL)

Without a folder the store lives in memory (a terraform run outside the tests).
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import importlib
import json
import os
import random
from pathlib import Path
from typing import Any, Iterator

from .values import Unknown


class CloudError(Exception):
    """The cloud refused a call; str(self) is the provider's error text for it."""


class Store:
    """The stand-in cloud's objects, faults and call log, in a folder shared between processes."""

    def __init__(self, folder: str | os.PathLike | None):
        self.folder = Path(folder) if folder else None
        self._memory: dict = {"objects": {}, "seq": 0, "faults": {}, "calls": []}

    @contextlib.contextmanager
    def edit(self) -> Iterator[dict]:
        """The store's data under an exclusive lock, written back when the block ends."""
        if self.folder is None:
            yield self._memory
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / "store.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            path = self.folder / "store.json"
            data = json.loads(path.read_text()) if path.exists() else {"objects": {}, "seq": 0,
                                                                       "faults": {}, "calls": []}
            try:
                yield data
            finally:  # a refusal keeps what the cloud counted before it (a throttle, a call)
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
                os.replace(tmp, path)

    def read(self) -> dict:
        with self.edit() as data:
            return copy.deepcopy(data)

    def set_faults(self, **faults: Any) -> None:
        with self.edit() as data:
            data["faults"].update(faults)

    def release(self, type_name: str, object_id: str) -> None:
        """The cloud releases an object on its own (a spot reclaim, a TTL): it is gone, and the
        next refresh tells terraform so."""
        with self.edit() as data:
            del data["objects"][_key(type_name, object_id)]
            data["calls"].append(["released", type_name, object_id])

    def objects(self, type_name: str | None = None) -> dict[str, dict]:
        """"<type> <id>" -> attrs of every object (of one type: id -> attrs) the cloud holds. Ids
        are unique per type only (a Tencent CBS attachment takes its disk's id)."""
        return {(o["attrs"]["id"] if type_name else key): o["attrs"] for key, o in self.read()["objects"].items()
                if type_name is None or o["type"] == type_name}


class Cloud:
    """One cloud's API as the provider sees it: create/read/update/delete of objects by type.

    `rules` is the cloud's module (rules_alicloud.py, ...): ids, the values the cloud computes, and
    its refusals. Every method returns (value, diagnostics) through `call` / `apply`.
    """

    def __init__(self, rules: Any, folder: str | None):
        self.rules = rules
        self.store = Store(folder)
        self.region: str | None = None

    # ---------------------------------------------------------------- provider configuration
    def configure(self, config: dict, env: dict[str, str]) -> list[dict]:
        """Credentials and region as the real provider requires them (rules.CREDENTIALS)."""
        self.region = config.get("region") or env.get(self.rules.REGION_ENV)
        problems = []
        if not self.region:
            problems.append(_diag(f"region is required: set it in the provider block or {self.rules.REGION_ENV}"))
        if not any(all(env.get(v) for v in names) for names in self.rules.CREDENTIALS):
            names = " / ".join(" + ".join(n) for n in self.rules.CREDENTIALS)
            problems.append(_diag(f"{self.rules.NO_CREDENTIALS} (set {names})"))
        return problems

    def call(self, method: str, *args: Any) -> tuple[Any, list[dict]]:
        try:
            return getattr(self, method)(*args), []
        except CloudError as e:
            return None, [_diag(str(e))]

    # ---------------------------------------------------------------- resources
    def plan_problems(self, type_name: str, prior: Any, planned: dict) -> list[dict]:
        """Refusals a real provider raises at plan (CustomizeDiff), from rules.plan_check."""
        check = getattr(self.rules, "plan_check", None)
        return [_diag(p) for p in (check(type_name, prior, planned) if check else [])]

    def apply(self, type_name: str, prior: Any, planned: Any, config: Any) -> tuple[Any, list[dict]]:
        try:
            if planned is None:
                self._delete(type_name, prior)
                return None, []
            if prior is None:
                return self._create(type_name, planned), []
            return self._update(type_name, prior, planned), []
        except CloudError as e:
            return (None if prior is None or planned is None else prior), [_diag(str(e))]

    def _create(self, type_name: str, planned: dict) -> dict:
        with self.store.edit() as data:
            self._throttled(data, "create", type_name)
            try:
                self.rules.create_check(type_name, planned, View(data, self.region))
            except CloudError as refusal:  # the call happened: the log (kept by edit) says so
                data["calls"].append(["refused", type_name, str(refusal).split("ErrorCode: ")[-1][:60]])
                raise
            quota = data["faults"].get("quota", {}).get(type_name)
            if quota is not None and sum(o["type"] == type_name for o in data["objects"].values()) >= quota:
                raise CloudError(self.rules.quota_error(type_name))
            data["seq"] += 1
            attrs = copy.deepcopy(planned)
            attrs["id"] = self.rules.new_id(type_name, attrs, random.Random(data["seq"]))
            self.rules.fill(type_name, attrs, View(data, self.region))
            attrs = _known(attrs)
            data["objects"][_key(type_name, attrs["id"])] = {"type": type_name, "attrs": attrs, "region": self.region,
                                            "seq": data["seq"]}
            data["calls"].append(["create", type_name, attrs["id"]])
            lose = data["faults"].get("lose", {})
            lost = bool(lose.get(type_name))
            if lost:
                lose[type_name] -= 1
        if lost:  # raised after the block: an exception inside edit() would skip writing the object back
            raise CloudError(self.rules.lost_response(type_name))
        return attrs

    def _update(self, type_name: str, prior: dict, planned: dict) -> dict:
        with self.store.edit() as data:
            self._throttled(data, "update", type_name)
            obj = data["objects"].get(_key(type_name, prior["id"]))
            if obj is None:
                raise CloudError(self.rules.not_found(type_name, prior["id"]))
            self.rules.update_check(type_name, obj["attrs"], planned, View(data, self.region))
            attrs = copy.deepcopy(planned)
            self.rules.fill(type_name, attrs, View(data, self.region), before=obj["attrs"])
            obj["attrs"] = attrs = _known(attrs)
            data["calls"].append(["update", type_name, prior["id"]])
            return attrs

    def _delete(self, type_name: str, prior: dict) -> None:
        with self.store.edit() as data:
            self._throttled(data, "delete", type_name)
            key = _key(type_name, prior["id"])
            if key not in data["objects"]:
                return  # already gone: the providers treat NotFound on delete as done
            self.rules.delete_check(type_name, data["objects"][key]["attrs"], View(data, self.region))
            del data["objects"][key]
            data["calls"].append(["delete", type_name, prior["id"]])

    def read(self, type_name: str, state: Any) -> Any:
        if state is None:
            return None
        with self.store.edit() as data:
            obj = data["objects"].get(_key(type_name, state.get("id")))
            data["calls"].append(["read", type_name, state.get("id")])
            return None if obj is None else copy.deepcopy(obj["attrs"])

    def import_(self, type_name: str, object_id: str) -> Any:
        with self.store.edit() as data:
            obj = data["objects"].get(_key(type_name, object_id))
            return copy.deepcopy(obj["attrs"]) if obj else None

    def read_data(self, type_name: str, config: dict) -> dict:
        with self.store.edit() as data:
            attrs = copy.deepcopy(config)
            self.rules.read_data(type_name, attrs, View(data, self.region))
            return _known(attrs)

    def _throttled(self, data: dict, op: str, type_name: str) -> None:
        """Throttling the SDK retries away (see the module docstring): counted, then carried out."""
        if data["faults"].get("throttle", 0) > 0:
            data["faults"]["throttle"] -= 1
            data["calls"].append(["throttled", type_name, op])


class View:
    """What rules may read of the store while a call holds its lock: objects by id and type."""

    def __init__(self, data: dict, region: str | None):
        self.data, self.region = data, region

    def get(self, type_name: str, object_id: str | None) -> dict | None:
        obj = self.data["objects"].get(_key(type_name, object_id)) if object_id else None
        return obj["attrs"] if obj else None

    def of_type(self, type_name: str) -> list[dict]:
        return [o["attrs"] for o in self.data["objects"].values() if o["type"] == type_name]

    @property
    def faults(self) -> dict:
        return self.data["faults"]

    def next(self) -> int:
        self.data["seq"] += 1
        return self.data["seq"]


def _known(value: Any) -> Any:
    """Apply's answer holds no unknowns: a computed value the cloud did not fill is null."""
    if isinstance(value, Unknown):
        return None
    if isinstance(value, dict):
        return {k: _known(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_known(v) for v in value]
    return value


def _key(type_name: str, object_id: str | None) -> str:
    return f"{type_name} {object_id}"


def _diag(text: str) -> dict:
    return {"severity": "error", "summary": text.split("\n", 1)[0][:200], "detail": text, "path": []}


def for_provider(name: str, folder: str | None) -> Cloud:
    return Cloud(importlib.import_module(f"{__package__}.rules_{name}"), folder)
