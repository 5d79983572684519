"""The draftlab results schema (docs/results-schema.md) as Python data.

Generated from core/results/results_schema.h and analysis/experiment_catalog.cpp (EXPERIMENTS) by
`draftlab schema --python --out analysis/results_schema.py`;
do not edit (the analysis.schema_files test fails while this file differs from what draftlab prints).
"""
import collections

Column = collections.namedtuple("Column", "type unit meaning")
Attribute = collections.namedtuple("Attribute", "type required default meaning")

SCHEMA = "draftlab-results/3"

ROOT_ATTRIBUTES = {
    "schema": Attribute("string", True, None,
              "the schema version (readers refuse any other value, naming the file and the value)"),
    "experiment": Attribute("string", True, None,
              "driver name: a driver of the experiment catalog (`draftlab exp --help`, analysis/experiment_catalog.cpp; `compare` for draftlab compare -o)"),
    "git_commit": Attribute("string", False, None,
              "`git describe --always --dirty` of the source tree the binary was built from (`unknown` if none)"),
    "command_line": Attribute("string", False, None,
              "the full command line"),
    "date": Attribute("string", False, None,
              "UTC start time, ISO 8601"),
    "host": Attribute("string", False, None,
              "host name"),
    "cpu": Attribute("string", False, None,
              "CPU model and the flags that matter (avx2, avx512f)"),
    "threads": Attribute("int64", True, None,
              "intra-op threads used"),
    "blas": Attribute("string", False, None,
              "BLAS library and core type (`blas_description()`), ending in a `[WARNING: ...]` when the environment presets an OPENBLAS_CORETYPE without AVX-512 kernels on an AVX-512 CPU"),
    "device": Attribute("string", False, None,
              "`cpu` / `cuda:0`"),
    "dtype": Attribute("string", False, None,
              "compute dtype (`float32`, ...)"),
    "forward": Attribute("string", False, None,
              "which forward ran: `native avx512 kernels, float16 weights` or `reference (libtorch), float32 on cpu` (`LlamaModel::path_description()`)"),
    "seed": Attribute("int64", True, None,
              "base seed of sampling"),
    "models": Attribute("string", False, None,
              "JSON object: role -> `{\"path\": ..., \"sha256\": ...}` (roles `target`, `head`, `draft`, ... as used); the checksum is of the weights file"),
    "shard": Attribute("string", False, None,
              "`i/n` for a shard of a sweep, `0/1` otherwise; a merged file records `merged:n`"),
    "settings": Attribute("string", False, None,
              "JSON object of the driver's settings (datasets, questions per set, max_new_tokens, warmup, repeats, temperatures, ...)"),
    "cost_model": Attribute("string", False, None,
              "the forward cost model the run was given (`exp --cost`: bench/forward_cost --out of this machine, model and settings, format draftlab-cost/1), its JSON text; `table` and `bounds` use it when given no --cost"),
}

RUN_ATTRIBUTES = {
    "method": Attribute("string", True, None,
              "label shown in tables and plots (`eagle2`, `eagle2 w/o value`, `EAGLE chain`, ...)"),
    "strategy": Attribute("string", True, None,
              "registry name of the strategy; a label for people: analysis never branches on it (see `draft_shape`)"),
    "draft_shape": Attribute("string", True, None,
              "what the strategy drafts, one of the draft shapes below; `none` marks the baseline every speedup divides by"),
    "options": Attribute("string", True, None,
              "JSON object of the strategy options as given (`{\"total_tokens\": \"60\", \"depth\": \"6\"}`)"),
    "dataset": Attribute("string", True, None,
              "`mt_bench`, `humaneval`, `gsm8k`, `alpaca`, `sum`, `qa`, or a file name"),
    "temperature": Attribute("float64", True, None,
              "0 = greedy"),
    "repeats": Attribute("int64", True, None,
              "timed repeats per question (times are medians over them)"),
    "warmup": Attribute("int64", True, None,
              "untimed warm-up runs"),
    "tokens_per_second": Attribute("float64", True, None,
              "derived for convenience: sum(new_tokens) / sum(wall_seconds)"),
    "tau": Attribute("float64", True, None,
              "derived for convenience: mean accept length of the cycles (bonus token included)"),
    "grid": Attribute("string", False, "",
              "sweeps only: JSON object of the grid point with its index in the whole grid (`{\"index\": 5, \"total_tokens\": 60, \"depth\": 6, \"top_k\": 10}`); shard `i/n` runs the points with index % n == i"),
    "shard": Attribute("string", False, "0/1",
              "the shard (process) that produced the run, `i/n`; `draftlab merge` keeps it, so a merged sweep still pairs each run with the baseline of the same dataset, temperature and shard"),
    "batch_size": Attribute("int64", False, 1,
              "sequences decoded together: consecutive questions in groups of this many, one target forward per cycle for the group; a turn's `wall_seconds` is its share of its batch's wall time, in proportion to its new tokens, so sums stay wall time and tokens per second throughput. Runs pair with the baseline of the same batch size"),
}

REQUIRED_RUN_ATTRIBUTES = ("method", "strategy", "draft_shape", "options", "dataset", "temperature", "repeats", "warmup", "tokens_per_second", "tau", )

# table -> column -> Column; the order is the order of the datasets in the file.
TABLES = {
    "questions": {
        "question_id": Column("int64", "",
                   "`question_id` of the bench JSONL (or the line number for plain prompt files)"),
        "category": Column("string", "",
                   "the JSONL `category` (empty when absent)"),
        "turn": Column("int32", "",
                   "0-based turn (MT-bench has two; later turns see earlier turns' answers in the prompt)"),
        "prompt_tokens": Column("int32", "tokens",
                   "prompt length after the chat template and any truncation"),
        "new_tokens": Column("int32", "tokens",
                   "tokens generated"),
        "wall_seconds": Column("float64", "s",
                   "median over `repeats` of the wall time of the whole generation (prefill included)"),
        "cycles": Column("int32", "cycles",
                   "draft/verify cycles of the last repeat (no drafting: one per token)"),
        "draft_seconds": Column("float64", "s",
                   "of the last repeat: time in the strategy"),
        "verify_seconds": Column("float64", "s",
                   "of the last repeat: time in the target forward + acceptance"),
        "cycle_offset": Column("int64", "row",
                   "index of this question's first row in `cycles/` (its rows are `[cycle_offset, +cycles)`)"),
        "identical": Column("int8", "",
                   "T = 0: 1 if the tokens equal the baseline's on this question, 0 if not; -1 when not checked (T > 0 or the baseline itself)"),
        "answer": Column("string", "",
                   "the decoded answer text, valid UTF-8 (a character cut by the token budget is U+FFFD); later turns see this text; used for the Spec-Bench JSONL"),
    },
    "cycles": {
        "question": Column("int32", "row",
                   "row index in `questions/`"),
        "accept_length": Column("int32", "tokens",
                   "tokens this cycle emitted (accepted draft nodes + 1)"),
        "drafted": Column("int32", "nodes",
                   "nodes in the draft tree"),
        "draft_seconds": Column("float64", "s",
                   "time in the strategy in this cycle"),
        "verify_seconds": Column("float64", "s",
                   "time in the target forward + acceptance in this cycle"),
        "experts_read": Column("int32", "experts",
                   "mixture-of-experts target: (layer, expert) pairs whose weights this cycle's verification forward read (decoding one token reads layers x experts per token); 0 for a dense target"),
        "node_offset": Column("int64", "row",
                   "index of this cycle's first row in `nodes/` (its rows are `[node_offset, +drafted)`)"),
    },
    "nodes": {
        "cycle": Column("int64", "row",
                   "row index in `cycles/`"),
        "depth": Column("int32", "",
                   "1 = child of the root"),
        "tree_index": Column("int32", "",
                   "flat index in the tree (1-based: the root is 0); for draft_shape `static_tree` the tree position (P1 = 1, ...)"),
        "parent": Column("int32", "",
                   "flat index of the parent (0 = root)"),
        "sibling_rank": Column("int32", "",
                   "0 = the parent's most probable child"),
        "confidence": Column("float32", "probability",
                   "the draft's probability of this token given its parent (EAGLE-2's confidence); NaN when the strategy has none"),
        "value": Column("float32", "probability",
                   "product of confidences along the path (EAGLE-2's value); NaN when none"),
        "accepted": Column("int8", "",
                   "1 = the verifier accepted this node"),
    },
    "oracle": {
        "question": Column("int32", "row",
                   "row index in `questions/`"),
        "position": Column("int32", "tokens",
                   "the cycle's root: index of the answer token it starts from (0 = the first new token)"),
        "matched": Column("int32", "nodes",
                   "draft tokens the verifier accepted from this position (before the one-token commit)"),
        "drafted": Column("int32", "nodes",
                   "nodes in the draft tree from this position"),
    },
}

# tables a run may lack (written only when they have rows)
OPTIONAL_TABLES = ("oracle", )

TABLE_MEANINGS = {
    "questions": "one row per question turn",
    "cycles": "one row per draft/verify cycle of the last repeat, questions concatenated in order",
    "nodes": "one row per drafted node of every cycle, in the tree's flat order: parents before children",
    "oracle": "runs with --oracle at T = 0 (the baseline has none): one more untimed generation per question turn that commits one token per cycle, so every position of the answer is a cycle start; one row per position, questions in order. `matched` is what a draft from that position would get accepted: the oracle draft length (the draft length an oracle would choose there)",
}

DRAFT_SHAPES = {
    "none": "no drafting (plain decoding): the baseline every speedup divides by",
    "chain": "one drafted path per cycle (a chain: EAGLE chain, a small draft model, prompt lookup)",
    "static_tree": "a tree of fixed shape, the same positions every cycle (tree_index = position)",
    "dynamic_tree": "a tree chosen anew every cycle (EAGLE-2)",
}
DRAFT_SHAPE_NONE = "none"
DRAFT_SHAPE_CHAIN = "chain"
DRAFT_SHAPE_STATIC_TREE = "static_tree"
DRAFT_SHAPE_DYNAMIC_TREE = "dynamic_tree"

# eval/<metric> datasets of training logs and /training/LABEL groups: name -> (single_value, meaning)
TRAINING_METRICS = {
    "accuracy": (True, "top-1 agreement of the head's next-token prediction with the target's on the validation windows (EAGLE and EAGLE-3 heads)"),
    "alpha": (False, "chain acceptance n-alpha on the validation windows, one column per n = 0, 1, ... (EAGLE heads: 0..4; EAGLE-3 heads: 0..7)"),
    "alpha_official": (False, "n-alpha as the official EAGLE code's getkacc counts it, one column per n = 0..4 (EAGLE heads): the fraction of start rows whose first n + 1 chain steps all agree, a start that failed earlier counting as a miss at every later n; starts and steps only where the window's token is the target's greedy choice (the head's own argmax is then the fed token)"),
    "head_accuracy": (False, "each parallel head's top-1 accuracy on the validation windows, one column per head (Medusa, Hydra)"),
}

# The experiment catalog (analysis/experiment_catalog.cpp), in the papers' order: name -> what it reproduces,
# its tables' heading, plot.py's figures, reproduce.sh's runs, and whether it is a `draftlab exp` driver (else a
# benchmark without a results file)
Experiment = collections.namedtuple("Experiment", "paper_item heading figures runs driver")
EXPERIMENTS = {
    "speed": Experiment("EAGLE-2 Table 1", "speedup and average acceptance length τ per dataset", ["speed"], ["speed"], True),
    "eagle3": Experiment("EAGLE-3 Table 1", "EAGLE-2 beside EAGLE-3 at the same tree settings: speedup and τ per dataset", ["speed"], ["eagle3"], True),
    "eagle3-alpha": Experiment("EAGLE-3 Figure 7", "acceptance rate n-α of 8-token chains, EAGLE-2 head vs EAGLE-3 head", ["n_alpha"], ["eagle3-alpha"], True),
    "data-scaling": Experiment("EAGLE-3 Figure 1", "speedup and τ of heads trained on more and more data", ["scaling"], ["data-scaling"], True),
    "alpha": Experiment("EAGLE Table 2", "average acceptance length τ and acceptance rate n-α", ["ablation"], ["alpha"], True),
    "calibration": Experiment("EAGLE-2 Figure 6", "acceptance rate per draft-confidence bin (width 0.05)", ["reliability"], ["calibration"], True),
    "positions": Experiment("EAGLE-2 Figure 5", "acceptance rate of static tree positions per question", ["positions"], ["positions"], True),
    "ablate-eagle2": Experiment("EAGLE-2 Table 3", "ablation of value and reranking", ["ablation"], ["ablate-eagle2"], True),
    "tree-vs-chain": Experiment("EAGLE Table 5", "τ with tree and chain drafts", ["ablation"], ["tree-vs-chain"], True),
    "sweep": Experiment("", "speedup and τ over the grid (best point in bold)", ["sweep"], ["sweep"], True),
    "ablate-inputs": Experiment("EAGLE Figure 8", "draft heads with different inputs", ["ablation"], ["ablate-inputs"], True),
    "train-data": Experiment("EAGLE Table 6", "speedup and τ by the head's training data", ["ablation"], ["train-data"], True),
    "ablate-eagle3": Experiment("EAGLE-3 Table 2", "EAGLE-2 head, TTT with the top-layer feature only, TTT + fusion", ["ablation"], ["ablate-eagle3"], True),
    "moe": Experiment("EAGLE Table 3", "speedup, τ, n-α and experts read per verification", ["ablation"], ["moe", "moe-dense"], True),
    "quantized": Experiment("EAGLE Table 4", "every method per weight storage beside llama.cpp's plain and speculative decoding on the same GGUF files", [], ["quantized"], False),
    "batch": Experiment("EAGLE Table 7", "speedup, τ and throughput per batch size", ["batch"], ["batch"], True),
    "drafters": Experiment("2026 drafters", "drafters of K tokens per forward beside EAGLE-2 / EAGLE-3: speedup and τ per dataset", ["speed", "profile"], ["drafters"], True),
    "compare": Experiment("", "speedup and average acceptance length τ of the methods compared", ["speed"], [], True),
}
