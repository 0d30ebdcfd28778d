"""How `make test` spreads the tiers that start processes over pytest-xdist workers.

Not a test module: tests/conftest.py imports it. With `pytest -n N --dist loadfile`, each test
module runs whole on one worker (its module fixtures are built once). Modules that build hosts in
network namespaces (tests/e2e/netns.py) may run side by side: each has its own name prefix and
/24 (netns.names_for), so one never purges or shares another's hosts.

Modules start longest first (the longest-processing-time rule: the long ones spread over the
workers, the short ones fill the gaps at the end), by what each took in a measured run: MEASURED_S.
Items are sorted on the workers, and xdist keeps that order when `loadscopereorder` is off.
"""

from __future__ import annotations

from pathlib import Path

from xdist.scheduler import LoadFileScheduling

# Seconds per module (setup + call + teardown of its tests, `--durations=0`) in `.ci/run` at
# 9dba0a0 on the 2-core machine, 3 workers (make test 1257 s); the fault matrix's modules with the
# rows added after it (during_write ~40 s, controller_stop/backoff ~75 s, the elastic row ~110 s,
# measured alone; the no-spare elastic row ~50 s, 11 s of CPU, beside other work), and
# test_aws_failover with its preflight and lost-rule test (+157 s alone). Only the order matters:
# a module that is not listed gets DEFAULT_S, and tests/unit/test_xdist_groups.py keeps the table
# naming modules that exist.
MEASURED_S = {
    "infra/test_aws_faults.py": 489, "e2e/test_fault_matrix_control.py": 417,
    "infra/test_aws_lifecycle.py": 391, "infra/test_aws_node_changes.py": 344,
    "e2e/test_fault_matrix.py": 420, "dist/test_train_fsdp.py": 233,
    "infra/test_aws_failover.py": 362, "e2e/test_doctor_hosts.py": 162,
    "infra/test_aws_replace.py": 150, "infra/test_aws_lost_response.py": 148,
    "e2e/test_run_ops_local.py": 117, "e2e/test_recover_hosts.py": 91,
    "dist/test_train_resume.py": 63, "e2e/test_hosts_multinode.py": 49,
    "infra/test_ansible_site.py": 47, "infra/test_credential_errors.py": 46,
    "infra/test_ansible_disks.py": 46, "e2e/test_train_local.py": 46, "infra/test_ci_pipelines.py": 45,
    "infra/test_budget_and_checkov.py": 43, "e2e/test_wheel.py": 42, "dist/test_train_torchrun.py": 41,
    "e2e/test_main_job.py": 38, "infra/test_aws_state_lock.py": 27, "infra/test_guard.py": 21,
    # the seed clouds through the provider stand-ins, measured alone on a busy machine (2026-12-04)
    "infra/test_seed_changes.py": 150, "infra/test_seed_sweep.py": 80, "infra/test_seed_lifecycle.py": 70,
    "infra/test_seed_preflight.py": 55,
    # clusters by name on local, measured alone on a busy machine (2026-12-04; 16 s of CPU)
    "e2e/test_clusters_by_name_local.py": 45,
    # issue 39's cluster-side rows: 888 s and 770 s measured side by side on a machine shared with
    # other sessions (2026-12-04), counted here by their makeup against the modules above (the
    # bench + 2 rows + destroy + apply vs test_fault_matrix's bench + 6 rows; 3 tries and a sweep
    # each vs test_aws_replace's 2 tries); the seed one measured alone
    "e2e/test_fault_matrix_cluster.py": 300, "infra/test_aws_replace_leaks.py": 330,
    "infra/test_seed_replace_leaks.py": 45,
    # issue 39's node rows: 985 s measured on a machine loaded by other sessions (load ~11 on 2
    # cores), scaled by what test_fault_matrix.py took on it (1752 s) against its 370 here
    "e2e/test_fault_matrix_node.py": 210,
    # issue 41's Slurm jobs: 59 s + 92 s + 101 s measured alone beside a running .ci/run (2026-12-04),
    # then 315 s for all seven beside other sessions (2026-12-05: the two added 91 s + 6 s;
    # the GPT test 53 s in another run of the module)
    "e2e/test_slurm_job.py": 400,
    # issue 41 item 2: apply (site.yml with the slurm role) twice, the digits job through sbatch twice
    # (the second across a node replaced by a spare, by train --recover), destroy: 114 s measured
    # alone (2026-12-05); 177-273 s with --recover replacing the node, beside other work
    "e2e/test_slurm_provisioned.py": 200,
    # issue 42's controller on hosts, two tests (each: apply, a detached --recover --down run, destroy
    # from the controller): 140 s measured alone (2026-12-05); 157 s (97 + 55 s calls) with test 2's
    # cancelled run without --down (2026-12-05, beside other sessions)
    "e2e/test_controller_hosts.py": 157,
    # issue 42's cloud hand-off: two moto applies (the second provisions node-0's namespace host), a
    # digits run handed to the controller's namespace host, its --down destroying through the s3
    # state with the metadata stand-in's credentials: 156 s measured (2026-12-05, beside other sessions' tests)
    "e2e/test_controller_cloud.py": 160,
    # issue 42's controller in the modules: the moto apply with an s3 backend (77 s alone, 154 s
    # beside other work) and the four modules through validate and plan (42 s), 2026-12-05
    "infra/test_aws_controller.py": 80, "infra/test_controller_modules.py": 42,
}
DEFAULT_S = 20


def rank(path: str) -> float:
    """Start order of a module: lower starts first (minus its measured seconds)."""
    file = Path(path)
    return -MEASURED_S.get(f"{file.parent.name}/{file.name}", DEFAULT_S)


class LongestFirstScheduling(LoadFileScheduling):
    """`--dist loadfile` keeping the workers' order (longest chains first)."""

    def __init__(self, config, log=None):
        config.option.loadscopereorder = False  # keep the workers' order (longest chain first)
        super().__init__(config, log)

