"""Commands on the spec alone: `validate`, `catalog`, `render`. No cloud calls, no terraform runs."""

from __future__ import annotations

from pathlib import Path

import click

from trainkit.catalog import catalog_clouds, catalog_rooms, load_catalog, matching, refreshed_price_file, with_prices
from trainkit.cluster import registry
from trainkit.commands import complete
from trainkit.commands.options import (
    check_region,
    cloud_room,
    dump_json,
    format_option,
    load,
    load_named,
    prices_option,
    spec_arg,
    spec_argument,
    workdir_option,
)
from trainkit.runs import record
from trainkit.runs.launch import workdir_files
from trainkit.spec.schema import check_key_files
from trainkit.spec.sshkeys import public_key_text
from trainkit.spec.train_config import check_train_config, world_size
from trainkit.stack.render import require_terraform, write_stack
from trainkit.util.resources import train_config


@click.command()
@spec_arg(required=False)
@click.option("--config", "config", type=click.Path(dir_okay=False), shell_complete=complete.train_configs,
              help="Also (or only) check this training config (a YAML file or a built-in name), "
                   "as `trainkit train` will.")
@click.argument("overrides", nargs=-1)
@prices_option
@format_option(help_text="json prints the resolved cluster.")
def validate(spec: str | None, config: str | None, overrides: tuple[str, ...],
             price_file: str | None, fmt: str) -> None:
    """Check a cluster SPEC and/or a training --config: exit 0 if good, 2 with every problem
    (field path + fix) if bad. Nothing is created and no node is touched.

    The spec: fields and types, addresses/users/paths (`trainkit docs spec`), network
    (IPv4 VPC, subnet inside it, SSH not open to the whole internet), the key files it names, the
    instance type. The config: keys (with suggestions, e.g. learning_rate -> lr0), types and
    ranges, the model/data import paths and their *_args against the builder's signature, and,
    with a SPEC, that the global batch splits over the cluster's ranks. key=value OVERRIDES
    apply to the config as in `trainkit train`.

    \b
    Example:
      trainkit validate examples/clusters/alicloud.yaml
      trainkit validate --config examples/train/digits.yaml
      trainkit validate examples/clusters/local.yaml --config examples/train/digits.yaml epochs=5
    """

    if spec and "=" in spec and not spec.endswith((".yaml", ".yml")):  # an override, no spec
        spec, overrides = None, (spec, *overrides)
    if spec and config and not Path(spec).exists() and not spec.endswith((".yaml", ".yml")) \
            and spec not in registry.known_names():
        raise click.UsageError(f"{spec!r} is neither a spec file nor an override (nor a cluster this machine "
                               f"knows); an override is key=value, e.g. {spec}=3")
    if not spec and not config:
        raise click.UsageError("give a cluster SPEC, a --config TRAIN, or both")
    if overrides and not config:
        raise click.UsageError("key=value overrides need --config TRAIN")
    cluster = None
    if spec:
        cluster, path, _, _ = load_named(spec, None, price_file)
        check_key_files(cluster.spec, path)
    checked = _check_config(cluster, config, overrides) if config else None
    _report(spec, cluster, config, checked, fmt == "json")


def _report(spec, cluster, config, checked, as_json: bool) -> None:
    """Print what validate found good: the cluster and/or the train config (text or JSON)."""
    if as_json:
        out: dict = {}
        if cluster is not None:
            inst = cluster.instance
            out = {"name": cluster.name, "cloud": cluster.spec.cloud, "nodes": cluster.nodes,
                   "instance_type": inst.type if inst else None, "gpus_per_node": cluster.gpus_per_node,
                   "image": cluster.image, "warnings": list(cluster.warnings)}
        if checked is not None and getattr(checked, "command", None) is not None:
            out["train_config"] = {"path": config, "name": checked.name, "command": checked.command,
                                   "workdir": str(checked.workdir) if checked.workdir else None}
        elif checked is not None:
            out["train_config"] = {"path": config, "hash": checked.config.hash(), "notes": checked.notes}
        click.echo(dump_json(out))
        return
    if cluster is not None:
        inst = cluster.instance
        what = f"{cluster.nodes} x {inst.type} ({inst.gpus} x {inst.gpu})" if inst else \
            f"{cluster.nodes} node(s)"
        click.echo(f"{spec}: ok - {cluster.name} on {cluster.spec.cloud}, {what}")
        for warning in cluster.warnings:
            click.echo(f"warning: {warning}", err=True)
    if checked is not None and getattr(checked, "command", None) is not None:
        click.echo(f"{config}: ok - custom job {checked.name}: its `command:` runs on every node"
                   + (f" from {checked.workdir}" if checked.workdir else ""))
    elif checked is not None:
        cfg = checked.config
        click.echo(f"{config}: ok - model {cfg.model}, data {cfg.data}, {cfg.epochs} epoch(s), "
                   f"global batch {cfg.batch}")
        for note in checked.notes:
            click.echo(f"note: {note}", err=True)


def _check_config(cluster, config: str, overrides: tuple[str, ...]):
    """check_train_config with the cluster's world size (nodes x ranks per node) when known."""

    if not Path(config).exists() and not Path(config).is_symlink():  # a built-in name, as train takes
        config = str(train_config(config))
    job = record.load_job(Path(config), list(overrides))  # the launcher's keys: name, command, env, stage
    if job.command is not None:  # a custom job: the engine's keys do not apply; its workdir ships
        if job.workdir:

            workdir_files(job.workdir, job.excludes)
        return job
    return check_train_config(config, list(overrides), world_size(cluster) if cluster else None)


@click.command()
@click.option("--cloud", "room", type=click.Choice(catalog_clouds()),
              callback=cloud_room(lambda r: r.has_catalog, "a cloud with a catalog"), help="Only this cloud.")
@click.option("--gpu", help="GPU model, e.g. A100 (case-insensitive).")
@click.option("--gpus", type=click.IntRange(min=1), help="At least this many GPUs per node.")
@click.option("--min-gpu-memory", "min_mem", type=click.IntRange(min=1), help="GB per GPU, at least.")
@click.option("--spot", is_flag=True, help="Sort by spot price where known.")
@prices_option
@click.option("--region", help="Use the prices `trainkit prices refresh` fetched for this region.")
@format_option()
def catalog(room, gpu, gpus, min_mem, spot, price_file, region, fmt) -> None:
    """List GPU instance types that match, cheapest first (unknown prices last).

    \b
    Example:
      trainkit catalog --cloud alicloud --gpu A100 --min-gpu-memory 80
    """
    if price_file and not room:
        raise click.UsageError("--prices needs --cloud (a price file belongs to one cloud)")
    if region and room:
        check_region(room, region)
    rows = []
    for name, cat in ((r.name, load_catalog(r)) for r in ([room] if room else catalog_rooms())):
        refreshed = refreshed_price_file(name, region or cat.price_region)
        if refreshed:  # `trainkit prices refresh` output comes before the shipped prices
            cat = with_prices(cat, refreshed)
        if price_file:
            cat = with_prices(cat, price_file)
        if region and cat.price_region and region != cat.price_region and not price_file:
            click.echo(f"warning: {name}: no prices for {region}; the prices shown are {cat.price_region}'s "
                       f"(`trainkit prices refresh --cloud {name} --region {region}` fetches {region}'s)",
                       err=True)
        for inst in matching(cat, gpu, gpus, min_mem, spot):
            price = inst.price(spot)
            basis = None if price is None else "spot" if spot and inst.spot is not None else "on-demand"
            rows.append({"cloud": name, "type": inst.type, "gpu": inst.gpu, "gpus": inst.gpus,
                         "gpu_memory_gb": inst.gpu_memory_gb, "vcpus": inst.vcpus,
                         "ram_gb": inst.ram_gb, "network_gbps": inst.network_gbps,
                         "price_per_hour": price, "price_basis": basis, "on_demand": inst.on_demand,
                         "spot": inst.spot, "subscription_month": inst.subscription_month,
                         "currency": cat.currency, "region": cat.price_region,
                         "price_source": cat.price_source if price is not None else None,
                         "price_date": cat.price_date if price is not None else None})
    if fmt == "json":
        click.echo(dump_json(rows))
        return
    if not rows:
        click.echo("no instance type matches", err=True)
        return
    header = f"{'cloud':<13}{'type':<26}{'gpu':<10}{'gpus':>4}{'mem':>5}{'vcpu':>6}{'ram':>7}{'gbps':>6}  price/h"
    click.echo(header)
    for r in rows:
        price = f"{r['price_per_hour']:.2f} {r['currency']} ({r['price_basis']}, {r['region'] or '?'}, " \
            f"{r['price_date'] or '?'})" if r["price_per_hour"] is not None else "unknown"
        click.echo(f"{r['cloud']:<13}{r['type']:<26}{r['gpu']:<10}{_n(r['gpus']):>4}{_n(r['gpu_memory_gb']):>5}"
                   f"{_n(r['vcpus']):>6}{_n(r['ram_gb']):>7}{_n(r['network_gbps']):>6}  {price}")


def _n(value) -> str:
    return "?" if value is None else f"{value:g}"


@click.command()
@spec_argument
@workdir_option
@format_option()
def render(spec: str, workdir: str | None, fmt: str) -> None:
    """Write the Terraform root stack for a cloud spec into its workspace (no cloud calls).

    The folder holds the root stack (versions.tf with the state backend, providers.tf, main.tf
    with the module call, variables.tf, outputs.tf) and a copy of the cloud's module, so it is
    self-contained. Every *.tf file is the same in every checkout of the spec: what belongs to
    this workspace (its generated key pair) is in terraform.tfvars.json, which terraform loads.

    \b
    Example:
      trainkit render examples/clusters/alicloud.yaml
      trainkit render examples/clusters/aws.yaml --workdir /tmp/aws-demo
    """

    cluster, ws = load(spec, workdir, warn=True)
    require_terraform(cluster)
    with ws.lock("render"):  # refuses someone else's --workdir; never rewrites a stack mid-apply
        key = public_key_text(cluster.spec.ssh, ws, comment=f"trainkit-{cluster.name}")
        written = write_stack(cluster, key, ws.terraform_dir)
    folder = ws.terraform_dir
    if fmt == "json":
        click.echo(dump_json({"cluster": cluster.name, "cloud": cluster.spec.cloud, "terraform_dir": str(folder),
                              "files": sorted(str(p) for p in written)}))
        return
    click.echo(f"rendered {len(written)} files for {cluster.name} ({cluster.spec.cloud}) into {folder}/")
    click.echo(f"  review: {folder}/main.tf (module inputs), versions.tf (state backend), "
               f"providers.tf; the module is under {folder}/modules/{cluster.spec.cloud}/")
    click.echo(f"  next:   trainkit plan {spec}" + (f" --workdir {workdir}" if workdir else ""))
