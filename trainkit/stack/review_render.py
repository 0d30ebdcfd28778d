"""A review dict (`trainkit.stack.review.review`) -> text for a terminal or markdown for a pull request.

Both carry the same facts in the same order, as an Atlantis comment with an infracost table does:

1. a header: cluster, cloud and region, workspace, state backend, the spec's commit (in git),
   and the command that applies the plan;
2. what is replaced or destroyed, first and loudly, each with its cause and what it loses;
3. counts per role, and the placement candidates (zone, type, billing) with what the cloud says
   of each and its price, where the spec lists several;
4. cost: now, new and the delta, per hour and per month, with the currency on every line; the
   items with their price basis, usage-priced items marked (their use is billed on top), and
   warnings (prices from another region);
5. findings and safety nets;
6. every create / update / delete / replace with its changed attributes (before -> after;
   sensitive values masked), in a collapsible <details> block in markdown.

The markdown stays under GitHub's comment size limit: the change list is cut with a note when it
would not fit. User text (paths, tag values) goes into code blocks or escaped HTML only.
"""

from __future__ import annotations

import html

from trainkit.money.cost import HOURS_PER_MONTH

# GitHub rejects issue/PR comments over 65536 characters ("Body is too long (maximum is 65536
# characters)", GitHub REST API, create an issue comment). Keep a margin for the note.
GITHUB_COMMENT_LIMIT = 65536
_MARGIN = 512
ROLES = ("network", "compute", "storage", "nas")
_LOUD = {"delete": "🔴 **DESTROY**", "replace": "🟠 **REPLACE**"}
_STOPS = "🟡 **STOPS**"  # an update the cloud makes on a stopped node (clouds' `in_place`)
# Terraform's own plan symbols (`terraform plan` output), also what a ```diff block colours.
SYMBOL = {"create": "+", "delete": "-", "update": "~", "replace": "-/+"}
MAX_ATTRIBUTES = 40  # attribute lines per resource; the rest are counted


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


def header_lines(rev: dict) -> list[tuple[str, str]]:
    """(label, value) pairs of the header, in order; the commit only when known."""
    h = rev.get("header") or {}
    where = f"{rev['cloud']}" + (f", {h['region']}" if h.get("region") else "")
    rows = [("cluster", f"{rev['cluster']} ({where})")]
    rows += [(k, h[k]) for k in ("spec", "workspace", "backend", "commit") if h.get(k)]
    if h.get("apply"):
        rows.append(("apply with", h["apply"]))
    return rows


def cost_lines(cost: dict) -> list[tuple[str, str, str]]:
    """(label, per hour, per month) for now / new / delta, each with its currency."""
    cur = cost.get("currency") or ""
    rows = [("new", money(cost["per_hour"], cost), money(cost["per_month"], cost))]
    if "delta_per_hour" in cost:
        now = cost["current_per_hour"]
        month = cost.get("current_per_month", now * HOURS_PER_MONTH)
        rows.insert(0, ("now", f"{now:,.2f} {cur}", f"{month:,.2f} {cur}"))
        d, m = cost["delta_per_hour"], cost["delta_per_month"]
        rows.append(("delta", f"{'+' if d >= 0 else '-'}{abs(d):,.2f} {cur}", f"{'+' if m >= 0 else '-'}{abs(m):,.2f} {cur}"))
    return rows


def item_price(item: dict, cost: dict) -> str:
    """An item's per-hour price with the currency; 'unknown'; '≤' for an upper bound."""
    if item["per_hour"] is None:
        return "unknown"
    return f"{'≤ ' if item['upper_bound'] else ''}{item['per_hour']:,.4f} {cost.get('currency') or ''}".rstrip()


def placement_rows(rev: dict) -> list[tuple[str, str, str, str]]:
    """(mark, candidate, what the cloud said, price per node-hour) for each placement candidate
    (the preflight's rows, cluster/preflight.py); mark "->" on the one planned. [] without them."""
    p = rev.get("placement")
    if not p:
        return []
    chosen = p["chosen"]
    out = []
    for row in p["candidates"]:
        here = (row["zone"], row["type"], row["billing"]) == (chosen["zone"], chosen["type"], chosen["billing"])
        price = f"{row['price']:,.4f} {p.get('currency') or ''}".rstrip() if row["price"] is not None else "unknown"
        billing = "spot" if row["billing"] == "spot" else "on-demand"
        out.append(("->" if here else "", f"{row['type']} in {row['zone']} ({billing})", row["status"], price))
    return out


def change_lines(a: dict) -> list[str]:
    """One resource as `terraform plan` prints it: symbol, address, action, then its attributes."""
    out = [f"{SYMBOL.get(a['action'], '?')} {a['address']} ({a['action']}{', ' + a['role'] if a.get('role') else ''})"]
    attrs = a.get("attributes") or []
    for row in attrs[:MAX_ATTRIBUTES]:
        out.append(f"    {_plain(row['name'])}: {row['before']} -> {row['after']}")
    if len(attrs) > MAX_ATTRIBUTES:
        out.append(f"    ... and {len(attrs) - MAX_ATTRIBUTES} more attribute(s) (`trainkit plan --format json`)")
    return out


def to_text(rev: dict) -> str:
    if rev.get("note"):  # local / hosts: nothing for terraform to do
        return rev["note"]
    ch, cost = rev["changes"], rev["cost"]
    lines = [f"Plan for {rev['cluster']} ({rev['cloud']}): "
             f"{ch['add']} to add, {ch['change']} to change, {ch['destroy']} to destroy"]
    lines += [f"  {label + ':':<11} {value}" for label, value in header_lines(rev)[1:]]
    for a in ch["addresses"]:
        if a["action"] in _LOUD:
            lines.append(f"  !! {'DESTROY' if a['action'] == 'delete' else 'REPLACE'} {a['address']}{_why(a)}")
        elif a.get("disruption") == "stops":
            lines.append(f"  !! STOPS {a['address']}{_why(a)}")
    for role in ROLES:
        if ch["by_role"][role]:
            lines.append(f"  {role:<8} " + ", ".join(f"{n} {a}" for a, n in ch["by_role"][role].items()))
    rows = placement_rows(rev)
    if rows:
        lines.append("Placement (candidates in the order apply tries them; what the cloud says now):")
        lines += [f"  {mark:<2} {i}. {what}: {status}, {price} per node-hour"
                  for i, (mark, what, status, price) in enumerate(rows, 1)]
    lines.append(f"Cost ({_billing(cost)}):")
    lines += [f"  {label:<6} {hour} per hour, {month} per month" for label, hour, month in cost_lines(cost)]
    for item in cost["items"]:
        lines.append(f"  {item['item']}: {item_price(item, cost)} per hour ({item['basis']})"
                     + (f"; usage-priced: {item['usage']}" if item.get("usage") else ""))
    lines += [f"  warning: {w}" for w in cost.get("warnings", [])]
    lines += [f"  [{f['severity']}] {f['code']}: {f['message']}" for f in rev["findings"]]
    if not rev["findings"]:
        lines.append("Findings: none")
    lines += [f"  safety: {s}" for s in rev.get("safety", [])]
    if rev.get("controller_policy"):
        lines.append("Controller policy (what the controller's instance identity may do):")
        lines += [f"  {line}" for line in rev["controller_policy"]]
    if ch["addresses"]:
        lines.append(f"Changes ({len(ch['addresses'])}):")
        lines += [f"  {line}" for a in ch["addresses"] for line in change_lines(a)]
    return "\n".join(lines)


def to_markdown(rev: dict, limit: int = GITHUB_COMMENT_LIMIT) -> str:
    """The pull-request comment; at most `limit` characters (the change list is cut to fit)."""
    title = f"### trainkit plan: `{rev['cluster']}` on {rev['cloud']}"
    if rev.get("note"):
        return f"{title}\n\n{rev['note']}\n"
    head = "\n".join([title, ""] + _header(rev) + _danger(rev) + _summary(rev) + _placement(rev) + _cost(rev)
                     + _findings(rev) + _controller(rev))
    blocks = [change_lines(a) for a in rev["changes"]["addresses"]]
    return head + _details(blocks, limit - len(head) - _MARGIN)


def _controller(rev: dict) -> list[str]:
    if not rev.get("controller_policy"):
        return []
    return ["", "**Controller policy** (what the controller's instance identity may do):", ""] + \
        [f"- `{_code(line)}`" for line in rev["controller_policy"]]


def _header(rev: dict) -> list[str]:
    rows = header_lines(rev)
    if len(rows) == 1:
        return []
    out = ["| | |", "|---|---|"]
    out += [f"| {label} | <code>{_cell(value)}</code> |" for label, value in rows]
    return out + [""]


def _danger(rev: dict) -> list[str]:
    loud = [a for a in rev["changes"]["addresses"] if a["action"] in _LOUD or a.get("disruption") == "stops"]
    if not loud:
        return ["No resource is replaced or destroyed.", ""]
    out = [f"> [!CAUTION]\n> **{len(loud)} resource(s) will be replaced, destroyed or stopped:**"]
    out += [f"> - {_LOUD.get(a['action'], _STOPS)} `{a['address']}` ({a['role']}){_why(a)}" for a in loud[:50]]
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


def _placement(rev: dict) -> list[str]:
    rows = placement_rows(rev)
    if not rows:
        return []
    out = ["**Placement** (candidates in the order apply tries them)", "",
           "| | candidate | the cloud says | per node-hour |", "|---|---|---|---:|"]
    out += [f"| {'**→**' if mark else ''} | {_cell(what)} | {_cell(status)} | {price} |" for mark, what, status, price in rows]
    return out + [""]


def _cost(rev: dict) -> list[str]:
    cost = rev["cost"]
    out = [f"**Estimated cost** ({_billing(cost)})", "", "| | per hour | per month |", "|---|---:|---:|"]
    out += [f"| {label} | {hour} | {month} |" for label, hour, month in cost_lines(cost)]
    out += ["", "| item | quantity | per hour | price basis |", "|---|---:|---:|---|"]
    for item in cost["items"]:
        basis = _cell(item["basis"]) + (f" — **usage-priced**: {_cell(item['usage'])}" if item.get("usage") else "")
        out.append(f"| {_cell(item['item'])} | {item['quantity']:g} {item['unit']} | {item_price(item, cost)} | {basis} |")
    out += [f"> [!WARNING]\n> {_cell(w)}" for w in cost.get("warnings", [])]
    return out + [""]


def _findings(rev: dict) -> list[str]:
    out = ["**Findings**" if rev["findings"] else "**Findings**: none"]
    out += [f"- {'⛔' if f['severity'] == 'block' else '⚠️'} `{f['code']}` {f['message']}" for f in rev["findings"]]
    if rev.get("checkov"):
        out.append(f"_{rev['checkov']}_")
    if rev.get("safety"):
        out += ["", "**Safety nets**"] + [f"- {s}" for s in rev["safety"]]
    return out + [""]


def _details(blocks: list[list[str]], room: int) -> str:
    """Every change with its attributes in a <details> ```diff block, cut (with a note) to fit."""
    kept, used = [], 0
    for block in blocks:
        size = sum(len(line) + 1 for line in block)
        if used + size > room:
            break
        kept.append(block)
        used += size
    attrs = sum(len(b) - 1 for b in blocks)
    note = [] if len(kept) == len(blocks) else \
        ["", f"_{len(blocks) - len(kept)} more change(s) not shown: GitHub's comment size limit. "
             f"Run `trainkit plan --format json` for all of them._"]
    return "\n".join(["", f"<details><summary>All {len(blocks)} change(s), {attrs} attribute line(s)</summary>",
                      "", "```diff"] + [line for b in kept for line in b] + ["```"] + note
                     + ["", "</details>", ""])


def _code(text: str) -> str:
    """Text for a markdown code span (shown as it is: `*` and `<` stay literal): no backtick or line break."""
    return str(text).replace("`", "'").replace("\n", " ").replace("\r", " ")


def _cell(text: str) -> str:
    """User text in a markdown table cell: HTML-escaped, no pipe, backtick or line break."""
    return html.escape(str(text)).replace("|", "&#124;").replace("`", "&#96;").replace("\n", " ")


def _plain(text: str) -> str:
    """An attribute name on one line (a tag key may hold anything)."""
    return "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in text)


def _billing(cost: dict) -> str:
    return (cost.get("billing") or "n/a").replace("_", "-")
