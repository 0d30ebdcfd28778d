"""A review dict (`trainkit.stack.review.review`) -> text for a terminal or markdown for a pull request.

The markdown puts what is dangerous first (replace and destroy, loudly), then cost per hour, day
and month with the delta against what runs now, findings, safety nets, and the full change list
in a collapsible block. It stays under GitHub's comment size limit: the change list is cut with a
note when it would not fit.
"""

from __future__ import annotations

# GitHub rejects issue/PR comments over 65536 characters ("Body is too long (maximum is 65536
# characters)", GitHub REST API, create an issue comment). Keep a margin for the note.
GITHUB_COMMENT_LIMIT = 65536
_MARGIN = 512
ROLES = ("network", "compute", "storage", "nas")
_LOUD = {"delete": "🔴 **DESTROY**", "replace": "🟠 **REPLACE**"}


def money(value: float | None, cost: dict) -> str:
    """'1.23 USD', with '+ unknown (...)' when some items have no price, and '(at most)' for bounds."""
    if value is None or cost.get("currency") is None:
        return "unknown"
    text = f"{value:,.2f} {cost['currency']}"
    if cost.get("upper_bound"):
        text = f"at most {text}"
    if not cost["complete"]:
        text += f" + unknown ({', '.join(cost['unknown'])})"
    return text


def to_text(rev: dict) -> str:
    if rev.get("note"):  # local / hosts: nothing for terraform to do
        return rev["note"]
    ch, cost = rev["changes"], rev["cost"]
    lines = [f"Plan for {rev['cluster']} ({rev['cloud']}): "
             f"{ch['add']} to add, {ch['change']} to change, {ch['destroy']} to destroy"]
    for a in ch["addresses"]:
        if a["action"] in _LOUD:
            lines.append(f"  !! {a['action'].upper()} {a['address']}{_why(a)}")
    for role in ROLES:
        if ch["by_role"][role]:
            lines.append(f"  {role:<8} " + ", ".join(f"{n} {a}" for a, n in ch["by_role"][role].items()))
    lines.append(f"Cost ({_billing(cost)}): {money(cost['per_hour'], cost)} per hour, "
                 f"{money(cost['per_day'], cost)} per day, {money(cost['per_month'], cost)} per month")
    if "delta_per_hour" in cost and ch["has_changes"]:
        lines.append(f"  change: {cost['delta_per_hour']:+,.2f} {cost['currency']} per hour against what runs now "
                     f"({cost['current_per_hour']:,.2f} {cost['currency']} per hour, priced from the state)")
    node = cost["items"][0] if cost["items"] else None
    if node:
        lines.append(f"  {node['item']}: {node['basis']}")
    lines += [f"  [{f['severity']}] {f['code']}: {f['message']}" for f in rev["findings"]]
    if not rev["findings"]:
        lines.append("Findings: none")
    lines += [f"  safety: {s}" for s in rev.get("safety", [])]
    return "\n".join(lines)


def to_markdown(rev: dict, limit: int = GITHUB_COMMENT_LIMIT) -> str:
    """The pull-request comment; at most `limit` characters (the change list is cut to fit)."""
    title = f"### trainkit plan: `{rev['cluster']}` on {rev['cloud']}"
    if rev.get("note"):
        return f"{title}\n\n{rev['note']}\n"
    head = "\n".join([title, ""] + _danger(rev) + _summary(rev) + _cost(rev) + _findings(rev))
    rows = [f"- `{a['action']}` `{a['address']}`" for a in rev["changes"]["addresses"]]
    return head + _details(rows, limit - len(head) - _MARGIN)


def _danger(rev: dict) -> list[str]:
    loud = [a for a in rev["changes"]["addresses"] if a["action"] in _LOUD]
    if not loud:
        return ["No resource is replaced or destroyed.", ""]
    out = [f"> [!CAUTION]\n> **{len(loud)} resource(s) will be replaced or destroyed:**"]
    out += [f"> - {_LOUD[a['action']]} `{a['address']}` ({a['role']}){_why(a)}" for a in loud[:50]]
    if len(loud) > 50:
        out.append(f"> - ... and {len(loud) - 50} more (see the change list)")
    return out + [""]


def _why(a: dict) -> str:
    """': why; loses what' for a replaced resource ('' otherwise)."""
    if not a.get("reason"):
        return ""
    return f": {a['reason']}" + (f"; loses {a['loses']}" if a.get("loses") else "")


def _summary(rev: dict) -> list[str]:
    ch = rev["changes"]
    out = [f"**{ch['add']}** to add, **{ch['change']}** to change, **{ch['destroy']}** to destroy", "",
           "| role | create | update | delete | replace |", "|---|---:|---:|---:|---:|"]
    for role in ROLES:
        c = ch["by_role"][role]
        out.append(f"| {role} | " + " | ".join(str(c.get(a, 0)) for a in
                                               ("create", "update", "delete", "replace")) + " |")
    return out + [""]


def _cost(rev: dict) -> list[str]:
    cost = rev["cost"]
    out = [f"**Estimated cost** ({_billing(cost)})", "",
           "| item | quantity | per hour | price basis |", "|---|---:|---:|---|"]
    for item in cost["items"]:
        price = "unknown" if item["per_hour"] is None else f"{item['per_hour']:,.4f}"
        if item["upper_bound"] and item["per_hour"] is not None:
            price = f"≤ {price}"
        out.append(f"| {item['item']} | {item['quantity']:g} {item['unit']} | {price} | {item['basis']} |")
    out += ["", f"Total: {money(cost['per_hour'], cost)} per hour, {money(cost['per_day'], cost)} per day, "
                f"{money(cost['per_month'], cost)} per month"]
    if "delta_per_hour" in cost:
        sign = "+" if cost["delta_per_hour"] >= 0 else "-"
        cur = cost["currency"]
        out.append(f"Change against what runs now: {sign}{abs(cost['delta_per_hour']):,.2f} {cur} per hour "
                   f"({sign}{abs(cost['delta_per_month']):,.2f} {cur} per month; now "
                   f"{cost['current_per_hour']:,.2f} {cur} per hour, priced from the state)")
    return out + [""]


def _findings(rev: dict) -> list[str]:
    out = ["**Findings**" if rev["findings"] else "**Findings**: none"]
    out += [f"- {'⛔' if f['severity'] == 'block' else '⚠️'} `{f['code']}` {f['message']}" for f in rev["findings"]]
    if rev.get("checkov"):
        out.append(f"_{rev['checkov']}_")
    if rev.get("safety"):
        out += ["", "**Safety nets**"] + [f"- {s}" for s in rev["safety"]]
    return out + [""]


def _details(rows: list[str], room: int) -> str:
    """The full change list in a <details> block, cut (with a note) to fit in `room` characters."""
    kept, used = [], 0
    for row in rows:
        if used + len(row) + 1 > room:
            break
        kept.append(row)
        used += len(row) + 1
    note = [] if len(kept) == len(rows) else \
        ["", f"_{len(rows) - len(kept)} more change(s) not shown: GitHub's comment size limit. "
             f"Run `trainkit plan --format json` for all of them._"]
    return "\n".join(["", f"<details><summary>All {len(rows)} change(s)</summary>", ""] + kept + note
                     + ["", "</details>", ""])


def _billing(cost: dict) -> str:
    return (cost.get("billing") or "n/a").replace("_", "-")
