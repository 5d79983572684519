#include "core/io/torch_archive.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <variant>

#include "core/base/error.h"
#include "core/base/file_bytes.h"

namespace draftlab {

namespace {

uint64_t le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// [offset, offset + len) inside n bytes. Written so that no sum can wrap: zip64 fields are any 64-bit value.
bool inside(uint64_t offset, uint64_t len, uint64_t n) { return offset <= n && len <= n - offset; }

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
      if (!inside(z, 56, n) || le(d + z, 4) != 0x06064b50) fail("bad zip64 end-of-central-directory record");
      count = le(d + z + 32, 8);
      cd = le(d + z + 48, 8);
    }
    uint64_t p = cd;
    for (uint64_t e = 0; e < count; ++e) {
      if (!inside(p, 46, n) || le(d + p, 4) != 0x02014b50) fail("bad central directory entry");
      const uint64_t method = le(d + p + 10, 2), name_len = le(d + p + 28, 2), extra_len = le(d + p + 30, 2),
                     comment_len = le(d + p + 32, 2);
      uint64_t size = le(d + p + 24, 4), local = le(d + p + 42, 4);
      if (!inside(p + 46, name_len + extra_len, n)) fail("central directory entry past the end");
      const std::string name(b_.data() + p + 46, name_len);
      // zip64 extra field (id 1): the 0xffffffff fields, in order uncompressed, compressed, offset; each read only
      // when the field holds it.
      const uint64_t extra_end = p + 46 + name_len + extra_len;
      for (uint64_t x = p + 46 + name_len; x + 4 <= extra_end;) {
        const uint64_t id = le(d + x, 2), len = le(d + x + 2, 2);
        if (x + 4 + len > extra_end) fail("extra field of '" + name + "' past the end of its directory entry");
        if (id == 1) {
          uint64_t q = x + 4;
          auto next = [&](uint64_t* v) {
            if (q + 8 > x + 4 + len) fail("zip64 extra field of '" + name + "' shorter than the sizes it replaces");
            *v = le(d + q, 8);
            q += 8;
          };
          uint64_t compressed = le(d + p + 20, 4);
          if (size == 0xffffffff) next(&size);
          if (compressed == 0xffffffff) next(&compressed);
          if (local == 0xffffffff) next(&local);
        }
        x += 4 + len;
      }
      if (!inside(local, 30, n) || le(d + local, 4) != 0x04034b50) fail("bad local header of '" + name + "'");
      const uint64_t data = local + 30 + le(d + local + 26, 2) + le(d + local + 28, 2);
      if (method != 0) fail("entry '" + name + "' is compressed (method " + std::to_string(method) + "); torch.save stores entries uncompressed");
      if (!inside(data, size, n)) fail("entry '" + name + "' runs past the end of the file");
      entries_[name] = {data, size};
      p += 46 + name_len + extra_len + comment_len;
    }
  }

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
struct Storage {                      // a persistent-id storage: a flat array of dtype
  DType dtype = DType::F32;
  std::shared_ptr<const std::string> bytes;
  int64_t numel = 0;
};
struct Value {
  std::variant<std::monostate, bool, int64_t, double, std::string, Global, Storage, StoredTensor, Mark,
               std::vector<ValuePtr>,                            // tuple or list
               std::vector<std::pair<ValuePtr, ValuePtr>>>       // dict / OrderedDict
      v;
};
using Items = std::vector<ValuePtr>;
using DictItems = std::vector<std::pair<ValuePtr, ValuePtr>>;


bool storage_dtype(const std::string& cls, DType* out) {
  static const std::map<std::string, DType> types{
      {"torch.FloatStorage", DType::F32}, {"torch.HalfStorage", DType::F16},  {"torch.BFloat16Storage", DType::BF16},
      {"torch.DoubleStorage", DType::F64}, {"torch.LongStorage", DType::I64}, {"torch.IntStorage", DType::I32},
      {"torch.ShortStorage", DType::I16}, {"torch.CharStorage", DType::I8},   {"torch.ByteStorage", DType::U8},
      {"torch.BoolStorage", DType::BOOL}};
  auto it = types.find(cls);
  if (it == types.end()) return false;
  *out = it->second;
  return true;
}

class TorchUnpickler {
 public:
  TorchUnpickler(const std::string& path, const ZipArchive& zip, std::string prefix)
      : path_(path), zip_(zip), prefix_(std::move(prefix)) {}
  // A pickle can make a container hold itself (a list appended to itself through the memo): shared_ptr alone would
  // never free such a cycle, so every value made is emptied here, once the caller has what it needs.
  ~TorchUnpickler() {
    for (const ValuePtr& v : made_) v->v = std::monostate{};
  }

  ValuePtr run(const std::string& pkl) {
    const auto* d = reinterpret_cast<const uint8_t*>(pkl.data());
    size_t i = 0;
    const size_t n = pkl.size();
    auto need = [&](uint64_t k) { if (k > n - i) fail("data.pkl truncated"); };  // i <= n: no wrap, whatever k
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
    auto pop_mark = [&] {  // the items since the last MARK, in order (collected backwards: linear time)
      Items items;
      while (true) {
        auto v = pop();
        if (std::holds_alternative<Mark>(v->v)) break;
        items.push_back(v);
      }
      std::reverse(items.begin(), items.end());
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
  ValuePtr make(decltype(Value::v) v) {
    made_.push_back(std::make_shared<Value>());
    made_.back()->v = std::move(v);
    return made_.back();
  }
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

  // ('storage', torch.<Type>Storage, key, location, numel) -> the bytes of <prefix>data/<key>.
  ValuePtr storage(const ValuePtr& pid) {
    const Items& t = list(pid);
    if (t.size() != 5 || str(t[0]) != "storage" || !std::holds_alternative<Global>(t[1]->v))
      fail("unsupported persistent id (expected ('storage', type, key, location, numel))");
    const std::string key = str(t[2]);
    auto cached = storages_.find(key);
    if (cached != storages_.end()) return cached->second;
    Storage s;
    const std::string& type = std::get<Global>(t[1]->v).name;
    if (!storage_dtype(type, &s.dtype)) fail("unsupported storage type " + type);
    s.numel = integer(t[4]);
    s.bytes = std::make_shared<const std::string>(zip_.read(prefix_ + "data/" + key));
    const size_t element = dtype_size(s.dtype);  // compared by division: numel * element may not fit in 64 bits
    if (s.numel < 0 || s.bytes->size() % element != 0 || s.bytes->size() / element != static_cast<uint64_t>(s.numel))
      fail("storage " + key + ": " + std::to_string(s.bytes->size()) + " bytes for " + std::to_string(s.numel) + " elements");
    return storages_[key] = make(s);
  }

  ValuePtr reduce(const ValuePtr& callable, const ValuePtr& args) {
    if (!std::holds_alternative<Global>(callable->v)) fail("REDUCE of something that is not a global");
    const std::string& name = std::get<Global>(callable->v).name;
    if (name == "collections.OrderedDict") return make(DictItems{});
    const Items& a = list(args);
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      if (a.size() < 4 || !std::holds_alternative<Storage>(a[0]->v)) fail(name + ": unexpected arguments");
      const Storage& s = std::get<Storage>(a[0]->v);
      StoredTensor t;
      t.dtype = s.dtype;
      t.storage = s.bytes;
      t.sizes = ints(a[2]);
      t.strides = ints(a[3]);
      t.storage_offset = integer(a[1]);
      if (t.sizes.size() != t.strides.size()) fail(name + ": sizes and strides of different lengths");
      int64_t last = t.storage_offset;  // the largest element index the view touches
      bool wraps = false;               // ... or more than int64 holds: past any storage
      for (size_t k = 0; k < t.sizes.size(); ++k) {
        if (t.sizes[k] < 0 || t.strides[k] < 0) fail(name + ": negative size or stride");
        if (t.sizes[k] == 0) { last = -1; break; }
        int64_t step = 0;
        wraps |= __builtin_mul_overflow(t.sizes[k] - 1, t.strides[k], &step) || __builtin_add_overflow(last, step, &last);
      }
      if (t.storage_offset < 0 || wraps || last >= s.numel) fail(name + ": view past the end of its storage");
      return make(std::move(t));
    }
    if (name == "torch._utils._rebuild_parameter") {
      if (a.empty() || !std::holds_alternative<StoredTensor>(a[0]->v)) fail(name + ": unexpected arguments");
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
  std::vector<ValuePtr> made_;
};

}  // namespace

std::vector<StoredTensor> read_torch_archive(const std::string& path) {
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
  std::vector<StoredTensor> out;
  for (const auto& [k, v] : std::get<DictItems>(root->v)) {
    if (!std::holds_alternative<std::string>(k->v)) throw Error::at(path, "a state dict key that is not a string");
    const std::string& name = std::get<std::string>(k->v);
    if (!std::holds_alternative<StoredTensor>(v->v)) throw Error::at(path, "'" + name + "' is not a tensor");
    out.push_back(std::get<StoredTensor>(v->v));
    out.back().name = name;
  }
  return out;
}

}  // namespace draftlab
