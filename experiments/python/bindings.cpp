// draftlab._draftlab: the C++ engine for Python, wrapped by experiments/python/draftlab/__init__.py.
//
//   run(args)                  a draftlab command in this process with the CLI's own options (one option table)
//   Model                      a target and its tokenizer: encode, decode, generate (any strategy, by name),
//                              forward (logits and features without a copy: DLPack for torch, or NumPy views)
//   register_strategy(...)     a drafter written in Python, usable by name like a C++ strategy and verified by
//                              the one C++ verifier (PythonStrategy below)
//
// Decoding releases the GIL; a Python strategy takes it back for its own calls. A Python exception raised inside
// a strategy unwinds the decoder as a C++ exception and reaches the caller as itself.
#include <ATen/DLConvertor.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/decoding/speculative_decoder.h"
#include "core/decoding/vanilla_decoder.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/experiment_cli.h"
#include "experiments/cli/model_loading.h"
#include "strategies/registry.h"
#include "strategies/tree_proposal.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace draftlab {
namespace {

int run(const std::vector<std::string>& args) {
  check(!args.empty(), "run: expected a command and its arguments, e.g. ['compare', '--help']");
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  py::gil_scoped_release release;
  return cli::run_command(static_cast<int>(copy.size()), argv.data());
}

// A tensor to Python without a copy: a DLPack capsule (torch.utils.dlpack.from_dlpack takes it), or a NumPy array
// viewing the tensor's memory, which a capsule holding the tensor keeps alive.
py::capsule dlpack_capsule(const at::Tensor& t) {
  DLManagedTensor* managed = at::toDLPack(t.contiguous());
  return py::capsule(managed, "dltensor", [](PyObject* capsule) {
    // A consumer renames the capsule "used_dltensor" and frees the tensor itself; an unconsumed one is freed here.
    if (PyCapsule_IsValid(capsule, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
      if (m != nullptr && m->deleter != nullptr) m->deleter(m);
    }
  });
}

py::array numpy_view(const at::Tensor& t_in) {
  const at::Tensor t = t_in.to(at::kCPU, at::kFloat).contiguous();
  auto* held = new at::Tensor(t);
  py::capsule owner(held, [](void* p) { delete static_cast<at::Tensor*>(p); });
  std::vector<py::ssize_t> shape(t.sizes().begin(), t.sizes().end()), strides;
  for (int64_t s : t.strides()) strides.push_back(s * static_cast<py::ssize_t>(sizeof(float)));
  return py::array_t<float>(shape, strides, t.data_ptr<float>(), owner);
}

// A drafter implemented in Python. The object has begin(prompt, first_token), propose(request) and
// observe(result); propose returns None or an object with `tokens` and `parents` (and optionally `confidences`
// and `q`: per node None or a probability vector over the vocabulary the token was sampled from).
class PythonStrategy : public SequenceStrategy {
 public:
  // impl may declare wants_features = True (begin and observe then get the target's features, as torch tensors
  // when torch is importable, else NumPy) and feature_layers = (l1, l2, ...) (which features: EAGLE-3's kind).
  PythonStrategy(std::string name, py::object impl, int64_t vocab)
      : name_(std::move(name)), impl_(std::move(impl)), vocab_(vocab) {
    wants_features_ = py::getattr(impl_, "wants_features", py::bool_(false)).cast<bool>();
    const py::object layers = py::getattr(impl_, "feature_layers", py::none());
    if (!layers.is_none()) feature_layers_ = layers.cast<std::vector<int64_t>>();
    if (wants_features_) {
      try {
        from_dlpack_ = py::module_::import("torch.utils.dlpack").attr("from_dlpack");
      } catch (const py::error_already_set&) {
        from_dlpack_ = py::none();  // no torch: NumPy arrays
      }
    }
  }
  ~PythonStrategy() override {
    py::gil_scoped_acquire gil;
    impl_ = py::object();
    from_dlpack_ = py::object();
  }

  std::string name() const override { return name_; }
  std::vector<int64_t> target_feature_layers() const override { return feature_layers_; }

  void begin(const std::vector<int64_t>& prompt, const at::Tensor& features, int64_t first_token) override {
    py::gil_scoped_acquire gil;
    impl_.attr("begin")(prompt, first_token, features_for_python(features));
  }

  DraftTree propose(const DraftRequest& request) override {
    py::gil_scoped_acquire gil;
    py::dict r;
    r["sequence"] = request.sequence;
    r["max_nodes"] = request.max_nodes;
    r["tokens_wanted"] = request.tokens_wanted;
    r["temperature"] = request.sampler.params().temperature;
    const py::object proposal = impl_.attr("propose")(r);
    return to_tree(proposal, request);
  }

  void observe(const VerifyResult& result) override {
    py::gil_scoped_acquire gil;
    py::dict r;
    r["accepted_nodes"] = result.accepted_nodes;
    r["tokens"] = result.tokens;
    r["features"] = features_for_python(result.features);
    impl_.attr("observe")(r);
  }

 private:
  py::object features_for_python(const at::Tensor& features) const {
    if (!wants_features_ || !features.defined()) return py::none();
    if (!from_dlpack_.is_none()) return from_dlpack_(dlpack_capsule(features.to(at::kFloat)));
    return numpy_view(features);
  }

  // Checks every node (an Error naming the strategy and the node, raised in Python as draftlab.Error).
  DraftTree to_tree(const py::object& p, const DraftRequest& request) const {
    DraftTree tree;
    if (p.is_none()) return tree;
    const std::string where = "strategy " + name_ + ": propose";
    auto field = [&](const char* key) { return py::hasattr(p, key) ? p.attr(key) : py::object(py::none()); };
    const py::object tokens_obj = field("tokens"), parents_obj = field("parents");
    check(!tokens_obj.is_none() && !parents_obj.is_none(),
          where + ": expected None or an object with tokens and parents (draftlab.Tree)");
    TreeProposal proposal;
    proposal.tokens = tokens_obj.cast<std::vector<int64_t>>();
    proposal.parents = parents_obj.cast<std::vector<int64_t>>();
    const py::object confidences_obj = field("confidences"), q_obj = field("q");
    if (!confidences_obj.is_none()) proposal.confidences = confidences_obj.cast<std::vector<double>>();
    py::list q;
    if (!q_obj.is_none()) q = py::list(q_obj);
    proposal.distributions = q.size();
    check_tree_proposal(proposal, vocab_, request.max_nodes, where);
    for (size_t i = 0; i < proposal.tokens.size(); ++i) {
      const std::string node = where + ": node " + std::to_string(i);
      int32_t distribution = -1;
      if (!q.empty() && !q[i].is_none()) {
        const auto probs = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(q[i]);
        check(probs && probs.ndim() == 1, node + ": q: expected a vector of " + std::to_string(vocab_) + " probabilities");
        check_draft_distribution(probs.data(), probs.shape(0), vocab_, proposal.tokens[i], node);
        at::Tensor t = at::empty({vocab_}, at::kFloat);
        std::copy(probs.data(), probs.data() + vocab_, t.data_ptr<float>());
        distribution = tree.add_distribution(t);
      }
      const float confidence = proposal.confidences.empty() ? 1.0f : static_cast<float>(proposal.confidences[i]);
      tree.add(proposal.tokens[i], static_cast<int32_t>(proposal.parents[i]), confidence, distribution);
    }
    return tree;
  }

  std::string name_;
  py::object impl_;
  int64_t vocab_;
  bool wants_features_ = false;
  std::vector<int64_t> feature_layers_;
  py::object from_dlpack_ = py::none();
};

DraftShape parse_shape(const std::string& shape) {
  for (DraftShape d : {DraftShape::Chain, DraftShape::StaticTree, DraftShape::DynamicTree})
    if (shape == shape_name(d)) return d;
  throw Error("register_strategy: shape: expected chain, static_tree or dynamic_tree, got '" + shape + "'");
}

// factory(options: dict of str) -> the strategy object; options: {key: default} (all text options).
void register_python_strategy(const std::string& name, py::object factory, const std::string& summary,
                              const std::string& shape, const std::map<std::string, std::string>& options,
                              bool has_confidence) {
  StrategyDescriptor d;
  d.name = name;
  d.summary = summary.empty() ? "a drafter written in Python" : summary;
  d.shape = parse_shape(shape);
  d.has_confidence = has_confidence;
  for (const auto& [key, value] : options) d.options.push_back(text_option(key, value, "a Python strategy option"));
  // The descriptor outlives no interpreter: draftlab/__init__.py unregisters every Python strategy at exit.
  auto held = std::make_shared<py::object>(std::move(factory));
  d.make = [name, held, keys = options](const StrategyContext& c, const StrategyOptions& o) -> std::unique_ptr<DraftStrategy> {
    py::gil_scoped_acquire gil;
    py::dict values;
    for (const auto& [key, unused] : keys) values[py::str(key)] = o.get_string(key);
    py::object impl = (*held)(values);
    return std::make_unique<PythonStrategy>(name, std::move(impl), c.target.config().vocab_size);
  };
  register_strategy(std::move(d));
}

// A column as NumPy: numbers as an array of their type, text as an array of str (as h5py reads the file).
template <typename T>
py::object column_to_python(const std::vector<T>& values) {
  if constexpr (std::is_same_v<T, std::string>) {
    py::list texts;
    for (const std::string& v : values)
      texts.append(py::reinterpret_steal<py::str>(
          PyUnicode_DecodeUTF8(v.data(), static_cast<Py_ssize_t>(v.size()), "replace")));
    return py::module_::import("numpy").attr("array")(texts, "dtype"_a = "str");
  } else {
    return py::array_t<T>(values.size(), values.data());
  }
}

// A results file in memory as the dicts analysis/plot.py's load_results reads from HDF5: {"attrs", "runs":
// [{attribute: value, ..., "questions"|"cycles"|"nodes": {column: array}}], "training": {label: {...}}}; absent
// optional attributes are left out as the file leaves them out.
py::dict results_to_python(const ResultsFile& results) {
  py::dict attrs;
  for (const auto& [key, value] : results.attributes) attrs[py::str(key)] = value;
#define DRAFTLAB_PY_ROOT_STRING(name, presence, meaning)
#define DRAFTLAB_PY_ROOT_INT(name, default_value, presence, meaning) attrs[#name] = results.name;
  DRAFTLAB_ROOT_ATTRIBUTES(DRAFTLAB_PY_ROOT_STRING, DRAFTLAB_PY_ROOT_INT)
#undef DRAFTLAB_PY_ROOT_INT
#undef DRAFTLAB_PY_ROOT_STRING
  py::list runs;
  for (const RunRecord& r : results.runs) {
    py::dict run;
    r.for_each_attribute([&](const char* name, Presence presence, const auto& value) {
      using T = std::decay_t<decltype(value)>;
      if constexpr (std::is_same_v<T, std::string>)
        if (presence == Presence::optional && value.empty()) return;
      run[name] = value;
    });
    r.for_each_table([&](const char* name, const auto& rows) {
      if (run_table_presence(name) == Presence::optional && rows.size() == 0) return;  // as the file leaves it out
      py::dict table;
      rows.for_each_column([&](const char* column, const auto& values) { table[column] = column_to_python(values); });
      run[name] = table;
    });
    runs.append(run);
  }
  py::dict training;
  for (const auto& [label, c] : results.training) {
    py::dict curves;
    curves["train/step"] = column_to_python(c.train_step);
    curves["train/loss"] = column_to_python(c.train_loss);
    curves["train/learning_rate"] = column_to_python(c.learning_rate);
    curves["eval/step"] = column_to_python(c.eval_step);
    curves["eval/loss"] = column_to_python(c.eval_loss);
    curves["eval/perplexity"] = column_to_python(c.eval_perplexity());
    for (const auto& [metric, rows] : c.eval_metrics) {  // [passes], or [passes, columns] (training_curves.h)
      std::vector<double> flat;
      for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
      py::array values = column_to_python(flat);
      if (!find_training_metric(metric).single_value)
        values = values.attr("reshape")(rows.size(), rows.empty() ? 0 : rows.front().size());
      curves[py::str("eval/" + metric)] = values;
    }
    py::dict curve_attrs;
    for (const auto& [key, value] : c.attributes) curve_attrs[py::str(key)] = value;
    curves["attrs"] = curve_attrs;
    training[py::str(label)] = curves;
  }
  py::dict out;
  out["attrs"] = attrs;
  out["runs"] = runs;
  out["training"] = training;
  return out;
}

struct Model {
  cli::LoadedModel loaded;
  cli::ModelOptions options;  // as loaded: compare and exp on this model must ask for the same

  // `draftlab compare|exp ARGS` on this model (no reload): the results as results_to_python gives them. Raises
  // draftlab.Error for a non-zero exit (bad options; greedy output differing from vanilla's).
  py::dict experiment(const std::vector<std::string>& args) const {
    ResultsFile results;
    int code = 0;
    {
      cli::InProcessModel in_process(loaded, options, results);
      code = run(args);
    }
    std::string command = "draftlab";
    for (const std::string& a : args) command += " " + a;
    check(code == 0, command + ": exit code " + std::to_string(code));
    check(!results.runs.empty(), command + ": expected compare or exp (the commands that run experiments)");
    return results_to_python(results);
  }

  // One plain forward of ids from an empty cache: logits [n, vocab] (float32) and features [n, width] (the final
  // normed hidden state, or the residual after feature_layers side by side), as DLPack capsules or NumPy views.
  py::tuple forward(const std::vector<int64_t>& ids, const std::vector<int64_t>& feature_layers, bool dlpack) const {
    check(!ids.empty(), "forward: no tokens");
    check(static_cast<int64_t>(ids.size()) <= loaded.model->config().max_position_embeddings,
          "forward: " + std::to_string(ids.size()) + " tokens: expected at most the context, " +
              std::to_string(loaded.model->config().max_position_embeddings));
    for (int64_t id : ids)
      check(id >= 0 && id < loaded.model->config().vocab_size,
            "forward: token " + std::to_string(id) + ": expected 0.." + std::to_string(loaded.model->config().vocab_size - 1));
    ForwardOutput out;
    {
      py::gil_scoped_release release;
      KvCache cache = loaded.model->make_cache(static_cast<int64_t>(ids.size()));
      ForwardOptions o;
      o.feature_layers = feature_layers;
      out = loaded.model->forward_chain(cache, ids, o);
    }
    if (dlpack) return py::make_tuple(dlpack_capsule(out.logits), dlpack_capsule(out.features));
    return py::make_tuple(numpy_view(out.logits), numpy_view(out.features));
  }

  std::vector<int64_t> encode(const std::string& text, const std::string& chat_template) const {
    return cli::encode_prompt(*loaded.tokenizer, text, chat_template);
  }

  // Text of token ids; a character cut by the end of the ids (a partial UTF-8 sequence) reads as U+FFFD.
  py::str decode(const std::vector<int64_t>& ids) const {
    std::vector<int32_t> v(ids.begin(), ids.end());
    const std::string text = loaded.tokenizer->decode(v);
    return py::reinterpret_steal<py::str>(
        PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace"));
  }

  py::dict generate(const std::vector<int64_t>& prompt, int64_t max_new_tokens, const std::string& strategy,
                    const std::map<std::string, std::string>& options, double temperature, int64_t top_k,
                    double top_p, uint64_t seed, bool stop_at_eos) const {
    check(!prompt.empty(), "generate: the prompt has no tokens");
    GenerationConfig gen;
    gen.max_new_tokens = max_new_tokens;
    gen.sampling.temperature = temperature;
    gen.sampling.top_k = top_k;
    gen.sampling.top_p = top_p;
    gen.seed = seed;
    if (stop_at_eos)
      for (int32_t eos : loaded.model->config().eos_token_ids) gen.stop_tokens.push_back(eos);
    std::vector<std::string> items;
    for (const auto& [k, v] : options) items.push_back(k + "=" + v);
    std::unique_ptr<DraftStrategy> drafter;
    if (strategy != baseline_strategy().name)
      drafter = make_strategy(strategy, StrategyContext{*loaded.model}, StrategyOptions::parse(items));
    else
      check(items.empty(), "generate: options given for " + strategy + ", which has none");
    SpeculativeResult r;
    {
      py::gil_scoped_release release;
      if (drafter) {
        r = SpeculativeDecoder(*loaded.model, *drafter).generate(prompt, gen);
      } else {
        static_cast<GenerationResult&>(r) = generate_vanilla(*loaded.model, prompt, gen);
      }
    }
    py::dict out;
    out["tokens"] = r.tokens;
    out["text"] = decode(r.tokens);
    out["stop_reason"] = r.stop_reason;
    out["prefill_seconds"] = r.prefill_seconds;
    out["decode_seconds"] = r.decode_seconds;
    out["tokens_per_second"] = r.tokens_per_second();
    std::vector<int32_t> drafted, accepted;
    std::vector<double> draft_seconds, verify_seconds;
    for (const CycleStats& c : r.cycles) {
      drafted.push_back(c.drafted);
      accepted.push_back(c.accepted);
      draft_seconds.push_back(c.draft_seconds);
      verify_seconds.push_back(c.verify_seconds);
    }
    out["cycles"] = static_cast<int64_t>(r.cycles.size());
    out["tau"] = drafter ? r.tau() : 1.0;
    out["drafted"] = py::array_t<int32_t>(drafted.size(), drafted.data());
    out["accepted"] = py::array_t<int32_t>(accepted.size(), accepted.data());
    out["draft_seconds"] = py::array_t<double>(draft_seconds.size(), draft_seconds.data());
    out["verify_seconds"] = py::array_t<double>(verify_seconds.size(), verify_seconds.data());
    return out;
  }
};

}  // namespace
}  // namespace draftlab

PYBIND11_MODULE(_draftlab, m) {
  using namespace draftlab;
  m.doc() = "draftlab's C++ engine (use the draftlab package, which wraps it)";
  // draftlab::Error (a bad file, option or proposal) as draftlab.Error, a ValueError.
  py::register_exception<Error>(m, "Error", PyExc_ValueError);

  m.def("run", &run, py::arg("args"),
        "Runs a draftlab command in this process, as `draftlab ARGS...` would (same options); returns its exit code.");
  m.def("usage", [] { return std::string(cli::usage()); });
  m.def("strategy_names", [] {
    std::vector<std::string> names;
    for (const StrategyDescriptor* d : strategy_table()) names.push_back(d->name);
    return names;
  });
  m.def("register_strategy", &register_python_strategy, py::arg("name"), py::arg("factory"), py::arg("summary"),
        py::arg("shape"), py::arg("options"), py::arg("has_confidence"));
  m.def("unregister_strategy", &unregister_strategy, py::arg("name"));

  py::class_<Model>(m, "Model")
      .def(py::init([](const std::string& path, const std::string& tokenizer, const std::string& dtype,
                       const std::string& cpu_path, const std::string& weights, const std::string& kv_cache,
                       int threads, const std::string& quant_dot) {
             cli::ModelOptions o;
             o.model_path = path;
             o.tokenizer_path = tokenizer;
             o.dtype = dtype;
             o.path = cpu_path;
             o.weights = weights;
             o.kv_cache = kv_cache;
             o.threads = threads;
             o.quant_dot = quant_dot;
             return Model{cli::load_model_and_tokenizer(o), o};
           }),
           py::arg("path"), py::arg("tokenizer") = "", py::arg("dtype") = "float32", py::arg("cpu_path") = "auto",
           py::arg("weights") = "auto", py::arg("kv_cache") = "auto", py::arg("threads") = 0,
           py::arg("quant_dot") = "float")
      .def("experiment", &Model::experiment, py::arg("args"))
      .def("encode", &Model::encode, py::arg("text"), py::arg("chat_template") = "plain")
      .def("decode", &Model::decode, py::arg("ids"))
      .def("forward", &Model::forward, py::arg("ids"), py::arg("feature_layers"), py::arg("dlpack"))
      .def_property_readonly("vocab_size", [](const Model& s) { return s.loaded.model->config().vocab_size; })
      .def_property_readonly("forward_path", [](const Model& s) { return s.loaded.model->path_description(); })
      .def("generate", &Model::generate, py::arg("prompt"), py::arg("max_new_tokens"), py::arg("strategy"),
           py::arg("options"), py::arg("temperature"), py::arg("top_k"), py::arg("top_p"), py::arg("seed"),
           py::arg("stop_at_eos"));
}
