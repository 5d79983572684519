// The results schema (docs/results-schema.md), declared once: every table column, run attribute and root
// attribute of a results file, with its type and meaning. Everything else is generated from these lists:
//   - the members of QuestionRows / CycleRows / NodeRows / RunRecord / ResultsFile (results_file.h),
//   - the writer, the reader and the column-length checks (results_file.cpp),
//   - `draftlab schema`: the tables of docs/results-schema.md and analysis/results_schema.py (schema_text.h).
// Adding a column is one line here (then `draftlab schema` regenerates the two committed files).
//
// The lists are X-macros: each takes the name of a macro and calls it once per entry, in file order.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace draftlab {

// Readers refuse any other value; bump it when a file of the old layout cannot be read as the new one.
// 2: run attribute draft_shape (required).
inline constexpr const char* kResultsSchema = "draftlab-results/3";

// Root attributes. S(name, presence, meaning): a string, kept by name in ResultsFile::attributes.
// I(name, default, presence, meaning): an int64, a member of ResultsFile of that name.
#define DRAFTLAB_ROOT_ATTRIBUTES(S, I)                                                                                  \
  S(schema, required, "the schema version (readers refuse any other value, naming the file and the value)")         \
  S(experiment, required,                                                                                           \
    "driver name: a driver of the experiment catalog (`draftlab exp --help`, analysis/experiment_catalog.cpp; "     \
    "`compare` for draftlab compare -o)")                                                                           \
  S(git_commit, optional,                                                                                           \
    "`git describe --always --dirty` of the source tree the binary was built from (`unknown` if none)")             \
  S(command_line, optional, "the full command line")                                                                \
  S(date, optional, "UTC start time, ISO 8601")                                                                     \
  S(host, optional, "host name")                                                                                    \
  S(cpu, optional, "CPU model and the flags that matter (avx2, avx512f)")                                           \
  I(threads, 1, required, "intra-op threads used")                                                                  \
  S(blas, optional,                                                                                                 \
    "BLAS library and core type (`blas_description()`), ending in a `[WARNING: ...]` when the environment "         \
    "presets an OPENBLAS_CORETYPE without AVX-512 kernels on an AVX-512 CPU")                                       \
  S(device, optional, "`cpu` / `cuda:0`")                                                                           \
  S(dtype, optional, "compute dtype (`float32`, ...)")                                                              \
  S(forward, optional,                                                                                              \
    "which forward ran: `native avx512 kernels, float16 weights` or `reference (libtorch), float32 on cpu` "        \
    "(`LlamaModel::path_description()`)")                                                                           \
  I(seed, 0, required, "base seed of sampling")                                                                     \
  S(models, optional,                                                                                               \
    "JSON object: role -> `{\"path\": ..., \"sha256\": ...}` (roles `target`, `head`, `draft`, ... as used); the "  \
    "checksum is of the weights file")                                                                              \
  S(shard, optional, "`i/n` for a shard of a sweep, `0/1` otherwise; a merged file records `merged:n`")             \
  S(settings, optional,                                                                                             \
    "JSON object of the driver's settings (datasets, questions per set, max_new_tokens, warmup, repeats, "          \
    "temperatures, ...)")                                                                                           \
  S(cost_model, optional,                                                                                           \
    "the forward cost model the run was given (`exp --cost`: bench/forward_cost --out of this machine, model and "  \
    "settings, format draftlab-cost/1), its JSON text; `table` and `bounds` use it when given no --cost")

// Attributes of a /runs/NNNN group. X(field, name, type, default, presence, meaning): RunRecord::field is
// written as the attribute `name`. A required attribute is always written and must be present to read; a
// string one must also be non-empty. An optional one is omitted when it is an empty string, and a reader takes
// the default when it is absent.
#define DRAFTLAB_RUN_ATTRIBUTES(X)                                                                                      \
  X(method, "method", std::string, "", required,                                                                    \
    "label shown in tables and plots (`eagle2`, `eagle2 w/o value`, `EAGLE chain`, ...)")                           \
  X(strategy, "strategy", std::string, "", required,                                                                \
    "registry name of the strategy; a label for people: analysis never branches on it (see `draft_shape`)")         \
  X(draft_shape, "draft_shape", std::string, "", required,                                                          \
    "what the strategy drafts, one of the draft shapes below; `none` marks the baseline every speedup divides by")  \
  X(options_json, "options", std::string, "{}", required,                                                           \
    "JSON object of the strategy options as given (`{\"total_tokens\": \"60\", \"depth\": \"6\"}`)")                \
  X(dataset, "dataset", std::string, "", required,                                                                  \
    "`mt_bench`, `humaneval`, `gsm8k`, `alpaca`, `sum`, `qa`, or a file name")                                      \
  X(temperature, "temperature", double, 0.0, required, "0 = greedy")                                                \
  X(repeats, "repeats", int64_t, 1, required, "timed repeats per question (times are medians over them)")           \
  X(warmup, "warmup", int64_t, 0, required, "untimed warm-up runs")                                                 \
  X(tokens_per_second, "tokens_per_second", double, 0.0, required,                                                  \
    "derived for convenience: sum(new_tokens) / sum(wall_seconds)")                                                 \
  X(tau, "tau", double, 0.0, required,                                                                              \
    "derived for convenience: mean accept length of the cycles (bonus token included)")                             \
  X(grid_json, "grid", std::string, "", optional,                                                                   \
    "sweeps only: JSON object of the grid point with its index in the whole grid "                                  \
    "(`{\"index\": 5, \"total_tokens\": 60, \"depth\": 6, \"top_k\": 10}`); shard `i/n` runs the points with "      \
    "index % n == i")                                                                                               \
  X(shard, "shard", std::string, "0/1", optional,                                                                   \
    "the shard (process) that produced the run, `i/n`; `draftlab merge` keeps it, so a merged sweep still pairs "   \
    "each run with the baseline of the same dataset, temperature and shard")                                        \
  X(batch_size, "batch_size", int64_t, 1, optional,                                                                 \
    "sequences decoded together: consecutive questions in groups of this many, one target forward per cycle for "   \
    "the group; a turn's `wall_seconds` is its share of its batch's wall time, in proportion to its new tokens, so " \
    "sums stay wall time and tokens per second throughput. Runs pair with the baseline of the same batch size")

// Values of the run attribute draft_shape. X(value, meaning); draft_shapes::value is the string "value".
#define DRAFTLAB_DRAFT_SHAPES(X)                                                                                        \
  X(none, "no drafting (plain decoding): the baseline every speedup divides by")                                    \
  X(chain, "one drafted path per cycle (a chain: EAGLE chain, a small draft model, prompt lookup)")                 \
  X(static_tree, "a tree of fixed shape, the same positions every cycle (tree_index = position)")                   \
  X(dynamic_tree, "a tree chosen anew every cycle (EAGLE-2)")

// The tables of a run. T(member, Rows, COLUMNS, presence, meaning): RunRecord::member of type Rows is the group
// `member`, its columns listed by the macro COLUMNS. A required table is always written and must be present to
// read; an optional one is written only when it has rows, and a reader takes it as empty when it is absent (files
// written before it existed stay readable).
#define DRAFTLAB_RUN_TABLES(T)                                                                                          \
  T(questions, QuestionRows, DRAFTLAB_QUESTION_COLUMNS, required, "one row per question turn")                      \
  T(cycles, CycleRows, DRAFTLAB_CYCLE_COLUMNS, required,                                                            \
    "one row per draft/verify cycle of the last repeat, questions concatenated in order")                           \
  T(nodes, NodeRows, DRAFTLAB_NODE_COLUMNS, required,                                                               \
    "one row per drafted node of every cycle, in the tree's flat order: parents before children")                   \
  T(oracle, OracleRows, DRAFTLAB_ORACLE_COLUMNS, optional,                                                          \
    "runs with --oracle at T = 0 (the baseline has none): one more untimed generation per question turn that "      \
    "commits one token per cycle, so every position of the answer is a cycle start; one row per position, "         \
    "questions in order. `matched` is what a draft from that position would get accepted: the oracle draft "       \
    "length (the draft length an oracle would choose there)")

// Columns: X(name, type, unit, meaning). All 1-D, one row per entry; the first column's length is the table's.
#define DRAFTLAB_QUESTION_COLUMNS(X)                                                                                    \
  X(question_id, int64_t, "", "`question_id` of the bench JSONL (or the line number for plain prompt files)")       \
  X(category, std::string, "", "the JSONL `category` (empty when absent)")                                          \
  X(turn, int32_t, "", "0-based turn (MT-bench has two; later turns see earlier turns' answers in the prompt)")     \
  X(prompt_tokens, int32_t, "tokens", "prompt length after the chat template and any truncation")                   \
  X(new_tokens, int32_t, "tokens", "tokens generated")                                                              \
  X(wall_seconds, double, "s", "median over `repeats` of the wall time of the whole generation (prefill included)") \
  X(cycles, int32_t, "cycles", "draft/verify cycles of the last repeat (no drafting: one per token)")               \
  X(draft_seconds, double, "s", "of the last repeat: time in the strategy")                                         \
  X(verify_seconds, double, "s", "of the last repeat: time in the target forward + acceptance")                     \
  X(cycle_offset, int64_t, "row",                                                                                   \
    "index of this question's first row in `cycles/` (its rows are `[cycle_offset, +cycles)`)")                     \
  X(identical, int8_t, "",                                                                                          \
    "T = 0: 1 if the tokens equal the baseline's on this question, 0 if not; -1 when not checked (T > 0 or the "    \
    "baseline itself)")                                                                                             \
  X(answer, std::string, "",                                                                                        \
    "the decoded answer text, valid UTF-8 (a character cut by the token budget is U+FFFD); later turns see this "   \
    "text; used for the Spec-Bench JSONL")

#define DRAFTLAB_CYCLE_COLUMNS(X)                                                                                       \
  X(question, int32_t, "row", "row index in `questions/`")                                                          \
  X(accept_length, int32_t, "tokens", "tokens this cycle emitted (accepted draft nodes + 1)")                       \
  X(drafted, int32_t, "nodes", "nodes in the draft tree")                                                           \
  X(draft_seconds, double, "s", "time in the strategy in this cycle")                                               \
  X(verify_seconds, double, "s", "time in the target forward + acceptance in this cycle")                           \
  X(experts_read, int32_t, "experts",                                                                               \
    "mixture-of-experts target: (layer, expert) pairs whose weights this cycle's verification forward read "        \
    "(decoding one token reads layers x experts per token); 0 for a dense target")                                 \
  X(node_offset, int64_t, "row", "index of this cycle's first row in `nodes/` (its rows are `[node_offset, +drafted)`)")

#define DRAFTLAB_NODE_COLUMNS(X)                                                                                        \
  X(cycle, int64_t, "row", "row index in `cycles/`")                                                                \
  X(depth, int32_t, "", "1 = child of the root")                                                                    \
  X(tree_index, int32_t, "",                                                                                        \
    "flat index in the tree (1-based: the root is 0); for draft_shape `static_tree` the tree position (P1 = 1, ...)") \
  X(parent, int32_t, "", "flat index of the parent (0 = root)")                                                     \
  X(sibling_rank, int32_t, "", "0 = the parent's most probable child")                                              \
  X(confidence, float, "probability",                                                                               \
    "the draft's probability of this token given its parent (EAGLE-2's confidence); NaN when the strategy has none") \
  X(value, float, "probability", "product of confidences along the path (EAGLE-2's value); NaN when none")          \
  X(accepted, int8_t, "", "1 = the verifier accepted this node")

#define DRAFTLAB_ORACLE_COLUMNS(X)                                                                                      \
  X(question, int32_t, "row", "row index in `questions/`")                                                          \
  X(position, int32_t, "tokens",                                                                                    \
    "the cycle's root: index of the answer token it starts from (0 = the first new token)")                         \
  X(matched, int32_t, "nodes", "draft tokens the verifier accepted from this position (before the one-token commit)") \
  X(drafted, int32_t, "nodes", "nodes in the draft tree from this position")

enum class Presence { required, optional };

// draft_shapes::none == "none", ...: the values of RunRecord::draft_shape, for code that branches on them.
namespace draft_shapes {
#define DRAFTLAB_DRAFT_SHAPE_CONSTANT(value, meaning) inline constexpr const char value[] = #value;
DRAFTLAB_DRAFT_SHAPES(DRAFTLAB_DRAFT_SHAPE_CONSTANT)
#undef DRAFTLAB_DRAFT_SHAPE_CONSTANT
}  // namespace draft_shapes

// The name of a column or attribute type as the docs, the Python module and error messages write it.
template <typename T>
constexpr const char* schema_type_name() {
  if constexpr (std::is_same_v<T, std::string>) return "string";
  else if constexpr (std::is_same_v<T, int8_t>) return "int8";
  else if constexpr (std::is_same_v<T, int32_t>) return "int32";
  else if constexpr (std::is_same_v<T, int64_t>) return "int64";
  else if constexpr (std::is_same_v<T, float>) return "float32";
  else if constexpr (std::is_same_v<T, double>) return "float64";
  else static_assert(!sizeof(T), "not a type of the results schema");
}

// The lists as data, for the generators and tests.
struct ColumnSpec {
  std::string name, type, unit, meaning;
};
struct TableSpec {
  std::string name, meaning;
  std::vector<ColumnSpec> columns;
  Presence presence;
};
struct AttributeSpec {
  std::string name, type, default_value;  // default_value: only for optional run attributes ("" otherwise)
  Presence presence;
  std::string meaning;
};
struct DraftShapeSpec {
  std::string value, meaning;
};

std::vector<AttributeSpec> root_attribute_specs();
std::vector<AttributeSpec> run_attribute_specs();
std::vector<TableSpec> run_table_specs();
// The presence of the run table `name` (one of DRAFTLAB_RUN_TABLES).
Presence run_table_presence(const std::string& name);
std::vector<DraftShapeSpec> draft_shape_specs();

// True when `value` is one of DRAFTLAB_DRAFT_SHAPES.
bool is_draft_shape(const std::string& value);

}  // namespace draftlab
