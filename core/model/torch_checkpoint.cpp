#include "core/model/torch_checkpoint.h"

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <variant>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/io/safetensors.h"

namespace draftlab {

namespace {

uint64_t le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// The stored entries of a zip archive, by name: (offset of the data, size).
class ZipArchive {
 public:
  ZipArchive(const std::string& path, const std::string& bytes) : path_(path), b_(bytes) {
    const auto* d = reinterpret_cast<const uint8_t*>(b_.data());
    const size_t n = b_.size();
    // End of central directory: the last signature 0x06054b50 (a comment of up to 64 KiB may follow it).
    size_t eocd = std::string::npos;
    for (size_t i = n >= 22 ? n - 22 : 0; i + 22 <= n; --i) {
      if (le(d + i, 4) == 0x06054b50) { eocd = i; break; }
      if (i == 0 || n - i > 65557) break;
    }
    if (eocd == std::string::npos) fail("no end-of-central-directory record (truncated or not a zip archive)");
    uint64_t count = le(d + eocd + 10, 2), cd = le(d + eocd + 16, 4);
    if (cd == 0xffffffff || count == 0xffff) {  // zip64: the locator sits just before the EOCD
      if (eocd < 20 || le(d + eocd - 20, 4) != 0x07064b50) fail("zip64 archive without a zip64 locator");
      const uint64_t z = le(d + eocd - 12, 8);
      if (z + 56 > n || le(d + z, 4) != 0x06064b50) fail("bad zip64 end-of-central-directory record");
      count = le(d + z + 32, 8);
      cd = le(d + z + 48, 8);
    }
    size_t p = cd;
    for (uint64_t e = 0; e < count; ++e) {
      if (p + 46 > n || le(d + p, 4) != 0x02014b50) fail("bad central directory entry");
      const uint64_t method = le(d + p + 10, 2), name_len = le(d + p + 28, 2), extra_len = le(d + p + 30, 2),
                     comment_len = le(d + p + 32, 2);
      uint64_t size = le(d + p + 24, 4), local = le(d + p + 42, 4);
      if (p + 46 + name_len + extra_len > n) fail("central directory entry past the end");
      const std::string name(b_.data() + p + 46, name_len);
      // zip64 extra field (id 1): the 0xffffffff fields, in order uncompressed, compressed, offset.
      for (size_t x = p + 46 + name_len; x + 4 <= p + 46 + name_len + extra_len;) {
        const uint64_t id = le(d + x, 2), len = le(d + x + 2, 2);
        if (id == 1) {
          size_t q = x + 4;
          if (size == 0xffffffff) size = le(d + q, 8), q += 8;
          if (le(d + p + 20, 4) == 0xffffffff) q += 8;
          if (local == 0xffffffff) local = le(d + q, 8);
        }
        x += 4 + len;
      }
      if (local + 30 > n || le(d + local, 4) != 0x04034b50) fail("bad local header of '" + name + "'");
      const uint64_t data = local + 30 + le(d + local + 26, 2) + le(d + local + 28, 2);
      if (method != 0) fail("entry '" + name + "' is compressed (method " + std::to_string(method) + "); torch.save stores entries uncompressed");
      if (data + size > n) fail("entry '" + name + "' runs past the end of the file");
      entries_[name] = {data, size};
      p += 46 + name_len + extra_len + comment_len;
    }
  }

  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  std::string read(const std::string& name) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) fail("no entry '" + name + "'");
    return b_.substr(it->second.first, it->second.second);
  }
  std::vector<std::string> names() const {
    std::vector<std::string> v;
    for (const auto& e : entries_) v.push_back(e.first);
    return v;
  }
  [[noreturn]] void fail(const std::string& what) const { throw Error::at(path_, "zip archive: " + what); }

 private:
  std::string path_;
  const std::string& b_;
  std::map<std::string, std::pair<uint64_t, uint64_t>> entries_;
};

// The pickle values torch.save produces for a state dict.
struct Value;
using ValuePtr = std::shared_ptr<Value>;
struct Global { std::string name; };  // "module.name"
struct Mark {};
struct Value {
  std::variant<std::monostate, bool, int64_t, double, std::string, Global, at::Tensor, Mark,
               std::vector<ValuePtr>,                            // tuple or list
               std::vector<std::pair<ValuePtr, ValuePtr>>>       // dict / OrderedDict
      v;
};
using Items = std::vector<ValuePtr>;
using DictItems = std::vector<std::pair<ValuePtr, ValuePtr>>;

ValuePtr make(decltype(Value::v) v) {
  auto p = std::make_shared<Value>();
  p->v = std::move(v);
  return p;
}

at::ScalarType storage_dtype(const std::string& cls, const std::function<void(const std::string&)>& fail) {
  static const std::map<std::string, at::ScalarType> types{
      {"torch.FloatStorage", at::kFloat}, {"torch.HalfStorage", at::kHalf},  {"torch.BFloat16Storage", at::kBFloat16},
      {"torch.DoubleStorage", at::kDouble}, {"torch.LongStorage", at::kLong}, {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort}, {"torch.CharStorage", at::kChar},  {"torch.ByteStorage", at::kByte},
      {"torch.BoolStorage", at::kBool}};
  auto it = types.find(cls);
  if (it == types.end()) fail("unsupported storage type " + cls);
  return it->second;
}

class TorchUnpickler {
 public:
  TorchUnpickler(const std::string& path, const ZipArchive& zip, std::string prefix)
      : path_(path), zip_(zip), prefix_(std::move(prefix)) {}

  ValuePtr run(const std::string& pkl) {
    const auto* d = reinterpret_cast<const uint8_t*>(pkl.data());
    size_t i = 0;
    const size_t n = pkl.size();
    auto need = [&](size_t k) { if (i + k > n) fail("data.pkl truncated"); };
    auto read_line = [&] {
      const size_t end = pkl.find('\n', i);
      if (end == std::string::npos) fail("data.pkl truncated");
      std::string s = pkl.substr(i, end - i);
      i = end + 1;
      return s;
    };
    auto pop = [&] {
      if (stack_.empty()) fail("pickle stack underflow");
      auto v = stack_.back();
      stack_.pop_back();
      return v;
    };
    auto pop_mark = [&] {  // the items since the last MARK
      Items items;
      while (true) {
        auto v = pop();
        if (std::holds_alternative<Mark>(v->v)) break;
        items.insert(items.begin(), v);
      }
      return items;
    };
    while (i < n) {
      const uint8_t op = d[i++];
      switch (op) {
        case 0x80: need(1); ++i; break;                          // PROTO
        case 0x95: need(8); i += 8; break;                       // FRAME
        case '(': stack_.push_back(make(Mark{})); break;         // MARK
        case 'N': stack_.push_back(make(std::monostate{})); break;
        case 0x88: stack_.push_back(make(true)); break;
        case 0x89: stack_.push_back(make(false)); break;
        case 'K': need(1); stack_.push_back(make(static_cast<int64_t>(d[i]))); i += 1; break;
        case 'M': need(2); stack_.push_back(make(static_cast<int64_t>(le(d + i, 2)))); i += 2; break;
        case 'J': need(4); stack_.push_back(make(static_cast<int64_t>(static_cast<int32_t>(le(d + i, 4))))); i += 4; break;
        case 0x8a: {  // LONG1: little-endian two's complement of n bytes
          need(1);
          const int len = d[i++];
          need(len);
          if (len > 8) fail("integer wider than 64 bits");
          uint64_t v = len ? le(d + i, len) : 0;
          if (len && len < 8 && (d[i + len - 1] & 0x80)) v |= ~uint64_t(0) << (8 * len);
          stack_.push_back(make(static_cast<int64_t>(v)));
          i += len;
          break;
        }
        case 'G': {  // BINFLOAT, big-endian
          need(8);
          uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) bits = (bits << 8) | d[i + k];
          double x;
          std::memcpy(&x, &bits, 8);
          stack_.push_back(make(x));
          i += 8;
          break;
        }
        case 'X': case 0x8c: case 0x8d: {  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
          const int w = op == 'X' ? 4 : op == 0x8c ? 1 : 8;
          need(w);
          const uint64_t len = le(d + i, w);
          i += w;
          need(len);
          stack_.push_back(make(pkl.substr(i, len)));
          i += len;
          break;
        }
        case 'c': {  // GLOBAL module\nname\n
          const std::string module = read_line();
          stack_.push_back(make(Global{module + "." + read_line()}));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          auto name = pop(), module = pop();
          stack_.push_back(make(Global{str(module) + "." + str(name)}));
          break;
        }
        case 'q': need(1); memo_[d[i]] = top(); i += 1; break;               // BINPUT
        case 'r': need(4); memo_[le(d + i, 4)] = top(); i += 4; break;       // LONG_BINPUT
        case 0x94: memo_[memo_.size()] = top(); break;                       // MEMOIZE
        case 'h': need(1); stack_.push_back(memo(d[i])); i += 1; break;      // BINGET
        case 'j': need(4); stack_.push_back(memo(le(d + i, 4))); i += 4; break;  // LONG_BINGET
        case ')': stack_.push_back(make(Items{})); break;
        case ']': stack_.push_back(make(Items{})); break;
        case '}': stack_.push_back(make(DictItems{})); break;
        case 't': stack_.push_back(make(pop_mark())); break;
        case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
          Items items(op - 0x84);
          for (size_t k = items.size(); k-- > 0;) items[k] = pop();
          stack_.push_back(make(items));
          break;
        }
        case 'a': { auto v = pop(); list(top()).push_back(v); break; }      // APPEND
        case 'e': { auto items = pop_mark(); auto& l = list(top()); l.insert(l.end(), items.begin(), items.end()); break; }
        case 's': { auto v = pop(), k = pop(); dict(top()).emplace_back(k, v); break; }  // SETITEM
        case 'u': {  // SETITEMS
          auto items = pop_mark();
          if (items.size() % 2) fail("SETITEMS with an odd number of items");
          for (size_t k = 0; k < items.size(); k += 2) dict(top()).emplace_back(items[k], items[k + 1]);
          break;
        }
        case 'b': pop(); break;  // BUILD: an OrderedDict's state (state_dict()._metadata) is not needed
        case 'Q': stack_.push_back(storage(pop())); break;  // BINPERSID
        case 'R': {  // REDUCE
          auto args = pop(), callable = pop();
          stack_.push_back(reduce(callable, args));
          break;
        }
        case '.': return pop();  // STOP
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(std::string("unsupported pickle opcode ") + hex + " at byte " + std::to_string(i - 1) +
               " (not a plain torch.save() of tensors)");
        }
      }
    }
    fail("data.pkl ended without STOP");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw Error::at(path_, what); }
  ValuePtr top() {
    if (stack_.empty()) fail("pickle stack underflow");
    return stack_.back();
  }
  ValuePtr memo(uint64_t k) {
    auto it = memo_.find(k);
    if (it == memo_.end()) fail("pickle memo " + std::to_string(k) + " read before it was written");
    return it->second;
  }
  const std::string& str(const ValuePtr& v) {
    if (!std::holds_alternative<std::string>(v->v)) fail("expected a string in data.pkl");
    return std::get<std::string>(v->v);
  }
  int64_t integer(const ValuePtr& v) {
    if (!std::holds_alternative<int64_t>(v->v)) fail("expected an integer in data.pkl");
    return std::get<int64_t>(v->v);
  }
  Items& list(const ValuePtr& v) {
    if (!std::holds_alternative<Items>(v->v)) fail("expected a tuple or list in data.pkl");
    return std::get<Items>(v->v);
  }
  DictItems& dict(const ValuePtr& v) {
    if (!std::holds_alternative<DictItems>(v->v)) fail("expected a dict in data.pkl");
    return std::get<DictItems>(v->v);
  }
  std::vector<int64_t> ints(const ValuePtr& v) {
    std::vector<int64_t> out;
    for (const auto& x : list(v)) out.push_back(integer(x));
    return out;
  }

  // ('storage', torch.<Type>Storage, key, location, numel) -> a flat CPU tensor over <prefix>data/<key>.
  ValuePtr storage(const ValuePtr& pid) {
    const Items& t = list(pid);
    if (t.size() != 5 || str(t[0]) != "storage" || !std::holds_alternative<Global>(t[1]->v))
      fail("unsupported persistent id (expected ('storage', type, key, location, numel))");
    const std::string key = str(t[2]);
    auto cached = storages_.find(key);
    if (cached != storages_.end()) return cached->second;
    const auto dtype = storage_dtype(std::get<Global>(t[1]->v).name, [&](const std::string& m) { fail(m); });
    const int64_t numel = integer(t[4]);
    const std::string bytes = zip_.read(prefix_ + "data/" + key);
    if (static_cast<int64_t>(bytes.size()) != numel * static_cast<int64_t>(c10::elementSize(dtype)))
      fail("storage " + key + ": " + std::to_string(bytes.size()) + " bytes for " + std::to_string(numel) + " elements");
    auto flat = at::empty({numel}, at::TensorOptions().dtype(dtype));
    if (!bytes.empty()) std::memcpy(flat.data_ptr(), bytes.data(), bytes.size());
    return storages_[key] = make(flat);
  }

  ValuePtr reduce(const ValuePtr& callable, const ValuePtr& args) {
    if (!std::holds_alternative<Global>(callable->v)) fail("REDUCE of something that is not a global");
    const std::string& name = std::get<Global>(callable->v).name;
    if (name == "collections.OrderedDict") return make(DictItems{});
    const Items& a = list(args);
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      if (a.size() < 4 || !std::holds_alternative<at::Tensor>(a[0]->v)) fail(name + ": unexpected arguments");
      const at::Tensor& flat = std::get<at::Tensor>(a[0]->v);
      const auto size = ints(a[2]), stride = ints(a[3]);
      const int64_t offset = integer(a[1]);
      int64_t last = offset;  // the largest element index the view touches
      for (size_t k = 0; k < size.size(); ++k) {
        if (size[k] == 0) { last = -1; break; }
        last += (size[k] - 1) * stride[k];
      }
      if (offset < 0 || last >= flat.numel()) fail(name + ": view past the end of its storage");
      return make(flat.as_strided(size, stride, offset).contiguous());
    }
    if (name == "torch._utils._rebuild_parameter") {
      if (a.empty() || !std::holds_alternative<at::Tensor>(a[0]->v)) fail(name + ": unexpected arguments");
      return a[0];
    }
    fail("unsupported global '" + name + "' in data.pkl (only tensors and dicts of them are read)");
  }

  std::string path_;
  const ZipArchive& zip_;
  std::string prefix_;
  std::vector<ValuePtr> stack_;
  std::map<uint64_t, ValuePtr> memo_;
  std::map<std::string, ValuePtr> storages_;
};

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> read_torch_state_dict(const std::string& path) {
  if (!is_file(path)) throw Error::at(path, "not found (expected a torch.save() checkpoint such as pytorch_model.bin)");
  const std::string bytes = read_text_file(path);
  if (bytes.size() < 4 || bytes[0] != 'P' || bytes[1] != 'K')
    throw Error::at(path, "not a zip archive: expected a torch.save() file of torch >= 1.6 (legacy non-zip "
                          "checkpoints: re-save them with torch.save in Python)");
  const ZipArchive zip(path, bytes);
  // The archive's one top-level folder (torch.save names it after the file: "archive/", "pytorch_model/", ...).
  std::string prefix;
  for (const auto& name : zip.names())
    if (name.size() > 9 && name.compare(name.size() - 9, 9, "/data.pkl") == 0) prefix = name.substr(0, name.size() - 8);
  if (prefix.empty()) throw Error::at(path, "no <name>/data.pkl in the archive: not a torch.save() file");
  TorchUnpickler unpickler(path, zip, prefix);
  const auto root = unpickler.run(zip.read(prefix + "data.pkl"));
  if (!std::holds_alternative<DictItems>(root->v)) throw Error::at(path, "expected a state dict (str -> tensor) at the top");
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [k, v] : std::get<DictItems>(root->v)) {
    if (!std::holds_alternative<std::string>(k->v)) throw Error::at(path, "a state dict key that is not a string");
    const std::string& name = std::get<std::string>(k->v);
    if (!std::holds_alternative<at::Tensor>(v->v)) throw Error::at(path, "'" + name + "' is not a tensor");
    out.emplace_back(name, std::get<at::Tensor>(v->v));
  }
  return out;
}

int64_t convert_torch_checkpoint(const std::string& in_path, const std::string& out_dir) {
  const auto tensors = read_torch_state_dict(in_path);
  std::vector<at::Tensor> kept;  // owners of the bytes written below
  std::vector<TensorToWrite> entries;
  for (const auto& [name, t] : tensors) {
    DType dtype;
    at::Tensor data = t;
    switch (t.scalar_type()) {
      case at::kFloat: dtype = DType::F32; break;
      case at::kHalf: dtype = DType::F16; break;
      case at::kBFloat16: dtype = DType::BF16; break;
      case at::kDouble: dtype = DType::F64; break;
      case at::kLong: case at::kInt: case at::kShort: case at::kByte: case at::kChar:
        data = t.to(at::kLong);
        dtype = DType::I64;
        break;
      case at::kBool: dtype = DType::BOOL; break;  // EAGLE-3's t2d
      default:
        throw Error::at(in_path, "tensor '" + name + "' has dtype " + std::string(c10::toString(t.scalar_type())) +
                                     ", which safetensors heads do not use");
    }
    kept.push_back(data);
    entries.push_back({name, dtype, data.sizes().vec(), data.data_ptr(), static_cast<size_t>(data.nbytes())});
  }
  std::filesystem::create_directories(out_dir);
  write_safetensors(out_dir + "/model.safetensors", entries, {{"format", "pt"}});
  // The published heads keep config.json beside pytorch_model.bin; EagleHead::load needs it beside the weights.
  const std::filesystem::path config = std::filesystem::path(in_path).parent_path() / "config.json";
  if (is_file(config.string()) &&
      std::filesystem::weakly_canonical(config) != std::filesystem::weakly_canonical(out_dir + "/config.json"))
    write_file_atomically(out_dir + "/config.json", read_text_file(config.string()));
  return static_cast<int64_t>(entries.size());
}

}  // namespace draftlab
