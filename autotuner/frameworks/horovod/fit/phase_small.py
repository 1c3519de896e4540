"""The small-response phases: a lone response (trickle), responses while the ranks sleep (idle), back to back in a busy cycle (the sweep's unfused job), queued at once (burst) and mid-size bursts.

Part of the sweep fit (:func:`autotuner.frameworks.horovod.fit.sweep.fit_sweep_env`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ....errors import AutotunerError
from ..knobs import MIB
from ....model.costmodel import Cluster
from ....readers.timeline import read_timeline


CPU_RECORDS = "cpu.jsonl"
#: the trickle phase's records, beside ``source`` (:data:`autotuner.frameworks.horovod.measure.TRICKLE_RECORDS`)
TRICKLE_RECORDS = "trickle.jsonl"
#: the idle phase's records, beside ``source`` (:data:`autotuner.frameworks.horovod.measure.IDLE_RECORDS`), and
#: the tensor-name prefix of autotuner.frameworks.horovod.idleprobe (not imported: fit does not load realrun)
IDLE_RECORDS, IDLE_PREFIX = "idle.jsonl", "idle"
#: the tensor-name prefixes of autotuner.frameworks.horovod.trickleprobe (not imported: fit does not load realrun)
TRICKLE, BACK_TO_BACK = "trickle", "b2b"


def _kept_timeline(env_dir, rec: dict[str, Any], problems: list[str], read: dict | None = None):
    """The timeline a probe phase's record kept (``rec["timeline"]``, relative to ``env_dir``), or
    None: the record has none, or it cannot be read (named in ``problems``). ``read`` (a dict the caller keeps)
    holds what each file gave, a Timeline or its error, so that two readers of one phase parse it once; each
    reader still names an unreadable file in ``problems``, as without it."""
    from pathlib import Path

    if not rec.get("timeline"):
        return None
    key = (str(env_dir), rec["timeline"])
    got = read.get(key) if read is not None else None
    if got is None:
        try:
            got = read_timeline(Path(env_dir) / rec["timeline"])
        except AutotunerError as e:
            got = e
        if read is not None:
            read[key] = got
    if isinstance(got, AutotunerError):
        problems.append(f"{rec['timeline']}: dropped ({got})")
        return None
    return got


def lone_response(recs: list[dict[str, Any]], env_dir, problems: list[str], read: dict | None = None) -> dict[str, Any]:
    """How much longer a response alone in its cycle runs, from the ``trickle`` phase's timelines
    (:mod:`autotuner.frameworks.horovod.trickleprobe`): per job and tensor size, the mean collective span of
    the tensors enqueued one per cycle less that of the same tensors enqueued all at once (each
    name's first use left out: the response cache's miss), averaged over the sizes; per cycle
    time, the median over rounds; then ``extra = lone + per_cycle x cycle`` through the cycle
    times by non-negative least squares (``scipy.optimize.nnls``). ``lone_us`` None (with a note)
    without two cycle times. ``problems`` gets unreadable timelines; ``read`` (optional) keeps each parsed
    timeline for :func:`busy_small_response`, which reads the same files (:func:`_kept_timeline`). Recorded in the
    model file's
    ``fit.negotiation.lone``; not a term of the cost model (research/notes/fresh-environments.md section 9)."""
    from scipy.optimize import nnls

    per_cycle: dict[float, list[float]] = {}
    sizes_info: dict[str, list[float]] = {}
    for r in recs:
        tl = _kept_timeline(env_dir, r, problems, read)
        if tl is None:
            continue
        spans: dict[tuple[str, int], list[float]] = {}
        seen: set[str] = set()
        for resp in sorted(tl.responses, key=lambda x: x.start_us):
            if resp.op != "allreduce" or len(resp.tensors) != 1:
                continue
            name = resp.tensors[0].split(".", 1)[-1]  # "allreduce.trickle.4096.3" -> "trickle.4096.3"
            kind = name.split(".", 1)[0]
            if kind not in (TRICKLE, BACK_TO_BACK):
                continue
            if name not in seen:  # each name's first use is left out (Horovod's first negotiation of it)
                seen.add(name)
                continue
            spans.setdefault((kind, resp.nbytes), []).append(resp.duration_us * 1e-6)
        extras = [float(np.mean(spans[(TRICKLE, n)]) - np.mean(spans[(BACK_TO_BACK, n)]))
                  for n in r["sizes"] if spans.get((TRICKLE, n)) and spans.get((BACK_TO_BACK, n))]
        for n in r["sizes"]:
            if spans.get((TRICKLE, n)) and spans.get((BACK_TO_BACK, n)):
                sizes_info.setdefault(f"{float(r['cycle_time_ms']):g} ms, {n} B", []).append(
                    float(np.mean(spans[(TRICKLE, n)]) - np.mean(spans[(BACK_TO_BACK, n)])) * 1e3)
        if extras:
            per_cycle.setdefault(float(r["cycle_time_ms"]), []).append(float(np.mean(extras)))
    out: dict[str, Any] = {"form": "extra = mean span one per cycle - all at once (per size, averaged); median over "
                                   "rounds; extra = lone + per_cycle x cycle (nnls)", "lone_us": None, "per_cycle": 0.0,
                           "extra_ms_by_cycle": {f"{c:g}": float(np.median(v)) * 1e3 for c, v in sorted(per_cycle.items())},
                           "extra_ms_by_cycle_and_size": sizes_info}
    if len(per_cycle) < 2:
        out["note"] = "fewer than two cycle times in a trickle phase: a lone response costs what the sweep says"
        return out
    cs = sorted(per_cycle)
    A = np.array([[1.0, c * 1e-3] for c in cs])
    (lone, slope), _ = nnls(A, np.array([max(0.0, float(np.median(per_cycle[c]))) for c in cs]))
    out.update(lone_us=float(lone) * 1e6, per_cycle=float(slope))
    return out


def idle_response(recs: list[dict[str, Any]], env_dir, problems: list[str], p: int) -> dict[str, Any]:
    """A small response's collective time while the ranks' main threads sleep, from the ``idle``
    phase's timelines (:mod:`autotuner.frameworks.horovod.idleprobe`): per job and tensor size, the mean span
    of the ``idle.<bytes>.<k>`` responses (each name's first use left out: the response cache's
    miss); per size, the mean over jobs (each job samples the host's idle regime once: the
    expected cost is the mean, not the median); then ``t(n) = a + b·n`` through the sizes by
    non-negative least squares (``scipy.optimize.nnls``), valid up to the largest size. Only jobs
    of the fitted tier's ``p`` ranks count. Returns the model file's ``fit.idle_response``:
    ``per_response_us`` (a), ``per_byte_ns`` (b), ``up_to_bytes``, ``ms_by_size`` ({size: [per job
    mean, ms]}), ``jobs``; ``per_response_us`` None (with a note) with fewer than 2 sizes seen.
    ``problems`` gets unreadable timelines. Recorded in the model file's ``fit.idle_response``; not
    a term of the cost model (research/notes/fresh-environments.md section 11)."""
    from scipy.optimize import nnls

    by_size: dict[int, list[float]] = {}
    jobs = 0
    for r in recs:
        if int(r.get("ranks", p)) != p:
            continue
        tl = _kept_timeline(env_dir, r, problems)
        if tl is None:
            continue
        spans: dict[int, list[float]] = {}
        seen: set[str] = set()
        for resp in sorted(tl.responses, key=lambda x: x.start_us):
            if resp.op != "allreduce" or len(resp.tensors) != 1:
                continue
            name = resp.tensors[0].split(".", 1)[-1]  # "allreduce.idle.4096.3" -> "idle.4096.3"
            if name.split(".", 1)[0] != IDLE_PREFIX:
                continue
            if name not in seen:  # its first use: the response cache's miss
                seen.add(name)
                continue
            spans.setdefault(int(resp.nbytes), []).append(resp.duration_us * 1e-6)
        if spans:
            jobs += 1
        for n, v in spans.items():
            by_size.setdefault(n, []).append(float(np.mean(v)))
    out: dict[str, Any] = {"form": "per job and size the mean span (first uses left out); per size the mean over "
                                   "jobs; t = a + b*n (nnls) up to the largest size",
                           "per_response_us": None, "per_byte_ns": None, "up_to_bytes": None, "jobs": jobs,
                           "ms_by_size": {str(n): [round(x * 1e3, 4) for x in v] for n, v in sorted(by_size.items())}}
    if len(by_size) < 2:
        out["note"] = "no idle phase (or fewer than 2 sizes in it): small responses cost what the sweep's tier says"
        return out
    ns = np.array(sorted(by_size), float)
    ts = np.array([np.mean(by_size[int(n)]) for n in ns])
    (a, b), _ = nnls(np.column_stack([np.ones_like(ns), ns]), ts)
    out.update(per_response_us=float(a) * 1e6, per_byte_ns=float(b) * 1e9, up_to_bytes=float(ns.max()),
               mean_ms_by_size={str(int(n)): round(float(t) * 1e3, 4) for n, t in zip(ns, ts)})
    return out


#: the largest response the back-to-back small-response price is read from (bytes): the largest size every
#: phase measures (the unfused job's 64 KiB, :data:`autotuner.frameworks.horovod.trickleprobe.SIZES`,
#: :data:`autotuner.frameworks.horovod.idleprobe.SIZES`; not imported: fit does not load realrun)
SMALL_RESPONSE_BYTES = 65536
#: fewest back-to-back small responses for the price to replace the sweep line's intercept
MIN_SMALL_RESPONSES = 100
#: tensor-name prefix of the sweep's unfused phase (autotuner.frameworks.horovod.sweepprobe)
UNFUSED_PREFIX = "sweep.unfused"


def busy_small_response(unfused_tls: list, trecs: list[dict[str, Any]], env_dir, problems: list[str], tier,
                        p: int, read: dict | None = None) -> dict[str, Any]:
    """What a small response costs where a training step runs it: back to back with others in one busy
    cycle (fusion off or a small threshold: a step's hundreds of BatchNorm, bias and LayerNorm tensors).

    Read from the phases of ``measure`` that queue small responses back to back while the ranks wait for
    them, each response's collective span off its timeline (each tensor name's first use left out: the
    response cache's miss), responses of up to :data:`SMALL_RESPONSE_BYTES`:

    - ``unfused``: the sweep's fusion-off job (``unfused_tls``, ``sweep.unfused.<bytes>.<k>``): 16 tensors
      enqueued at once, the ranks waiting as the env's ranks wait (``measure --wait``);
    - ``trickle_b2b``: the trickle phase's all-at-once tensors (``trecs``, ``b2b.<bytes>.<k>``; the ranks
      wait in ``hvd.synchronize``), 4 rounds of 32 per size and job.

    The idle phase is left out: it samples the host's slow wake-up regime on purpose (every job in it),
    while a step's responses fall in either (research/notes/fresh-environments.md sections 10-11; with it the
    price over-charged the 2x2 env's fusion-off runs by 16 %, research/notes/accuracy.md). Each span less the tier's
    bandwidth part (``tier.allreduce_s(n, p)`` minus its latency ``2(p-1)·alpha``) is one sample of the
    fixed cost; ``fixed_ms`` is their mean (a step pays the sum: the mean, tails included), None (with a
    note) with fewer than :data:`MIN_SMALL_RESPONSES` samples. The fit then uses it as the tier's small-message latency
    (``fixed / (2(p-1))`` per ring step) in place of the pooled line's intercept, whose small sizes the
    single allreduces (each alone in its cycle, paying the other rank's cycle) and their tiny share of the
    time-share weights decide. ``problems`` gets unreadable timelines; ``read`` (optional) is the dict of
    timelines already parsed that :func:`lone_response` shares (:func:`_kept_timeline`). Returns the model file's
    ``fit.small_responses``: ``fixed_ms``, ``line_a_ms`` (the intercept it replaces), ``n``, ``up_to_bytes``
    and per phase ``n``, ``mean_span_ms``, ``median_span_ms``, ``mean_fixed_ms``."""
    base_s = 2 * (p - 1) * tier.alpha_s  # the line's latency at n -> 0 on p ranks

    def spans(tl, prefix: str) -> list[tuple[int, float]]:
        out, seen = [], set()
        for resp in sorted(tl.responses, key=lambda x: x.start_us):
            if resp.op != "allreduce" or len(resp.tensors) != 1 or resp.nbytes > SMALL_RESPONSE_BYTES:
                continue
            name = resp.tensors[0].split(".", 1)[-1]  # "allreduce.idle.4096.3" -> "idle.4096.3"
            if not name.startswith(prefix + "."):
                continue
            if name not in seen:  # its first use: the response cache's miss
                seen.add(name)
                continue
            out.append((int(resp.nbytes), resp.duration_us * 1e-6))
        return out

    phases: dict[str, list[tuple[int, float]]] = {"unfused": [], "trickle_b2b": []}
    for tl in unfused_tls:
        phases["unfused"] += spans(tl, UNFUSED_PREFIX)
    for r in trecs:
        if int(r.get("ranks", p)) != p:
            continue
        tl = _kept_timeline(env_dir, r, problems, read)
        if tl is not None:
            phases["trickle_b2b"] += spans(tl, BACK_TO_BACK)
    out: dict[str, Any] = {
        "regime": "back to back in a busy cycle (the fusion-off job, the trickle phase's all-at-once tensors)",
        "form": f"fixed = mean over responses <= {SMALL_RESPONSE_BYTES} bytes of (span - the tier's bandwidth part); "
                "the tier's small-message latency = fixed / (2(p-1))",
        "fixed_ms": None, "line_a_ms": base_s * 1e3, "up_to_bytes": SMALL_RESPONSE_BYTES, "p": p, "phases": {}}
    fixed_all: list[float] = []
    for key, v in phases.items():
        if not v:
            out["phases"][key] = {"n": 0}
            continue
        n = np.array([x[0] for x in v], float)
        sp = np.array([x[1] for x in v], float)
        fixed = sp - (np.asarray(tier.allreduce_s(n, p), float) - base_s)
        fixed_all += fixed.tolist()
        out["phases"][key] = {"n": int(len(v)), "mean_span_ms": float(sp.mean()) * 1e3,
                              "median_span_ms": float(np.median(sp)) * 1e3, "mean_fixed_ms": float(fixed.mean()) * 1e3}
    out["n"] = len(fixed_all)
    if len(fixed_all) < MIN_SMALL_RESPONSES:
        out["note"] = (f"{len(fixed_all)} back-to-back small response(s), fewer than {MIN_SMALL_RESPONSES}: the "
                       "sweep line's intercept prices small responses")
        return out
    out["fixed_ms"] = max(0.0, float(np.mean(fixed_all))) * 1e3
    return out


#: the burst phase's records beside ``source`` (:data:`autotuner.frameworks.horovod.measure.BURST_RECORDS`)
BURST_RECORDS = "burst.jsonl"
#: the step phase's records beside ``source`` (:data:`autotuner.frameworks.horovod.measure.STEP_RECORDS`)
STEP_RECORDS = "step.jsonl"
#: fewest (size, job) marginal costs for the burst phase's price of a small response
MIN_BURST_POINTS = 3


def _burst_marginal_sim_s(cost, nbytes: int, count: int, p: int) -> float:
    """The simulator's marginal time (s) of one more of ``count`` responses of ``nbytes`` enqueued at once
    (fusion off, 1 ms cycle, cache on), ``(T(count) - T(1)) / (count - 1)``, on ``cost`` with ``p`` ranks on
    one node: the burst phase's pattern run through :func:`autotuner.frameworks.horovod.simulator.simulate_step`."""
    from ..knobs import DEFAULTS_0_28
    from ..simulator import simulate_step
    from ....model.workload import Workload

    cfg = replace(DEFAULTS_0_28, fusion_threshold_bytes=0)
    wl = Workload(forward_s=0.0, backward_s=1e-6)
    cl = Cluster(p, 1)

    def t(n: int) -> float:
        return simulate_step(np.full(n, nbytes, dtype=np.int64), np.ones(n), wl, cfg, cost, cl).step_time_s

    return (t(count) - t(1)) / (count - 1)


def burst_marginals_ms(rec: dict[str, Any]) -> list[tuple[int, int, float]]:
    """One burst record's (:class:`autotuner.schemas.BurstRecord`) marginal wall time of a response back to back:
    ``[(bytes, count, (median T(count) - median T(1)) / (count - 1) ms), ...]`` for every count above 1 whose size
    also ran alone, sorted by size and count (the rounds' medians; the probe left each first round out)."""
    by = {(int(b), int(c)): float(np.median(v)) for b, c, v in rec["wall_ms"] if v}
    return [(b, c, (tc - by[(b, 1)]) / (c - 1)) for (b, c), tc in sorted(by.items()) if c != 1 and (b, 1) in by]


def burst_small_response(recs: list[dict[str, Any]], cost, p: int) -> dict[str, Any]:
    """The price of a small response back to back in a busy cycle, from the ``burst`` phase
    (:mod:`autotuner.frameworks.horovod.burstprobe`): wall-clock times without Horovod's timeline, whose writer takes
    the ranks' CPU (research/notes/accuracy.md, "The small-response regime").

    Per job and size, the measured marginal ``m = (median T(32) - median T(1)) / 31`` (ms; the rounds'
    medians, each size's first round left out by the probe). The simulator runs the same pattern on
    ``cost`` (:func:`_burst_marginal_sim_s`) with the tier's latency set to 0, giving ``m0``: what the
    fitted negotiation, host gaps and bandwidth already charge per response. The latency that closes the
    gap is ``alpha = (m - m0) / (2(p-1))`` per ring step (a ring allreduce pays ``2(p-1)`` latencies; the
    simulator is linear in it), taken as the median over sizes and jobs, at least 0. Returns the model
    file's ``fit.small_responses.burst``: ``alpha_us`` (None with a note below :data:`MIN_BURST_POINTS`
    points), ``fixed_ms`` (= ``2(p-1)·alpha``), ``points`` (``[bytes, job, m_ms, m0_ms]``), ``regime``,
    ``form``."""
    out: dict[str, Any] = {"regime": "back to back in a busy cycle, wall clock without the timeline (burst phase)",
                           "form": "alpha = median over sizes and jobs of (marginal measured - marginal simulated at "
                                   "alpha 0) / (2(p-1))",
                           "alpha_us": None, "fixed_ms": None, "points": [], "jobs": 0}
    recs = [r for r in recs if int(r.get("ranks", p)) == p]
    out["jobs"] = len(recs)
    if not recs:
        out["note"] = "no burst phase measured (autotuner measure --burst-rounds)"
        return out
    zero = replace(cost, inter=replace(cost.inter, alpha_s=0.0))
    m0_cache: dict[int, float] = {}
    alphas = []
    for r in recs:
        for b, c, m_ms in burst_marginals_ms(r):
            m = m_ms * 1e-3
            if b not in m0_cache:
                m0_cache[b] = _burst_marginal_sim_s(zero, b, c, p)
            alphas.append((m - m0_cache[b]) / (2 * (p - 1)))
            out["points"].append([b, int(r["repeat"]), m * 1e3, m0_cache[b] * 1e3])
    if len(alphas) < MIN_BURST_POINTS:
        out["note"] = f"{len(alphas)} burst point(s), fewer than {MIN_BURST_POINTS}: not used"
        return out
    a = max(0.0, float(np.median(alphas)))
    out["alpha_us"] = a * 1e6
    out["fixed_ms"] = 2 * (p - 1) * a * 1e3
    out["charged"] = False  # recorded, not a term: see the comment where fit_sweep_env calls this
    return out


#: the mid-size burst records beside ``source`` (:data:`autotuner.frameworks.horovod.measure.MID_RECORDS`)
MID_RECORDS = "burst-mid.jsonl"
#: fewest jobs (rounds) of the mid-size burst phase for its shift to be charged
MIN_MID_JOBS = 3


def _mid_sizes(recs: list[dict[str, Any]], keep, cost, p: int) -> tuple[list[list], list[float], set[int]]:
    """The mid-size burst phase's jobs (``recs``, already those on ``p`` ranks without the timeline) per record size
    ``b`` and count ``c`` with ``keep(b)``, against the simulator on ``cost``: ``(sizes, diffs, sides)``, sorted by
    size: ``sizes`` rows ``[bytes, jobs, measured min, median, max, simulated]`` (ms per response; measured:
    :func:`burst_marginals_ms`, simulated: :func:`_burst_marginal_sim_s`), ``diffs`` the median measured - simulated
    per size (ms), ``sides`` the set of +1 (every job above the simulated marginal), -1 (every one below), 0 (some on
    each side)."""
    by: dict[tuple[int, int], list[float]] = {}
    for r in recs:
        for b, c, m_ms in burst_marginals_ms(r):
            if keep(b):
                by.setdefault((b, c), []).append(m_ms)
    rows, diffs, sides = [], [], set()
    for b, c in sorted(by):
        m, sim = by[(b, c)], _burst_marginal_sim_s(cost, b, c, p) * 1e3
        rows.append([b, len(m), min(m), float(np.median(m)), max(m), sim])
        diffs.append(float(np.median(m)) - sim)
        sides.add(1 if min(m) > sim else -1 if max(m) < sim else 0)
    return rows, diffs, sides


def mid_response(recs: list[dict[str, Any]], cost, p: int) -> dict[str, Any]:
    """What a mid-size response (at or above the tier's knee, ``large_from_bytes``) costs back to back in a busy
    cycle by the wall clock, against what ``cost``'s line above the knee charges for it: the shift of that line's
    latency, from the mid-size burst phase (:func:`autotuner.frameworks.horovod.measure.run_burst_phase` with
    :data:`autotuner.frameworks.horovod.measure.MID_SIZES`, counts 1 and 8, no timeline; research/notes/accuracy.md,
    "Mid-size responses back to back"). That line is fitted on spans read off the sweep's timelines, whose
    writer takes the ranks' CPU.

    Per job, record size at or above the knee and count ``c`` above 1, the measured marginal ``(median T(c) -
    median T(1)) / (c - 1)`` (ms, :func:`burst_marginals_ms`; ``c`` = 8 in ``measure``'s phase); the simulator's for
    the same pattern on ``cost`` (:func:`_burst_marginal_sim_s`). The rule, declared before it was judged on a
    fresh env: the shift is the median over those sizes of (median over jobs of the measured -
    simulated), charged only where the records resolve it: at least
    :data:`MIN_MID_JOBS` jobs, and at every such size the jobs' whole range on the same side of the simulated
    marginal. Where the differences are inside the jobs' own scatter the line stands. Narrowed after the replays of
    the committed envs were read: only a shift down is charged (the timeline writer's cost taken out of a line
    fitted on timeline spans); a wall clock above the line is recorded (on fresh-poll-2gbit, charging +0.44 ms
    turned its configurations' order over, Kendall tau 0.85 -> 0.62 over pairs > 2 % apart, and on
    fresh-2x1-5gbit a shift up broke DistilBERT's rows). ``large_alpha_s += shift / (2(p-1))`` (a ring pays
    ``2(p-1)`` latencies), floored at 0. Returns the model file's ``fit.small_responses.mid``: ``shift_ms``
    (None where not resolved), ``charged``, ``sizes`` (``[bytes, jobs, measured min, median, max, simulated]``,
    ms per response), ``regime``, ``form``, ``note``."""
    out: dict[str, Any] = {"regime": "mid-size responses back to back in a busy cycle, wall clock without the "
                                     "timeline (mid-size burst phase)",
                           "form": "shift = median over sizes >= knee of (median measured - simulated marginal); "
                                   "charged where every size's jobs lie below the simulated marginal",
                           "shift_ms": None, "charged": False, "sizes": [], "jobs": 0}
    knee = cost.inter.large_from_bytes
    recs = [r for r in recs if int(r.get("ranks", p)) == p and not r.get("timeline_recorded")]
    out["jobs"] = len(recs)
    if not recs:
        out["note"] = "no mid-size burst phase measured (autotuner measure --mid-rounds)"
        return out
    if knee is None:
        out["note"] = "the tier has one line for all sizes: nothing above a knee to shift"
        return out
    out["sizes"], diffs, sides = _mid_sizes(recs, lambda b: b >= knee, cost, p)
    if not diffs:
        out["note"] = f"no record size at or above the knee ({knee / MIB:g} MiB)"
        return out
    out["shift_ms"] = float(np.median(diffs))
    if len(recs) < MIN_MID_JOBS:
        out["note"] = f"{len(recs)} job(s), fewer than {MIN_MID_JOBS}"
    elif len(sides) != 1 or 0 in sides:
        out["note"] = "inside the jobs' own scatter (or on both sides) at some size: the line stands"
    elif sides == {1}:
        out["note"] = ("the wall clock above the line, which a step's queued responses did not show (research/notes/accuracy.md, "
                       "\"Mid-size responses back to back\")")
    else:
        out["charged"] = True
    return out


#: the smallest record size the below-knee rule reads: under it a response's price is mostly its fixed part
MID_BANDWIDTH_FROM_BYTES = MIB
#: fewest record sizes below the knee (and at least :data:`MID_BANDWIDTH_FROM_BYTES`) for the below-knee rule
MIN_MID_BELOW_SIZES = 2


def mid_bandwidth(recs: list[dict[str, Any]], cost, p: int) -> dict[str, Any]:
    """What a mid-size response below the tier's knee costs back to back by the wall clock, against ``cost``'s
    line below the knee (its fixed part the small responses' price, its bandwidth the sweep's pooled spans): the
    change of that line's bandwidth, from the same mid-size burst phase as :func:`mid_response` (no timeline).

    The rule, declared after reading fresh-poll-2x1-4gbit's and -3.5gbit's records and before it was
    judged on an env no fit had seen: per record size ``b`` with :data:`MID_BANDWIDTH_FROM_BYTES` <= ``b`` < the
    knee, ``d(b)`` = median over jobs of the measured marginal (:func:`burst_marginals_ms`) - the simulated one
    (:func:`_burst_marginal_sim_s` on ``cost``, its small-response price already set). A bandwidth error grows with
    the size, a fixed-cost error does not: charged only where at least :data:`MIN_MID_BELOW_SIZES` such sizes,
    :data:`MIN_MID_JOBS` jobs, at every size the jobs' whole range on the same side of the simulated marginal, and
    ``|d|`` growing with ``b``. The per-byte change ``k`` is the least-squares slope through the origin of ``d``
    against ``b`` (``k = sum(d b) / sum(b^2)``, the fixed part left to the small responses' price); a ring allreduce
    moves ``2(p-1)/p`` bytes per byte of response, so ``1/bandwidth' = 1/bandwidth + k p / (2(p-1))``, charged in
    either direction (the line's form, not the timeline writer's cost, is what it corrects) where that stays
    positive. No knee (one line for all sizes, the large messages' too): recorded, not charged. Returns the model
    file's ``fit.small_responses.mid.below``: ``k_ms_per_mib`` (None where not resolved), ``charged``,
    ``bandwidth_gbps`` ``[before, after]``, ``sizes`` (``[bytes, jobs, measured min, median, max, simulated]``, ms
    per response), ``regime``, ``form``, ``note``."""
    out: dict[str, Any] = {"regime": "mid-size responses below the knee back to back in a busy cycle, wall clock "
                                     "without the timeline (mid-size burst phase)",
                           "form": "k = sum(d b) / sum(b^2) over sizes 1 MiB <= b < knee, d = median measured - "
                                   "simulated marginal; 1/bandwidth += k p / (2(p-1)); charged where every size's jobs "
                                   "lie on one side and |d| grows with b",
                           "k_ms_per_mib": None, "charged": False, "bandwidth_gbps": None, "sizes": [], "jobs": 0}
    knee = cost.inter.large_from_bytes
    recs = [r for r in recs if int(r.get("ranks", p)) == p and not r.get("timeline_recorded")]
    out["jobs"] = len(recs)
    if not recs:
        out["note"] = "no mid-size burst phase measured (autotuner measure --mid-rounds)"
        return out
    if knee is None:
        out["note"] = "the tier has one line for all sizes, the large messages' too: its bandwidth stands"
        return out
    rows, ds, sides = _mid_sizes(recs, lambda b: MID_BANDWIDTH_FROM_BYTES <= b < knee, cost, p)
    if len(rows) < MIN_MID_BELOW_SIZES:
        out["note"] = (f"{len(rows)} record size(s) from {MID_BANDWIDTH_FROM_BYTES / MIB:g} MiB to under the knee "
                       f"({knee / MIB:g} MiB), fewer than {MIN_MID_BELOW_SIZES}")
        return out
    out["sizes"] = rows
    b_, d_ = np.array([r[0] / MIB for r in rows]), np.array(ds)
    k = float(np.sum(d_ * b_) / np.sum(b_ * b_))  # ms per MiB of response
    out["k_ms_per_mib"] = k
    inv = 1.0 / cost.inter.bandwidth_Bps + k * 1e-3 / MIB * p / (2 * (p - 1))
    out["bandwidth_gbps"] = [cost.inter.bandwidth_Bps * 8e-9, (8e-9 / inv) if inv > 0 else None]
    if len(recs) < MIN_MID_JOBS:
        out["note"] = f"{len(recs)} job(s), fewer than {MIN_MID_JOBS}"
    elif len(sides) != 1 or 0 in sides:
        out["note"] = "inside the jobs' own scatter (or on both sides) at some size: the line stands"
    elif not all(abs(y) > abs(x) for x, y in zip(ds, ds[1:])):
        out["note"] = "the difference does not grow with the size (a fixed part, not the bandwidth): the line stands"
    elif inv <= 0:
        out["note"] = "the change would leave no time per byte: the line stands"
    else:
        out["charged"] = True
    return out


#: fewest rounds of the step phase with both a defaults and a fusion-off job for its price to be charged
