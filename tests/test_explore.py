"""Explorer view: the grid, marks, sensitivity, measured overlay; CLI end to end and bad input."""
import json
from pathlib import Path

import numpy as np
import pytest

from autotuner.frameworks.horovod.predict import make_scenario
from autotuner.frameworks.horovod.readers.runs import read_validation_records
from autotuner.model.costmodel import Cluster
from autotuner.frameworks.horovod.views.explore import (ExploreError, combos, cycle_axis, explore, measured_points, sensitivity,
                               step_times_ms, threshold_axis)
from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28, MIB, Config

from cli_helpers import assert_one_line_error, run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "autotuner" / "models"


@pytest.fixture(scope="module")
def v100_resnet():
    sc, _ = make_scenario(MODELS, "v100-16gbit", "resnet50")
    return sc, explore(sc, resolution=8)


def test_axes():
    t = threshold_axis(10)
    assert t.shape == (11,) and t[0] == 0 and t[1] == 64 * 1024 and t[-1] == 512 * MIB and np.all(np.diff(t) > 0)
    c = cycle_axis(10)
    assert c.shape == (10,) and c[0] == pytest.approx(0.1) and c[-1] == pytest.approx(100)


def test_combinations_follow_the_cluster():
    assert len(combos(Cluster(1, 2))) == 2 and not any(c.hierarchical_allreduce for c in combos(Cluster(1, 8)))
    assert {(c.cache, c.hierarchical_allreduce) for c in combos(Cluster(4, 1))} == {
        (True, False), (True, True), (False, False), (False, True)}


def test_grid_minimum_beats_defaults_and_matches_the_simulator(v100_resnet):
    sc, ex = v100_resnet
    assert len(ex.grid) == 4 * 9 * 8  # combinations x (threshold 0 + 8) x 8 cycle times
    default = next(m for m in ex.marks if m.kind == "default")
    assert default.config == DEFAULTS_0_28
    assert default.step_time_ms == pytest.approx(sc.simulate(DEFAULTS_0_28).step_time_ms)
    assert ex.best.step_time_ms <= default.step_time_ms
    assert ex.best.step_time_ms == pytest.approx(ex.grid["step_time_ms"].min())
    assert ex.best.step_time_ms == pytest.approx(sc.simulate(ex.best.config).step_time_ms, rel=1e-12)
    # every cell is a direct simulation of its configuration
    row = ex.grid.iloc[37]
    cfg = Config(fusion_threshold_bytes=int(row["fusion_threshold_bytes"]), cycle_time_ms=row["cycle_time_ms"],
                 cache_capacity=1024 if row["cache"] else 0, hierarchical_allreduce=bool(row["hierarchical_allreduce"]))
    assert row["step_time_ms"] == pytest.approx(sc.simulate(cfg).step_time_ms, rel=1e-12)


def test_fusion_off_is_slower_for_resnet50_on_v100_16gbit(v100_resnet):
    _, ex = v100_resnet
    g = ex.grid[(ex.grid["combo"] == "cache on, flat")]
    off = g[g["fusion_threshold_bytes"] == 0]["step_time_ms"].min()
    fused = g[g["fusion_threshold_bytes"] > 0]["step_time_ms"].min()
    assert off > fused * 1.05


def test_marks_defaults_autotune_starts_and_suggest():
    sc, _ = make_scenario(MODELS, "local-gloo-1gbit", "resnet50")
    pick = Config(fusion_threshold_bytes=8 * MIB, cycle_time_ms=2.0)
    ex = explore(sc, resolution=4, suggested=pick)
    kinds = [m.kind for m in ex.marks]
    assert kinds.count("default") == 1 and kinds.count("suggest") == 1 and kinds.count("grid-best") == 1
    assert kinds.count("autotune-start") == 4 * 2  # four start points per combination (cache on/off)
    s = next(m for m in ex.marks if m.kind == "suggest")
    assert s.config == pick and s.step_time_ms == pytest.approx(sc.simulate(pick).step_time_ms)


def test_sensitivity_passes_through_the_best(v100_resnet):
    sc, ex = v100_resnet
    s = ex.sensitivity
    assert set(s["knob"]) == {"fusion_threshold_mb", "cycle_time_ms", "cache", "hierarchical_allreduce"}
    at_best = s[(s["knob"] == "cache") & (s["value"] == float(ex.best.config.cache_enabled))]["step_time_ms"]
    assert float(at_best.iloc[0]) == pytest.approx(ex.best.step_time_ms)
    one_node, _ = make_scenario(MODELS, "local-gloo-1gbit", "resnet50")
    assert "hierarchical_allreduce" not in set(sensitivity(one_node, DEFAULTS_0_28, points=4)["knob"])


def test_measured_overlay_from_the_committed_validation():
    sc, _ = make_scenario(MODELS, "local-gloo-1gbit", "resnet50")
    recs = read_validation_records(ROOT / "runs", "local-gloo-1gbit")
    m = measured_points(recs, sc)
    assert set(m["source"]) >= {"fit-sweep", "holdout-sweep"}
    assert len(m[m["source"] == "holdout-sweep"]) == 7 and set(m[m["source"] == "holdout-sweep"]["n"]) == {2}
    r = m.iloc[0]
    cfg = Config(fusion_threshold_bytes=int(r["fusion_threshold_bytes"]), cycle_time_ms=r["cycle_time_ms"])
    assert r["predicted_step_time_ms"] == pytest.approx(sc.simulate(cfg).step_time_ms)
    # these sweeps ran with Horovod's timeline (their records carry its summary): not the predicted job, no error
    assert m["timeline"].all() and all(e is None for e in m["error_percent"])
    # another model, failed or autotune trials are not overlaid
    setup = {"env": "local-gloo-1gbit", "model": "resnet50", "np": 2}
    ok = {"status": "ok", "kind": "proposal", "config": DEFAULTS_0_28.to_dict(), "measured_step_time_ms": 1.0,
          "setup": setup}
    one = measured_points([("x", ok)], sc).iloc[0]
    assert not one["timeline"] and one["error_percent"] == pytest.approx((one["predicted_step_time_ms"] - 1.0) * 100)
    bad = [ok | {"status": "failed"}, ok | {"kind": "autotune"}, ok | {"setup": setup | {"model": "vgg16"}},
           ok | {"setup": setup | {"np": 4}}, ok | {"config": None}]
    assert len(measured_points([("x", r) for r in bad], sc)) == 0
    assert len(measured_points([("x", ok)], sc)) == 1


def test_views_evaluate_only_through_the_evaluator():
    sc, _ = make_scenario(MODELS, "local-gloo-1gbit", "resnet50")
    seen = []

    def counting(s, configs):
        seen.append(len(configs))
        return step_times_ms(s, configs)
    ex = explore(sc, resolution=3, evaluate=counting)
    assert sum(seen) == ex.evaluations


def test_bad_resolution():
    sc, _ = make_scenario(MODELS, "local-gloo-1gbit", "resnet50")
    with pytest.raises(ExploreError):
        explore(sc, resolution=1)


def test_cli_explore_json_and_files(tmp_path):
    p = run("explore", "--model", "resnet50", "--env", "v100-16gbit", "--resolution", "5", "--no-suggest", "--json",
            "--out", str(tmp_path / "ex"))
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert set(d) >= {"scenario", "grid", "marks", "best", "sensitivity", "measured", "thresholds_bytes", "cycles_ms"}
    assert len(d["grid"]) == 4 * 6 * 5 and d["thresholds_bytes"][0] == 0
    assert set(d["grid"][0]) >= {"combo", "fusion_threshold_bytes", "fusion_threshold_mb", "cycle_time_ms", "cache",
                                 "hierarchical_allreduce", "step_time_ms"}
    assert d["best"]["step_time_ms"] == min(r["step_time_ms"] for r in d["grid"])
    files = [Path(f) for f in d["files"]]
    assert {f.suffix for f in files} == {".png", ".svg"} and len(files) == 4
    for f in files:
        assert f.exists() and f.stat().st_size > 1000
    assert files[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_explore_overlays_measured_and_marks_suggest(tmp_path):
    p = run("explore", "--model", "resnet50", "--env", "local-gloo-1gbit", "--resolution", "4", "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "measured" in p.stdout and "holdout" in p.stdout and "suggest pick" in p.stdout
    assert len(list(tmp_path.glob("*.svg"))) == 2


def test_cli_explore_marks_a_saved_suggest_pick(tmp_path):
    pick = tmp_path / "pick.json"
    pick.write_text(json.dumps({"proposals": [{"config": {"fusion_threshold_mb": 3, "cycle_time_ms": 7.0}}]}))
    p = run("explore", "--model", "resnet50", "--env", "local-gloo-1gbit", "--resolution", "3", "--proposals", str(pick),
            "--json", "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    s = [m for m in json.loads(p.stdout)["marks"] if m["kind"] == "suggest"]
    assert len(s) == 1 and s[0]["config"]["fusion_threshold_bytes"] == 3 * MIB and s[0]["config"]["cycle_time_ms"] == 7.0


@pytest.mark.parametrize("args,needle", [
    (["--model", "resnet50", "--env", "nope"], "unknown env"),
    (["--model", "nomodel"], "unknown model"),
    (["--model", "resnet50", "--resolution", "1"], "resolution"),
    (["--model", "resnet50", "--gpus-per-node", "0"], "must be >= 1"),
    (["--model", "resnet50", "--link-gbit", "0"], "--link-gbit: 0.0: must be >= 0.01"),
    (["--model", "resnet50", "--proposals", "/nonexistent/pick.json"], "proposals /nonexistent/pick.json: not found"),
])
def test_cli_explore_bad_input(args, needle, tmp_path):
    assert_one_line_error(run("explore", *args, "--no-suggest", "--out", str(tmp_path)), needle)


def _fp16_records():
    """The committed fp16 validation on fresh-poll-2gbit: defaults (none) and an fp16 proposal with the same knobs."""
    return [(s, r) for s, r in read_validation_records(ROOT / "runs", "fresh-poll-2gbit") if s == "fp16-mobilenet_v2"]


def test_a_measured_point_is_one_job_predicted_as_that_job():
    """A measured point is one job: an fp16 file's defaults and its fp16 proposal (same knobs) are not pooled into
    one row compared with the uncompressed prediction, and trials run with the timeline are marked."""
    from dataclasses import replace

    sc, _ = make_scenario(MODELS, "fresh-poll-2gbit", "mobilenet_v2", compute_ms=60)
    recs = _fp16_records()
    m = measured_points(recs, sc)
    assert sorted(m["compression"]) == ["fp16", "none"] and list(m["n"]) == [3, 3]
    for _, row in m.iterrows():
        mine = [r["measured_step_time_ms"] for _, r in recs if r["compression"] == row["compression"]]
        assert row["measured_step_time_ms"] == pytest.approx(np.mean(mine), rel=1e-12)
        want = replace(sc, compression=row["compression"]).simulate(DEFAULTS_0_28).step_time_ms
        assert row["predicted_step_time_ms"] == pytest.approx(want, rel=1e-9)  # fp16 predicted with fp16
        assert not row["timeline"] and row["error_percent"] == pytest.approx(
            (want / row["measured_step_time_ms"] - 1) * 100, rel=1e-9)
    # an fp16 map predicts the uncompressed trials without compression, too
    m16 = measured_points(recs, replace(sc, compression="fp16"))
    assert list(m16["predicted_step_time_ms"]) == pytest.approx(list(m["predicted_step_time_ms"]), rel=1e-9)
    # the same trial run with Horovod's timeline is a third job, marked, and not compared with the prediction
    tl = dict(recs[0][1]) | {"timeline_recorded": True}
    m2 = measured_points(recs + [(recs[0][0], tl)], sc)
    assert len(m2) == 3 and int(m2["timeline"].sum()) == 1
    assert m2[m2["timeline"]].iloc[0]["error_percent"] is None
    json.dumps([{k: v for k, v in r.items()} for r in m2.to_dict(orient="records")], allow_nan=False)


def test_heatmap_labels_one_position_once(tmp_path, monkeypatch):
    """Where several files share a configuration, the heatmap's position carries one label (never labels on top
    of each other), a line per job (fp16 and timeline marked)."""
    import matplotlib.text
    from autotuner.frameworks.horovod.views import plots_explore

    sc, _ = make_scenario(MODELS, "fresh-poll-2gbit", "mobilenet_v2", compute_ms=60)
    recs = _fp16_records()
    recs += [("copy", r) for _, r in recs] + [("tl", dict(recs[0][1]) | {"timeline_recorded": True})]
    ex = explore(sc, resolution=3, measured_records=recs)
    figs = []
    monkeypatch.setattr(plots_explore, "_save", lambda fig, stem: figs.append(fig) or [])
    plots_explore.heatmaps(ex, tmp_path / "h")
    labels = [t for t in [*figs[0].artists, *(t for ax in figs[0].axes for t in ax.texts)]
              if isinstance(t, matplotlib.text.Annotation) and t.get_text().startswith("m ")]
    where = [tuple(np.round(t.xy, 9)) for t in labels]
    assert len(where) == len(set(where)) == 1  # the cache-on panel: one point, one label
    assert len(ex.measured) == 5  # 2 jobs x 2 files + the timeline job
    lines = labels[0].get_text().splitlines()
    assert len(lines) == 5 and sum(" fp16" in ln for ln in lines) == 2 and sum(ln.endswith(" tl") for ln in lines) == 1


def test_heatmap_labels_never_overlap(tmp_path, monkeypatch):
    """local-gloo-1gbit's five validation files put 25 measured jobs in one panel, several a few pixels
    apart: every label's text is clear of every other's (leader lines may cross)."""
    import matplotlib.text
    from autotuner.frameworks.horovod.views import plots_explore

    sc, _ = make_scenario(MODELS, "local-gloo-1gbit", "resnet50")
    ex = explore(sc, resolution=4, measured_records=read_validation_records(ROOT / "runs", "local-gloo-1gbit"))
    figs = []
    monkeypatch.setattr(plots_explore, "_save", lambda fig, stem: figs.append(fig) or [])
    plots_explore.heatmaps(ex, tmp_path / "h")
    fig = figs[0]
    fig.canvas.draw()  # positions every label (an annotation's text box is known once drawn)
    r = fig.canvas.get_renderer()
    boxes = [matplotlib.text.Text.get_window_extent(a, r) for a in [*fig.artists, *(t for ax in fig.axes for t in ax.texts)]
             if isinstance(a, matplotlib.text.Annotation) and a.get_text().startswith("m ")]
    assert len(boxes) == 18  # positions: 25 jobs, several files at the same knobs
    for i, b in enumerate(boxes):
        for c in boxes[i + 1:]:
            assert min(b.x1, c.x1) <= max(b.x0, c.x0) or min(b.y1, c.y1) <= max(b.y0, c.y0), (b, c)
