"""PyTorch DDP's real runs under torchrun: ``ddp measure`` (the sweep and its phases), ``ddp validate`` (replays
against their predictions), ``ddp tune`` (Bayesian optimisation on real runs)."""
from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

import autotuner  # the public API: everything the commands do

from .. import options as opt
from ..render import render_table
from .common import (CONCEPTS, MODEL_HELP, model_dir_opt, PRINT_LAUNCH_HELP, RSH_HELP, RUNS_OUT_HELP, command_arg, compute_opt,
                     ddp_app, device_opt, hosts_opt, json_opt, network, np_opt, old_names, out, progress, proposals_opt, rounds_opt,
                     runs_dir_opt, testbed_opts)


class LaunchKind(str, Enum):
    """``--print-launch``: each host's command lines, or a SLURM batch script."""

    commands = "commands"
    sbatch = "sbatch"


def launch_opts():
    """``--hosts --rsh --device --print-launch``: where the torchrun jobs start (real hosts through a remote shell),
    on what device, or only print their launch."""
    return (hosts_opt("; DDP: one torchrun per host through --rsh (replaces --np), e.g. h1:8,h2:8"),
            typer.Option("ssh", "--rsh", help=RSH_HELP),
            device_opt("where the ranks run: cpu (Gloo) or cuda (NCCL, one GPU per rank; the probes get --device "
                       "cuda)"),
            typer.Option(None, "--print-launch", help=PRINT_LAUNCH_HELP))


def _print_launch(text: str, as_json: bool, env: str) -> None:
    """The launch ``--print-launch`` asked for, exactly as the API gave it (or in JSON)."""
    if as_json:
        print(json.dumps({"env": env, "launch": text}))
    else:
        print(text, end="")


@ddp_app.command("measure", short_help="the DDP sweep: torch.distributed's allreduce under torchrun")
@old_names(sweep_rounds="--jobs", burst_rounds="--burst-jobs", first_touch_rounds="--first-touch-jobs",
           cpu_rounds="--cpu-jobs")
def ddp_measure_cmd(env: str = typer.Option(..., "--env", help="environment name: the sweep goes to "
                                            "<runs>/<env>/ddp-sweep.jsonl", callback=opt.checked(opt.PlainName, "--env")),
                    np_: int = np_opt(),
                    testbed_hosts: Optional[int] = testbed_opts()[0],
                    ranks_per_host: Optional[int] = testbed_opts()[1],
                    link_gbit: Optional[float] = testbed_opts()[2],
                    loopback_gbit: Optional[float] = testbed_opts()[3],
                    bandwidth_gbit: Optional[float] = testbed_opts()[4],
                    sweep_rounds: int = typer.Option(CONCEPTS["sweep rounds"].default, "--sweep-rounds",
                                                     help=f"{CONCEPTS['sweep rounds'].help} (one job each, every "
                                                          "size)", callback=opt.checked(opt.Count, "--sweep-rounds")),
                    repeats: int = typer.Option(7, "--repeats", help="timed allreduces per size and job",
                                                callback=opt.checked(opt.Count, "--repeats")),
                    burst_rounds: int = rounds_opt("burst rounds", "one job: allreduces back to back against lone "
                                                   "ones", "ddp measure"),
                    first_touch_rounds: int = rounds_opt("first-touch rounds", "one job: fresh gradients held vs "
                                                         "dropped, CPU ranks' page faults", "ddp measure"),
                    cpu_rounds: int = rounds_opt("cpu rounds", "one job: compute beside a stream of allreduces and "
                                                 "alone, the CPU a collective takes from the ranks' compute",
                                                 "ddp measure"),
                    host_rounds: int = rounds_opt("host rounds", "one job: a module plain and under DDP over each "
                                                  "rank's own one-rank group, what the Reducer adds per gradient "
                                                  "and per bucket", "ddp measure"),
                    hosts: str = launch_opts()[0],
                    rsh: str = launch_opts()[1],
                    device: autotuner.ProfileDevice = launch_opts()[2],
                    print_launch: Optional[LaunchKind] = launch_opts()[3],
                    from_output: Optional[Path] = typer.Option(None, "--from-output", help="run nothing: append the "
                                                               "results in this file (the output of --print-launch "
                                                               "sbatch's job), with this command's --hosts/--np and "
                                                               "--device as their setup"),
                    runs_dir: Optional[Path] = runs_dir_opt(RUNS_OUT_HELP),
                    as_json: bool = json_opt("the sweep's file")) -> None:
    """Measure what DDP's buckets cost on this cluster: torch.distributed's allreduce (Gloo; NCCL with --device cuda) of 4 KiB-128 MiB in
    float32 and float16 (what the fp16 hook sends), the copy into a bucket and the hook's casts, then the burst
    phase (allreduces launched back to back, as DDP launches buckets, against lone ones), the first-touch phase
    (what re-faulting fresh gradients held to the step's end costs a CPU rank), the cpu phase (the CPU a
    collective in flight takes from the ranks' compute) and the host phase (what DDP's Reducer adds per gradient and
    per bucket beside the copies, no wire), under torchrun on --np
    ranks here, a shaped loopback (--link-gbit) or an emulated cluster (--testbed-hosts); resumable: run it
    again on a measured env to add a phase it lacks.
    On a GPU cluster: --hosts h1:8,h2:8 --device cuda (NCCL; one torchrun per host through ssh or --rsh; the CPU
    ranks' phases skipped), or --print-launch sbatch for SLURM: docs/getting-started/gpu-cluster.md.

    Example:

    \b
        autotuner ddp measure --env myddp --np 2 --link-gbit 2
        autotuner ddp measure --env h100x2 --hosts h1:8,h2:8 --device cuda
    """
    link_gbit, loopback_gbit = network(link_gbit, loopback_gbit, bandwidth_gbit, testbed_hosts)
    with progress(f"ddp measure {env}", quiet=as_json, echo=True) as act:
        path = autotuner.ddp_measure(env, np=np_, link_gbit=link_gbit, loopback_gbit=loopback_gbit,
                                     testbed_hosts=testbed_hosts or 0, ranks_per_host=ranks_per_host or 1,
                                     sweep_rounds=sweep_rounds, repeats=repeats, burst_rounds=burst_rounds,
                                     first_touch_rounds=first_touch_rounds, cpu_rounds=cpu_rounds,
                                     host_rounds=host_rounds, runs_dir=runs_dir,
                                     on_event=act.event, hosts=hosts, rsh=rsh, device=device.value,
                                     print_launch=print_launch.value if print_launch else None,
                                     from_output=from_output)
    if print_launch:
        _print_launch(path, as_json, env)
        return
    if as_json:
        print(json.dumps({"env": env, "sweep": str(path)}))
        return
    out.print(f"wrote {path}; next: autotuner ddp suggest --env {env} --model resnet50", highlight=False,
              soft_wrap=True)


@ddp_app.command("validate", short_help="real DDP replays of bucket settings, against their predictions")
def ddp_validate_cmd(env: str = typer.Option(..., "--env", help="DDP environment (measured with ddp measure)",
                                             callback=opt.checked(opt.PlainName, "--env")),
                     model: str = typer.Option(..., "--model", help=MODEL_HELP + " (with your own script: its "
                                               "layout, from autotuner profile)"),
                     command: Optional[List[str]] = command_arg(),
                     proposals: Optional[Path] = proposals_opt("the DDP settings to run (default: 11 settings, "
                                                               "DDP's default, 1-200 MiB, a per-bucket list, the "
                                                               "view, the fp16 hook)"),
                     name: Optional[str] = typer.Option(None, "--name", help="record file name (default: the model)",
                                                        callback=opt.checked(opt.PlainName, "--name")),
                     compute_ms: Optional[float] = compute_opt(),
                     steps: int = typer.Option(5, "--steps", help="measured steps per trial",
                                               callback=opt.checked(opt.Count, "--steps")),
                     warmup: int = typer.Option(3, "--warmup", help="warm-up steps per trial (the first rebuilds "
                                                "DDP's buckets)", callback=opt.checked(opt.Count, "--warmup")),
                     repeats: int = typer.Option(3, "--repeats", help="interleaved rounds of every setting",
                                                 callback=opt.checked(opt.Count, "--repeats")),
                     np_: int = np_opt(),
                     testbed_hosts: Optional[int] = testbed_opts()[0],
                     ranks_per_host: Optional[int] = testbed_opts()[1],
                     link_gbit: Optional[float] = testbed_opts()[2],
                     loopback_gbit: Optional[float] = testbed_opts()[3],
                     bandwidth_gbit: Optional[float] = testbed_opts()[4],
                     hosts: str = launch_opts()[0],
                     rsh: str = launch_opts()[1],
                     device: autotuner.ProfileDevice = launch_opts()[2],
                     print_launch: Optional[LaunchKind] = launch_opts()[3],
                     runs_dir: Optional[Path] = runs_dir_opt(),
                     model_dir: Optional[Path] = model_dir_opt(),
                     as_json: bool = json_opt("each setting's row, the verdict, the records' and report's paths")
                     ) -> None:
    """Run real DDP (torchrun: the DDP replay workload, or your own script after --, which reads each setting from
    AUTOTUNER_DDP_* variables as examples/train_ddp.py does) for each setting, repeated and interleaved, no
    timeline; records appended trial by trial to <runs>/<env>/ddp-validation/<name>.jsonl (a killed run resumes);
    then each setting's measured step beside its prediction from the env's sweep alone.

    Example:

    \b
        autotuner ddp suggest --env myddp --model resnet50 --json > pick.json
        autotuner ddp validate --env myddp --model resnet50 --proposals pick.json --link-gbit 2
        autotuner ddp validate --env myddp --model my_layout.json -- python examples/train_ddp.py
    """
    link_gbit, loopback_gbit = network(link_gbit, loopback_gbit, bandwidth_gbit, testbed_hosts)
    with progress(f"ddp validate {env}", quiet=as_json, echo=True) as act:
        r = autotuner.ddp_validate(env, model, proposals=proposals, name=name, compute_ms=compute_ms, steps=steps,
                                   warmup=warmup, repeats=repeats, np=np_, link_gbit=link_gbit,
                                   loopback_gbit=loopback_gbit, testbed_hosts=testbed_hosts or 0,
                                   ranks_per_host=ranks_per_host or 1, command=command or None, runs_dir=runs_dir,
                                   on_event=act.event, hosts=hosts, rsh=rsh, device=device.value,
                                   print_launch=print_launch.value if print_launch else None, model_dir=model_dir)
    if print_launch:
        _print_launch(r, as_json, env)
        return
    if as_json:
        out.print_json(json.dumps(r.to_dict()))
        return
    t = Table(title=f"{model}: measured against predicted (the env's cost model alone)")
    for col in ("setting", "trials", "measured ms (range)", "predicted ms", "error", "first step ms"):
        t.add_column(col, justify="left" if col == "setting" else "right")
    for row in r.rows:
        t.add_row(row.label, str(row.trials), f"{row.measured_ms:.1f} ({row.low_ms:.1f}-{row.high_ms:.1f})",
                  f"{row.predicted_ms:.1f}", f"{row.error_pct:+.1f} %",
                  ("n/a" if row.first_measured_ms != row.first_measured_ms else f"{row.first_measured_ms:.1f}")
                  + f" / {row.first_predicted_ms:.1f}")
    render_table(out, t)
    out.print(f"verdict: {r.verdict}", highlight=False, soft_wrap=True)
    out.print(f"records: {r.path}; report: {r.report}", highlight=False, soft_wrap=True)



@ddp_app.command("tune", short_help="Bayesian optimisation of DDP's buckets on real runs, the simulator as prior")
def ddp_tune_cmd(env: str = typer.Option(..., "--env", help="DDP environment (measured with ddp measure)",
                                         callback=opt.checked(opt.PlainName, "--env")),
                 model: str = typer.Option(..., "--model", help=MODEL_HELP + " (with your own script: its "
                                           "layout, from autotuner profile)"),
                 command: Optional[List[str]] = command_arg(),
                 name: Optional[str] = typer.Option(None, "--name", help="record file name (default: the model)",
                                                    callback=opt.checked(opt.PlainName, "--name")),
                 compute_ms: Optional[float] = compute_opt(),
                 steps: int = typer.Option(5, "--steps", help="measured steps per trial",
                                           callback=opt.checked(opt.Count, "--steps")),
                 warmup: int = typer.Option(3, "--warmup", help="warm-up steps per trial",
                                            callback=opt.checked(opt.Count, "--warmup")),
                 budget_steps: int = typer.Option(160, "--budget-steps", help="steps (warm-up included) the tune may "
                                                  "spend", callback=opt.checked(opt.Count, "--budget-steps")),
                 np_: int = np_opt(),
                 testbed_hosts: Optional[int] = testbed_opts()[0],
                 ranks_per_host: Optional[int] = testbed_opts()[1],
                 link_gbit: Optional[float] = testbed_opts()[2],
                 loopback_gbit: Optional[float] = testbed_opts()[3],
                 bandwidth_gbit: Optional[float] = testbed_opts()[4],
                 hosts: str = launch_opts()[0],
                 rsh: str = launch_opts()[1],
                 device: autotuner.ProfileDevice = launch_opts()[2],
                 print_launch: Optional[LaunchKind] = launch_opts()[3],
                 runs_dir: Optional[Path] = runs_dir_opt(),
                 as_json: bool = json_opt()) -> None:
    """Real DDP replays chosen one at a time: the simulator's best first, then DDP's defaults, a repeat for the
    noise, then expected improvement on a Gaussian process of where real runs disagree with the simulator; stops
    when no candidate's improvement beats one trial's noise, or at the budget (docs/how-to/tune.md). Records appended to
    <runs>/<env>/ddp-tune/<name>.jsonl (a killed tune resumes). Your own script after -- instead of the replay
    reads each trial's setting from AUTOTUNER_DDP_* variables, as examples/train_ddp.py does.

    Example:

    \b
        autotuner ddp tune --env myddp --model resnet50 --compute-ms 100 --link-gbit 2
        autotuner ddp tune --env myddp --model my_layout.json --hosts h1:8,h2:8 -- python examples/train_ddp.py
    """
    link_gbit, loopback_gbit = network(link_gbit, loopback_gbit, bandwidth_gbit, testbed_hosts)
    with progress(f"ddp tune {env}", quiet=as_json, echo=True) as act:
        r = autotuner.ddp_tune(env, model, name=name, compute_ms=compute_ms, steps=steps, warmup=warmup,
                               budget_steps=budget_steps, np=np_, link_gbit=link_gbit, loopback_gbit=loopback_gbit,
                               testbed_hosts=testbed_hosts or 0, ranks_per_host=ranks_per_host or 1,
                               runs_dir=runs_dir, on_event=act.event, command=command or None, hosts=hosts, rsh=rsh,
                               device=device.value, print_launch=print_launch.value if print_launch else None)
    if print_launch:
        _print_launch(r, as_json, env)
        return
    if as_json:
        out.print_json(json.dumps(r.to_dict()))
        return
    out.print(f"stopped: {r.stop}; {len(r.trials)} trials, {r.steps} steps", highlight=False, soft_wrap=True)
    if r.final is not None:
        rng = f"{min(r.final_ms):.1f}-{max(r.final_ms):.1f}" if r.final_ms else "n/a"
        dflt = f"{min(r.default_ms):.1f}-{max(r.default_ms):.1f} ms" if r.default_ms else "not measured"
        out.print(f"final: {r.final.label()}: measured {rng} ms over {len(r.final_ms)} trial(s); DDP's defaults "
                  f"{dflt}", highlight=False, soft_wrap=True)
        out.print(r.final.code(), highlight=False, markup=False, soft_wrap=True)
    out.print(f"records: {r.path}", highlight=False, soft_wrap=True)

