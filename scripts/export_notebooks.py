#!/usr/bin/python3
"""Writes notebooks_export/*.ipynb: one notebook per figure of analysis/plot.py.

Each notebook holds a copy of one `figure_*` function of analysis/plot.py and of the loading/statistics helpers it
uses, so the notebooks draw exactly what `draftlab plot` draws and a researcher can restyle them in place.
Regenerate after editing plot.py (the analysis.notebooks test fails while they differ):

    /usr/bin/python3 scripts/export_notebooks.py            # rewrite notebooks_export/*.ipynb
    /usr/bin/python3 scripts/export_notebooks.py --check    # exit 1 if any notebook is out of date

Notebooks are written without outputs (commitable); run them with `jupyter nbconvert --to notebook --execute`.
"""
import argparse
import ast
import importlib.util
import inspect
import os
import sys

import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# notebook name -> (figure function, fixture experiment for the default path, title, what it shows)
NOTEBOOKS = {
    "reliability": ("figure_reliability", "calibration", "Reliability diagram (EAGLE-2 Figure 6)",
                    "Acceptance rate per draft-confidence bin (width 0.05) against the diagonal, the tested nodes "
                    "per bin, and the same per draft depth; ECE in the titles. Input: `draftlab exp calibration`."),
    "positions": ("figure_positions", "positions", "Acceptance per static-tree position (EAGLE-2 Figure 5)",
                  "One dot per question: the acceptance rate of tree positions P1..P6, with the mean over "
                  "questions. Input: `draftlab exp positions`."),
    "speed": ("figure_speed", "speed", "Speedup and τ per dataset and method (EAGLE-2 Table 1)",
              "Bars of the speedup over vanilla (same dataset, temperature and process) and of τ, one row per "
              "temperature. Input: `draftlab exp speed`."),
    "sweep": ("figure_sweep", "sweep", "τ and speedup against total tokens (sweep)",
              "One line per (depth, top_k, dataset, T) of the grid; the fastest point starred. Input: "
              "`draftlab exp sweep` (merged shards)."),
    "ablations": ("figure_ablation", "ablate-eagle2", "Ablations (EAGLE-2 Table 3, EAGLE-3 Table 2, EAGLE Tables 5/6, "
                  "Figure 8)",
                  "Speedup, τ and 0-α..4-α per method, one panel per dataset and temperature. Input: "
                  "`draftlab exp ablate-eagle2|ablate-eagle3|ablate-inputs|tree-vs-chain|train-data|alpha`."),
    "n_alpha": ("figure_n_alpha", "eagle3-alpha", "n-α against n (EAGLE-3 Figure 7)",
                "The acceptance rate of the n-th draft token of a chain whose earlier tokens were accepted, one line "
                "per method (EAGLE-2 head vs EAGLE-3 head). Input: `draftlab exp eagle3-alpha`."),
    "scaling": ("figure_scaling", "data-scaling", "Speedup and τ against training data (EAGLE-3 Figure 1)",
                "One line per head family and data file, x = the training tokens each head's log records. Input: "
                "`draftlab exp data-scaling` (heads from scripts/train_scaling_heads.sh)."),
    "training": ("figure_training", "speed", "Training curves",
                 "Loss, learning rate, eval accuracy and n-α of every /training group of the file."),
}


def schema_constants(path, names):
    """`NAME = value` lines for the names plot.py imports from results_schema that `names` (the copied code) use.

    The notebooks stand alone, so they carry the values of analysis/results_schema.py (generated from
    core/results/results_schema.h) instead of importing it; --check notices when the schema changes them."""
    with open(path) as f:
        tree = ast.parse(f.read())
    imported = [a.name for node in tree.body if isinstance(node, ast.ImportFrom) and node.module == "results_schema"
                for a in node.names]
    sys.path.insert(0, os.path.dirname(path))
    import results_schema
    return [f"{n} = {getattr(results_schema, n)!r}" for n in imported if n in names]


def load_plot_module():
    spec = importlib.util.spec_from_file_location("draftlab_plot", os.path.join(ROOT, "analysis", "plot.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def top_level_sources(path):
    """name -> source text of every top-level function and assignment of the file, in file order."""
    with open(path) as f:
        text = f.read()
    lines = text.splitlines()
    out = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = "\n".join(lines[node.lineno - 1:node.end_lineno])
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = "\n".join(lines[node.lineno - 1:node.end_lineno])
    return out


def helpers_used(names, sources, helper_names):
    """The helpers the functions `names` need, directly or through other helpers, in file order."""
    needed, todo = set(names) & helper_names, list(names)
    while todo:
        used = {n.id for n in ast.walk(ast.parse(sources[todo.pop()])) if isinstance(n, ast.Name)}
        for h in used & helper_names - needed:
            needed.add(h)
            todo.append(h)
    return [h for h in sources if h in needed]


def build_notebook(name, sources, helper_names):
    function, experiment, title, description = NOTEBOOKS[name]
    helpers = helpers_used([function, "load_results"], sources, helper_names)
    used = {n.id for code in [sources[function]] + [sources[h] for h in helpers]
            for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}
    constants = schema_constants(os.path.join(ROOT, "analysis", "plot.py"), used)
    cells = [
        nbformat.v4.new_markdown_cell(
            f"# {title}\n\n{description}\n\nGenerated by `scripts/export_notebooks.py` from `analysis/plot.py` "
            f"(`{function}`): the same figure as `draftlab plot RESULTS.h5 --out DIR --figure "
            f"{function.replace('figure_', '')}`. Restyle freely; regenerate to pick up changes of plot.py."),
        nbformat.v4.new_code_cell(
            "# The results file to draw (docs/results-schema.md). Default: the small test fixture, made by\n"
            "#   /usr/bin/python3 tests/analysis/make_fixture.py --all /tmp/draftlab-fixtures\n"
            "import os\n\n"
            f"RESULTS = os.path.join(os.environ.get(\"DRAFTLAB_FIXTURES\", \"/tmp/draftlab-fixtures\"), "
            f"\"fixture-{experiment}.h5\")"),
        nbformat.v4.new_code_cell("import json\nimport textwrap\n\nimport h5py\nimport matplotlib.pyplot as plt\nimport numpy as np\n\n"
                                  "# From analysis/results_schema.py (generated from core/results/results_schema.h)\n" +
                                  "\n".join(constants)),
        nbformat.v4.new_markdown_cell("## Loading and statistics\n\nThe definitions of docs/results-schema.md "
                                      "(tested nodes, calibration bins, n-α, speedup pairing)."),
        nbformat.v4.new_code_cell("\n\n\n".join(sources[h] for h in helpers)),
        nbformat.v4.new_markdown_cell("## The figure"),
        nbformat.v4.new_code_cell(sources[function]),
        nbformat.v4.new_code_cell(f"results = load_results(RESULTS)\nfig = {function}(results)\n"
                                  f"# fig.savefig(\"{name}.svg\")"),
    ]
    for i, cell in enumerate(cells):
        cell["id"] = f"{name}-{i}"  # fixed ids: regenerating gives the same bytes
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    return nbformat.writes(nb) + "\n"


def main():
    parser = argparse.ArgumentParser(description="Export notebooks_export/*.ipynb from analysis/plot.py.")
    parser.add_argument("--check", action="store_true", help="exit 1 if a notebook differs from what would be written")
    parser.add_argument("--out", default=os.path.join(ROOT, "notebooks_export"))
    args = parser.parse_args()
    load_plot_module()  # fails loudly here if plot.py does not even import
    sources = top_level_sources(os.path.join(ROOT, "analysis", "plot.py"))
    helper_names = {n for n in sources if not n.startswith("figure_") and n not in ("FIGURES", "BY_EXPERIMENT", "main")}
    stale = []
    for name in NOTEBOOKS:
        text = build_notebook(name, sources, helper_names)
        nbformat.validate(nbformat.reads(text, as_version=4))
        path = os.path.join(args.out, f"{name}.ipynb")
        current = open(path).read() if os.path.exists(path) else None
        if args.check:
            if current != text:
                stale.append(path)
        elif current != text:
            tmp = f"{path}.tmp.{os.getpid()}"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, path)
            print(f"wrote {path}")
    if stale:
        print("out of date (run /usr/bin/python3 scripts/export_notebooks.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
