"""Issue 29 part 5: why a two-host env's real layouts want different small-response prices.

On fresh-poll-2x1-4.5gbit the price ``a = 2(p-1) alpha`` at which the simulator meets a replay's fusion off -
defaults (paired by round) is 0.75 / 0.95 / 1.05 ms for vit_s16 in three sittings and 1.38 / 1.56 ms for DistilBERT
in two, against the step phase's 1.46 ms, which the fit charges (``python research/scripts/small_price_range.py
--calibrate``; docs/accuracy.md, "The small-response price the phases leave open"). The step phase's layout is 32
blocks of one 256 KiB weight and three 1 KiB vectors at 100 ms of compute; vit_s16's replays ran 300 ms, and its
small vectors sit between weights of 0.6-2.25 MiB. Two things differ, and this separates them in one sitting on the
env's own testbed (2 emulated hosts, 4.5 Gbit/s HTB links, ranks polling):

* the weight beside the small vectors: the phase's 256 KiB (``w256k``) against 2.25 MiB (``w2m``: 768x768, the size
  of vit_s16's fc1/fc2 and DistilBERT's attention weights);
* the compute: 100 ms (the phase's) against 300 ms (the replays');

and vit_s16 and DistilBERT themselves at 300 ms as anchors. Each job: Horovod's defaults against fusion off, 5
interleaved repeats, 8 steps after 2 of warm-up, no timeline (``autotuner validate`` in a scratch copy of the env, so
that no acceptance row reads the records). The report gives, per job, the measured fusion off - defaults (mean over
rounds, +- its standard error) and the price that meets it (``small_response_pairs.price_that_meets``).

Declared before it ran (2026-12-02, session 53):

1. The anchors reproduce their earlier sittings: vit_s16 wants at most 0.75x the step phase's 1.46 ms (<= 1.10 ms),
   DistilBERT within 20 % of it (1.17-1.75 ms). If not, the sitting differs from the earlier ones and the rest is
   read with that caveat.
2. If the weight beside the small responses is what makes vit_s16's cheaper: at either compute, ``w2m`` wants at
   least 25 % less than ``w256k``.
3. If the compute is: for either weight, 300 ms wants at least 25 % less than 100 ms.
4. ``w256k`` at 100 ms is the step phase's own job: it wants within 30 % of the charged 1.46 ms (session 52 found a
   one-host env's phase re-measured +57 % and -61 % apart; this is the first two-host re-measure).

Nothing is charged from it: it decides what the next pass measures.

A third set (``ENV=fresh-poll-2.5gbit ... measure anchors``), declared after the second set's report and before it
ran (2026-12-02, session 53): the two real layouts alone (vit_s16 and DistilBERT, 300 ms) on a one-host polling env
(fresh-poll-2.5gbit: HTB on lo, 2.5 Gbit/s), where vit_s16's fusion off is predicted too fast (-6.7 %), not too slow
as on every two-host env. Declared: if the layouts' different prices are a two-host effect, the two want prices
within 25 % of each other here; if DistilBERT again wants at least 1.5x vit_s16's, it is the layouts on any link.

A second set (``measure embedding``), declared after the first set's report and before it ran (2026-12-02, session
53): the first set's two real layouts wanted 1.11 ms (vit_s16) and 1.95 ms (DistilBERT) per small response, and
no price with any copy rate of the fusion buffer meets both. DistilBERT ends its backward with an 89 MiB gradient
(``embeddings.word_embeddings.weight``, 30522x768, ready last), vit_s16 has nothing above 2.25 MiB. In one sitting,
at 300 ms of compute: DistilBERT without that tensor (``distilbert-noemb``), vit_s16 with one of its shape appended
last (``vit_s16-emb``), and both anchors again (``-b``). Declared: if the huge last gradient is what makes
DistilBERT's small responses dearer, ``distilbert-noemb`` wants a price at most 0.8x this set's DistilBERT anchor
and ``vit_s16-emb`` at least 1.25x this set's vit_s16 anchor; if neither moves by 20 %, it is not the huge last
gradient. The anchors again: within 25 % of the first set's (1.11, 1.95 ms), or the sitting differs.

A fourth set (``ENV=fresh-poll-2x1-2.5gbit ... measure compute``), declared after the third set's report and before
it ran (2026-12-02, session 54): on the two-host env measured last on this machine's kind (AMD EPYC), vit_s16 and
DistilBERT at 10 ms of compute (the step is then the responses alone, back to back: the simulator's fusion off -
defaults at the charged 1.95 ms is +215.4 ms for vit_s16 at 10 ms and +213.9 at 300 ms, DistilBERT +75.8 and
+73.2: it already runs them as one serial queue at 300 ms) and both again at 300 ms as anchors (session 53 measured
vit_s16 +104, DistilBERT +94 at 300 ms). Declared: if the simulator's per-response cost is what is wrong (not how
the responses overlap the backward), vit_s16's measured difference at 10 ms is within 25 % of this sitting's at 300
ms (both far under +215); if the backward's overlap is what the simulator misses, vit_s16's at 10 ms is at least
1.5x its 300 ms one. The same reading for DistilBERT. The defaults at 10 ms (simulated 397.5 and 1182.1 ms) show
what the fused responses alone cost.

A fifth set (``ENV=fresh-poll-2x1-2.5gbit ... measure fused``), declared after the fourth set's report, the fused
phase at 4-96 MiB (``research/scripts/fused_large.py``) and the pair taken apart (``research/scripts/fused_variants.py``: float32 fused
responses pay 0.23-0.43 ms per MiB over a lone one in the probe) and before it ran (2026-12-02, session 54): does a
replayed step pay the copies the probe pays? Two synthetic layouts at 10 ms of compute, defaults against fusion
off: ``sixteen6`` (16 float32 tensors of 6 MiB, equal backward shares) and ``one96`` (one tensor of 96 MiB). The
simulator at the env's charged copies: ``sixteen6`` defaults 451.5 ms (one lone 6 MiB response, then 15 tensors
fused: 90 MiB, 26.1 ms of copies), fusion off 435.8, fusion off - defaults -15.7 ms; without the copies +10.3.
Declared: if the replayed step pays the copies as the probe does, ``sixteen6``'s fusion off - defaults is at most -5
ms (the probe's rates give -11 to -29); if a replayed step hides them, at least +3 ms; ``one96``'s fusion off -
defaults within +-5 ms (the same job twice: the sitting's noise).

A sixth set (``ENV=fresh-poll-2x1-2.5gbit ... measure large``), declared after the fifth set's report (``sixteen6``:
fusion off - defaults -9.4 +- 12.7 ms, a standard error that spans both declared outcomes) and before it ran
(2026-12-02, session 54): the same question with copies twice as large beside the noise, ``sixteen16`` (16 float32
tensors of 16 MiB) at 10 ms of compute, 8 interleaved rounds. The simulator: defaults one lone 16 MiB response, then
128 and 112 MiB fused (71.2 ms of copies), fusion off - defaults -61.6 ms at the charged copies, +9.6 without them;
the probe's rates (0.23-0.43 ms per MiB of 240 MiB fused) give -45 to -94. Declared: the replayed step pays the
copies if fusion off - defaults is at most -30 ms, hides them if at least -10 ms; between, undecided.

A seventh set (``ENV=fresh-poll-2x1-2.5gbit ... measure split``), declared after the sixth set's report (the copies
are paid: a replayed 16 x 16 MiB step, the probe's pair taken apart, DistilBERT's own timeline) and before it ran
(2026-12-02, session 54): the two real layouts at 10 ms of compute, each whole (anchors) and split in two, 6
interleaved rounds: ``-nosmall`` (every tensor of 256 KiB and more: the mid-size and large responses) and
``-small`` (every tensor under 256 KiB: the small responses), each split with equal backward shares. The simulator's
fusion off - defaults at the env's charged price (1.95 ms) and copies: vit_s16 whole +215.4, nosmall +12.7, small
+194.4; DistilBERT whole +75.8, nosmall -47.9, small +116.3 (at 1.0 ms per small response: small +101.4 and +62.2).
The fourth set measured the wholes at +140.2 and +105.9. Declared: (1) the parts add up: each whole's measured
difference within 2 standard errors (combined) of its two parts' sum; (2) if the small responses are what the
simulator misprices, each ``-nosmall`` meets its simulated difference within 2 standard errors and the ``-small``
parts want prices of their own; (3) if the mid-size and large responses are, a ``-nosmall`` misses by more than 2
standard errors (DistilBERT's by more than +20 ms, as its whole is 30 ms dearer than simulated).

An eighth set (``ENV=fresh-poll-2x1-2.5gbit ... measure neighbours``), declared after the seventh set's report and
before it ran (2026-12-02, session 54). The seventh set found the parts do not add up in DistilBERT: its small
responses cost +61 ms alone (62 of them, 1.0 ms each) and +152 ms among its mid-size and large responses (whole -
nosmall, medians; 2.45 ms each), where vit_s16's cost +89 alone and +110 among its own (0.86 and 1.09 ms each).
DistilBERT's small responses follow 9 MiB responses (12 of 62) and 2.25 MiB ones (24); vit_s16's never follow
anything over 2.25 MiB. So: does a small response cost more after a larger response? Synthetic layouts at 10 ms of
compute, each a block of one weight then one 3 KiB vector (768 float32, after its weight in backward order, as
DistilBERT's ``lin1.bias`` after ``lin2.weight``), against the same weights without the vectors, 6 rounds:
``alt2m`` (32 blocks, 2.25 MiB weights) and ``alt9m`` (16 blocks, 9 MiB weights), ``-nov`` without the vectors. A
small response's cost after a weight of L: ``a(L) = ((fusion off - defaults) with the vectors - without) / blocks``.
The simulator charges the same for every small response: a(2.25 MiB) = 2.01 ms, a(9 MiB) = 1.74 ms. Declared: if a
small response costs more after a larger response, a(9 MiB) - a(2.25 MiB) is at least 1.0 ms and a(9 MiB) at least
2.0 ms; if not, the two are within 0.5 ms of each other and DistilBERT's interleaving cost is not its neighbours'
size.

Its second sitting (``... measure neighbours-b``, 8 rounds, jobs named ``-b``), declared after the first, whose
rounds a contended host scattered by 60-75 ms standard errors (vmstat steal up to 15 %; medians gave a(2.25 MiB)
2.7 ms and a(9 MiB) 5.0 ms, in the declared direction but not resolved), and before it ran: the same judgement.

A ninth set (``... measure handover``), declared after ``research/scripts/fused_variants.py --set layouts`` (enqueued at once,
a small response costs 1.32 ms among DistilBERT's larger responses and 0.82 alone: a surcharge of 0.50 ms against
the 10 ms replay's 1.45) and before it ran (2026-12-02, session 54): DistilBERT whole and split (as the seventh set),
replayed at 0.3 ms of compute (its tensors handed over within 0.2 ms, all but at once), 6 rounds. Declared: if the
hand-over through a 6.7 ms backward is what adds the surcharge, DistilBERT's (whole - nosmall) / 62 - small / 62 is
at most 0.8 ms here; if it is at least 1.2 ms, it is not the hand-over's timing but something else the replay does
(its hooks, ``DistributedOptimizer``, its wait).

    python research/scripts/step_layout_neighbours.py measure    # as root, alone (~15 min)
    python research/scripts/step_layout_neighbours.py measure embedding   # the second set (~10 min)
    ENV=fresh-poll-2.5gbit python research/scripts/step_layout_neighbours.py measure anchors   # the third set
    ENV=fresh-poll-2x1-2.5gbit python research/scripts/step_layout_neighbours.py measure compute   # the fourth set (~12 min)
    ENV=fresh-poll-2x1-2.5gbit python research/scripts/step_layout_neighbours.py measure fused     # the fifth set (~4 min)
    ENV=fresh-poll-2x1-2.5gbit python research/scripts/step_layout_neighbours.py measure large     # the sixth set (~5 min)
    ENV=fresh-poll-2x1-2.5gbit python research/scripts/step_layout_neighbours.py measure split     # the seventh set (~12 min)
    ENV=fresh-poll-2x1-2.5gbit python research/scripts/step_layout_neighbours.py measure neighbours   # the eighth set (~10 min)
    ENV=fresh-poll-2x1-2.5gbit python research/scripts/step_layout_neighbours.py measure neighbours-b # its second sitting
    ENV=fresh-poll-2x1-2.5gbit python research/scripts/step_layout_neighbours.py measure handover  # the ninth set (~8 min)
    python research/scripts/step_layout_neighbours.py report     # the prices, the anchors over price x copy rate, two latencies

Records: ``runs/fresh-poll-2x1-4.5gbit/experiments/step-layout-neighbours/<job>.jsonl`` beside the layout files; no
fit reads them.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "research" / "scripts"))
RUNS = ROOT / "runs"
#: the env (``ENV=... python research/scripts/step_layout_neighbours.py ...`` for another: the third set)
ENV = os.environ.get("ENV", "fresh-poll-2x1-4.5gbit")
SUB = Path("experiments") / "step-layout-neighbours"
MIB_ = 2**20
#: job -> (model: a layout of step_layout_sizes.layout's (weight shape) or a shipped model's name, compute ms)
JOBS = {"w256k-100ms": ((256, 256), 100.0), "w2m-100ms": ((768, 768), 100.0),
        "w256k-300ms": ((256, 256), 300.0), "w2m-300ms": ((768, 768), 300.0),
        "vit_s16-300ms": ("vit_s16", 300.0), "distilbert-300ms": ("distilbert", 300.0)}
#: the second set: job -> (model, compute ms); a model ending in -emb / -noemb is written by :func:`_variant`
EMBEDDING_JOBS = {"distilbert-noemb-300ms": ("distilbert-noemb", 300.0), "vit_s16-emb-300ms": ("vit_s16-emb", 300.0),
                  "vit_s16-b-300ms": ("vit_s16", 300.0), "distilbert-b-300ms": ("distilbert", 300.0)}
#: the fourth set: job -> (model, compute ms)
COMPUTE_JOBS = {"vit_s16-10ms": ("vit_s16", 10.0), "distilbert-10ms": ("distilbert", 10.0),
                "vit_s16-c-300ms": ("vit_s16", 300.0), "distilbert-c-300ms": ("distilbert", 300.0)}
#: the fifth set: job -> (layout: tensors x (rows, cols) float32, compute ms)
FUSED_JOBS = {"sixteen6-10ms": ((16, (1536, 1024)), 10.0), "one96-10ms": ((1, (6144, 4096)), 10.0)}
#: the sixth set (8 rounds)
LARGE_JOBS = {"sixteen16-10ms": ((16, (4096, 1024)), 10.0)}
#: the seventh set (6 rounds): job -> (model, compute ms); ``-nosmall`` / ``-small`` written by :func:`_split`
SPLIT_JOBS = {"vit_s16-s-10ms": ("vit_s16", 10.0), "vit_s16-nosmall-10ms": ("vit_s16-nosmall", 10.0),
              "vit_s16-small-10ms": ("vit_s16-small", 10.0), "distilbert-s-10ms": ("distilbert", 10.0),
              "distilbert-nosmall-10ms": ("distilbert-nosmall", 10.0),
              "distilbert-small-10ms": ("distilbert-small", 10.0)}
#: the split between small and mid-size responses (bytes): the env's knee (``large_from_bytes``)
SPLIT_BYTES = 262144
#: the eighth set (6 rounds): job -> ((blocks, weight shape, with the vectors), compute ms)
NEIGHBOUR_JOBS = {"alt2m-10ms": ((32, (768, 768), True), 10.0), "alt2m-nov-10ms": ((32, (768, 768), False), 10.0),
                  "alt9m-10ms": ((16, (768, 3072), True), 10.0), "alt9m-nov-10ms": ((16, (768, 3072), False), 10.0)}
#: the eighth set's second sitting (8 rounds)
NEIGHBOUR_JOBS_B = {job.replace("-10ms", "-b-10ms"): spec for job, spec in NEIGHBOUR_JOBS.items()}
#: the ninth set (6 rounds): job -> (model, compute ms)
HANDOVER_JOBS = {"distilbert-h-0.3ms": ("distilbert", 0.3), "distilbert-nosmall-h-0.3ms": ("distilbert-nosmall", 0.3),
                 "distilbert-small-h-0.3ms": ("distilbert-small", 0.3)}
#: DistilBERT's last gradient: word embeddings, 30522 x 768 float32 (89.4 MiB)
EMBEDDING = "embeddings.word_embeddings.weight"


def _model(job: str, out: Path) -> str:
    from step_layout_sizes import layout

    what = JOBS[job][0]
    if isinstance(what, str):
        return what
    lf = out / f"{job.split('-')[0]}.json"
    lf.write_text(json.dumps(layout(job.split("-")[0], 256, what), indent=1) + "\n")
    return str(lf)


def _measured_model(job: str, what) -> str:
    """What ``job`` replayed, as ``make_scenario`` takes it: a shipped model's name, or the layout file written
    beside its records (a ``-emb`` / ``-noemb`` variant, or a synthetic layout of step_layout_sizes.layout's)."""
    if isinstance(what, str):
        return str(RUNS / ENV / SUB / f"{what}.json") if what.endswith(("emb", "small")) else what
    return str(RUNS / ENV / SUB / f"{job.rsplit('-', 1)[0].removesuffix('-b')}.json")


def _variant(name: str, out: Path) -> str:
    """``distilbert-noemb`` (DistilBERT's layout less :data:`EMBEDDING`) or ``vit_s16-emb`` (vit_s16's with a
    tensor of :data:`EMBEDDING`'s shape ready last, compute share 0) written to ``out/<name>.json``; its path."""
    base = json.loads((ROOT / "autotuner" / "layouts" / f"{name.split('-')[0]}.json").read_text())
    emb = next(t for t in json.loads((ROOT / "autotuner" / "layouts" / "distilbert.json").read_text())["tensors"]
               if t["name"] == EMBEDDING)
    if name.endswith("-noemb"):
        base["tensors"] = [t for t in base["tensors"] if t["name"] != EMBEDDING]
        why = f"less {EMBEDDING}"
    else:
        base["tensors"] = base["tensors"] + [dict(emb, name="appended." + EMBEDDING, compute_share=0.0)]
        why = f"with DistilBERT's {EMBEDDING} ({emb['shape'][0]}x{emb['shape'][1]}) appended, ready last"
    base.update(name=name, source=f"research/scripts/step_layout_neighbours.py: the shipped {name.split('-')[0]} layout {why}")
    f = out / f"{name}.json"
    f.write_text(json.dumps(base, indent=1) + "\n")
    return str(f)


def _equal_layout(name: str, n: int, shape: tuple[int, int], out: Path) -> str:
    """``n`` float32 tensors of ``shape``, equal backward shares, written to ``out/<name>.json``; its path."""
    f = out / f"{name}.json"
    f.write_text(json.dumps({"schema": "autotuner.layout/1", "name": name, "order": "backward",
                             "source": f"research/scripts/step_layout_neighbours.py: {n} float32 tensor(s) of "
                                       f"{shape[0]}x{shape[1]}, equal backward shares",
                             "tensors": [{"name": f"t{i}.weight", "shape": list(shape), "dtype": "float32",
                                          "compute_share": 1.0 / n} for i in range(n)]}, indent=1) + "\n")
    return str(f)


def _split(name: str, out: Path) -> str:
    """``<model>-nosmall`` (the shipped layout's tensors of :data:`SPLIT_BYTES` and more) or ``<model>-small`` (those
    under it), equal backward shares, written to ``out/<name>.json``; its path."""
    import math

    model, kind = name.rsplit("-", 1)
    base = json.loads((ROOT / "autotuner" / "layouts" / f"{model}.json").read_text())
    keep = [t for t in base["tensors"] if (4 * math.prod(t["shape"]) >= SPLIT_BYTES) == (kind == "nosmall")]
    base.update(name=name, source=f"research/scripts/step_layout_neighbours.py: the shipped {model} layout's tensors "
                                  f"{'of' if kind == 'nosmall' else 'under'} {SPLIT_BYTES} bytes"
                                  f"{' and more' if kind == 'nosmall' else ''}, equal backward shares",
                tensors=[dict(t, compute_share=1.0 / len(keep)) for t in keep])
    f = out / f"{name}.json"
    f.write_text(json.dumps(base, indent=1) + "\n")
    return str(f)


def _alternating(name: str, blocks: int, shape: tuple[int, int], vectors: bool, out: Path) -> str:
    """``blocks`` blocks of one float32 weight of ``shape`` (equal backward shares) and, with ``vectors``, a 768-element
    vector after it (share 0), written to ``out/<name>.json``; its path."""
    tensors = []
    for b in range(blocks):
        tensors.append({"name": f"block{b}.weight", "shape": list(shape), "dtype": "float32",
                        "compute_share": 1.0 / blocks})
        if vectors:
            tensors.append({"name": f"block{b}.bias", "shape": [768], "dtype": "float32", "compute_share": 0.0})
    f = out / f"{name}.json"
    f.write_text(json.dumps({"schema": "autotuner.layout/1", "name": name, "order": "backward",
                             "source": f"research/scripts/step_layout_neighbours.py: {blocks} blocks of a {shape[0]}x{shape[1]} "
                                       f"float32 weight{' then a 768-element vector' if vectors else ''}",
                             "tensors": tensors}, indent=1) + "\n")
    return str(f)


def measure(which: str = "") -> int:
    from step_layout_sizes import replay_jobs

    out = RUNS / ENV / SUB
    out.mkdir(parents=True, exist_ok=True)
    if which == "anchors":
        return replay_jobs(ENV, out, [(job, m, compute) for job, (m, compute) in JOBS.items() if isinstance(m, str)])
    if which == "fused":
        return replay_jobs(ENV, out, [(job, _equal_layout(job.split("-")[0], *spec, out), compute)
                                      for job, (spec, compute) in FUSED_JOBS.items()])
    if which == "handover":
        return replay_jobs(ENV, out, [(job, _split(m, out) if m.endswith("small") else m, compute)
                                      for job, (m, compute) in HANDOVER_JOBS.items()], repeats=6)
    if which == "neighbours-b":
        return replay_jobs(ENV, out, [(job, _alternating(job.rsplit("-", 2)[0], *spec, out), compute)
                                      for job, (spec, compute) in NEIGHBOUR_JOBS_B.items()], repeats=8)
    if which == "neighbours":
        return replay_jobs(ENV, out, [(job, _alternating(job.rsplit("-", 1)[0], *spec, out), compute)
                                      for job, (spec, compute) in NEIGHBOUR_JOBS.items()], repeats=6)
    if which == "split":
        return replay_jobs(ENV, out, [(job, _split(m, out) if m.endswith("small") else m, compute)
                                      for job, (m, compute) in SPLIT_JOBS.items()], repeats=6)
    if which == "large":
        return replay_jobs(ENV, out, [(job, _equal_layout(job.split("-")[0], *spec, out), compute)
                                      for job, (spec, compute) in LARGE_JOBS.items()], repeats=8)
    if which == "compute":
        return replay_jobs(ENV, out, [(job, m, compute) for job, (m, compute) in COMPUTE_JOBS.items()])
    if which == "embedding":
        return replay_jobs(ENV, out, [(job, _variant(m, out) if m.endswith("emb") else m, compute)
                                      for job, (m, compute) in EMBEDDING_JOBS.items()])
    return replay_jobs(ENV, out, [(job, _model(job, out), compute) for job, (_, compute) in JOBS.items()])


def report() -> int:
    from autotuner.frameworks.horovod.knobs import config_from_values
    from autotuner.frameworks.horovod.predict import make_scenario
    from small_response_pairs import price_that_meets
    from step_layout_sizes import paired

    print("| job | defaults, measured (median ms) | fusion off - defaults, measured (mean +- se, ms) | simulated at "
          "the env's price (ms) | the price it wants (ms) | / the env's step-phase price |")
    print("|---|---:|---:|---:|---:|---:|")
    for job, (what, compute) in {**JOBS, **EMBEDDING_JOBS, **COMPUTE_JOBS, **FUSED_JOBS, **LARGE_JOBS, **SPLIT_JOBS,
                                **NEIGHBOUR_JOBS, **NEIGHBOUR_JOBS_B,
                                **HANDOVER_JOBS}.items():
        f = RUNS / ENV / SUB / f"{job}.jsonl"
        if not f.exists():
            continue
        try:
            by, d, m, se = paired(f)
        except statistics.StatisticsError:  # no round ran both jobs yet
            continue
        d0 = statistics.median(x["default"]["measured_step_time_ms"] for x in by.values() if "default" in x)
        r0 = next(x for x in by.values() if "proposal-1" in x and "default" in x)
        model = _measured_model(job, what)
        sc, _ = make_scenario(None, ENV, model, compute_ms=compute)
        a, own, at_own = price_that_meets(sc, config_from_values(r0["default"]["config"]),
                                          config_from_values(r0["proposal-1"]["config"]), m)
        print(f"| {job} ({len(d)} rounds) | {d0:.1f} | {m:+.1f} +- {se:.1f} | {at_own:+.1f} | "
              + ("none in 0-10 | -" if a is None else f"{a:.2f} | {a / own:.2f}") + " |")
    return 0


def joint() -> int:
    """Can one per-response price meet both real layouts of the sitting? Their fusion off - defaults simulated over a
    grid of the price ``a`` (ms) and the fusion buffer's copy rate (ms per MiB, the other term fusion off changes:
    the defaults' fused responses pay it, fusion off's single tensors do not), beside the measured means."""
    from dataclasses import replace

    from autotuner.frameworks.horovod.knobs import config_from_values
    from autotuner.frameworks.horovod.predict import make_scenario
    from step_layout_sizes import paired

    d0, fo = config_from_values({}), config_from_values({"fusion_threshold_mb": 0})
    anchors = [j for j, (w, _) in JOBS.items() if isinstance(w, str) and (RUNS / ENV / SUB / f"{j}.jsonl").exists()]
    if not anchors:
        return 0
    scs = {j: make_scenario(None, ENV, JOBS[j][0], compute_ms=JOBS[j][1])[0] for j in anchors}
    meas = {j: paired(RUNS / ENV / SUB / f"{j}.jsonl")[2] for j in anchors}
    print("\n| copy rate (ms/MiB) | price a (ms) | " + " | ".join(f"{j}: simulated (measured {meas[j]:+.1f})"
                                                                for j in anchors) + " |")
    print("|---:|---:|" + "---:|" * len(anchors))
    for c in (0.0, 0.2, 0.34, 0.5):
        for a in (0.77, 1.10, 1.46, 1.95):
            row = []
            for j in anchors:
                cost = scs[j].cost.at_small_alpha(a * 1e-3 / (2 * (scs[j].cluster.size - 1)))
                cost = replace(cost, host=replace(cost.host, memcpy_s_per_byte=c * 1e-3 / 2**20))
                sc = replace(scs[j], cost=cost)
                row.append(f"{sc.simulate(fo).step_time_ms - sc.simulate(d0).step_time_ms:+.1f}")
            print(f"| {c:.2f} | {a:.2f} | " + " | ".join(row) + " |")
    return 0


#: the sets whose real layouts' copy credit :func:`copy_credit` fits: env -> jobs (one sitting each)
CREDIT_SETS = {"fresh-poll-2x1-2.5gbit": ("vit_s16-10ms", "distilbert-10ms", "vit_s16-c-300ms", "distilbert-c-300ms"),
               "fresh-poll-2x1-4.5gbit": ("vit_s16-300ms", "distilbert-300ms", "vit_s16-b-300ms", "distilbert-b-300ms"),
               "fresh-poll-2.5gbit": ("vit_s16-300ms", "distilbert-300ms")}


def copy_credit(env: str, copy_rates=np.arange(0.0, 0.51, 0.02), prices=np.arange(0.3, 3.01, 0.1)) -> dict | None:
    """The fusion buffer's copy rate ``c`` (ms per MiB of a fused response, >= 0: what fusion off saves per byte the
    defaults fused) and the small-response price ``a`` (ms) that together meet one sitting's real layouts' fusion off
    - defaults (:data:`CREDIT_SETS`), least squares in standard errors over the grid; the spill above the knee
    scaled with ``c``. Returns ``{"c", "a", "chi2", "jobs", "c_range": (lo, hi) within chi-square + 4, "charged",
    "sims"}`` (ms per MiB, ms; ``sims``: job -> (measured, se, simulated at the best pair)), or None where a job's
    records are missing."""
    from dataclasses import replace

    from autotuner.frameworks.horovod.knobs import config_from_values
    from autotuner.frameworks.horovod.predict import make_scenario
    from step_layout_sizes import paired

    d0, fo = config_from_values({}), config_from_values({"fusion_threshold_mb": 0})
    jobs = []
    for j in CREDIT_SETS[env]:
        f = RUNS / env / SUB / f"{j}.jsonl"
        if not f.exists():
            return None
        _, _, m, se = paired(f)
        jobs.append((j, make_scenario(None, env, j.split("-")[0], compute_ms=float(j.rsplit("-", 1)[1][:-2]))[0], m, se))
    host = jobs[0][1].cost.host
    grid = {}
    for c in copy_rates:
        scale = c * 1e-3 / MIB_ / host.memcpy_s_per_byte
        for a in prices:
            sims = []
            for _, sc, _, _ in jobs:
                cost = sc.cost.at_small_alpha(a * 1e-3 / (2 * (sc.cluster.size - 1)))
                cost = replace(cost, host=replace(cost.host, memcpy_s_per_byte=c * 1e-3 / MIB_,
                                                  memcpy_spill_s_per_byte=cost.host.memcpy_spill_s_per_byte * scale))
                s = replace(sc, cost=cost)
                sims.append(s.simulate(fo).step_time_ms - s.simulate(d0).step_time_ms)
            grid[(float(c), float(a))] = (sum(((v - m) / se) ** 2 for v, (_, _, m, se) in zip(sims, jobs)), sims)
    (c, a), (chi, sims) = min(grid.items(), key=lambda kv: kv[1][0])
    near = [k[0] for k, (x, _) in grid.items() if x <= chi + 4]
    return {"c": c, "a": a, "chi2": chi, "jobs": len(jobs), "c_range": (min(near), max(near)),
            "charged": host.memcpy_s_per_byte * MIB_ * 1e3,
            "sims": {j: (m, se, v) for (j, _, m, se), v in zip(jobs, sims)}}


def copy_credits() -> int:
    """:func:`copy_credit` for every set of :data:`CREDIT_SETS` measured: the copy credit two hosts and one host want."""
    rows = [(env, copy_credit(env)) for env in CREDIT_SETS]
    rows = [(env, r) for env, r in rows if r is not None]
    if not rows:
        return 0
    print("\n| env (one sitting) | jobs | copy rate c (ms/MiB): best, within chi-square + 4 | charged | price a (ms) | "
          "chi-square |")
    print("|---|---:|---|---:|---:|---:|")
    for env, r in rows:
        print(f"| {env} | {r['jobs']} | {r['c']:.2f} ({r['c_range'][0]:.2f}-{r['c_range'][1]:.2f}) | "
              f"{r['charged']:.2f} | {r['a']:.2f} | {r['chi2']:.1f} |")
    return 0


def two_latencies() -> int:
    """Session 39's two latencies (a small response during the backward, one after it: ``CostModel.after_backward_s``)
    fitted on the sitting's four synthetic jobs (least squares in standard errors over a 0.1 ms grid), then every
    job predicted with them: do they carry to the real layouts?"""
    from dataclasses import replace

    from autotuner.frameworks.horovod.knobs import config_from_values
    from autotuner.frameworks.horovod.predict import make_scenario
    from step_layout_sizes import paired

    d0, fo = config_from_values({}), config_from_values({"fusion_threshold_mb": 0})
    jobs = {}
    for job, (what, compute) in {**JOBS, **EMBEDDING_JOBS, **COMPUTE_JOBS, **FUSED_JOBS, **LARGE_JOBS, **SPLIT_JOBS,
                                **NEIGHBOUR_JOBS, **NEIGHBOUR_JOBS_B,
                                **HANDOVER_JOBS}.items():
        f = RUNS / ENV / SUB / f"{job}.jsonl"
        if not f.exists():
            continue
        model = _measured_model(job, what)
        jobs[job] = (make_scenario(None, ENV, model, compute_ms=compute)[0], *paired(f)[2:])

    def diff(sc, a: float, b: float) -> float:
        k = 2 * (sc.cluster.size - 1)
        s = replace(sc, cost=replace(sc.cost.at_small_alpha(a * 1e-3 / k), after_backward_s=(b - a) * 1e-3 / k))
        return s.simulate(fo).step_time_ms - s.simulate(d0).step_time_ms

    fit = [j for j, (w, _) in JOBS.items() if not isinstance(w, str) and j in jobs]
    if not fit:  # the third set: no synthetic job to fit them on
        return 0
    grid = [(a, b) for a in np.arange(0.0, 3.01, 0.1) for b in np.arange(0.0, 4.01, 0.1)]
    a, b = min(grid, key=lambda ab: sum(((diff(jobs[j][0], *ab) - jobs[j][1]) / jobs[j][2]) ** 2 for j in fit))
    print(f"\ntwo latencies fitted on {', '.join(fit)}: {a:.2f} ms during the backward, {b:.2f} ms after it\n")
    print("| job | fusion off - defaults, measured (ms) | two latencies (ms) | one, the charged step-phase price (ms) |")
    print("|---|---:|---:|---:|")
    for j, (sc, m, se) in jobs.items():
        own = 2 * (sc.cluster.size - 1) * sc.cost.inter.alpha_s * 1e3
        print(f"| {j} | {m:+.1f} +- {se:.1f} | {diff(sc, a, b):+.1f} | {diff(sc, own, own):+.1f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("measure", "report"))
    ap.add_argument("set", nargs="?", choices=("embedding", "anchors", "compute", "fused", "large", "split",
                                                   "neighbours", "neighbours-b", "handover"),
                    help="measure: the second set, the third (the two real layouts alone, on ENV), or the fourth "
                         "(both at 10 and 300 ms of compute, on ENV), the fifth (two synthetic layouts, on ENV) the sixth "
                         "(sixteen16, on ENV) the seventh (both split at 256 KiB, on ENV) or the "
                         "eighth (a small response after a 2.25 or 9 MiB one, on ENV)")
    a = ap.parse_args(argv)
    return measure(a.set or "") if a.what == "measure" else report() or joint() or two_latencies() or copy_credits()


if __name__ == "__main__":
    sys.exit(main())
