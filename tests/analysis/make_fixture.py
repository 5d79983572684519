#!/usr/bin/python3
"""Writes a small draftlab results file (docs/results-schema.md) with h5py.

A second, independent writer of the schema: the C++ reader (read_results) must read what this writes, and the
analysis tests know every number in it by construction (comments give the hand-computed values). The column
types, the schema version and the draft shapes come from analysis/results_schema.py (generated from
core/results/results_schema.h); this file only fills the columns by name.

    /usr/bin/python3 tests/analysis/make_fixture.py OUT.h5 [--experiment speed|alpha|calibration|...|sweep]
    /usr/bin/python3 tests/analysis/make_fixture.py --all DIR     # DIR/fixture-EXPERIMENT.h5 for every experiment

Content (every experiment gets the same runs; `sweep` replaces eagle2 with three grid points):
  datasets mt_bench (question turns (81,0), (81,1), (82,0), (82,1)) and gsm8k ((1,0) .. (4,0)); T = 0 and 1.
  vanilla      16 tokens per question in 16 cycles of 1, 2.0 s per question                    tau 1
  eagle2       4 cycles of accept length 4, 1.0 s per question (T=1: 1.25 s)                  tau 4, 2.00x (1.60x)
               tree per cycle (tree_index: depth, parent, rank, confidence, accepted):
                 1: d1 p0 r0 0.92 1 | 2: d1 p0 r1 0.02 0 | 3: d2 p1 r0 0.82 1 | 4: d3 p3 r0 0.72 1
                 5: d2 p2 r0 0.62 0 (never tested: parent 2 rejected)
  static-tree  positions P1..P6, P1 accepted in cycles k with (k + q) % 4 != 0 (q = question row) ...
               see static_tree_cycle(); 1.6 s per question                                     1.25x
  EAGLE chain  5-node chains (confidence 0.98 - 0.1 * depth) accepting L = 3, 1, 2, 0 nodes in its 4 cycles per question, 1.25 s  tau 2.5, 1.60x
               0-a = 3/4, 1-a = 2/3, 2-a = 1/2, 3-a = 0/1, 4-a: none tested
  /training/eagle-head: 10 train steps, 3 eval passes with accuracy and 0..4-alpha (last top-1 0.62).
  data-scaling also: /training/eagle2 (family eagle, 1000 training tokens) and /training/EAGLE chain (eagle3, 500).
"""
import argparse
import json
import os

import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "analysis"))
from results_schema import (DRAFT_SHAPE_CHAIN, DRAFT_SHAPE_DYNAMIC_TREE, DRAFT_SHAPE_NONE,  # noqa: E402
                            DRAFT_SHAPE_STATIC_TREE, EXPERIMENTS as CATALOG, SCHEMA, TABLES)

DTYPES = {"int8": np.int8, "int32": np.int32, "int64": np.int64, "float32": np.float32, "float64": np.float64,
          "string": h5py.string_dtype("utf-8")}
DATASETS = {"mt_bench": [(81, 0, "writing"), (81, 1, "writing"), (82, 0, "roleplay"), (82, 1, "roleplay")],
            "gsm8k": [(1, 0, ""), (2, 0, ""), (3, 0, ""), (4, 0, "")]}
# Every driver of the experiment catalog (a benchmark writes no results file).
EXPERIMENTS = [name for name, entry in CATALOG.items() if entry.driver]
# The node columns the *_cycle() rows fill, in the order of their tuples (d, i, p, r, c, value, accepted).
NODE_FIELDS = ["depth", "tree_index", "parent", "sibling_rank", "confidence", "value", "accepted"]


def eagle2_cycle(q, k):
    """(depth, tree_index, parent, rank, confidence, accepted) rows of one eagle2 tree: 3 accepted."""
    return [(1, 1, 0, 0, 0.92, 1), (1, 2, 0, 1, 0.02, 0), (2, 3, 1, 0, 0.82, 1), (3, 4, 3, 0, 0.72, 1),
            (2, 5, 2, 0, 0.62, 0)]


def static_tree_cycle(q, k):
    """Static tree P1..P6 (P1, P2 under the root; P3, P4 under P1; P5 under P2; P6 under P3).

    P1 accepted when (k + q) % 4 != 0; then P3 when k is even, else P4; P6 when P3 was and q is odd.
    When P1 is rejected, P2 is accepted if q is even (then P5 never)."""
    p1 = (k + q) % 4 != 0
    p2 = (not p1) and q % 2 == 0
    p3 = p1 and k % 2 == 0
    p4 = p1 and not p3
    p6 = p3 and q % 2 == 1
    acc = {1: p1, 2: p2, 3: p3, 4: p4, 5: False, 6: p6}
    shape = {1: (1, 0, 0, 0.72), 2: (1, 0, 1, 0.22), 3: (2, 1, 0, 0.52), 4: (2, 1, 1, 0.32), 5: (2, 2, 0, 0.42),
             6: (3, 3, 0, 0.47)}
    return [(d, i, p, r, c, int(acc[i])) for i, (d, p, r, c) in shape.items()]


def chain_cycle(q, k):
    accepted = [3, 1, 2, 0][k]
    return [(d, d, d - 1, 0, 0.98 - 0.1 * d, int(d <= accepted)) for d in range(1, 6)]


def write_run(group, method, strategy, draft_shape, dataset, temperature, wall, cycle_fn, cycles_per_question,
              options, grid=None):
    group.attrs["method"] = method
    group.attrs["strategy"] = strategy
    group.attrs["draft_shape"] = draft_shape
    group.attrs["options"] = json.dumps(options)
    group.attrs["dataset"] = dataset
    group.attrs["temperature"] = float(temperature)
    group.attrs["repeats"] = np.int64(1)
    group.attrs["warmup"] = np.int64(0)
    group.attrs["shard"] = "0/1"
    if grid is not None:
        group.attrs["grid"] = json.dumps(grid)
    questions, cycles, nodes = ({k: [] for k in TABLES[t]} for t in ("questions", "cycles", "nodes"))
    for q, (qid, turn, category) in enumerate(DATASETS[dataset]):
        questions["cycle_offset"].append(len(cycles["question"]))
        emitted = 0
        for k in range(cycles_per_question):
            rows = cycle_fn(q, k) if cycle_fn else []
            cycles["question"].append(q)
            cycles["node_offset"].append(len(nodes["cycle"]))
            cycles["drafted"].append(len(rows))
            cycles["accept_length"].append(1 + sum(r[5] for r in rows))
            emitted += cycles["accept_length"][-1]
            cycles["draft_seconds"].append(0.25 * wall / cycles_per_question if rows else 0.0)
            cycles["verify_seconds"].append(0.75 * wall / cycles_per_question if rows else wall / cycles_per_question)
            cycles["experts_read"].append(0)  # a dense target
            conf_of = {}
            for d, i, p, r, c, a in rows:
                conf_of[i] = c * conf_of.get(p, 1.0)
                for name, v in zip(NODE_FIELDS, (d, i, p, r, c, conf_of[i], a)):
                    nodes[name].append(v)
                nodes["cycle"].append(len(cycles["question"]) - 1)
        questions["question_id"].append(qid)
        questions["category"].append(category)
        questions["turn"].append(turn)
        questions["prompt_tokens"].append(20 + 5 * q)
        questions["new_tokens"].append(emitted)
        questions["wall_seconds"].append(wall)
        questions["cycles"].append(cycles_per_question)
        questions["draft_seconds"].append(sum(cycles["draft_seconds"][-cycles_per_question:]))
        questions["verify_seconds"].append(sum(cycles["verify_seconds"][-cycles_per_question:]))
        questions["identical"].append(-1 if draft_shape == DRAFT_SHAPE_NONE or temperature > 0 else 1)
        questions["answer"].append(f"{method} answer to {qid} turn {turn}")
    for table_name, table in (("questions", questions), ("cycles", cycles), ("nodes", nodes)):
        sub = group.create_group(table_name)
        for name, values in table.items():
            if len(values) != len(table[next(iter(table))]):
                raise SystemExit(f"make_fixture.py: {table_name}/{name} is not filled (a column new in the schema?)")
            dtype = DTYPES[TABLES[table_name][name].type]
            sub.create_dataset(name, data=np.array(values, dtype=dtype), dtype=dtype)
    total_tokens = sum(questions["new_tokens"])
    group.attrs["tokens_per_second"] = float(total_tokens / sum(questions["wall_seconds"]))
    group.attrs["tau"] = float(sum(cycles["accept_length"]) / len(cycles["accept_length"]))


def write_training(group, family=None, train_tokens=None, data=None):
    steps = np.arange(1, 11, dtype=np.int64)
    group.create_dataset("train/step", data=steps)
    group.create_dataset("train/loss", data=3.0 * np.exp(-steps / 4.0) + 0.5)
    group.create_dataset("train/learning_rate", data=np.minimum(steps / 3.0, 1.0) * 1e-3)
    group.create_dataset("eval/step", data=np.array([0, 5, 10], dtype=np.int64))
    group.create_dataset("eval/loss", data=np.array([3.6, 1.4, 0.9]))
    group.create_dataset("eval/accuracy", data=np.array([0.01, 0.45, 0.62]))
    group.create_dataset("eval/alpha", data=np.array([[0.0] * 5, [0.5, 0.4, 0.35, 0.3, 0.3],
                                                      [0.7, 0.6, 0.55, 0.5, 0.5]]))
    group.attrs["command_line"] = "draftlab train-head --fixture"
    group.attrs["seed"] = "1"
    for key, value in (("family", family), ("train_tokens", train_tokens), ("data", data)):
        if value is not None:
            group.attrs[key] = value


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?")
    parser.add_argument("--experiment", default="speed")
    parser.add_argument("--all", metavar="DIR", help="write DIR/fixture-EXPERIMENT.h5 for every experiment")
    args = parser.parse_args()
    if args.all:
        os.makedirs(args.all, exist_ok=True)
        for experiment in EXPERIMENTS:
            write_fixture(os.path.join(args.all, f"fixture-{experiment}.h5"), experiment)
    elif args.out:
        write_fixture(args.out, args.experiment)
    else:
        parser.error("give OUT.h5 or --all DIR")


def write_fixture(out, experiment):
    tmp = f"{out}.tmp.{os.getpid()}"
    with h5py.File(tmp, "w") as f:
        attrs = {"schema": SCHEMA, "experiment": experiment, "git_commit": "fixture",
                 "command_line": "make_fixture.py", "date": "2024-06-01T00:00:00Z", "host": "fixture-host",
                 "cpu": "Fixture CPU (avx2)", "blas": "OpenBLAS fixture", "device": "cpu", "dtype": "float32",
                 "models": json.dumps({"target": {"path": "data/models/ts-tiny", "sha256": "ab" * 32},
                                       "head": {"path": "data/models/ts-tiny-eagle-head", "sha256": "cd" * 32}}),
                 "shard": "0/1", "settings": json.dumps({"questions": 4, "max_new_tokens": 16})}
        for k, v in attrs.items():
            f.attrs[k] = v
        f.attrs["threads"] = np.int64(2)
        f.attrs["seed"] = np.int64(7)
        runs = f.create_group("runs")
        n = 0

        def run(*a, **kw):
            nonlocal n
            write_run(runs.create_group(f"{n:04d}"), *a, **kw)
            n += 1

        for t in (0.0, 1.0):
            for dataset in DATASETS:
                run("vanilla", "vanilla", DRAFT_SHAPE_NONE, dataset, t, 2.0, None, 16, {})
                if experiment == "sweep":
                    for total, wall in ((20, 1.25), (40, 1.0), (60, 1.6)):
                        grid = {"total_tokens": total, "depth": 5, "top_k": 8}
                        run(f"eagle2 total_tokens={total}", "eagle2", DRAFT_SHAPE_DYNAMIC_TREE, dataset, t, wall,
                            eagle2_cycle, 4,
                            {k: str(v) for k, v in grid.items()}, grid=grid)
                else:
                    run("eagle2", "eagle2", DRAFT_SHAPE_DYNAMIC_TREE, dataset, t, 1.0 if t == 0 else 1.25, eagle2_cycle,
                        4, {"total_tokens": "5"})
                run("static-tree", "static-tree", DRAFT_SHAPE_STATIC_TREE, dataset, t, 1.6, static_tree_cycle, 4, {})
                run("EAGLE chain", "eagle-chain", DRAFT_SHAPE_CHAIN, dataset, t, 1.25, chain_cycle, 4, {"depth": "5"})
        write_training(f.create_group("training/eagle-head"))
        if experiment == "data-scaling":  # the heads' logs, under their methods' labels as the driver writes them
            write_training(f.create_group("training/eagle2"), "eagle", "1000", "corpus.txt (text)")
            write_training(f.create_group("training/EAGLE chain"), "eagle3", "500",
                           "corpus.txt (text), the first 0.5 of its training split")
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
