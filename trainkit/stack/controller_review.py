"""The controller's policy in a review (issue 42): what its instance identity may do, one readable
line per statement, so an infra engineer sees it in the pull request before it exists.

Every module outputs `controller_policy` (the policy document as JSON, or null) and the root stack
passes it on; the plan JSON holds it under planned_values.outputs once it is known at plan time
(the modules build it from the spec's values only). Pure functions.
"""

from __future__ import annotations

import json
from typing import Any

OUTPUT = "controller_policy"


def policy_statements(plan: dict) -> list[dict] | None:
    """The planned controller policy's statements, keys lower-cased (AWS, Alibaba and Huawei write
    `Statement`/`Effect`, Tencent CAM `statement`/`effect`); None when the plan has no controller or
    its policy is not known until apply."""
    value = (((plan.get("planned_values") or {}).get("outputs") or {}).get(OUTPUT) or {}).get("value")
    if not isinstance(value, str):
        return None
    try:
        doc = json.loads(value)
    except ValueError:
        return None
    doc = {str(k).lower(): v for k, v in doc.items()} if isinstance(doc, dict) else {}
    statements = doc.get("statement") or []
    return [{str(k).lower(): v for k, v in s.items()} for s in statements if isinstance(s, dict)]


def _words(value: Any) -> str:
    return ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)


def statement_line(s: dict) -> str:
    """One statement in words: `Allow ec2:RunInstances on arn:...:instance/* if StringEquals
    aws:RequestTag/trainkit-cluster = lab`."""
    line = f"{s.get('effect', '?')} {_words(s.get('action', '?'))} on {_words(s.get('resource', '*'))}"
    conditions = []
    for operator, keys in (s.get("condition") or {}).items():
        for key, value in (keys or {}).items() if isinstance(keys, dict) else ():
            conditions.append(f"{operator} {key} = {_words(value)}")
    return line + (f" if {' and '.join(conditions)}" if conditions else "")


def policy_lines(plan: dict) -> list[str]:
    """The controller's policy as lines for the review ([] when there is none)."""
    return [statement_line(s) for s in policy_statements(plan) or []]
