"""draftlab from Python: the C++ engine in this process (experiments/python/bindings.cpp), results as pandas.

    import draftlab
    df = draftlab.compare("data/models/ts-target", ["once upon a time"], ["eagle2"],
                          head="data/models/ts-target-eagle-head", n=48)
    print(df[["method", "tau", "tokens_per_second"]])

- `run("compare", "--help")`: any draftlab command, in-process, with the CLI's own options.
- `compare(...)`, `exp(NAME, ...)`: the commands of the same names; keyword arguments are their options
  (`questions=10` is `--questions 10`, `ignore_eos=True` is `--ignore-eos`, a list repeats the option); the
  results come back as a DataFrame with the schema's column names (docs/results-schema.md). Given a loaded
  `Model` (compare's `model`, exp's `model=`), they run on it: no reload, no results file unless `out` is given.
- `Model(path)`: encode, decode, generate with any strategy, the output's tokens, tau and per-cycle numbers.
- `register_strategy(name, factory)`: a drafter written in Python (a `Strategy` subclass), usable by name in
  generate, compare and exp like a C++ one; the C++ verifier checks every proposal (a malformed tree raises
  draftlab.Error naming the node) and keeps the output lossless.
"""
import atexit
import os
import sys
import tempfile

from . import _draftlab
from ._paths import SOURCE_DIR

Error = _draftlab.Error

sys.path.insert(0, os.path.join(SOURCE_DIR, "analysis"))  # the results reader, shared with `draftlab plot`
from plot import load_results  # noqa: E402

__all__ = ["Error", "Model", "Strategy", "Tree", "compare", "exp", "load_results", "register_strategy", "results",
           "run", "unregister_strategy"]


def _arguments(options):
    """Keyword arguments as command-line options: key=value -> --key value (underscores as dashes)."""
    args = []
    for key, value in options.items():
        flag = ("-" if len(key) == 1 else "--") + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, (list, tuple)):
            for v in value:
                args += [flag, str(v)]
        else:
            args += [flag, str(value)]
    return args


def run(*args):
    """Runs `draftlab ARGS...` in this process; raises Error on a non-zero exit code."""
    code = _draftlab.run([str(a) for a in args])
    if code != 0:
        raise Error(f"draftlab {' '.join(map(str, args))}: exit code {code}")


def results(path_or_loaded):
    """A results file (or load_results' dicts of one) as one DataFrame: a row per question turn of every run, the
    run's attributes beside it."""
    import pandas as pd

    loaded = load_results(path_or_loaded) if isinstance(path_or_loaded, (str, os.PathLike)) else path_or_loaded
    frames = []
    for run_ in loaded["runs"]:
        table = pd.DataFrame(run_["questions"])
        for key, value in run_.items():
            if key not in ("questions", "cycles", "nodes", "oracle") and key not in table.columns:
                table[key] = value
        frames.append(table)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _command_to_frame(command, args, out, model=None):
    """Runs compare / exp: on a loaded Model in this process (results handed over in memory, a file only at out),
    else as the command line would (loading --model, results read back from out or a temporary file)."""
    output = ["-o", str(out)] if out else []
    if isinstance(model, Model):
        return results(model._model.experiment([*command, *model._options(), *args, *output]))
    with tempfile.TemporaryDirectory() as tmp:
        path = str(out) if out else os.path.join(tmp, "results.h5")
        run(*command, *args, "-o", path)
        return results(path)


def compare(model, prompts, strategies, out=None, **options):
    """`draftlab compare` on these prompts and strategies (each "NAME" or "NAME:key=value,..."): a DataFrame.
    model: a loaded Model (run on it) or a model path."""
    args = _arguments({"prompt": list(prompts), "s": list(strategies)}) + _arguments(options)
    if isinstance(model, Model):
        return _command_to_frame(["compare"], args, out, model)
    return _command_to_frame(["compare"], ["--model", model] + args, out)


def exp(name, out=None, model=None, **options):
    """`draftlab exp NAME` with these options: its results as a DataFrame (the file kept at `out` when given).
    model: a loaded Model (run on it) or a model path (also m=PATH, the CLI's -m)."""
    if isinstance(model, Model):
        return _command_to_frame(["exp", name], _arguments(options), out, model)
    return _command_to_frame(["exp", name], _arguments(dict(options, model=model)), out)


class Model:
    """A target and its tokenizer (a Hugging Face folder, a .gguf, or a llama2.c .bin with tokenizer=)."""

    def __init__(self, path, tokenizer="", dtype="float32", cpu_path="auto", weights="auto", kv_cache="auto",
                 threads=0, quant_dot="float"):
        self._model = _draftlab.Model(path, tokenizer, dtype, cpu_path, weights, kv_cache, threads, quant_dot)
        self._loaded_with = dict(model=path, tokenizer=tokenizer, dtype=dtype, path=cpu_path, weights=weights,
                                 kv_cache=kv_cache, quant_dot=quant_dot)

    def _options(self):
        """The command-line options that name this model as it was loaded (compare / exp run on it)."""
        return _arguments({k: v for k, v in self._loaded_with.items() if v != ""})

    @property
    def vocab_size(self):
        return self._model.vocab_size

    def encode(self, text, chat_template="plain"):
        return self._model.encode(text, chat_template)

    def decode(self, ids):
        return self._model.decode(list(ids))

    def forward(self, prompt, feature_layers=()):
        """One forward of the prompt (text or ids): (logits [n, vocab], features [n, width]) as torch tensors
        sharing the engine's memory when torch is importable (python3-torch, the same libtorch), else NumPy arrays.
        features: the final normed hidden state, or the residual after each of feature_layers side by side."""
        ids = self.encode(prompt) if isinstance(prompt, str) else [int(i) for i in prompt]
        try:
            from torch.utils.dlpack import from_dlpack
        except ImportError:
            return self._model.forward(ids, list(feature_layers), False)
        return tuple(from_dlpack(c) for c in self._model.forward(ids, list(feature_layers), True))

    def generate(self, prompt, max_new_tokens=64, strategy="vanilla", temperature=0.0, top_k=0, top_p=1.0, seed=0,
                 stop_at_eos=True, **options):
        """Decodes prompt (text or token ids) with a strategy; strategy options as keywords (head=PATH, ...).

        Returns a dict: tokens, text, tau, cycles, stop_reason, timings, and per cycle drafted / accepted nodes
        and draft / verify seconds (NumPy arrays).
        """
        ids = self.encode(prompt) if isinstance(prompt, str) else list(prompt)
        return self._model.generate(ids, max_new_tokens, strategy, {k: str(v) for k, v in options.items()},
                                    temperature, top_k, top_p, seed, stop_at_eos)


class Tree:
    """A draft tree: node i has tokens[i] and parents[i] (-1: under the root, else an earlier node), optionally a
    confidence and q, the distribution over the vocabulary it was sampled from (None: chosen deterministically)."""

    def __init__(self):
        self.tokens, self.parents, self.confidences, self.q = [], [], [], []

    def add(self, token, parent=-1, confidence=1.0, q=None):
        self.tokens.append(int(token))
        self.parents.append(int(parent))
        self.confidences.append(float(confidence))
        self.q.append(q)
        return len(self.tokens) - 1

    def __len__(self):
        return len(self.tokens)


class Strategy:
    """Base class of Python drafters: override propose; begin and observe are optional.

    begin(prompt, first_token, features): a new sequence (prompt ids; first_token, the first root).
    propose(request) -> Tree or None: request["sequence"] (prompt and output so far; its last token is the root),
        request["max_nodes"], request["tokens_wanted"], request["temperature"].
    observe(result): result["accepted_nodes"] (indices into the tree) and result["tokens"] (accepted, then the
        verifier's own token, the next root), result["features"].
    With wants_features = True, features are the target's (torch tensors when torch is importable, else NumPy):
    of the prompt's tokens in begin, [prompt, width]; of the old root and each accepted node in observe (what an
    EAGLE head drafts from), else None. feature_layers = (l1, ...) asks for the residual after those layers side
    by side instead of the final normed hidden state.
    """

    wants_features = False
    feature_layers = None

    def begin(self, prompt, first_token, features=None):
        pass

    def propose(self, request):
        raise NotImplementedError

    def observe(self, result):
        pass


_registered = []


def register_strategy(name, factory, options=None, shape="chain", summary="", has_confidence=False):
    """Registers factory(options) -> Strategy under `name` for generate, compare and exp (options: a dict of
    option names to default values, given as strings to the factory; shape: chain, static_tree or dynamic_tree)."""
    _draftlab.register_strategy(name, factory, summary, shape, {k: str(v) for k, v in (options or {}).items()},
                                has_confidence)
    _registered.append(name)


def unregister_strategy(name):
    _draftlab.unregister_strategy(name)
    if name in _registered:
        _registered.remove(name)


@atexit.register
def _unregister_all():
    # The C++ registry holds the factories; drop them while the interpreter can still release them.
    for name in list(_registered):
        unregister_strategy(name)
