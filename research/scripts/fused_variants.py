"""Issue 29 part 5: which part of the fused phase's pair pays what a real step's fused responses do not?

On fresh-poll-2x1-2.5gbit, in one sitting (session 54; docs/accuracy.md, "What fusion off saves on two hosts"), the
fused phase's pair (8 float32 + 8 float64 tensors of S/8 enqueued together: two fused responses of S) cost 0.17-0.24 ms
per MiB more than two lone float32 tensors of S, at S = 16-96 MiB (``research/scripts/fused_large.py``), while a real step's
defaults, which fuse 76-122 MiB of float32 gradients into one or two responses, paid nothing over the lone line
(DistilBERT at 10 ms of compute: 1083.5 ms measured, 1073 the line alone, 1114-1131 with the phase's copies). The pair
differs from a step's fused response in three ways this separates, each timed by the wall clock, no timeline, at
S = 32 and 96 MiB, every item once per round, rounds interleaved, 5 rounds after 1 of warm-up, on the env's own
testbed (2 emulated hosts, 2.5 Gbit/s HTB links, ranks polling as the env's):

* ``lone32`` / ``lone64``: one float32 / one float64 tensor of S, in place (the phase's lone item is float32);
* ``pair``: the phase's own pair (two responses of S: report it per response, ``pair / 2``);
* ``fused32`` / ``fused64``: 16 float32 / 16 float64 tensors of S/16 (one fused response of S, one dtype);
* ``many32``: 64 float32 tensors of S/64 (one response of S: a step's tensor count);
* ``renewed32``: ``fused32`` with every tensor's values renewed (``normal_``) before each round's call, outside the
  timed call, as the replay renews its gradients (``autotuner.frameworks.horovod.replay``).

Declared before it ran (2026-12-02, session 54), per MiB of S, medians over jobs of the per-round differences:

1. dtype: if the phase's extra is the float64 response's, ``fused32 - lone32`` is at most 0.10 ms per MiB and
   ``lone64 - lone32`` at least 0.15.
2. copies paid by float32 fused responses: ``fused32 - lone32`` at least 0.15 ms per MiB; then the steps' freedom
   from them is not the dtype, and 3-4 are read.
3. tensor count: ``many32`` within 0.05 ms per MiB of ``fused32``, or not.
4. renewed values: ``renewed32`` within 0.05 ms per MiB of ``fused32``, or not.

A second set (``--set neighbours``), declared after the eighth set of ``research/scripts/step_layout_neighbours.py`` (replays
minutes apart on a contended host could not resolve it) and before it ran (2026-12-02, session 54): does a small
response cost more right after a larger response? The seventh set found DistilBERT's small responses cost 2.45 ms
each among its 2.25 and 9 MiB responses and 1.0 ms alone, vit_s16's 1.09 among responses of at most 2.25 MiB and
0.86 alone. One job, fusion off (``HOROVOD_FUSION_THRESHOLD=0``), every item once per round, 5 rounds after 1 of
warm-up, 3 jobs, enqueued at once and waited for as above:

* ``weights``: 16 float32 tensors of L (16 lone responses back to back);
* ``interleaved``: the same 16 with a 3 KiB vector (768 float32) enqueued after each (32 responses, each small one
  after a weight);
* ``vectors``: the 16 vectors alone;

for L = 2.25 and 9 MiB. A small response after a weight of L costs ``a(L) = (interleaved - weights) / 16`` (ms, median
over rounds, then over jobs), one among small ones ``vectors / 16``. Declared: if a small response costs more after a
larger one, a(9 MiB) - a(2.25 MiB) is at least 0.5 ms and a(9 MiB) at least 1.5x ``vectors / 16``; if not, a(9 MiB)
is within 0.3 ms of a(2.25 MiB).

A third set (``--set layouts``), declared after the second set's report (a small response after a 9 MiB response
costs 1.43 ms, after a 2.25 MiB one 1.54, after a small one 1.41: not the neighbour's size) and before it ran
(2026-12-02, session 54): the real layouts' own orders, enqueued at once in one fusion-off job, against their parts.
For vit_s16 and DistilBERT (the ``sizes`` axis indexes :data:`LAYOUT_MODELS`), in their layouts' backward order:
``whole`` (every tensor), ``nosmall`` (the tensors of 256 KiB and more), ``small`` (the others). The replays of the
seventh set of ``research/scripts/step_layout_neighbours.py`` (tensors handed over through a 10 ms step's backward, cycle by
cycle) measured a small response at 2.45 ms among DistilBERT's larger ones (whole - nosmall, over 62) against 1.0 alone,
and 1.09 against 0.86 in vit_s16. Declared: if the replay's hand-over is what makes them dearer, here DistilBERT's
(whole - nosmall) / 62 is within 0.3 ms of its small / 62; if DistilBERT's order itself is, it is at least 1.5x.

A fourth set (``--set hooks``), declared after the ninth set of ``research/scripts/step_layout_neighbours.py`` (DistilBERT
replayed at 0.3 ms of compute, its tensors handed over all but at once: a small response costs 2.57 ms among the
larger ones and 1.11 alone, a surcharge of 1.46 ms against the third set's 0.50) and before it ran (2026-12-02,
session 55): does the replay's path through ``hvd.DistributedOptimizer`` make a small response dearer among larger
ones? One fusion-off job, ``torch.set_num_threads(1)`` as the replay, for vit_s16 and DistilBERT (``sizes`` indexes
:data:`LAYOUT_MODELS`), each part (``whole``, ``nosmall``, ``small`` as in the third set) three ways:

* ``direct_*``: the third set's items (``torch.ones``, names ``fv.<part>.<model>.<i>``, ``allreduce_async_`` of
  every tensor at once);
* ``values_*``: ``allreduce_async_`` at once of the replay's gradients (each rank's own N(0, 1e-3) values, copied
  back before every round outside the timed call, as ``replay.renew``) under the replay's names
  (``allreduce.<layout name>``);
* ``hooks_*``: the replay's own parameters and graph (``replay._build`` at 0 ms of backward: every stage hands its
  tensor over at once) under ``hvd.DistributedOptimizer`` with a no-op update; timed from ``loss.backward()`` through
  the replay's sleep-poll wait and ``opt.step()``'s synchronize, the graph built before the clock starts.

Every item is preceded by the same one-element barrier. A small response among the larger ones costs ``(whole -
nosmall) / n`` (medians over rounds of the paired difference, then over 3 jobs), alone ``small / n``. Declared, for
DistilBERT (n = 62):

1. the probe reproduces the third set: ``direct`` among within 0.3 ms of 1.32, alone within 0.3 of 0.82; otherwise
   the sitting differs, and 2-4 are read against this sitting's ``direct``;
2. the values or names carry the surcharge: ``values`` among at least 0.5 ms above ``direct`` among;
3. the optimizer's path carries it: ``hooks`` among at least 0.5 ms above ``values`` among;
4. neither: ``hooks`` and ``values`` among both within 0.3 ms of ``direct`` among. Then what the replay adds lies
   outside one step's allreduces (the step's start without a barrier, its forward, its separate jobs), and the next
   set replays it.

A fifth set (``--set blocks``), declared after the fourth set's report (in one job a small response costs 0.9-1.4 ms
among DistilBERT's or vit_s16's larger responses, 0.6-0.8 alone) and before it ran (2026-12-02, session 55): the
step phase's own pattern, whose replays the fit prices at 1.95 ms per small response on this env
(:mod:`autotuner.frameworks.horovod.stepprobe`: 32 blocks, each one weight then three 1 KiB vectors, backward order),
enqueued at once in one fusion-off job. The ``sizes`` axis is the weight's bytes: the phase's 256 KiB, and 2.25 MiB
(768 x 768, vit_s16's and DistilBERT's attention weights). Items as the third set: ``whole`` (the 128 tensors),
``nosmall`` (the 32 weights), ``small`` (the 96 vectors). A small response among the weights costs ``(whole -
nosmall) / 96``, alone ``small / 96`` (medians over rounds of the paired difference, then over 3 jobs). Declared:

1. the pattern itself makes small responses dear, as the step phase prices them: among(256 KiB) at least 1.5 ms;
2. the weight's size matters: among(256 KiB) - among(2.25 MiB) at least 0.4 ms;
3. neither: among(256 KiB) at most 1.3 ms; then the step phase's 1.95 comes with its replay (tensors handed over
   through a 100 ms step's backward, the defaults it is paired with), not with the order of its responses.

The fifth set again on five more envs (``ENV=<env> python research/scripts/fused_variants.py measure --set blocks``), declared
after its first report and before they ran (2026-12-02, session 55): fresh-poll-2x1-4.5gbit, fresh-poll-2x1-3gbit
(two hosts, ranks polling), fresh-2x1-5gbit (two hosts, ranks spinning), fresh-poll-3gbit and fresh-poll-2.5gbit (one
host, HTB on lo). ``report --set blocks`` adds what each env's shipped model simulates for the same jobs (every tensor
ready at once, fusion off) and the env's step and burst phase prices. Declared, as on fresh-poll-2x1-2.5gbit:

1. on every env, the simulator charges the 96 vectors alone at least twice what they measure;
2. on every two-host env, the step phase's price is at least 0.3 ms above among(256 KiB);
3. on every env, a 256 KiB weight alone (``nosmall / 32``) costs more than the simulator charges for it.

Nothing is charged from it; it says whether fresh-poll-2x1-2.5gbit's reading holds on other envs.

A sixth set (``--set decay``), declared after the fifth set's six envs and before it ran (2026-12-02, session 55):
the fifth set timed the same 96 vectors alone at 0.68 ms each after light traffic and 1.07 after heavy traffic on
fresh-poll-2x1-2.5gbit, 0.80 and 1.72 on fresh-poll-3gbit. How long does heavy traffic make small responses dearer?
One fusion-off job, the ``sizes`` axis the delay ``d`` (ms): each item first runs a prelude, untimed, then sleeps
``d``, then the 96 vectors enqueued at once after the barrier, timed:

* ``after_heavy``: the prelude is 8 float32 weights of 2.25 MiB enqueued at once (18 MiB);
* ``after_light``: the prelude is the 96 vectors themselves.

A vector costs ``item / 96`` (medians over rounds and jobs), at d = 0, 10, 50 and 200 ms. Declared, on
fresh-poll-2x1-2.5gbit and fresh-poll-3gbit:

1. the history effect reproduces: at d = 0, after_heavy is at least 1.3x after_light;
2. it decays: the first d at which after_heavy comes within 10 % of after_light is reported; if none does by 200 ms,
   whatever heavy traffic leaves behind outlasts a training step's backward and is not a transient of the link.

    python research/scripts/fused_variants.py measure    # as root, alone (~3 min)
    python research/scripts/fused_variants.py report
    python research/scripts/fused_variants.py measure --set neighbours    # the second set (~2 min)
    python research/scripts/fused_variants.py report --set neighbours
    python research/scripts/fused_variants.py measure --set layouts    # the third set (~2 min)
    python research/scripts/fused_variants.py report --set layouts
    python research/scripts/fused_variants.py measure --set hooks    # the fourth set (~4 min)
    python research/scripts/fused_variants.py report --set hooks
    python research/scripts/fused_variants.py measure --set blocks    # the fifth set (~2 min)
    python research/scripts/fused_variants.py report --set blocks
    ENV=fresh-poll-3gbit python research/scripts/fused_variants.py measure --set blocks    # the fifth set on another env
    ENV=fresh-poll-3gbit python research/scripts/fused_variants.py measure --set decay    # the sixth set (~2 min)

Records: ``runs/fresh-poll-2x1-2.5gbit/experiments/fused-variants.jsonl`` and, for the other sets,
``fused-variants-<set>.jsonl`` (:data:`SETS`; one line per job, appended job by job; a killed run resumes); no fit
reads them. Outcome of the fourth set: docs/accuracy.md, "In one job, no surcharge".
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from autotuner.frameworks.horovod.stepprobe import BLOCKS, VECTOR_SHAPE, WEIGHT_SHAPE  # noqa: E402
RUNS = ROOT / "runs"
#: the env whose recorded testbed the jobs run on and whose experiments/ folder takes the records (``ENV=...``; every
#: set but the fifth ran on the default only)
ENV = os.environ.get("ENV", "fresh-poll-2x1-2.5gbit")
MIB = 2**20
SIZES = (32 * MIB, 96 * MIB)
ITEMS = ("lone32", "lone64", "pair", "fused32", "fused64", "many32", "renewed32")
RECORDS = "experiments/fused-variants.jsonl"
#: the second set: items and weight sizes L (bytes), fusion off
NEIGHBOUR_ITEMS = ("weights", "interleaved", "vectors")
NEIGHBOUR_SIZES = (9 * 2**18, 9 * 2**20)  # 2.25 and 9 MiB
VECTOR = 768  # float32 elements of a small response (3 KiB)
#: the third set: the shipped layouts (``sizes`` axis: 1-based index into this), items, the small/large split (bytes)
LAYOUT_MODELS = ("vit_s16", "distilbert")
LAYOUT_ITEMS = ("whole", "nosmall", "small")
SPLIT_BYTES = 262144
#: the fifth set: the step phase's blocks (its BLOCKS of one weight, then VECTORS_PER_BLOCK vectors of BLOCK_VECTOR
#: float32 elements); the ``sizes`` axis is the weight's bytes: the phase's own and 768 x 768
VECTORS_PER_BLOCK, BLOCK_VECTOR = 3, math.prod(VECTOR_SHAPE)
BLOCK_WEIGHTS = (4 * math.prod(WEIGHT_SHAPE), 768 * 768 * 4)
#: the sixth set: delays (ms) after the prelude, and the heavy prelude (float32 weights of 2.25 MiB)
DECAY_MS, HEAVY_WEIGHTS = (0, 10, 50, 200), 8
#: set -> (items, sizes, records, fusion off)
SETS = {"pair": (ITEMS, SIZES, RECORDS, False),
        "neighbours": (NEIGHBOUR_ITEMS, NEIGHBOUR_SIZES, "experiments/fused-variants-neighbours.jsonl", True),
        "layouts": (LAYOUT_ITEMS, (1, 2), "experiments/fused-variants-layouts.jsonl", True),
        "hooks": (tuple(f"{way}_{part}" for way in ("direct", "values", "hooks") for part in LAYOUT_ITEMS), (1, 2),
                  "experiments/fused-variants-hooks.jsonl", True),
        "blocks": (LAYOUT_ITEMS, BLOCK_WEIGHTS, "experiments/fused-variants-blocks.jsonl", True),
        "decay": (("after_heavy", "after_light"), DECAY_MS, "experiments/fused-variants-decay.jsonl", True)}


def layout_elements(model: str, item: str) -> list[int]:
    """The float32 element counts of ``model``'s shipped layout (autotuner/layouts/<model>.json), backward order:
    every tensor (``whole``), those of :data:`SPLIT_BYTES` and more (``nosmall``), or the others (``small``)."""
    n = [math.prod(t["shape"]) for t in json.loads((ROOT / "autotuner" / "layouts" / f"{model}.json").read_text())["tensors"]]
    return {"whole": n, "nosmall": [x for x in n if 4 * x >= SPLIT_BYTES], "small": [x for x in n if 4 * x < SPLIT_BYTES]}[item]
TAG = "AUTOTUNER_FUSED_VARIANTS"
JOBS, ROUNDS, WARMUP = 3, 5, 1
WAIT_POLL_S = 0.0002  # as the replay's --wait sleep (autotuner.frameworks.horovod.replay.WAIT_POLL_S)


def worker(wait: str, which: str = "pair") -> int:
    """Runs on every rank under horovodrun: each item of the set ``which`` (:data:`SETS`) at each of its sizes, once
    per round; rank 0 prints one ``TAG {json}`` line: ``{"sizes": [...], "items": {item: [[ms per round] per size]}}``."""
    import horovod.torch as hvd
    import torch

    hvd.init()
    torch.manual_seed(hvd.rank())
    items, sizes, _, _ = SETS[which]

    def tensors(item: str, s: int) -> list:
        f32, f64 = torch.float32, torch.float64
        if which == "decay":  # the prelude: heavy weights, or the vectors themselves (own names: not the timed ones)
            spec = ([(BLOCK_WEIGHTS[1] // 4, f32)] * HEAVY_WEIGHTS if item == "after_heavy"
                    else [(BLOCK_VECTOR, f32)] * (BLOCKS * VECTORS_PER_BLOCK))
        elif which == "blocks":  # the step phase's blocks with a weight of s bytes, or their parts
            spec = [(n, f32) for n in block_elements(item, s)]
        elif which == "layouts":  # a shipped layout's tensors, or its parts, in backward order
            spec = [(n, f32) for n in layout_elements(LAYOUT_MODELS[s - 1], item)]
        elif which == "neighbours":  # 16 weights of s bytes, each followed (interleaved) by a vector, or the vectors
            spec = {"weights": [(s // 4, f32)] * 16, "interleaved": [(s // 4, f32), (VECTOR, f32)] * 16,
                    "vectors": [(VECTOR, f32)] * 16}[item]
        else:
            spec = {"lone32": [(s // 4, f32)], "lone64": [(s // 8, f64)],
                    "pair": [(s // 32, f32)] * 8 + [(s // 64, f64)] * 8,
                    "fused32": [(s // 64, f32)] * 16, "fused64": [(s // 128, f64)] * 16,
                    "many32": [(s // 256, f32)] * 64, "renewed32": [(s // 64, f32)] * 16}[item]
        return [(torch.ones(n, dtype=dt), f"fv.{item}.{s}.{i}") for i, (n, dt) in enumerate(spec)]

    def wait_all(hs) -> None:
        if wait == "sleep":
            while not all(hvd.poll(h) for h in hs):
                time.sleep(WAIT_POLL_S)
        for h in hs:
            hvd.synchronize(h)

    def at_once(ts) -> float:
        """``ts`` ((tensor, name) pairs) enqueued at once after the barrier (every rank starts together), waited
        for; ms."""
        hvd.allreduce(torch.zeros(1), name="fv.barrier")
        t0 = time.perf_counter()
        wait_all([hvd.allreduce_async_(t, name=name) for t, name in ts])
        return (time.perf_counter() - t0) * 1e3

    timed = _hooks_items(hvd, torch, sizes, wait_all) if which == "hooks" else {}
    out: dict[str, list[list[float]]] = {item: [[] for _ in sizes] for item in items}
    held = {(item, s): tensors(item, s) for item in items for s in sizes if which != "hooks"}
    vectors = [(torch.ones(BLOCK_VECTOR), f"fv.decay.v.{i}") for i in range(BLOCKS * VECTORS_PER_BLOCK)]
    for r in range(WARMUP + ROUNDS):
        for k, s in enumerate(sizes):
            for item in items:
                if which == "hooks":
                    ms = timed[(item, s)]()
                elif which == "decay":  # a prelude, untimed, then s ms of sleep, then the vectors, timed
                    at_once(held[(item, s)])
                    time.sleep(s / 1e3)
                    ms = at_once(vectors)
                else:
                    ts = held[(item, s)]
                    if item == "renewed32":
                        for t, _ in ts:
                            t.normal_(0.0, 1e-3)
                    ms = at_once(ts)
                if r >= WARMUP:
                    out[item][k].append(round(ms, 4))
    if hvd.rank() == 0:
        print(f"{TAG} " + json.dumps({"sizes": list(sizes), "items": out, "ranks": hvd.size(), "wait": wait}),
              flush=True)
    time.sleep(0.2)
    hvd.shutdown()
    return 0


def _layout_part(model: str, part: str):
    """``model``'s shipped layout (:class:`autotuner.model.layout.Layout`) cut to ``part`` (``whole``, ``nosmall``:
    tensors of :data:`SPLIT_BYTES` and more, ``small``: the others), backward order kept."""
    from dataclasses import replace

    from autotuner.model.layout import DTYPE_BYTES
    from autotuner.readers.layouts import load_layout

    lay = load_layout(model)
    keep = [i for i, (shape, dt) in enumerate(zip(lay.shapes, lay.dtypes))
            if part == "whole" or (part == "nosmall") == (DTYPE_BYTES[dt] * math.prod(shape) >= SPLIT_BYTES)]
    pick = lambda xs: tuple(xs[i] for i in keep)  # noqa: E731
    return replace(lay, names=pick(lay.names), shapes=pick(lay.shapes), dtypes=pick(lay.dtypes),
                   compute_share=pick(lay.compute_share))


def _hooks_items(hvd, torch, sizes, wait_all) -> dict:
    """The fourth set's items: (item, size) -> a callable that runs the item once and returns its time (ms), every
    item after the same one-element barrier. ``direct_*`` and ``values_*`` enqueue every tensor at once
    (``allreduce_async_``); ``hooks_*`` run the replay's own graph and ``hvd.DistributedOptimizer``
    (:mod:`autotuner.frameworks.horovod.replay`) at 0 ms of backward."""
    from autotuner.frameworks.horovod import replay

    torch.set_num_threads(1)  # as the replay

    class NoUpdate(torch.optim.Optimizer):
        """The replay's emulated update at ``--update-ms 0``: its step does nothing."""

        def __init__(self, ps):
            super().__init__(ps, {})

        def step(self, closure=None):  # noqa: ARG002
            return None

    def barrier() -> None:
        hvd.allreduce(torch.zeros(1), name="fv.barrier")

    def enqueue_at_once(ts, names, renew=None):
        def run() -> float:
            if renew is not None:
                renew()
            barrier()
            t0 = time.perf_counter()
            wait_all([hvd.allreduce_async_(t, name=n) for t, n in zip(ts, names)])
            return (time.perf_counter() - t0) * 1e3
        return run

    def through_optimizer(lay):
        params, forward, clock, values = replay._build(lay, 0.0, seed=hvd.rank())
        opt = hvd.DistributedOptimizer(NoUpdate(params), named_parameters=list(zip(lay.names, params)))
        x = torch.ones(1, requires_grad=True)

        def run() -> float:
            replay.renew(params, values)
            loss = forward(x)  # the graph, built before the clock starts
            barrier()
            t0 = time.perf_counter()
            clock["t0"] = t0
            loss.backward()
            replay._sleep_until_done(hvd, opt)
            opt.step()
            return (time.perf_counter() - t0) * 1e3
        return run

    out = {}
    for s in sizes:
        for part in LAYOUT_ITEMS:
            lay = _layout_part(LAYOUT_MODELS[s - 1], part)
            ones = [torch.ones(math.prod(shape)) for shape in lay.shapes]
            out[(f"direct_{part}", s)] = enqueue_at_once(ones, [f"fv.{part}.{s}.{i}" for i in range(len(ones))])
            params, _, _, values = replay._build(lay, 0.0, seed=hvd.rank())
            grads = [prm.grad for prm in params]
            out[(f"values_{part}", s)] = enqueue_at_once(grads, list(lay.names),  # Horovod adds "allreduce."
                                                         renew=lambda p=params, v=values: replay.renew(p, v))
            out[(f"hooks_{part}", s)] = through_optimizer(lay)
    return out


def _parse(text: str, source: str, which: str = "pair") -> tuple[list[dict], list[str]]:
    """Records of the set ``which``'s file: one JSON object per line with ``trial``, ``sizes`` and ``items``."""
    items, sizes, _, _ = SETS[which]
    recs, problems = [], []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            if not (isinstance(r, dict) and "trial" in r and r["sizes"] == list(sizes) and set(r["items"]) == set(items)):
                raise ValueError("not a fused-variants record")
        except (ValueError, KeyError, TypeError) as e:
            problems.append(f"{source}:{i}: {e}")
            continue
        recs.append(r)
    return recs, problems


def measure(which: str = "pair") -> int:
    """:data:`JOBS` jobs of the set ``which`` on the env's own recorded testbed, each appended to its records file
    when it ends."""
    import os
    from dataclasses import replace

    from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28
    from autotuner.frameworks.horovod.launch import Job, run_job
    from autotuner.frameworks.horovod.validation import TrialStore
    from burst_midsize import env_testbed

    _, _, records, fusion_off = SETS[which]
    store = TrialStore(RUNS / ENV / records, parse=lambda text, src: _parse(text, src, which))
    done = {r["trial"] for r in store.records()}
    with env_testbed(ENV, records) as (setup, tier, tb, note):
        for k in range(JOBS):
            if f"job-{k}" in done:
                continue
            job = Job(np=tier.np, hosts=tier.hosts, command=(sys.executable, str(Path(__file__).resolve()), "worker",
                                                             "--wait", setup.wait, "--set", which),
                      prefix=tb.prefix, config=replace(DEFAULTS_0_28, fusion_threshold_bytes=0) if fusion_off
                      else DEFAULTS_0_28, launcher=tb.launcher, timeline=None)
            print(f"  job {k + 1} of {JOBS}", flush=True)
            res = run_job(job, 900.0)
            m = re.search(TAG + r" (\{.*\})", res.stdout)  # horovodrun prefixes a rank's lines
            if res.returncode != 0 or m is None:
                tail = [ln for ln in (res.stderr + res.stdout).splitlines() if ln.strip()][-1:] or ["no output"]
                print(f"error: job {k + 1}: horovodrun exit {res.returncode}: {tail[0][-300:]}", file=sys.stderr)
                return 1
            store.append({"trial": f"job-{k}", **json.loads(m.group(1)), "testbed": note,
                          "load_avg_1m": round(os.getloadavg()[0], 2),
                          "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    return 0


def differences(recs: list[dict]) -> dict[tuple[str, int], list[float]]:
    """(comparison, size) -> per job, the median over rounds of the paired difference, ms per MiB of S: ``fused32 -
    lone32``, ``lone64 - lone32``, ``pair/2 - lone32``, ``fused64 - lone64``, ``many32 - fused32``,
    ``renewed32 - fused32``."""
    pairs = {"fused32 - lone32": ("fused32", "lone32", 1), "lone64 - lone32": ("lone64", "lone32", 1),
             "pair/2 - lone32": ("pair", "lone32", 2), "fused64 - lone64": ("fused64", "lone64", 1),
             "many32 - fused32": ("many32", "fused32", 1), "renewed32 - fused32": ("renewed32", "fused32", 1)}
    out: dict[tuple[str, int], list[float]] = {}
    for r in recs:
        for k, s in enumerate(r["sizes"]):
            for name, (a, b, div) in pairs.items():
                d = [x / div - y for x, y in zip(r["items"][a][k], r["items"][b][k])]
                out.setdefault((name, s), []).append(statistics.median(d) / (s / MIB))
    return out


def neighbour_costs(recs: list[dict]) -> dict[str, list[float]]:
    """The second set: per job, ``a(L)`` for each weight size (``"a(2.25 MiB)"``, ``"a(9 MiB)"``: (interleaved -
    weights) / 16, medians over rounds of the paired difference) and ``"alone"`` (vectors / 16, median over rounds and
    sizes), ms per small response."""
    out: dict[str, list[float]] = {}
    for r in recs:
        for k, s in enumerate(r["sizes"]):
            d = [x - y for x, y in zip(r["items"]["interleaved"][k], r["items"]["weights"][k])]
            out.setdefault(f"a({s / 2**20:g} MiB)", []).append(statistics.median(d) / 16)
        out.setdefault("alone", []).append(statistics.median(x for v in r["items"]["vectors"] for x in v) / 16)
    return out


def layout_costs(recs: list[dict], way: str = "") -> dict[str, list[float]]:
    """The third set (and the fourth's items ``<way>_<part>``): per job and model, a small response's cost among the
    layout's larger responses (``"<model> among"``: (whole - nosmall) / small count) and alone (``"<model> alone"``:
    small / small count), ms, medians over rounds of the paired difference."""
    pre = f"{way}_" if way else ""
    out: dict[str, list[float]] = {}
    for r in recs:
        for k, s in enumerate(r["sizes"]):
            model = LAYOUT_MODELS[s - 1]
            n = len(layout_elements(model, "small"))
            it = r["items"]
            out.setdefault(f"{model} among", []).append(
                statistics.median(w - x for w, x in zip(it[pre + "whole"][k], it[pre + "nosmall"][k])) / n)
            out.setdefault(f"{model} alone", []).append(statistics.median(it[pre + "small"][k]) / n)
    return out


def block_costs(recs: list[dict]) -> dict[str, list[float]]:
    """The fifth set: per job and weight size, a small response's cost among the weights (``"among(<w> MiB)"``:
    (whole - nosmall) / vectors, medians over rounds of the paired difference) and alone (``"alone(<w> MiB)"``:
    small / vectors), ms."""
    n = BLOCKS * VECTORS_PER_BLOCK
    out: dict[str, list[float]] = {}
    for r in recs:
        for k, s in enumerate(r["sizes"]):
            it, w = r["items"], f"{s / MIB:g} MiB"
            out.setdefault(f"among({w})", []).append(
                statistics.median(a - b for a, b in zip(it["whole"][k], it["nosmall"][k])) / n)
            out.setdefault(f"alone({w})", []).append(statistics.median(it["small"][k]) / n)
    return out

def block_elements(item: str, s: int) -> list[int]:
    """The fifth set's float32 element counts, in order: :data:`BLOCKS` blocks of a weight of ``s`` bytes and
    :data:`VECTORS_PER_BLOCK` vectors (``whole``), the weights (``nosmall``) or the vectors (``small``)."""
    return {"whole": [s // 4] + [BLOCK_VECTOR] * VECTORS_PER_BLOCK, "nosmall": [s // 4],
            "small": [BLOCK_VECTOR] * VECTORS_PER_BLOCK}[item] * BLOCKS


def simulated_blocks(env: str) -> dict[tuple[str, int], float]:
    """(item, weight bytes) -> what ``env``'s shipped model (autotuner/models/<env>.json) simulates for the fifth
    set's job (ms): every tensor ready at once (a backward of 1 ns), fusion off, the env's cluster and backend."""
    from dataclasses import replace

    from autotuner import Cluster
    from autotuner.frameworks.horovod.fit.fitters import workload_for
    from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28
    from autotuner.frameworks.horovod.simulator import simulate_step
    from autotuner.model.costmodel import CostModel

    m = json.loads((ROOT / "autotuner" / "models" / f"{env}.json").read_text())
    cost, cl = CostModel.from_dict(m["cost_model"]), Cluster(m["cluster"]["nodes"], m["cluster"]["gpus_per_node"])
    off = replace(DEFAULTS_0_28, fusion_threshold_bytes=0)
    out = {}
    for s in BLOCK_WEIGHTS:
        for item in LAYOUT_ITEMS:
            sizes = [4 * n for n in block_elements(item, s)]
            out[(item, s)] = simulate_step(sizes, [0.0] * len(sizes), workload_for(1e-9), off, cost, cl,
                                           backend=m["cluster"]["backend"]).step_time_s * 1e3
    return out

def _pooled_ms(recs: list[dict], item: str, k: int) -> float:
    """Median over every round of every job of ``item`` at size index ``k`` (ms)."""
    return statistics.median(x for r in recs for x in r["items"][item][k])


def _item_table(recs: list[dict], items, sizes, axis: str, name, sim: dict | None = None) -> None:
    """Print a Markdown table of each item's median over rounds and jobs per size (``axis``: the size column's
    header, ``name(s)``: its cell), and ``sim[(item, s)]`` beside it where given."""
    print(f"| {axis} | item | median over rounds and jobs (ms) |" + (" simulated (ms) |" if sim else ""))
    print("|---:|---|---:|" + ("---:|" if sim else ""))
    for k, s in enumerate(sizes):
        for item in items:
            print(f"| {name(s)} | {item} | {_pooled_ms(recs, item, k):.1f} |" + (f" {sim[(item, s)]:.1f} |" if sim else ""))


def _cost_table(costs: dict[str, list[float]], way: str | None = None) -> None:
    """Print per-job figures and their median (ms), one row per name of ``costs``; ``way`` adds that column."""
    for name, v in costs.items():
        print(f"| {name} |" + (f" {way} |" if way is not None else "") +
              f" {', '.join(f'{x:.2f}' for x in v)} | {statistics.median(v):.2f} |")


def report(which: str = "pair") -> int:
    items, sizes, records, _ = SETS[which]
    f = RUNS / ENV / records
    if not f.exists():
        print(f"error: no {f}: run `python research/scripts/fused_variants.py measure --set {which}` first", file=sys.stderr)
        return 2
    recs, problems = _parse(f.read_text(), f.name, which)
    for p in problems:
        print(f"skipped: {p}", file=sys.stderr)
    print(f"{ENV}, {records}: {len(recs)} job(s)\n")
    if which in ("layouts", "hooks"):
        _item_table(recs, items, sizes, "layout", lambda s: LAYOUT_MODELS[s - 1])
        print("\n| small response | way | per job (ms) | median (ms) |")
        print("|---|---|---|---:|")
        for way in ("direct", "values", "hooks") if which == "hooks" else ("",):
            _cost_table(layout_costs(recs, way), way or "direct")
        return 0
    if which == "decay":
        n = BLOCKS * VECTORS_PER_BLOCK
        print("| delay (ms) | vector after heavy traffic (ms) | after light traffic (ms) | ratio |")
        print("|---:|---:|---:|---:|")
        for k, d in enumerate(sizes):
            h, lt = (_pooled_ms(recs, item, k) / n for item in ("after_heavy", "after_light"))
            print(f"| {d} | {h:.2f} | {lt:.2f} | {h / lt:.2f} |")
        return 0
    if which in ("blocks", "neighbours"):
        _item_table(recs, items, sizes, "weight (MiB)" if which == "blocks" else "S (MiB)", lambda s: f"{s / MIB:g}")
        print("\n| small response | per job (ms) | median (ms) |")
        print("|---|---|---:|")
        _cost_table(block_costs(recs) if which == "blocks" else neighbour_costs(recs))
        if which == "blocks":
            sr = json.loads((ROOT / "autotuner" / "models" / f"{ENV}.json").read_text())["fit"]["small_responses"]
            print(f"\nthe shipped model: step phase price {sr['step']['fixed_ms']:.2f} ms, burst phase price "
                  f"{sr['burst']['fixed_ms']:.2f} ms\n")
            _item_table(recs, items, sizes, "weight (MiB)", lambda s: f"{s / MIB:g}", sim=simulated_blocks(ENV))
        return 0
    print("| S (MiB) | item | median over rounds and jobs (ms) | per MiB (ms) |")
    print("|---:|---|---:|---:|")
    for k, s in enumerate(SIZES):
        for item in ITEMS:
            v = _pooled_ms(recs, item, k) / (2 if item == "pair" else 1)
            print(f"| {s // MIB} | {item}{' (per response)' if item == 'pair' else ''} | {v:.1f} | {v / (s / MIB):.3f} |")
    print("\n| comparison | S (MiB) | per job (ms per MiB of S) | median |")
    print("|---|---:|---|---:|")
    for (name, s), v in differences(recs).items():
        print(f"| {name} | {s // MIB} | {', '.join(f'{x:+.3f}' for x in v)} | {statistics.median(v):+.3f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("measure", "report", "worker"))
    ap.add_argument("--wait", choices=("spin", "sleep"), default="sleep", help="worker: how a rank waits")
    ap.add_argument("--set", choices=tuple(SETS), default="pair", help="which set (see the docstring)")
    a = ap.parse_args(argv)
    return {"measure": measure, "report": report}[a.what](a.set) if a.what != "worker" else worker(a.wait, a.set)


if __name__ == "__main__":
    sys.exit(main())
