"""Commands about money: `cost` (compare billing plans) and `prices refresh` (prices from the clouds)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from trainkit.commands.options import (
    Finite,
    check_region,
    cloud_room,
    dump_json,
    format_option,
    load_named,
    prices_option,
    spec_argument,
    workdir_option,
)
from trainkit.errors import InputError
from trainkit.money import billing
from trainkit.money import prices as price_api
from trainkit.spec.resolve import nat_gateway
from trainkit.spec.train_config import check_train_config
from trainkit.workspace import Workspace


@click.command()
@spec_argument
@click.option("--hours", type=Finite(min=0, min_open=True, max=1e6), required=True,
              help="Hours of training work (wall hours on a node that is never reclaimed; "
                   "at most 1e6, a century).")
@click.option("--reclaims-per-day", type=Finite(min=0), default=None,
              help="Spot reclaims of the whole cluster per day (default: the cloud's published "
                   "figure per node, or trainkit's stated assumption, times the nodes).")
@click.option("--band", default=None,
              help="The instance type's interruption band where the cloud publishes bands "
                   "(AWS Spot Instance Advisor: '<5%', '5-10%', '10-15%', '15-20%', '>20%').")
@click.option("--checkpoint-every", type=Finite(min=0, min_open=True, max=1e7), default=None,
              help="Seconds between checkpoints, as your train config's checkpoint.interval "
                   "(default: Young's interval from the checkpoint time and the reclaim rate).")
@click.option("--config", "train_config", type=click.Path(dir_okay=False), default=None,
              help="Your train config: its checkpoint.interval in seconds is the interval "
                   "('auto' or unset: Young's).")
@click.option("--checkpoint-seconds", type=Finite(min=0, min_open=True), default=None,
              help="Seconds to write a checkpoint (default: measured by the newest run, else 60).")
@click.option("--restart-seconds", type=Finite(min=0), default=None,
              help="Seconds from a reclaim to training again (default 600).")
@prices_option
@workdir_option
@format_option()
def cost(spec, hours, reclaims_per_day, band, checkpoint_every, train_config, checkpoint_seconds, restart_seconds,
         price_file, workdir, fmt):
    """Compare on-demand, subscription and spot with checkpoints for HOURS of training.

    Spot adds checkpoint overhead, the work lost per reclaim (half a checkpoint interval) plus
    the restart time, and the on-demand controller that runs the recovery loop; the last line is
    spot/on-demand for the same work. Reclaims come from the cloud's published figure
    (`trainkit docs cost`). Unknown prices stay unknown. The newest run in the workspace (--workdir)
    gives the checkpoint time unless --checkpoint-seconds does.

    \b
    Example:
      trainkit cost examples/clusters/aws.yaml --hours 100 --checkpoint-every 1800
      trainkit cost examples/clusters/aws.yaml --hours 100 --band '10-15%' --json
      trainkit cost examples/clusters/aws.yaml --hours 100 --config examples/train/digits.yaml
    """

    cluster, spec, workdir, _ = load_named(spec, workdir, price_file)
    if cluster.catalog is None:
        raise InputError(f"cloud {cluster.spec.cloud}: trainkit does not bill your own machines",
                         fix="`trainkit cost` is for cloud targets")
    measured = measured_checkpoint_s(Workspace.for_cluster(cluster.name, workdir).runs_dir)
    ckpt = checkpoint_seconds or measured or billing.DEFAULT_CHECKPOINT_S
    source = "given" if checkpoint_seconds else "measured by the newest run" if measured else "default"
    checkpoint_every, every_source = interval_from(checkpoint_every, train_config)
    if band is not None and reclaims_per_day is not None:
        raise InputError("--band and --reclaims-per-day: give one", fix="drop --band to use your own rate")
    out = billing.compare(
        cluster, hours, cluster.nodes, 1 if nat_gateway(cluster.spec) else 0, reclaims_per_day, ckpt,
        billing.DEFAULT_RESTART_S if restart_seconds is None else restart_seconds, checkpoint_every, band)
    out.update(checkpoint_s=ckpt, checkpoint_source=source, checkpoint_every=checkpoint_every,
               checkpoint_every_source=every_source)
    if fmt == "json":
        click.echo(dump_json(out))
        return
    click.echo(to_text(out))


def interval_from(checkpoint_every: float | None, train_config: str | None) -> tuple[float | None, str | None]:
    """(seconds between checkpoints or None for Young's, where it came from) from --checkpoint-every
    or the train config's checkpoint.interval. InputError naming the options when both are given,
    and naming checkpoint.every_n_steps (steps, not seconds) when the config counts steps."""
    if train_config is None:
        return checkpoint_every, "given" if checkpoint_every is not None else None
    if checkpoint_every is not None:
        raise InputError("--checkpoint-every and --config: give one", fix="drop one of them")
    ckpt = check_train_config(train_config).config.checkpoint
    if ckpt.every_n_steps is not None:
        raise InputError(f"--config {train_config}: checkpoint.every_n_steps counts steps, not seconds",
                         fix="pass --checkpoint-every SECONDS (the steps times the seconds a step takes)")
    if isinstance(ckpt.interval, (int, float)):
        return float(ckpt.interval), f"checkpoint.interval of {Path(train_config).name}"
    return None, None


def to_text(out: dict) -> str:
    cur = out["currency"]
    lines = [f"{out['cluster']}: {out['hours']:g} h of training on {out['nodes']} node(s); "
             f"checkpoint {out['checkpoint_s']:g} s ({out['checkpoint_source']})",
             f"  {'plan':<13}{'per hour':>14}{'hours billed':>14}{'expected total':>18}  price basis"]
    for p in out["plans"]:
        per_h = "unknown" if p["per_hour"] is None else f"{p['per_hour']:,.2f}"
        total = "unknown" if p["total"] is None else \
            f"{'<= ' if p['upper_bound'] else ''}{p['total']:,.2f} {cur}"
        billed = "n/a" if p["hours_billed"] is None else f"{p['hours_billed']:,.1f}"
        if p["plan"] == "subscription" and p.get("months"):
            billed = f"{p['months']} month(s)"
        lines.append(f"  {p['plan'].replace('_', '-'):<13}{per_h:>14}{billed:>14}{total:>18}  {p['basis']}")
        if p["unknown"] and p["total"] is not None:
            lines.append(f"  {'':<13}+ unknown: {', '.join(p['unknown'])}")
        if p["plan"] == "spot":
            lines += _spot_lines(p, out)
    lines += [f"warning: {w}" for w in out.get("warnings", [])]
    seed = out["spot_vs_on_demand"]
    if seed["ratio"] is not None:
        bound = "at most " if seed["upper_bound"] else ""
        lines.append(f"spot / on-demand for the same work: {bound}{seed['ratio']:.2f} "
                     f"(saves {'at least ' if bound else ''}{seed['saving']:,.2f} {cur}, {1 - seed['ratio']:.0%})")
    rec = out["recommendation"]
    lines.append(f"recommendation: {rec.replace('_', '-') if rec else 'unknown'} ({out['reason']})")
    return "\n".join(lines)


def _spot_lines(p: dict, out: dict) -> list[str]:
    """The spot plan's model in words: interval, reclaims and their source, lost time, controller."""
    pad, rate = f"  {'':<13}", out["reclaims"]
    every = "no reclaims expected" if p["interval_s"] is None else \
        f"checkpoint every {p['interval_s']:g} s ({out.get('checkpoint_every_source') or 'Young'})"
    lines = [f"{pad}{every}, {p['reclaims_per_day']:.4g} reclaims/day ({rate['basis']}), "
             f"{p['lost_hours_per_reclaim'] * 60:.1f} min lost per reclaim"]
    if rate.get("source"):
        url = re.search(r"https?://\S+?(?=[),;]|$|\s)", rate["source"])
        lines.append(f"{pad}reclaim figure from {url.group(0) if url else rate['source']} (`trainkit docs cost`)")
    ctrl = p["controller"]
    if ctrl["per_hour"] is not None:
        lines.append(f"{pad}+ controller {ctrl['type']} at {ctrl['per_hour']:g}/h for the wall time")
    return lines


def measured_checkpoint_s(runs_dir: Path) -> float | None:
    """`checkpoint_write_s` from the newest run summary that has one, else None."""
    if not runs_dir.is_dir():
        return None
    for run in sorted(runs_dir.iterdir(), reverse=True):
        try:
            value = json.loads((run / "summary.json").read_text()).get("checkpoint_write_s")
        except (OSError, ValueError):
            continue
        if isinstance(value, (int, float)) and value > 0:
            return float(value)
    return None


@click.group()
def prices() -> None:
    """Prices from the clouds' own price APIs, with your credentials (discounts included).

    \b
    Example:
      trainkit prices refresh --cloud aws --region us-east-1 --types g5.xlarge
    """


@prices.command()
@click.option("--cloud", "room", required=True, callback=cloud_room(lambda r: r.has_module, "a cloud"),
              help="Cloud whose price API to ask.")
@click.option("--region", required=True, help="Region to price, e.g. us-east-1.")
@click.option("--types", help="Comma-separated instance types (default: every catalog type).")
@click.option("--zone", help="Zone, for clouds that quote per zone (Tencent).")
@click.option("--endpoint", help="Custom API endpoint (emulators, private endpoints).")
@format_option()
def refresh(room, region, types, zone, endpoint, fmt):
    """Ask the cloud's price API and write a dated price file that catalog/plan/cost then use.

    \b
    Example:
      trainkit prices refresh --cloud aws --region us-east-1 --types g5.xlarge,g5.12xlarge
    """
    check_region(room, region)
    wanted = [t.strip() for t in types.split(",") if t.strip()] if types else None
    path = price_api.refresh(room, region, wanted, endpoint=endpoint, zone=zone)
    if fmt == "json":
        click.echo(dump_json({"cloud": room.name, "region": region, "price_file": str(path)}))
        return
    click.echo(f"prices written to {path}")
