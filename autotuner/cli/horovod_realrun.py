"""Horovod's real runs: ``measure`` (the cluster's sweep), ``profile`` (a model's gradients), ``validate``
(horovodrun trials against the predictions), ``tune`` (Bayesian optimisation on real runs)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

import autotuner  # the public API: everything the commands do
from autotuner import ProfileDevice

from .. import options as opt
from ..render import MIB
from .common import (RUNS_OUT_HELP, app, command_arg, compute_opt, device_opt, err, hosts_opt, json_opt, model_dir_opt,
                     network, np_opt, old_names, out, progress, proposals_opt, rounds_opt, runs_dir_opt, testbed_opts,
                     trained_model_opt, wait_opt)


@app.command(short_help="real horovodrun trials: defaults, autotune, proposals")
@old_names(wait="--replay-wait")
def validate(env: str = typer.Option(..., "--env", help="environment name: results go to <runs>/<env>/validation/",
                                     callback=opt.checked(opt.PlainName, "--env")),
             model: str = trained_model_opt(),
             command: Optional[List[str]] = command_arg(),
             np_: int = np_opt(),
             hosts: str = hosts_opt(),
             testbed_hosts: Optional[int] = testbed_opts()[0],
             ranks_per_host: Optional[int] = testbed_opts()[1],
             link_gbit: Optional[float] = testbed_opts()[2],
             loopback_gbit: Optional[float] = testbed_opts()[3],
             bandwidth_gbit: Optional[float] = testbed_opts()[4],
             wait: str = wait_opt(),
             compute_ms: Optional[float] = compute_opt(),
             steps: int = typer.Option(6, "--steps", help="measured steps per trial", callback=opt.checked(opt.Count, "--steps")),
             warmup: int = typer.Option(2, "--warmup", help="warm-up steps per trial", callback=opt.checked(opt.Index, "--warmup")),
             repeats: int = typer.Option(3, "--repeats", help="repeats of each fixed configuration",
                                         callback=opt.checked(opt.Count, "--repeats")),
             top: int = typer.Option(1, "--top", help="proposals from suggest to validate", callback=opt.checked(opt.Count, "--top")),
             proposals: Optional[Path] = proposals_opt("the configurations to validate (default: suggest's top --top)"),
             autotune: bool = typer.Option(True, "--autotune/--no-autotune",
                                           help="run Horovod autotune (shortened to about 150 steps: 1 warm-up "
                                                "sample, 1 step per sample, at most 5 samples per combination; "
                                                "Horovod's defaults take thousands) and then its best config"),
             defaults: bool = typer.Option(True, "--defaults/--no-defaults", help="run Horovod's defaults"),
             name: Optional[str] = typer.Option(None, "--name", help="record file name (default: the model)",
                                                callback=opt.checked(opt.PlainName, "--name")),
             timeout_s: float = typer.Option(600.0, "--timeout", help="seconds per trial before it is killed",
                                             callback=opt.checked(opt.Seconds, "--timeout")),
             keep_timelines: bool = typer.Option(False, "--keep-timelines", help="record and keep each trial's timeline "
                                                 "(gzipped; implies --timeline)"),
             timeline: Optional[bool] = typer.Option(None, "--timeline/--no-timeline",
                                                     help="record Horovod's timeline in each trial, for responses/step "
                                                     "(its writer's cost is then in every step time, which the "
                                                     "predictions leave out; default: off, the production job, unless "
                                                     "--keep-timelines; --no-timeline: the default, kept for old "
                                                     "commands)"),
             batch_size: Optional[int] = typer.Option(None, "--batch-size",
                                                      help="images per rank per step (for img/sec output)",
                                                      callback=opt.checked(opt.Count, "--batch-size")),
             runs_dir: Optional[Path] = runs_dir_opt(RUNS_OUT_HELP),
             model_dir: Optional[Path] = model_dir_opt(),
             as_json: bool = json_opt("the records, the report's path and the verdict")) -> None:
    """Run real horovodrun trials: defaults, autotune, autotune's best, proposals; write a report.

    Example:

    \b
        autotuner validate --env mycluster --model my_layout.json --no-autotune -- python examples/train_horovod.py
    """
    link_gbit, loopback_gbit = network(link_gbit, loopback_gbit, bandwidth_gbit, testbed_hosts)
    with progress(f"validate {env}", quiet=as_json, echo=True) as act:
        r = autotuner.validate(env, model, command=tuple(command or ()), np=np_, hosts=hosts, link_gbit=link_gbit,
                               loopback_gbit=loopback_gbit, testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host,
                               wait=wait, compute_ms=compute_ms, steps=steps, warmup=warmup, repeats=repeats,
                               top=top, proposals=proposals, autotune=autotune, defaults=defaults, name=name,
                               timeout_s=timeout_s, keep_timelines=keep_timelines, timeline=timeline,
                               batch_size=batch_size, runs_dir=runs_dir, model_dir=model_dir, on_event=act.event)
    recs, report, verdict = r.records, r.report, r.verdict
    if as_json:
        print(json.dumps({"records": list(recs), "report": str(report), "verdict": verdict}, allow_nan=False,
                         default=str))
        return
    out.print(f"{len(recs)} trials recorded; report: {report}", highlight=False)
    out.print(verdict, highlight=False)


@app.command(short_help="Bayesian optimisation on real runs, the simulator as its prior")
@old_names(wait="--replay-wait")
def tune(env: str = typer.Option(..., "--env", help="a fitted environment: its model is the prior; results go to "
                                 "<runs>/<env>/tune/", callback=opt.checked(opt.PlainName, "--env")),
         model: str = trained_model_opt(),
         command: Optional[List[str]] = command_arg(),
         np_: int = np_opt(),
         hosts: str = hosts_opt(),
         testbed_hosts: Optional[int] = testbed_opts()[0],
         ranks_per_host: Optional[int] = testbed_opts()[1],
         link_gbit: Optional[float] = testbed_opts()[2],
         loopback_gbit: Optional[float] = testbed_opts()[3],
         bandwidth_gbit: Optional[float] = testbed_opts()[4],
         wait: str = wait_opt(),
         compute_ms: Optional[float] = compute_opt(),
         steps: int = typer.Option(6, "--steps", help="measured steps per trial", callback=opt.checked(opt.Count, "--steps")),
         warmup: int = typer.Option(2, "--warmup", help="warm-up steps per trial", callback=opt.checked(opt.Index, "--warmup")),
         budget_steps: int = typer.Option(240, "--budget-steps", help="steps all trials may run, warm-up included "
                                          "(Horovod's default autotune takes about 4,000)",
                                          callback=opt.checked(opt.Count, "--budget-steps")),
         compression: str = typer.Option("none", "--compression", help="compressions searched: none, fp16 or "
                                         "none,fp16 (fp16 runs for real through hvd.Compression.fp16)"),
         against_autotune: bool = typer.Option(False, "--against-autotune", help="then run Horovod's autotune with its "
                                               "default settings on the same job and measure both finals and the "
                                               "defaults, interleaved"),
         repeats: int = typer.Option(3, "--repeats", help="--against-autotune: repeats of each final",
                                     callback=opt.checked(opt.Count, "--repeats")),
         name: Optional[str] = typer.Option(None, "--name", help="record file name (default: tune-<model>)",
                                            callback=opt.checked(opt.PlainName, "--name")),
         timeout_s: float = typer.Option(600.0, "--timeout", help="seconds per trial before it is killed",
                                         callback=opt.checked(opt.Seconds, "--timeout")),
         batch_size: Optional[int] = typer.Option(None, "--batch-size", help="images per rank per step (img/sec output)",
                                                  callback=opt.checked(opt.Count, "--batch-size")),
         runs_dir: Optional[Path] = runs_dir_opt(RUNS_OUT_HELP),
         model_dir: Optional[Path] = model_dir_opt(),
         as_json: bool = json_opt()) -> None:
    """Tune the knobs with real horovodrun trials, starting from the simulator's belief.

    A Gaussian process models where real trials disagree with the simulator; each trial refits the env's
    link bandwidth; it stops when no candidate's expected improvement beats the measured noise. Example:

    \b
        autotuner tune --env mycluster --model resnet50 --compute-ms 300 --budget-steps 200
    """
    link_gbit, loopback_gbit = network(link_gbit, loopback_gbit, bandwidth_gbit, testbed_hosts)
    comps = [c.strip() for c in compression.split(",") if c.strip()]
    with progress("tune (steps)", quiet=as_json, total=budget_steps, echo=True) as act:
        r = autotuner.tune(env, model, command=tuple(command or ()), np=np_, hosts=hosts, link_gbit=link_gbit,
                           loopback_gbit=loopback_gbit, testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host,
                           wait=wait, compute_ms=compute_ms, steps=steps, warmup=warmup,
                           budget_steps=budget_steps, compressions=comps, against_autotune=against_autotune,
                           repeats=repeats, name=name, timeout_s=timeout_s, batch_size=batch_size, runs_dir=runs_dir,
                           model_dir=model_dir, on_event=act.event,
                           progress=lambda spent, budget, incumbent: act.update(
                               spent, budget, f"tune (steps; best {incumbent})" if incumbent else None))
    if as_json:
        print(json.dumps({"final": r.final, "steps": r.steps, "trials": r.trials, "wall_s": r.wall_s, "stop": r.stop,
                          "refits": list(r.refits), "defaults_ms": list(r.defaults_ms), "report": str(r.report),
                          "trust": r.trust, "head_to_head": r.head_to_head}, allow_nan=False, default=str))
        return
    if r.final is None:
        out.print(f"no configuration was measured: {r.stop}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    f = r.final
    m = f["measured_ms"]
    rng = f"range {min(m):.1f}-{max(m):.1f} ms over {len(m)} trials" if len(m) > 1 else "one trial"
    is_defaults = f["compression"] == "none" and f["config"] == autotuner.DEFAULTS_0_28.to_dict()
    lines = [f"final: {f['key']}: {f['median_ms']:.1f} ms/step ({rng})"
             + (": Horovod's defaults, keep them" if is_defaults else "")]
    if r.defaults_ms and not is_defaults:
        import statistics

        d = r.defaults_ms
        lines.append(f"Horovod's defaults measured {statistics.median(d):.1f} ms/step"
                     + (f" (range {min(d):.1f}-{max(d):.1f} ms over {len(d)} trials)" if len(d) > 1 else " (one trial)"))
    lines += [f"spent: {r.steps} steps in {r.trials} trials, {r.wall_s:.0f} s of jobs",
              f"stopped: {r.stop}", "horovodrun flags: " + " ".join(f["flags"]),
              "env vars: " + " ".join(f"{k}={v}" for k, v in f["env"].items())]
    if f["compression"] != "none":
        lines.append(f"in your script: {f['compression_code']}")
    if r.head_to_head:
        a = r.head_to_head["autotune"]
        lines.append(f"Horovod's default autotune: {'settled' if a.get('finished') else 'did not settle'} after "
                     f"{a.get('steps')} steps, {a.get('wall_s')} s")
        lines.append(r.head_to_head["verdict"])
    lines.append(f"trust: {r.trust}")
    lines.append(f"report: {r.report}")
    for ln in lines:
        out.print(ln, highlight=False, markup=False, soft_wrap=True)



@app.command("profile", short_help="time your model's gradients: a layout JSON")
def profile_cmd(model: str = typer.Option(..., "--model", help="pkg.mod:factory, a function returning your torch.nn.Module (importable: on PYTHONPATH)"),
                input_shape: str = typer.Option(..., "--input-shape", help="one sample's input shape, e.g. 3,224,224 "
                                                "(the batch dimension comes from --batch-size)"),
                batch_size: int = typer.Option(32, "--batch-size", help="samples per step (per GPU / rank)",
                                               callback=opt.checked(opt.Count, "--batch-size")),
                device: ProfileDevice = device_opt("where the model runs"),
                amp: bool = typer.Option(False, "--amp", help="autocast forward + loss: bfloat16 on CPU; on CUDA "
                                         "bfloat16 where the GPU supports it, else float16"),
                steps: int = typer.Option(10, "--steps", help="measured steps (medians are reported)",
                                          callback=opt.checked(opt.Count, "--steps")),
                warmup: int = typer.Option(3, "--warmup", help="warm-up steps, not measured",
                                           callback=opt.checked(opt.Index, "--warmup")),
                threads: Optional[int] = typer.Option(None, "--threads", help="CPU: torch threads per rank, as your "
                                                      "script sets them (default: torch's)",
                                                      callback=opt.checked(opt.Count, "--threads")),
                concurrent: int = typer.Option(1, "--concurrent", help="CPU: copies computing at once, as the ranks "
                                               "on one host do (e.g. 2 for horovodrun -np 2 on one host)",
                                               callback=opt.checked(opt.Count, "--concurrent")),
                out_file: Path = typer.Option(..., "--out", help="layout JSON to write (for --model FILE.json)"),
                as_json: bool = json_opt("a summary")) -> None:
    """Measure your model's gradient readiness, forward and backward times; write a layout JSON that
    simulate, suggest, explore and validate take as --model FILE.json (no --compute-ms needed).

    Example:

    \b
        autotuner profile --model mypkg.models:build --input-shape 3,224,224 --batch-size 32 --out my_layout.json
    """
    with progress("profile", quiet=as_json) as act:
        d = autotuner.profile_model(model, out_file, input_shape=input_shape, batch_size=batch_size, device=device,
                                    amp=amp, steps=steps, warmup=warmup, threads=threads, concurrent=concurrent,
                                    on_event=act.event)
    for w in d["warnings"]:
        err.print(f"warning: {w}", highlight=False, markup=False, soft_wrap=True)
    if as_json:
        print(json.dumps(d, allow_nan=False))
        return
    out.print(f"[bold]{model}[/] on {d['device']} ({d['device_name']}), {'autocast ' if d['amp'] else ''}{d['dtype']}, "
              f"batch {d['batch_size']} x {d['input_shape']}: forward {d['forward_ms']:.2f} ms, backward "
              f"{d['backward_ms']:.2f} ms (medians of {d['steps']} steps after {d['warmup']} warm-up"
              + (f"; {d['threads']} thread(s), {d['concurrent']} cop{'y' if d['concurrent'] == 1 else 'ies'} at once"
                 if d.get("threads") else "") + ")", highlight=False)
    out.print(f"{d['tensors']} gradients, {d['bytes'] / MIB:.2f} MiB; first ready {d['first_ready_ms']:.2f} ms, "
              f"last {d['last_ready_ms']:.2f} ms after the end of forward", highlight=False)
    out.print(f"wrote {d['out']}; use it as: autotuner simulate --model {d['out']}", highlight=False, soft_wrap=True)


@app.command("measure", short_help="measure this cluster with Horovod's allreduce")
@old_names(cpu_rounds="--cpu-repeats", trickle_rounds="--trickle-repeats", idle_rounds="--idle-repeats",
           burst_rounds="--burst-repeats", mid_rounds="--mid-repeats", step_rounds="--step-repeats",
           fused_rounds="--fused-repeats", fp16_rounds="--fp16-repeats")
def measure_cmd(env: str = typer.Option(..., "--env", help="environment name: the sweep goes to <runs-dir>/<env>/",
                                        callback=opt.checked(opt.PlainName, "--env")),
                np_: int = np_opt(),
                hosts: str = hosts_opt("; several hosts: the intra-node and inter-node tiers are measured apart"),
                testbed_hosts: Optional[int] = testbed_opts()[0],
                ranks_per_host: Optional[int] = testbed_opts()[1],
                link_gbit: Optional[float] = testbed_opts()[2],
                loopback_gbit: Optional[float] = testbed_opts()[3],
                bandwidth_gbit: Optional[float] = testbed_opts()[4],
                wait: str = wait_opt(),
                sizes: Optional[str] = typer.Option(None, "--sizes", help="message sizes: LO:HI doubling, or a comma "
                                                    "list; bytes or K/M/G (binary) [default: 1K:512M]"),
                repeats: int = typer.Option(5, "--repeats", help="timed samples per size",
                                            callback=opt.checked(opt.Count, "--repeats")),
                warmup: int = typer.Option(1, "--warmup", help="untimed samples per size first",
                                           callback=opt.checked(opt.Index, "--warmup")),
                timeout_s: float = typer.Option(900.0, "--timeout", help="seconds per horovodrun job before it is killed",
                                                callback=opt.checked(opt.Seconds, "--timeout")),
                cpu_rounds: int = rounds_opt("cpu rounds", "jobs of compute beside Horovod's cycles and of "
                                             "collectives beside compute", "measure"),
                trickle_rounds: int = rounds_opt("trickle rounds", "jobs of tensors one per cycle, at 1 and 5 ms",
                                                 "measure"),
                idle_rounds: int = rounds_opt("idle rounds", "one job: small responses while the ranks sleep",
                                              "measure"),
                burst_rounds: int = rounds_opt("burst rounds", "one job: small responses 1 and 32 at once, timed "
                                               "without the timeline", "measure"),
                mid_rounds: int = rounds_opt("mid rounds", "one job: responses of 256 KiB-4 MiB, 1 and 8 at once, "
                                             "timed without the timeline", "measure"),
                step_rounds: int = rounds_opt("step rounds", "5 replay jobs of many small gradients: defaults, fusion "
                                              "off, cache off at 100 ms of compute, defaults and fusion off at 300 ms; "
                                              "no timeline", "measure"),
                fused_rounds: int = rounds_opt("fused rounds", "one job: fused responses of 4-32 MiB against lone "
                                               "ones, timed without the timeline", "measure"),
                fp16_rounds: int = rounds_opt("fp16 rounds", "one job: float16 against float32 allreduces, the casts",
                                              "measure"),
                device: ProfileDevice = device_opt("where the sweep's tensors live: cuda puts them on each rank's GPU "
                                                   "(Horovod built with NCCL) and runs the sweep and the fused phase "
                                                   "only"),
                as_json: bool = json_opt("the summary"),
                runs_dir: Optional[Path] = runs_dir_opt(RUNS_OUT_HELP)) -> None:
    """Measure this cluster with Horovod's own allreduce (size sweep, fusion copies, negotiation); resumable.

    Writes the records to <runs-dir>/<env>/ and fits nothing: its last line is the command to run next,
    autotuner fit <runs-dir> (docs/how-to/measure.md). Example:

    \b
        autotuner measure --env mycluster --hosts node1:4,node2:4
        autotuner fit runs/
    """
    link_gbit, loopback_gbit = network(link_gbit, loopback_gbit, bandwidth_gbit, testbed_hosts)
    with progress(f"measure {env}", quiet=as_json, counts=True, echo=True) as act:
        summary = autotuner.measure(env=env, runs_dir=runs_dir, np=np_, hosts=hosts, link_gbit=link_gbit,
                                    loopback_gbit=loopback_gbit, sizes=sizes, repeats=repeats, warmup=warmup,
                                    timeout_s=timeout_s, testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host,
                                    wait=wait, cpu_rounds=cpu_rounds, trickle_rounds=trickle_rounds,
                                    idle_rounds=idle_rounds, fp16_rounds=fp16_rounds, burst_rounds=burst_rounds,
                                    step_rounds=step_rounds, mid_rounds=mid_rounds, fused_rounds=fused_rounds,
                                    device=device, on_total=act.update, on_event=act.event,
                                    on_item=lambda r: act.advance(f"{r['phase']} {r['bytes']} B: "
                                                                  f"{r['median_ms']:.2f} ms"))
    if as_json:
        out.print_json(json.dumps(summary))
        return
    big = summary["largest_allreduce"]
    out.print(f"{summary['items_new']} item(s) measured, {summary['items_recorded']} of {summary['items_total']} recorded "
              f"in {summary['records']} ({summary['wall_s']} s)", highlight=False)
    if big:
        out.print(f"largest allreduce: {big['mib']:g} MiB in {big['median_ms']:.1f} ms (algbw {big['algbw_gbit_s']:.3f} Gbit/s)",
                  highlight=False)
    for name in ("cpu", "trickle", "idle", "burst", "mid", "step", "fused", "fp16"):
        ph = summary.get(name)
        if ph:
            out.print(f"{'mid-size burst' if name == 'mid' else name} phase: {ph['jobs_new']} job(s) run, {ph['jobs_recorded']} recorded in {ph['records']}",
                      highlight=False)
    out.print(f"network: {summary['network']}", highlight=False)
    out.print(f"next: autotuner fit {summary['runs_dir']}", highlight=False)

