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

# notebook name -> (plot.py figure, what it draws, what it shows). The paper items in the title, the experiments it
# reads ("Input:") and its default fixture come from the experiment catalog (results_schema.EXPERIMENTS); every
# figure of plot.py has a notebook.
NOTEBOOKS = {
    "reliability": ("reliability", "Reliability diagram",
                    "Acceptance rate per draft-confidence bin (width 0.05) against the diagonal, the tested nodes "
                    "per bin, and the same per draft depth; ECE in the titles."),
    "positions": ("positions", "Acceptance per static-tree position",
                  "One dot per question: the acceptance rate of tree positions P1..P6, with the mean over "
                  "questions."),
    "speed": ("speed", "Speedup and τ per dataset and method",
              "Bars of the speedup over vanilla (same dataset, temperature and process) and of τ, one row per "
              "temperature."),
    "sweep": ("sweep", "τ and speedup against total tokens",
              "One line per (depth, top_k, dataset, T) of the grid; the fastest point starred (merge a sharded "
              "sweep first)."),
    "ablations": ("ablation", "Ablations", "Speedup, τ and 0-α..4-α per method, one panel per dataset and temperature."),
    "n_alpha": ("n_alpha", "n-α against n",
                "The acceptance rate of the n-th draft token of a chain whose earlier tokens were accepted, one line "
                "per method (EAGLE-2 head vs EAGLE-3 head)."),
    "scaling": ("scaling", "Speedup and τ against training data",
                "One line per head family and data file, x = the training tokens each head's log records (heads "
                "from scripts/train_scaling_heads.sh)."),
    "batch": ("batch", "Speedup, τ and throughput per batch size",
              "One line per method against the batch size, beside batched vanilla of the same size."),
    "profile": ("profile", "Speculation profile",
                "SPEED-Bench's conditional acceptance per draft position and the share of cycles per accept length, "
                "one line and one bar per method, all sets pooled, one row per temperature."),
    "cost": ("cost", "Forward cost model and its residuals",
             "The cost model a results file records (exp --cost): its measured curves per cached length, and each "
             "method's recorded verify time less the model's forward, per rows verified."),
    "training": ("training", "Training curves",
                 "Loss, learning rate, eval accuracy and n-α of every /training group of the file (any results "
                 "file whose methods use heads with a training log)."),
}


def catalog():
    sys.path.insert(0, os.path.join(ROOT, "analysis"))
    import results_schema
    return results_schema.EXPERIMENTS


def notebook_header(figure, what):
    """(title, the experiments that draw it as an "Input:" sentence, the fixture experiment) from the catalog."""
    users = [(name, e) for name, e in catalog().items() if figure in e.figures and e.driver]
    items = []
    for _, e in users:
        if e.paper_item and e.paper_item not in items:
            items.append(e.paper_item)
    title = what + (f" ({', '.join(items)})" if items else "")
    if not users:  # the training curves: drawn for any file with /training groups
        return title, "", "speed"
    return title, " Input: `draftlab exp " + "|".join(n for n, _ in users) + "`.", users[0][0]


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
    figure, what, description = NOTEBOOKS[name]
    function = f"figure_{figure}"
    title, inputs, experiment = notebook_header(figure, what)
    description += inputs
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
    plot = load_plot_module()  # fails loudly here if plot.py does not even import
    missing = set(plot.FIGURES) - {figure for figure, _, _ in NOTEBOOKS.values()}
    if missing:
        print(f"export_notebooks.py: no notebook for plot.py's figure(s) {', '.join(sorted(missing))}: add them to "
              "NOTEBOOKS", file=sys.stderr)
        return 1
    sources = top_level_sources(os.path.join(ROOT, "analysis", "plot.py"))
    helper_names = {n for n in sources if not n.startswith("figure_") and n not in ("FIGURES", "experiment_figures", "main")}
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
