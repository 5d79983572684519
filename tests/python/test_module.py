"""The Python module (experiments/python) against independent truths: the CLI's own output and results files, the
C++ `pld`, vanilla decoding, and vanilla's sampled distribution (a two-sample chi-square); malformed proposals
raise draftlab.Error naming the node, and a strategy's own exception comes through as itself.

Run by ctest (python.module): PYTHONPATH=build/python DRAFTLAB_BIN=build/draftlab python3 -m pytest tests/python
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import draftlab
from draftlab._paths import SOURCE_DIR

sys.path.insert(0, os.path.join(SOURCE_DIR, "experiments", "python", "examples"))
import prompt_lookup  # noqa: E402

BIN = os.environ.get("DRAFTLAB_BIN", os.path.join(SOURCE_DIR, "build", "draftlab"))
TARGET = os.path.join(SOURCE_DIR, "data", "models", "ts-target")
TINY = os.path.join(SOURCE_DIR, "data", "models", "ts-tiny")
PROMPTS = ["once upon a time, there was a little dog named max",
           "lily and her mom went to the park. lily saw a big tree",
           "tom had a red ball. he liked to play with it every day"]


@pytest.fixture(scope="module")
def target():
    return draftlab.Model(TARGET, threads=1)


@pytest.fixture(scope="module")
def tiny():
    return draftlab.Model(TINY, threads=1)


@pytest.fixture(scope="module", autouse=True)
def py_pld():
    draftlab.register_strategy("py_pld", prompt_lookup.PromptLookup, prompt_lookup.OPTIONS)
    yield
    draftlab.unregister_strategy("py_pld")


def registered(name, strategy, **kwargs):
    """Registers a ready strategy object under name (replacing an earlier one)."""
    draftlab.unregister_strategy(name)
    draftlab.register_strategy(name, lambda options: strategy, **kwargs)
    return name


def test_generate_gives_the_cli_tokens(tiny):
    out = subprocess.run([BIN, "generate", "-m", TINY, "-p", "once upon a time", "-n", "40", "--print-ids",
                          "--threads", "1"], capture_output=True, text=True, check=True).stdout
    line = next(line for line in out.splitlines() if line.startswith("generated_ids"))
    assert tiny.generate("once upon a time", 40)["tokens"] == [int(x) for x in line.split()[1:]]


def test_python_pld_equals_the_cpp_pld_and_vanilla(target):
    taus = []
    for prompt in PROMPTS:
        for temperature, seed in ((0.0, 0), (1.0, 3), (0.7, 11)):
            cpp = target.generate(prompt, 64, "pld", temperature=temperature, seed=seed)
            py = target.generate(prompt, 64, "py_pld", temperature=temperature, seed=seed)
            # Point-mass drafts and the same random stream: the very same run, cycle by cycle.
            assert py["tokens"] == cpp["tokens"]
            assert list(py["drafted"]) == list(cpp["drafted"]) and list(py["accepted"]) == list(cpp["accepted"])
            assert py["tau"] == cpp["tau"]
            taus.append(py["tau"])
        assert target.generate(prompt, 64, "py_pld")["tokens"] == target.generate(prompt, 64)["tokens"]
    assert max(taus) > 1.2, "the Python drafter never had a draft accepted: the test would show nothing"


def test_options_reach_the_factory(target):
    short = target.generate(PROMPTS[0], 64, "py_pld", num_tokens=1)
    assert max(short["drafted"]) == 1
    assert short["tokens"] == target.generate(PROMPTS[0], 64, "pld", num_tokens=1)["tokens"]


class SampledSiblings(draftlab.Strategy):
    """Two children of the root drawn independently from a fixed q over the vocabulary (its own generator), each
    with a sampled child: the verifier's multi-round residuals at T > 0 with drafts from a declared q.
    honest=False declares q but always drafts q's most likely token: the planted error the test must see (drafts
    not drawn from the q they declare bias the output; undeclared ones never do, they verify as point masses)."""

    def __init__(self, q, seed, honest=True):
        self.q, self.rng, self.honest = q, np.random.default_rng(seed), honest

    def draw(self):
        return self.rng.choice(len(self.q), p=self.q) if self.honest else int(np.argmax(self.q))

    def propose(self, request):
        tree = draftlab.Tree()
        for _ in range(2):
            parent = tree.add(self.draw(), -1, q=self.q)
            tree.add(self.draw(), parent, q=self.q)
        return tree


def two_sample_chi_square(a, b):
    """Statistic and dof of two equal-size samples' counts, outcomes pooled to expected counts >= 5."""
    rows, rest = [], np.zeros(2)
    for k in np.argsort(-(a + b)):
        if (a[k] + b[k]) / 2 >= 5:
            rows.append((a[k], b[k]))
        else:
            rest += (a[k], b[k])
    rows.append(tuple(rest))
    table = np.array(rows, dtype=float)
    expected = table.sum(1, keepdims=True) / 2
    return ((table - expected) ** 2 / np.maximum(expected, 1e-12)).sum(), len(rows) - 1


def test_a_sampling_python_strategy_keeps_the_target_distribution(tiny):
    """Second generated token (the first one a verification decides) over 3000 seeds, against vanilla's over 3000
    other seeds: a two-sample chi-square over the outcomes pooled to expected counts >= 5, false alarm 1e-4."""
    from scipy.stats import chi2

    prompt, n = "once upon a time", 3000
    vanilla = [tiny.generate(prompt, 2, temperature=1.0, seed=10**6 + s, stop_at_eos=False)["tokens"][1]
               for s in range(n)]
    counts = np.bincount(vanilla, minlength=tiny.vocab_size)
    q = np.full(tiny.vocab_size, 0.2 / tiny.vocab_size)
    q[np.argsort(counts)[-4:]] += 0.2  # most of q on four likely tokens: some drafts accepted, some rejected
    q = (q / q.sum()).astype(np.float32)

    def second_tokens(honest):
        name = registered("py_sampled", SampledSiblings(q, 5, honest), shape="dynamic_tree")
        runs = [tiny.generate(prompt, 2, name, temperature=1.0, seed=s, stop_at_eos=False) for s in range(n)]
        accepted = sum(int(r["accepted"][0]) for r in runs if len(r["accepted"]))
        return np.bincount([r["tokens"][1] for r in runs], minlength=tiny.vocab_size), accepted

    a = np.bincount(vanilla, minlength=tiny.vocab_size)
    b, accepted = second_tokens(True)
    assert 0.1 * n < accepted < 0.9 * n, f"{accepted} of {n} first drafts accepted: no power either way"
    statistic, dof = two_sample_chi_square(a, b)
    bound = chi2.ppf(1 - 1e-4, dof)
    planted, planted_dof = two_sample_chi_square(a, second_tokens(False)[0])
    print(f"chi-square {statistic:.1f} on {dof} dof, bound {bound:.1f}; {accepted} accepted; "
          f"drafts not drawn from their q: {planted:.1f} on {planted_dof} dof")
    assert statistic < bound
    assert planted > chi2.ppf(1 - 1e-4, planted_dof), "drafts unlike their declared q went unnoticed: no power"


class Returns(draftlab.Strategy):
    def __init__(self, value):
        self.value = value

    def propose(self, request):
        return self.value(request) if callable(self.value) else self.value


def tree(tokens, parents, q=None):
    t = draftlab.Tree()
    t.tokens, t.parents, t.confidences, t.q = tokens, parents, [1.0] * len(tokens), q or [None] * len(tokens)
    return t


@pytest.mark.parametrize("proposal, message", [
    (tree([5, 6], [-1, 3]), "node 1: parent 3: expected -1 (the root) or an earlier node (0..0)"),
    (tree([5, 4096], [-1, 0]), "node 1: token 4096: expected 0..4095"),
    (tree([5, 6], [-1]), "parents has 1 entries, tokens 2"),
    (tree([5], [-1], [np.full(4096, 2 / 4096, dtype=np.float32)]), "node 0: q: expected non-negative probabilities summing to 1"),
    (tree([5], [-1], [np.eye(4096, dtype=np.float32)[6]]), "node 0: q gives the node's token 5 no mass"),
    (tree([5], [-1], [np.ones(7, dtype=np.float32) / 7]), "node 0: q: expected a vector of 4096 probabilities"),
    (lambda r: tree([5] * (r["max_nodes"] + 1), list(range(-1, r["max_nodes"]))), "expected at most request['max_nodes']"),
    (42, "expected None or an object with tokens and parents"),
])
def test_malformed_proposals_raise_naming_the_node(target, proposal, message):
    name = registered("py_bad", Returns(proposal))
    with pytest.raises(draftlab.Error, match=re.escape(message)):
        target.generate(PROMPTS[0], 8, name)


def test_a_strategy_exception_comes_through_as_itself(target):
    name = registered("py_raises", Returns(lambda r: 1 / 0))
    with pytest.raises(ZeroDivisionError):
        target.generate(PROMPTS[0], 8, name)
    assert target.generate(PROMPTS[0], 8)["tokens"]  # the model is still usable


def test_bad_names_and_options_raise(target):
    with pytest.raises(draftlab.Error, match="the name 'pld' is taken"):
        draftlab.register_strategy("pld", prompt_lookup.PromptLookup)
    with pytest.raises(draftlab.Error, match="expected one of"):
        target.generate(PROMPTS[0], 8, "no_such_strategy")
    with pytest.raises(draftlab.Error, match="max_ngram"):
        target.generate(PROMPTS[0], 8, "pld", max_ngram=0)
    with pytest.raises(draftlab.Error, match="the prompt has no tokens"):
        target.generate([], 8)


def test_compare_in_process_equals_the_cli_results_file(tmp_path):
    """draftlab.compare (in-process, a Python strategy among the C++ ones) against `draftlab compare -o` run as
    a separate process: the same tokens, cycles and tau per method and prompt; timings differ."""
    args = dict(n=32, threads=1, repeats=1, warmup=0)
    df = draftlab.compare(TARGET, PROMPTS[:2], ["pld", "py_pld"], **args)
    cli = str(tmp_path / "cli.h5")
    subprocess.run([BIN, "compare", "--model", TARGET, "--prompt", PROMPTS[0], "--prompt", PROMPTS[1], "-s", "pld",
                    "-n", "32", "--threads", "1", "--repeats", "1", "--warmup", "0", "-o", cli],
                   check=True, capture_output=True)
    want = draftlab.results(cli)
    for method in ("vanilla", "pld"):
        ours, theirs = df[df["method"] == method], want[want["method"] == method]
        assert len(ours) == len(theirs) == 2
        for column in ("new_tokens", "cycles", "answer", "identical"):
            assert list(ours[column]) == list(theirs[column]), (method, column)
        assert np.allclose(ours["tau"], theirs["tau"])
    py, cpp = df[df["method"] == "py_pld"], df[df["method"] == "pld"]
    assert list(py["answer"]) == list(cpp["answer"]) and list(py["cycles"]) == list(cpp["cycles"])
    assert list(py["identical"]) == [1, 1]


def assert_same_results(memory, file):
    """Two results in load_results' form hold the same attributes, runs, columns and training curves."""
    assert memory["attrs"] == file["attrs"]
    assert len(memory["runs"]) == len(file["runs"])
    for ours, theirs in zip(memory["runs"], file["runs"]):
        assert ours.keys() == theirs.keys()
        for key, value in theirs.items():
            if isinstance(value, dict):  # a table: its columns
                assert ours[key].keys() == value.keys(), key
                for column, values in value.items():
                    assert ours[key][column].dtype.kind == values.dtype.kind, (key, column)
                    assert np.array_equal(ours[key][column], values, equal_nan=values.dtype.kind == "f"), (key, column)
            else:
                assert ours[key] == value, key
    assert memory["training"].keys() == file["training"].keys()
    for label, curves in file["training"].items():
        assert memory["training"][label].keys() == curves.keys(), label
        for key, values in curves.items():
            if key == "attrs":
                assert memory["training"][label][key] == values
            else:
                assert np.array_equal(memory["training"][label][key], values), (label, key)


def test_an_experiment_on_a_loaded_model_hands_back_what_its_file_holds(target, tmp_path):
    """Model.experiment (compare / exp on the loaded model, no reload): the results in memory equal, attribute for
    attribute and column for column, the file the same run writes as h5py reads it back; the head's training
    curves too. Without out, draftlab.compare on the Model writes no file and gives the path form's tokens."""
    common = ["-n", "16", "--threads", "1", "--repeats", "1", "--warmup", "0", "--quiet"]
    out = str(tmp_path / "compare.h5")
    memory = target._model.experiment(["compare", *target._options(), "--prompt", PROMPTS[0], "-s", "pld",
                                       *common, "-o", out])
    assert_same_results(memory, draftlab.load_results(out))

    head = os.path.join(SOURCE_DIR, "data", "models", "ts-target-eagle-head")
    out = str(tmp_path / "compare-head.h5")
    memory = target._model.experiment(["compare", *target._options(), "--prompt", PROMPTS[1], "-s", "eagle2",
                                       "--head", head, *common, "-o", out])
    file = draftlab.load_results(out)
    assert_same_results(memory, file)

    os.remove(out)
    os.remove(str(tmp_path / "compare.h5"))
    args = dict(n=16, threads=1, repeats=1, warmup=0, quiet=True)
    on_model = draftlab.compare(target, PROMPTS[:2], ["pld"], **args)
    assert os.listdir(tmp_path) == []
    from_path = draftlab.compare(TARGET, PROMPTS[:2], ["pld"], **args)
    for column in ("method", "new_tokens", "cycles", "answer", "identical", "tau"):
        assert list(on_model[column]) == list(from_path[column]), column
    with pytest.raises(draftlab.Error, match="option min_ngram"):  # the command's own refusal
        draftlab.compare(target, PROMPTS[:1], ["pld:min_ngram=x"], **args)
    # Options naming another model than the loaded one are refused, naming the flag.
    with pytest.raises(draftlab.Error, match="--model: expected '.*ts-target', as the loaded model was"):
        target._model.experiment(["compare", "--model", TINY, "--prompt", PROMPTS[0], *common])
    with pytest.raises(draftlab.Error, match="--dtype: expected 'float32', as the loaded model was, got 'bfloat16'"):
        target._model.experiment(["compare", "--model", TARGET, "--path", "auto", "--dtype", "bfloat16", "--prompt",
                                  PROMPTS[0], *common])


@pytest.mark.parametrize("name", ["strategy_in_python", "experiment_from_python"])
def test_the_python_notebooks_run_end_to_end(tmp_path, name):
    """notebooks_export/python/*.ipynb executed top to bottom through the module (a Python strategy tabled beside
    eagle2 with outputs identical to vanilla asserted inside; an exp driver and plot.py's figure): no error, a
    figure drawn."""
    import json
    import shutil

    if shutil.which("jupyter-nbconvert") is None:
        pytest.skip("jupyter-nbconvert missing (apt install jupyter-nbconvert python3-ipykernel)")
    shared = os.environ.get("DRAFTLAB_SHARED", os.path.join(SOURCE_DIR, "..", "shared"))
    if name == "experiment_from_python" and not os.path.isdir(os.path.join(shared, "data", "bench")):
        pytest.skip(f"no bench questions under {shared} (set DRAFTLAB_SHARED)")
    notebook = os.path.join(SOURCE_DIR, "notebooks_export", "python", name + ".ipynb")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), PYDEVD_DISABLE_FILE_VALIDATION="1",
               DRAFTLAB_SHARED=os.path.abspath(shared))
    subprocess.run(["jupyter-nbconvert", "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=300",
                    "--output-dir", str(tmp_path), notebook], check=True, capture_output=True, env=env)
    cells = json.load(open(tmp_path / (name + ".ipynb")))["cells"]
    outputs = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert [o for o in outputs if "image/png" in o.get("data", {})]


def test_forward_gives_logits_and_features_as_torch_tensors(target):
    torch = pytest.importorskip("torch")
    ids = target.encode(PROMPTS[0])
    logits, features = target.forward(ids)
    assert isinstance(logits, torch.Tensor) and tuple(logits.shape) == (len(ids), target.vocab_size)
    assert tuple(features.shape) == (len(ids), 256)  # ts-target's hidden size
    # The last row's argmax is greedy decoding's first token; the NumPy form holds the same values.
    assert int(logits[-1].argmax()) == target.generate(ids, 1, stop_at_eos=False)["tokens"][0]
    np_logits, np_features = target._model.forward(ids, [], False)
    assert np.array_equal(np_logits, logits.numpy()) and np.array_equal(np_features, features.numpy())
    _, layers = target.forward(ids, feature_layers=(1, 7))
    assert tuple(layers.shape) == (len(ids), 2 * 256)
    with pytest.raises(draftlab.Error, match="token 4096"):
        target.forward([0, 4096])


def test_exp_runs_a_driver_with_the_cli_options(tmp_path):
    shared = os.environ.get("DRAFTLAB_SHARED", os.path.join(SOURCE_DIR, "..", "shared"))
    if not os.path.isfile(os.path.join(shared, "data", "bench", "mt_bench", "question.jsonl")):
        pytest.skip(f"no bench questions under {shared} (set DRAFTLAB_SHARED)")
    os.environ["DRAFTLAB_SHARED"] = shared
    out = str(tmp_path / "alpha.h5")
    head = os.path.join(SOURCE_DIR, "data", "models", "ts-tiny-eagle-head")
    df = draftlab.exp("alpha", m=TINY, head=head, questions=2, n=16, ignore_eos=True, threads=1, repeats=1,
                      warmup=0, out=out)
    assert os.path.isfile(out)
    assert set(df["method"]) == {"vanilla", "eagle-chain"} and len(df) == 2 * 4  # 2 MT-bench questions, 2 turns
    assert (df[df["method"] == "eagle-chain"]["identical"] == 1).all()
    assert df[df["method"] == "eagle-chain"]["tau"].iloc[0] > 1
    # The same driver on a loaded Model: the same tokens, no file.
    on_model = draftlab.exp("alpha", model=draftlab.Model(TINY, threads=1), head=head, questions=2, n=16,
                            ignore_eos=True, threads=1, repeats=1, warmup=0)
    for column in ("method", "new_tokens", "cycles", "answer", "tau"):
        assert list(on_model[column]) == list(df[column]), column
    with pytest.raises(draftlab.Error, match="--temperatures"):  # the CLI's own message for its own option
        draftlab.exp("alpha", m=TINY, temperatures="hot")


class FeatureRecorder(draftlab.Strategy):
    """Drafts nothing and keeps the features it is handed."""
    wants_features = True

    def __init__(self, layers=None):
        self.feature_layers, self.prompt, self.seen = layers, None, []

    def begin(self, prompt, first_token, features=None):
        self.prompt = (list(prompt), features)

    def propose(self, request):
        return None

    def observe(self, result):
        self.seen.append(result["features"])


@pytest.mark.parametrize("layers, width", [(None, 256), ((2, 5), 512)])
def test_a_strategy_gets_the_target_features(target, layers, width):
    """The features handed to begin and observe are the target's own: equal (to float rounding across forward
    shapes) to one plain forward of the same tokens."""
    recorder = FeatureRecorder(layers)
    name = registered("py_features", recorder)
    out = target.generate(PROMPTS[1], 6, name, stop_at_eos=False)
    prompt, features = recorder.prompt
    assert tuple(features.shape) == (len(prompt), width)
    sequence = prompt + out["tokens"]
    _, plain = target.forward(sequence, feature_layers=layers or ())
    assert np.allclose(features.numpy(), plain[:len(prompt)].numpy(), atol=1e-4)
    for cycle, f in enumerate(recorder.seen):  # no drafts: each cycle's features are its root's, one row
        assert tuple(f.shape) == (1, width)
        assert np.allclose(f.numpy()[0], plain[len(prompt) + cycle].numpy(), atol=1e-4)


def test_models_load_from_gguf_and_llama2c(tmp_path, tiny):
    """Model takes what the CLI takes: a GGUF file (exported here through draftlab.run) decodes as its source
    folder does, and a llama2.c checkpoint with its tokenizer as `draftlab generate` does."""
    gguf = str(tmp_path / "ts-tiny.gguf")
    draftlab.run("export-gguf", "--model", TINY, "--out", gguf)
    assert draftlab.Model(gguf, threads=1).generate("once upon a time", 24)["tokens"] == \
        tiny.generate("once upon a time", 24)["tokens"]
    shared = os.environ.get("DRAFTLAB_SHARED", os.path.join(SOURCE_DIR, "..", "shared"))
    checkpoint = os.path.join(shared, "models", "aidreams260K", "aidreams260K.bin")
    if not os.path.isfile(checkpoint):
        pytest.skip(f"no llama2.c checkpoint under {shared}")
    tokenizer = os.path.join(shared, "models", "aidreams260K", "tok512.bin")
    out = subprocess.run([BIN, "generate", "-m", checkpoint, "--tokenizer", tokenizer, "-p", "once upon a time",
                          "-n", "24", "--print-ids", "--threads", "1"], capture_output=True, text=True, check=True)
    line = next(line for line in out.stdout.splitlines() if line.startswith("generated_ids"))
    model = draftlab.Model(checkpoint, tokenizer=tokenizer, threads=1)
    assert model.generate("once upon a time", 24)["tokens"] == [int(x) for x in line.split()[1:]]
