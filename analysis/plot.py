#!/usr/bin/python3
"""Figures of a draftlab results file (docs/results-schema.md) as PNG and SVG.

    /usr/bin/python3 analysis/plot.py RESULTS.h5 --out DIR [--figure NAME ...]

`draftlab plot` runs this. Without --figure it draws the figures of the file's experiment (the experiment catalog,
analysis/experiment_catalog.cpp, as results_schema.EXPERIMENTS: calibration -> reliability, speed -> speed, ...)
and the training curves when the file has /training groups.

Every figure is one function `figure_NAME(results)` returning a matplotlib Figure; scripts/export_notebooks.py
copies these functions and the loading helpers into notebooks_export/*.ipynb, so keep each function
self-contained (plain matplotlib, only the helpers above it) and restylable.
"""
import argparse
import json
import os
import textwrap
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # results_schema.py beside this file
from results_schema import (DRAFT_SHAPE_NONE, DRAFT_SHAPE_STATIC_TREE, EXPERIMENTS, OPTIONAL_TABLES,  # noqa: E402
                            REQUIRED_RUN_ATTRIBUTES, SCHEMA)

# ---- loading and statistics (the same definitions as analysis/*.h; see docs/results-schema.md) ----


def load_results(path):
    """The whole file as plain dicts and numpy arrays: {"attrs", "runs": [...], "training": {label: {...}}}."""

    def text(value):
        # Files written before the drivers stored answers as valid UTF-8 can hold a character cut by the token
        # budget; such an answer must not stop a plot.
        return value.decode(errors="replace") if isinstance(value, bytes) else value

    def table(group):
        return {name: (np.array([text(v) for v in ds[()]]) if ds.dtype.kind == "O" else ds[()])
                for name, ds in group.items()}

    with h5py.File(path, "r") as f:
        attrs = {k: text(v) for k, v in f.attrs.items()}
        if attrs.get("schema") != SCHEMA:
            raise ValueError(f"{path}: schema: expected {SCHEMA}, got {attrs.get('schema')!r}")
        runs = []
        for name in sorted(f["runs"].keys()):
            g = f["runs"][name]
            run = {k: text(v) for k, v in g.attrs.items()}
            missing = [k for k in REQUIRED_RUN_ATTRIBUTES if k not in run]
            if missing:
                raise ValueError(f"{path}: /runs/{name}: attribute {missing[0]}: expected one, got none (missing)")
            for t in ("questions", "cycles", "nodes", *OPTIONAL_TABLES):
                if t in g or t not in OPTIONAL_TABLES:  # an optional table is absent when it has no rows
                    run[t] = table(g[t])
            runs.append(run)
        training = {}
        for label, g in (f["training"].items() if "training" in f else []):
            curves = {}
            g.visit(lambda key: curves.__setitem__(key, g[key][()]) if isinstance(g[key], h5py.Dataset) else None)
            curves["attrs"] = {k: text(v) for k, v in g.attrs.items()}  # command line, family, train_tokens, ...
            training[label] = curves
    return {"attrs": attrs, "runs": runs, "training": training}


def parent_accepted(run):
    """Per node: True when its parent is the root or was accepted in the same cycle (the node was tested)."""
    nodes, cycles = run["nodes"], run["cycles"]
    tested = np.zeros(len(nodes["cycle"]), dtype=bool)
    for offset, drafted in zip(cycles["node_offset"], cycles["drafted"]):
        accepted = {0: True}
        for i in range(offset, offset + drafted):
            tested[i] = accepted[nodes["parent"][i]]
            accepted[nodes["tree_index"][i]] = bool(nodes["accepted"][i])
    return tested


def calibration(runs, depth=None, width=0.05):
    """Bins of draft confidence: count (tested nodes), acceptance rate, mean confidence; and the ECE."""
    nbins = int(round(1 / width))
    conf, acc = [], []
    for run in runs:
        nodes = run["nodes"]
        keep = parent_accepted(run) & ~np.isnan(nodes["confidence"])
        if depth is not None:
            keep &= nodes["depth"] == depth
        conf.append(nodes["confidence"][keep].astype(float))
        acc.append(nodes["accepted"][keep].astype(float))
    conf, acc = np.concatenate(conf), np.concatenate(acc)
    bins = np.clip(np.floor(conf * nbins).astype(int), 0, nbins - 1)
    count = np.bincount(bins, minlength=nbins).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.bincount(bins, weights=acc, minlength=nbins) / count
        mean_conf = np.bincount(bins, weights=conf, minlength=nbins) / count
    filled = count > 0
    ece = float(np.sum(count[filled] * np.abs(mean_conf[filled] - rate[filled])) / count.sum()) if count.sum() else np.nan
    return {"lower": np.arange(nbins) * width, "width": width, "count": count, "rate": rate,
            "mean_confidence": mean_conf, "ece": ece}


def position_acceptance(run):
    """(positions, rate[questions, positions]) of a run with draft_shape static_tree; NaN where a position was never drafted."""
    nodes = run["nodes"]
    question = run["cycles"]["question"][nodes["cycle"]]
    positions = np.unique(nodes["tree_index"])
    nq = len(run["questions"]["question_id"])
    drafted = np.zeros((nq, len(positions)))
    accepted = np.zeros((nq, len(positions)))
    column = np.searchsorted(positions, nodes["tree_index"])
    np.add.at(drafted, (question, column), 1)
    np.add.at(accepted, (question, column), nodes["accepted"])
    with np.errstate(invalid="ignore", divide="ignore"):
        return positions, np.where(drafted > 0, accepted / drafted, np.nan)


def n_alpha(run, max_n=4):
    """0-alpha .. max_n-alpha: acceptance of most-probable-child nodes at depth n+1 whose parent was accepted."""
    nodes = run["nodes"]
    tested = parent_accepted(run) & (nodes["sibling_rank"] == 0)
    out = []
    for n in range(max_n + 1):
        keep = tested & (nodes["depth"] == n + 1)
        out.append(nodes["accepted"][keep].mean() if keep.any() else np.nan)
    return np.array(out)


def speculation_profile(runs, max_positions=8):
    """SPEED-Bench's profile pooled over runs (analysis/speculation_profile.h): conditional acceptance at positions
    1..max_positions (accepted at k given k - 1 accepted and something drafted at k; NaN where nothing reached k) and
    the share of cycles per accept length 1..max_positions + 1 (longer ones in the last)."""
    reached = np.zeros(max_positions)
    accepted = np.zeros(max_positions)
    lengths = np.zeros(max_positions + 1)
    for run in runs:
        cycles, nodes = run["cycles"], run["nodes"]
        deepest = np.zeros(len(cycles["accept_length"]), dtype=int)
        np.maximum.at(deepest, nodes["cycle"].astype(int), nodes["depth"].astype(int))
        got = cycles["accept_length"].astype(int) - 1  # draft tokens accepted
        for k in range(1, max_positions + 1):
            at = (got >= k - 1) & (deepest >= k)
            reached[k - 1] += at.sum()
            accepted[k - 1] += (at & (got >= k)).sum()
        lengths += np.bincount(np.minimum(got, max_positions), minlength=max_positions + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return accepted / reached, lengths / lengths.sum()


def cost_model_seconds(model, n, cached):
    """Seconds of a target forward of n rows after `cached` tokens under a cost model (format draftlab-cost/1), as
    analysis/cost_model.h computes it: linear in n between measured points (the last segment extended), linear in
    the cached length between curves, the nearest curve outside them."""
    def on_curve(curve, n):
        pts = [(r["n"], r["median_ms"] * 1e-3) for r in curve["results"]]
        if len(pts) == 1 or n <= 1:
            return pts[0][1] * max(n, 1)
        hi = 1
        while hi + 1 < len(pts) and pts[hi][0] < n:
            hi += 1
        (n0, s0), (n1, s1) = pts[hi - 1], pts[hi]
        return s0 + (s1 - s0) * (n - n0) / (n1 - n0)
    curves = model["curves"]
    if cached <= curves[0]["cached"]:
        return on_curve(curves[0], n)
    if cached >= curves[-1]["cached"]:
        return on_curve(curves[-1], n)
    hi = 1
    while curves[hi]["cached"] < cached:
        hi += 1
    a, b = curves[hi - 1], curves[hi]
    t = (cached - a["cached"]) / (b["cached"] - a["cached"])
    return (1 - t) * on_curve(a, n) + t * on_curve(b, n)


def cached_at_cycles(run):
    """Per cycle: tokens in the cache before it (the prompt, then what earlier cycles of its question emitted)."""
    q, c = run["questions"], run["cycles"]
    out = np.zeros(len(c["accept_length"]), dtype=np.int64)
    for prompt, begin, count in zip(q["prompt_tokens"], q["cycle_offset"], q["cycles"]):
        emitted = np.concatenate([[0], np.cumsum(c["accept_length"][begin:begin + count])[:-1]])
        out[begin:begin + count] = prompt + emitted
    return out


def is_baseline(run):
    """A run without drafting (draft_shape none): the baseline speedups divide by."""
    return run["draft_shape"] == DRAFT_SHAPE_NONE


def tau(run):
    """Mean accept length of the run's cycles (bonus token included); NaN without cycles (analysis/run_metrics.h)."""
    accept = run["cycles"]["accept_length"]
    return accept.sum() / len(accept) if len(accept) else np.nan


def speedup(results, run):
    """The baseline's total wall time over this run's, on the question turns both have (analysis/run_metrics.h)."""
    for v in results["runs"]:
        if (is_baseline(v) and v["dataset"] == run["dataset"] and v["temperature"] == run["temperature"]
                and v.get("shard", "0/1") == run.get("shard", "0/1")  # same process, interleaved timing
                and v.get("batch_size", 1) == run.get("batch_size", 1)):
            base = {(i, t): w for i, t, w in zip(v["questions"]["question_id"], v["questions"]["turn"],
                                                 v["questions"]["wall_seconds"])}
            q = run["questions"]
            pairs = [(base[(i, t)], w) for i, t, w in zip(q["question_id"], q["turn"], q["wall_seconds"])
                     if (i, t) in base]
            if pairs:
                b, m = np.array(pairs).T
                return b.sum() / m.sum()
    return np.nan


def machine_caption(results):
    a = results["attrs"]
    try:
        models = ", ".join(f"{role} {os.path.basename(str(m.get('path', '')).rstrip('/'))}"
                           for role, m in json.loads(a.get("models", "{}")).items())
    except (ValueError, AttributeError):
        models = "unknown"
    return (f"{a.get('host', '?')} ({a.get('cpu', '?')}), {a.get('threads', '?')} threads, "
            f"{a.get('device', '?')} {a.get('dtype', '')}; models: {models}")


DATASET_NAMES = {"mt_bench": "MT-bench", "humaneval": "HumanEval", "gsm8k": "GSM8K", "alpaca": "Alpaca",
                 "sum": "CNN/DM", "qa": "Natural Ques."}

# ---- figures ----


def figure_reliability(results):
    """EAGLE-2 Figure 6: acceptance rate per confidence bin against the diagonal, counts below; per depth."""
    import matplotlib.pyplot as plt
    runs = [r for r in results["runs"] if not is_baseline(r) and (~np.isnan(r["nodes"]["confidence"])).any()]
    fig, (ax, ax_count, ax_depth) = plt.subplots(1, 3, figsize=(15, 4.6), gridspec_kw={"width_ratios": [1.2, 1, 1.2]})
    if not runs:
        ax.text(0.5, 0.5, "no draft confidences in this file", ha="center")
        return fig
    cal = calibration(runs)
    filled = cal["count"] > 0
    centers = cal["lower"] + cal["width"] / 2
    ax.bar(cal["lower"][filled], cal["rate"][filled], width=cal["width"], align="edge", color="#4c72b0",
           edgecolor="white", label="acceptance rate")
    ax.plot(cal["mean_confidence"][filled], cal["rate"][filled], "o", color="#dd8452", ms=4, label="at mean confidence")
    ax.plot([0, 1], [0, 1], "r--", lw=1.2, label="perfect calibration")
    ax.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="draft confidence", ylabel="acceptance rate",
           title=f"Reliability (ECE {cal['ece']:.3f}, {int(cal['count'].sum())} tested nodes)")
    ax.legend(loc="best", fontsize=8, framealpha=0.85)
    ax_count.bar(centers, cal["count"], width=cal["width"] * 0.9, color="#8c8c8c")
    for x, c in zip(centers[filled], cal["count"][filled]):
        ax_count.text(x, c, f"{int(c)}", ha="center", va="bottom", fontsize=7)
    ax_count.set(xlim=(0, 1), xlabel="draft confidence", ylabel="tested nodes", title="Tested nodes per bin")
    ax_count.margins(y=0.1)
    depths = sorted(set(np.concatenate([r["nodes"]["depth"] for r in runs]).tolist()))
    colors = plt.cm.viridis(np.linspace(0, 0.9, max(len(depths), 1)))
    for d, color in zip(depths, colors):
        c = calibration(runs, depth=d)
        keep = c["count"] > 0
        if not keep.any():
            continue  # a depth whose nodes were never tested (all parents rejected)
        ax_depth.plot(c["mean_confidence"][keep], c["rate"][keep], "o-", color=color, ms=3,
                      label=f"depth {d} (ECE {c['ece']:.3f})")
    ax_depth.plot([0, 1], [0, 1], "r--", lw=1.2)
    ax_depth.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="mean confidence in bin", ylabel="acceptance rate",
                 title="Per draft depth")
    ax_depth.legend(fontsize=7, loc="best", framealpha=0.85)
    methods = sorted({f"{r['method']} / {DATASET_NAMES.get(r['dataset'], r['dataset'])}" for r in runs})
    fig.suptitle(f"Calibration of the draft: {', '.join(methods)}\n{machine_caption(results)}", fontsize=9)
    fig.tight_layout()
    return fig


def figure_positions(results, max_positions=6):
    """EAGLE-2 Figure 5: per-question acceptance rate of static tree positions P1..Pn (one dot per question)."""
    import matplotlib.pyplot as plt
    runs = [r for r in results["runs"] if r["draft_shape"] == DRAFT_SHAPE_STATIC_TREE]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if not runs:
        ax.text(0.5, 0.5, "no run with a static tree (draft shape) in this file", ha="center")
        return fig
    rng = np.random.default_rng(0)  # horizontal jitter only, so overlapping dots stay visible
    width = 0.8 / len(runs)
    for k, run in enumerate(runs):
        positions, rate = position_acceptance(run)
        positions, rate = positions[:max_positions], rate[:, :max_positions]
        label = f"{run['method']}, {DATASET_NAMES.get(run['dataset'], run['dataset'])}, T={run['temperature']:g}"
        for j, p in enumerate(positions):
            y = rate[:, j][~np.isnan(rate[:, j])]
            x = j + 1 + (k - (len(runs) - 1) / 2) * width + rng.uniform(-width / 4, width / 4, len(y))
            ax.scatter(x, y, s=14, alpha=0.6, color=f"C{k}", label=label if j == 0 else None)
            ax.hlines(np.mean(y) if len(y) else np.nan, j + 1 + (k - (len(runs) - 1) / 2) * width - width / 2.5,
                      j + 1 + (k - (len(runs) - 1) / 2) * width + width / 2.5, color=f"C{k}", lw=2)
        ax.set_xticks(np.arange(1, len(positions) + 1), [f"P{p}" for p in positions])
    ax.set(ylim=(-0.03, 1.03), xlabel="tree position", ylabel="acceptance rate per question",
           title="Acceptance of static tree positions (bar = mean over questions)")
    ax.legend(fontsize=7, loc="best", framealpha=0.85)
    fig.text(0.5, 0.005, machine_caption(results), ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def figure_speed(results):
    """Speedup and tau per dataset and method (EAGLE-2 Table 1 as bars), one row per temperature."""
    import matplotlib.pyplot as plt
    runs = [r for r in results["runs"] if not is_baseline(r)]
    temps = sorted({r["temperature"] for r in runs})
    datasets = list(dict.fromkeys(r["dataset"] for r in runs))
    methods = list(dict.fromkeys(r["method"] for r in runs))
    # Wide enough for every bar's label standing upright (labels side by side overlapped with many methods).
    bars_per_axis = max(len(methods), 1) * max(len(datasets), 1)
    fig, axes = plt.subplots(len(temps), 2, figsize=(max(12, 0.2 * bars_per_axis), 3.8 * len(temps)), squeeze=False)
    width = 0.8 / max(len(methods), 1)
    for row, t in zip(axes, temps):
        for k, m in enumerate(methods):
            found = {r["dataset"]: r for r in runs if r["method"] == m and r["temperature"] == t}
            x = np.arange(len(datasets)) + (k - (len(methods) - 1) / 2) * width
            for ax, metric in zip(row, (lambda r: speedup(results, r), tau)):
                values = [metric(found[d]) if d in found else np.nan for d in datasets]
                bars = ax.bar(x, values, width, label=m, color=f"C{k}")
                ax.bar_label(bars, fmt="%.2f", fontsize=6, padding=2, rotation=90)
        for ax, name in zip(row, ("speedup vs vanilla", "τ (tokens per cycle)")):
            ax.set_xticks(np.arange(len(datasets)), [DATASET_NAMES.get(d, d) for d in datasets])
            ax.set(ylabel=name, title=f"{name}, T = {t:g}")
            ax.margins(y=0.22)
        row[0].axhline(1.0, color="k", lw=0.8, ls=":")
    axes[0][1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle(machine_caption(results), fontsize=8)
    fig.tight_layout()
    return fig


def figure_sweep(results):
    """tau and speedup against total tokens, one line per (depth, top_k) of the grid; the best point starred."""
    import matplotlib.pyplot as plt
    points = []
    any_grid = any(r.get("grid") for r in results["runs"])  # then runs without a grid are baselines, not points
    for r in results["runs"]:
        if is_baseline(r) or (any_grid and not r.get("grid")):
            continue
        grid = json.loads(r.get("grid") or r.get("options") or "{}")
        if "total_tokens" not in grid:
            continue
        key = ", ".join(f"{k}={v}" for k, v in grid.items() if k not in ("total_tokens", "index"))
        key += f" · {DATASET_NAMES.get(r['dataset'], r['dataset'])} T={r['temperature']:g}"
        points.append((key, float(grid["total_tokens"]), speedup(results, r), tau(r)))
    fig, (ax_s, ax_t) = plt.subplots(1, 2, figsize=(12, 4.5))
    if not points:
        ax_s.text(0.5, 0.5, "no grid points (total_tokens) in this file", ha="center")
        return fig
    for k, key in enumerate(dict.fromkeys(p[0] for p in points)):
        sel = sorted(p[1:] for p in points if p[0] == key)
        x, s, t = np.array(sel).T
        ax_s.plot(x, s, "o-", color=f"C{k % 10}", label=key)
        ax_t.plot(x, t, "o-", color=f"C{k % 10}", label=key)
    best = max(points, key=lambda p: -np.inf if np.isnan(p[2]) else p[2])
    ax_s.plot(best[1], best[2], "*", ms=16, color="gold", mec="k", label=f"best: {best[0]}, total={best[1]:g}")
    ax_s.axhline(1.0, color="k", lw=0.8, ls=":")
    ax_s.set(xlabel="total tokens", ylabel="speedup vs vanilla", title="Speedup over the grid")
    ax_t.set(xlabel="total tokens", ylabel="τ", title="τ over the grid")
    ax_s.legend(fontsize=7)
    fig.suptitle(machine_caption(results), fontsize=8)
    fig.tight_layout()
    return fig


def figure_ablation(results):
    """Bars of speedup, tau and 0..4-alpha per method (EAGLE-2 Table 3, EAGLE Table 5/6, Figure 8)."""
    import matplotlib.pyplot as plt
    runs = [r for r in results["runs"] if not is_baseline(r)]
    groups = list(dict.fromkeys((r["dataset"], r["temperature"]) for r in runs))
    methods = list(dict.fromkeys(r["method"] for r in runs))
    metrics = [("speedup", lambda r: speedup(results, r)), ("τ", tau)]
    metrics += [(f"{n}-α", lambda r, n=n: n_alpha(r)[n]) for n in range(5)]
    fig, axes = plt.subplots(len(groups), 1, figsize=(12, 3.4 * len(groups)), squeeze=False)
    width = 0.8 / max(len(methods), 1)
    for ax, (dataset, t) in zip(axes[:, 0], groups):
        ax_alpha = ax.twinx()  # alphas are rates in [0, 1]; speedup and tau share the left axis
        for k, m in enumerate(methods):
            run = next((r for r in runs if r["method"] == m and r["dataset"] == dataset and r["temperature"] == t), None)
            values = [f(run) if run is not None else np.nan for _, f in metrics]
            x = np.arange(len(metrics)) + (k - (len(methods) - 1) / 2) * width
            left = ax.bar(x[:2], values[:2], width, color=f"C{k}", label=m)
            right = ax_alpha.bar(x[2:], values[2:], width, color=f"C{k}", alpha=0.75)
            ax.bar_label(left, fmt="%.2f", fontsize=6, padding=1)
            ax_alpha.bar_label(right, fmt="%.2f", fontsize=6, padding=1)
        ax.axvline(1.5, color="k", lw=0.6)
        ax.set_xticks(np.arange(len(metrics)), [name for name, _ in metrics])
        ax.set_xlim(-0.6, len(metrics) - 0.4)
        ax.set(ylabel="speedup, τ", title=f"{DATASET_NAMES.get(dataset, dataset)}, T = {t:g}")
        ax.margins(y=0.15)
        ax_alpha.set(ylim=(0, 1.15), ylabel="n-α")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    # The caption lists every model: wrap it to the figure's width and make room for its lines above the legend.
    caption = textwrap.fill(f"{results['attrs'].get('experiment', '')}: {machine_caption(results)}", width=190)
    lines = caption.count("\n") + 1
    height = fig.get_figheight()
    fig.suptitle(caption, fontsize=8, y=0.995)
    fig.legend(handles, labels, loc="upper center", ncol=len(methods), fontsize=8,
               bbox_to_anchor=(0.5, 1 - (0.05 + 0.15 * lines) / height))
    fig.tight_layout(rect=(0, 0, 1, 1 - (0.3 + 0.15 * lines) / height))
    return fig


def figure_n_alpha(results, max_n=7):
    """n-alpha against n, one line per method (EAGLE-3 Figure 7: chains with the EAGLE-2 and the EAGLE-3 head)."""
    import matplotlib.pyplot as plt
    runs = [r for r in results["runs"] if not is_baseline(r)]
    groups = list(dict.fromkeys((r["dataset"], r["temperature"]) for r in runs))
    fig, axes = plt.subplots(1, max(len(groups), 1), figsize=(6.5 * max(len(groups), 1), 4), squeeze=False)
    for ax, (dataset, t) in zip(axes[0], groups):
        for k, r in enumerate(r for r in runs if r["dataset"] == dataset and r["temperature"] == t):
            ax.plot(range(max_n + 1), n_alpha(r, max_n), "o-", color=f"C{k}", label=f"{r['method']} (τ {tau(r):.2f})")
        ax.set(xlabel="n (draft tokens before this one)", ylabel="n-α", ylim=(0, 1.05),
               title=f"{DATASET_NAMES.get(dataset, dataset)}, T = {t:g}")
        ax.set_xticks(range(max_n + 1))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")
    fig.suptitle(textwrap.fill(machine_caption(results), width=130), fontsize=7)
    fig.tight_layout()
    return fig


def figure_scaling(results):
    """Speedup and tau against each head's training tokens (its training log), one line per head family and data
    file (EAGLE-3 Figure 1)."""
    import matplotlib.pyplot as plt
    runs = [r for r in results["runs"] if not is_baseline(r)]
    groups = list(dict.fromkeys((r["dataset"], r["temperature"]) for r in runs))
    fig, axes = plt.subplots(len(groups), 2, figsize=(12, 3.8 * max(len(groups), 1)), squeeze=False)

    def head(r):  # (line label, training tokens) from the head's training log: one line per family and data file
        attrs = results["training"].get(r["method"], {}).get("attrs", {})
        source = os.path.basename(attrs.get("data", "").split(" (")[0]) or "data not recorded"
        return f"{attrs.get('family', '?')} head, {source}", float(attrs.get("train_tokens", "nan"))

    for row, (dataset, t) in zip(axes, groups):
        lines = {}
        for r in runs:
            if r["dataset"] == dataset and r["temperature"] == t:
                label, tokens = head(r)
                lines.setdefault(label, []).append((tokens, speedup(results, r), tau(r)))
        for k, (label, points) in enumerate(sorted(lines.items())):
            points.sort()
            x = [p[0] for p in points]
            for ax, j in zip(row, (1, 2)):
                ax.plot(x, [p[j] for p in points], "o-", color=f"C{k}", label=label)
        title = f"{DATASET_NAMES.get(dataset, dataset)}, T = {t:g}"
        for ax, name in zip(row, ("speedup vs vanilla", "τ (tokens per cycle)")):
            ax.set_xscale("log", base=2)
            ax.set(xlabel="training tokens (the head's training split)", ylabel=name, title=title)
            ax.set_ylim(bottom=0)  # from zero: a flat curve must look flat, not magnified noise
            ax.grid(alpha=0.3)
        row[1].legend(fontsize=8)
    fig.suptitle(textwrap.fill(machine_caption(results), width=150), fontsize=7)
    fig.tight_layout()
    return fig


def figure_training(results):
    """Training curves of every /training group: train and eval loss, learning rate, eval accuracy and n-alpha."""
    import matplotlib.pyplot as plt
    logs = results["training"]
    fig, axes = plt.subplots(max(len(logs), 1), 3, figsize=(14, 3.6 * max(len(logs), 1)), squeeze=False)
    if not logs:
        axes[0][0].text(0.5, 0.5, "no /training groups in this file", ha="center")
        return fig
    for (ax_loss, ax_lr, ax_acc), (label, c) in zip(axes, logs.items()):
        if "train/loss" in c:
            ax_loss.plot(c["train/step"], c["train/loss"], lw=1, label="train")
        if "eval/loss" in c:
            ax_loss.plot(c["eval/step"], c["eval/loss"], "o-", ms=3, label="eval")
        ax_loss.set(xlabel="step", ylabel="loss", title=f"{label}: loss")
        ax_loss.legend(fontsize=7)
        if "train/learning_rate" in c:
            ax_lr.plot(c["train/step"], c["train/learning_rate"], color="C2")
        ax_lr.set(xlabel="step", ylabel="learning rate", title=f"{label}: learning rate")
        if "eval/accuracy" in c:
            ax_acc.plot(c["eval/step"], c["eval/accuracy"], "o-", ms=3, color="k", label="top-1 accuracy")
        if "eval/alpha" in c:
            alpha = np.atleast_2d(c["eval/alpha"])
            for n in range(alpha.shape[1]):
                ax_acc.plot(c["eval/step"][:len(alpha)], alpha[:, n], ".--", lw=1, label=f"{n}-α")
        ax_acc.set(xlabel="step", ylim=(0, 1), title=f"{label}: eval accuracy and n-α")
        if ax_acc.get_legend_handles_labels()[0]:
            ax_acc.legend(fontsize=7, ncol=2)
        else:
            ax_acc.text(0.5, 0.5, "no eval/accuracy or eval/alpha in this log", ha="center", transform=ax_acc.transAxes)
    fig.tight_layout()
    return fig


def figure_batch(results):
    """EAGLE Table 7 as lines: speedup over batched vanilla and throughput against the batch size, per T and dataset."""
    import matplotlib.pyplot as plt
    runs = results["runs"]
    panels = list(dict.fromkeys((r["temperature"], r["dataset"]) for r in runs))
    methods = list(dict.fromkeys(r["method"] for r in runs if not is_baseline(r)))
    fig, axes = plt.subplots(len(panels), 2, figsize=(12, 3.8 * len(panels)), squeeze=False)
    for row, (t, d) in zip(axes, panels):
        here = [r for r in runs if r["temperature"] == t and r["dataset"] == d]
        lines = [("vanilla", [r for r in here if is_baseline(r)])] + [(m, [r for r in here if r["method"] == m])
                                                                     for m in methods]
        for k, (label, rs) in enumerate(lines):
            rs = sorted(rs, key=lambda r: r.get("batch_size", 1))
            sizes = [r.get("batch_size", 1) for r in rs]
            rates = [r["questions"]["new_tokens"].sum() / max(r["questions"]["wall_seconds"].sum(), 1e-12) for r in rs]
            style = dict(marker="o", color=f"C{k}", label=label, ls="--" if label == "vanilla" else "-")
            row[1].plot(sizes, rates, **style)
            if label != "vanilla":
                row[0].plot(sizes, [speedup(results, r) for r in rs], **style)
        title = f"{DATASET_NAMES.get(d, d)}, T = {t:g}"
        row[0].set(xlabel="batch size", ylabel="speedup over batched vanilla", title=title)
        row[0].axhline(1.0, color="k", lw=0.8, ls=":")
        row[1].set(xlabel="batch size", ylabel="throughput (tokens/s)", title=title)
        for ax in row:
            ax.set_xticks(sorted({r.get("batch_size", 1) for r in here}))
            ax.grid(alpha=0.3)
    axes[0][1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle(machine_caption(results), fontsize=8)
    fig.tight_layout()
    return fig


def figure_profile(results, max_positions=8):
    """SPEED-Bench's speculation profile per method, all sets pooled: conditional acceptance per draft position and
    the share of cycles per accept length; one row per temperature."""
    import matplotlib.pyplot as plt
    runs = [r for r in results["runs"] if not is_baseline(r)]
    temps = sorted({r["temperature"] for r in runs})
    methods = list(dict.fromkeys(r["method"] for r in runs))
    fig, axes = plt.subplots(len(temps), 2, figsize=(13, 3.8 * len(temps)), squeeze=False)
    positions = np.arange(1, max_positions + 1)
    width = 0.8 / max(len(methods), 1)
    for row, t in zip(axes, temps):
        for k, m in enumerate(methods):
            conditional, shares = speculation_profile(
                [r for r in runs if r["method"] == m and r["temperature"] == t], max_positions)
            style = dict(color=f"C{k % 10}", ls=("-", "--", ":")[k // 10 % 3])
            row[0].plot(positions, conditional, marker="o", label=m, **style)
            row[1].bar(np.arange(1, max_positions + 2) + (k - (len(methods) - 1) / 2) * width, shares, width,
                       color=style["color"], label=m)
        row[0].set(xlabel="draft position k", ylabel="P(accepted at k | k - 1 accepted)", ylim=(0, 1.02),
                   title=f"conditional acceptance, T = {t:g}")
        row[0].set_xticks(positions)
        row[1].set(xlabel="accept length (tokens per cycle, bonus included)", ylabel="share of cycles",
                   title=f"accept lengths, T = {t:g}")
        row[1].set_xticks(np.arange(1, max_positions + 2),
                          [str(i) for i in range(1, max_positions + 1)] + [f"≥{max_positions + 1}"])
        for ax in row:
            ax.grid(alpha=0.3)
    axes[0][1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle(machine_caption(results), fontsize=8)
    fig.tight_layout()
    return fig


def figure_cost(results):
    """The forward cost model the run recorded (exp --cost): its measured curves (median, min-max) per cached length,
    and its residuals on the runs: each cycle's recorded verify time against the model's forward of drafted + 1 rows
    at that cycle's cached length, the median per row count and method (the rest is acceptance and bookkeeping)."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), squeeze=False)
    left, right = axes[0]
    text = results["attrs"].get("cost_model", "")
    if not text:
        for ax in (left, right):
            ax.text(0.5, 0.5, "no cost model recorded\n(draftlab exp ... --cost COST.json)", ha="center", va="center",
                    transform=ax.transAxes)
            ax.set_axis_off()
        return fig
    model = json.loads(text)
    for k, curve in enumerate(model["curves"]):
        n = np.array([r["n"] for r in curve["results"]])
        med = np.array([r["median_ms"] for r in curve["results"]])
        low = np.array([r.get("min_ms", m) for r, m in zip(curve["results"], med)])
        high = np.array([r.get("max_ms", m) for r, m in zip(curve["results"], med)])
        left.errorbar(n, med, yerr=[med - low, high - med], marker="o", ms=3, capsize=2, color=f"C{k % 10}",
                      label=f"cached {curve['cached']}")
    left.set(xscale="log", xlabel="rows in the forward (n)", ylabel="ms (median, min-max)",
             title=f"forward cost: {model.get('forward', '?')}, {model.get('threads', '?')} thread(s)")
    left.legend(fontsize=7)
    for k, run in enumerate(r for r in results["runs"] if not is_baseline(r) and len(r["cycles"]["drafted"])):
        c = run["cycles"]
        rows = c["drafted"].astype(int) + 1
        cached = cached_at_cycles(run)
        predicted = np.array([cost_model_seconds(model, n, kv) for n, kv in zip(rows, cached)])
        residual = 1e3 * (c["verify_seconds"] - predicted)
        sizes = np.unique(rows)
        right.plot(sizes, [np.median(residual[rows == n]) for n in sizes], marker="o", ms=3, color=f"C{k % 10}",
                   label=f"{run['method']}, {DATASET_NAMES.get(run['dataset'], run['dataset'])}, "
                         f"T = {run['temperature']:g}")
    right.axhline(0.0, color="k", lw=0.8, ls=":")
    right.set(xlabel="rows verified (drafted + 1)", ylabel="recorded verify - model forward (ms, median)",
              title="residuals on the runs")
    if right.lines[1:]:
        right.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1))
    for ax in (left, right):
        ax.grid(alpha=0.3)
    fig.suptitle(machine_caption(results), fontsize=8)
    fig.tight_layout()
    return fig


FIGURES = {"reliability": figure_reliability, "positions": figure_positions, "speed": figure_speed,
           "sweep": figure_sweep, "ablation": figure_ablation, "training": figure_training, "batch": figure_batch,
           "n_alpha": figure_n_alpha, "scaling": figure_scaling, "profile": figure_profile,
           "cost": figure_cost}


def experiment_figures(experiment):
    """The figures of an experiment: the catalog's (analysis/experiment_catalog.cpp), speed's for an unknown one."""
    entry = EXPERIMENTS.get(experiment)
    return list(entry.figures) if entry and entry.figures else ["speed"]


def main(argv=None):
    parser = argparse.ArgumentParser(description="Render the figures of a draftlab results file (PNG + SVG).")
    parser.add_argument("results")
    parser.add_argument("--out", required=True, help="directory for NAME.png and NAME.svg")
    parser.add_argument("--figure", action="append", choices=sorted(FIGURES) + ["all"],
                        help="figure to draw (repeatable; default: the experiment's figures + training)")
    args = parser.parse_args(argv)
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    try:
        results = load_results(args.results)
    except (OSError, KeyError, ValueError) as e:
        print(f"plot.py: error: {args.results}: not a draftlab results file ({e})", file=sys.stderr)
        return 1
    names = args.figure or experiment_figures(results["attrs"].get("experiment")) + (
        ["training"] if results["training"] else []) + (["cost"] if results["attrs"].get("cost_model") else [])
    if "all" in names:
        names = list(FIGURES)
    os.makedirs(args.out, exist_ok=True)
    for name in names:
        fig = FIGURES[name](results)
        for ext in ("png", "svg"):
            path = os.path.join(args.out, f"{name}.{ext}")
            tmp = f"{path}.tmp.{os.getpid()}.{ext}"  # keeps the extension: savefig picks the format from it
            fig.savefig(tmp, dpi=130)
            os.replace(tmp, path)
            print(path)
        plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
