// The pickle machine: a stack of values, a stack of marks and a memo, with the objects it builds in
// TorchObjects (torch_objects.cpp). Every argument length is checked against the bytes left, every
// pop against the stack, every memo index against the memo (and there a tensor's view against its
// storage), before anything is read or copied; then the zip reader of torch.save's files.
#include "recall/formats/torch_pickle.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fmt/format.h>

#include <cstring>
#include <unordered_map>

#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/formats/torch_objects.h"

namespace recall {
namespace {

using Kind = PickleValue::Kind;

class Unpickler {
 public:
  Unpickler(std::string_view bytes, const StorageLoader& storage, const std::string& source)
      : b_(bytes),
        source_(source),
        objects_(storage, source, [this](const std::string& why) { return refuse(why); }) {}

  PickleRef run() {
    while (true) {
      const auto op = static_cast<unsigned char>(take(1)[0]);
      if (op == '.') {
        if (stack_.empty()) throw refuse("STOP with an empty stack");
        return stack_.back();
      }
      step(op);
    }
  }

 private:
  UsageError refuse(const std::string& why) const {
    return UsageError(
        fmt::format("{}: its pickle is damaged ({} at byte {}); it is refused", source_, why, at_));
  }

  std::string_view take(uint64_t n) {
    if (n > b_.size() - at_) throw refuse("truncated");
    auto out = b_.substr(at_, n);
    at_ += n;
    return out;
  }
  uint64_t take_uint(int n) {
    const auto s = take(n);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i)
      v |= static_cast<uint64_t>(static_cast<unsigned char>(s[i])) << (8 * i);
    return v;
  }
  std::string take_line() {
    const auto end = b_.find('\n', at_);
    if (end == std::string_view::npos) throw refuse("truncated");
    std::string out(b_.substr(at_, end - at_));
    at_ = end + 1;
    return out;
  }

  PickleRef pop() {
    if (stack_.size() <= floor()) throw refuse("stack underflow");
    auto v = stack_.back();
    stack_.pop_back();
    return v;
  }
  PickleRef& top() {
    if (stack_.size() <= floor()) throw refuse("stack underflow");
    return stack_.back();
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::vector<PickleRef> pop_mark() {
    if (marks_.empty()) throw refuse("no MARK");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PickleRef> out(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return out;
  }
  void push(PickleRef v) {
    if (stack_.size() > (size_t{1} << 24)) throw refuse("stack too deep");
    stack_.push_back(std::move(v));
  }
  void push_int(int64_t i) {
    auto v = make_pickle_value(Kind::kInt);
    v->i = i;
    push(v);
  }
  void push_string(Kind kind, std::string_view s) {
    auto v = make_pickle_value(kind);
    v->s = std::string(s);
    push(v);
  }
  void push_tuple(std::vector<PickleRef> items) {
    auto v = make_pickle_value(Kind::kTuple);
    v->items = std::move(items);
    push(v);
  }
  void put(uint64_t key) {
    if (stack_.empty()) throw refuse("PUT with an empty stack");
    memo_[key] = stack_.back();
  }
  void get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) throw refuse(fmt::format("memo {} is not set", key));
    push(it->second);
  }
  void set_items(PickleValue& dict, const std::vector<PickleRef>& kv) {
    if (kv.size() % 2) throw refuse("SETITEMS with an odd count");
    if (dict.kind == Kind::kOpaque) return;  // an object of a class this reader does not build
    if (dict.kind != Kind::kDict) throw refuse("SETITEM on a " + dict.describe());
    for (size_t i = 0; i < kv.size(); i += 2) {
      bool replaced = false;
      if (kv[i]->kind == Kind::kString || kv[i]->kind == Kind::kInt)
        for (auto& [k, v] : dict.entries)
          if (k->kind == kv[i]->kind && k->s == kv[i]->s && k->i == kv[i]->i) {
            v = kv[i + 1];
            replaced = true;
          }
      if (!replaced) dict.entries.emplace_back(kv[i], kv[i + 1]);
    }
  }
  void append(PickleValue& list, const std::vector<PickleRef>& items) {
    if (list.kind == Kind::kOpaque) return;
    if (list.kind != Kind::kList) throw refuse("APPEND on a " + list.describe());
    list.items.insert(list.items.end(), items.begin(), items.end());
  }

  // One opcode: each group's handler takes the opcodes it knows and returns whether it did.
  void step(unsigned char op) {
    if (!stack_op(op) && !scalar_op(op) && !container_op(op) && !object_op(op) && !memo_op(op))
      throw refuse(fmt::format("opcode 0x{:02x} is not one recall reads", op));
  }

  // Framing and the stack itself: PROTO, FRAME, MARK, POP, POP_MARK, DUP.
  bool stack_op(unsigned char op) {
    switch (op) {
      case 0x80:
        take(1);
        return true;  // PROTO
      case 0x95:
        take(8);
        return true;  // FRAME: a length hint only
      case '(':
        marks_.push_back(stack_.size());
        return true;
      case '0':
        pop();
        return true;
      case '1':
        pop_mark();
        return true;
      case '2':
        push(top());
        return true;
      default:
        return false;
    }
  }

  // LONG1, LONG4: little-endian two's complement of n bytes.
  int64_t take_long(unsigned char op) {
    const uint64_t n = take_uint(op == 0x8a ? 1 : 4);
    const auto s = take(n);
    if (n > 8) throw refuse("an integer wider than 64 bits");
    uint64_t u = 0;
    for (uint64_t i = 0; i < n; ++i)
      u |= static_cast<uint64_t>(static_cast<unsigned char>(s[i])) << (8 * i);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(s[n - 1]) & 0x80))
      u |= ~uint64_t{0} << (8 * n);
    return static_cast<int64_t>(u);
  }

  // BINFLOAT: a big-endian double.
  double take_double() {
    const auto s = take(8);
    uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u = (u << 8) | static_cast<unsigned char>(s[i]);
    double f = 0;
    std::memcpy(&f, &u, 8);
    return f;
  }

  // None, bools, ints, floats, strings and bytes.
  bool scalar_op(unsigned char op) {
    switch (op) {
      case 'N':
        push(make_pickle_value(Kind::kNone));
        return true;
      case 0x88:
      case 0x89: {
        auto v = make_pickle_value(Kind::kBool);
        v->i = op == 0x88;
        push(v);
        return true;
      }
      case 'J':
        push_int(static_cast<int32_t>(take_uint(4)));
        return true;
      case 'K':
        push_int(static_cast<int64_t>(take_uint(1)));
        return true;
      case 'M':
        push_int(static_cast<int64_t>(take_uint(2)));
        return true;
      case 0x8a:
      case 0x8b:
        push_int(take_long(op));
        return true;
      case 'G': {
        auto v = make_pickle_value(Kind::kFloat);
        v->f = take_double();
        push(v);
        return true;
      }
      case 'X':  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, BINSTRING, SHORT_BINSTRING
      case 0x8c:
      case 0x8d:
      case 'T':
      case 'U':
        push_string(Kind::kString, take(take_uint(length_bytes(op))));
        return true;
      case 'B':  // BINBYTES, SHORT_BINBYTES, BINBYTES8
      case 'C':
      case 0x8e:
        push_string(Kind::kBytes, take(take_uint(length_bytes(op))));
        return true;
      default:
        return false;
    }
  }

  // The width of a string's or bytes' length prefix.
  static int length_bytes(unsigned char op) {
    switch (op) {
      case 0x8c:
      case 'U':
      case 'C':
        return 1;
      case 0x8d:
      case 0x8e:
        return 8;
      default:
        return 4;
    }
  }

  // Lists (sets and frozensets become lists), tuples and dicts, and what adds to them.
  bool container_op(unsigned char op) {
    switch (op) {
      case ']':
      case 0x8f:  // EMPTY_SET
        push(make_pickle_value(Kind::kList));
        return true;
      case 'l':
      case 0x91: {  // LIST, FROZENSET
        auto v = make_pickle_value(Kind::kList);
        v->items = pop_mark();
        push(v);
        return true;
      }
      case 'a': {
        auto item = pop();
        append(*top(), {item});
        return true;
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        auto items = pop_mark();
        append(*top(), items);
        return true;
      }
      case ')':
        push_tuple({});
        return true;
      case 't':
        push_tuple(pop_mark());
        return true;
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
        const size_t n = op - 0x84u;
        std::vector<PickleRef> items(n);
        for (size_t i = n; i-- > 0;) items[i] = pop();
        push_tuple(std::move(items));
        return true;
      }
      case '}':
        push(make_pickle_value(Kind::kDict));
        return true;
      case 'd': {
        auto v = make_pickle_value(Kind::kDict);
        set_items(*v, pop_mark());
        push(v);
        return true;
      }
      case 's': {
        auto value = pop();
        auto key = pop();
        set_items(*top(), {key, value});
        return true;
      }
      case 'u': {
        auto kv = pop_mark();
        set_items(*top(), kv);
        return true;
      }
      default:
        return false;
    }
  }

  // Globals, the calls that build objects from them (call() knows which it builds), BUILD, and
  // torch's persistent ids.
  bool object_op(unsigned char op) {
    switch (op) {
      case 'c': {
        const std::string module = take_line();
        push_string(Kind::kGlobal, module + "." + take_line());
        return true;
      }
      case 0x93: {  // STACK_GLOBAL
        auto name = pop();
        auto module = pop();
        if (module->kind != Kind::kString || name->kind != Kind::kString)
          throw refuse("STACK_GLOBAL of a non-string");
        push_string(Kind::kGlobal, module->s + "." + name->s);
        return true;
      }
      case 'R':     // REDUCE callable args
      case 0x81:    // NEWOBJ cls args
      case 0x92: {  // NEWOBJ_EX cls args kwargs
        if (op == 0x92) pop();
        auto args = pop();
        auto callable = pop();
        if (args->kind != Kind::kTuple)
          throw refuse(fmt::format("{} without an argument tuple", op == 'R'    ? "REDUCE"
                                                                   : op == 0x81 ? "NEWOBJ"
                                                                                : "NEWOBJ_EX"));
        push(objects_.call(callable, args->items));
        return true;
      }
      case 'b':
        pop();
        top();
        return true;  // BUILD: object state; no object here runs code
      case 'Q':
        push(objects_.persistent(pop()));
        return true;
      default:
        return false;
    }
  }

  // The memo: PUT and GET in their binary and text forms, MEMOIZE.
  bool memo_op(unsigned char op) {
    switch (op) {
      case 'q':
        put(take_uint(1));
        return true;
      case 'r':
        put(take_uint(4));
        return true;
      case 0x94:
        put(memo_.size());
        return true;  // MEMOIZE
      case 'h':
        get(take_uint(1));
        return true;
      case 'j':
        get(take_uint(4));
        return true;
      case 'p':
        put(parse_decimal(take_line()));
        return true;
      case 'g':
        get(parse_decimal(take_line()));
        return true;
      default:
        return false;
    }
  }

  uint64_t parse_decimal(const std::string& s) {
    uint64_t v = 0;
    if (s.empty() || s.size() > 18) throw refuse("a bad memo index");
    for (char c : s) {
      if (c < '0' || c > '9') throw refuse("a bad memo index");
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return v;
  }

  std::string_view b_;
  size_t at_ = 0;
  const std::string& source_;
  std::vector<PickleRef> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PickleRef> memo_;
  TorchObjects objects_;
};

// The file's bytes to LibTorch's zip reader.
class BytesAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BytesAdapter(const std::string& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<uint64_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::string& bytes_;
};

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

}  // namespace

PickleRef unpickle(std::string_view bytes, const StorageLoader& storage,
                   const std::string& source) {
  return Unpickler(bytes, storage, source).run();
}

PickleRef read_torch_file(const std::string& path) {
  const std::string bytes = read_file("--from", path);
  if (bytes.size() < 4 || bytes.compare(0, 4, "PK\x03\x04") != 0)
    throw UsageError(
        fmt::format("{}: is not a torch.save file of torch >= 1.6 (a zip archive); re-save it with "
                    "torch.save from torch 1.6 or later",
                    path));
  try {
    caffe2::serialize::PyTorchStreamReader reader(std::make_shared<BytesAdapter>(bytes));
    if (!reader.hasRecord("data.pkl"))
      throw UsageError(
          fmt::format("{}: the archive holds no data.pkl; it is not a torch.save file", path));
    auto [pickle, pickle_size] = reader.getRecord("data.pkl");
    auto load = [&](const std::string& key, torch::ScalarType dtype, int64_t numel) {
      const std::string record = "data/" + key;
      if (!reader.hasRecord(record))
        throw UsageError(fmt::format("{}: storage {} is missing from the archive", path, key));
      auto [data, size] = reader.getRecord(record);
      const auto item = static_cast<uint64_t>(c10::elementSize(dtype));
      if (size / item != static_cast<uint64_t>(numel) || size % item)
        throw UsageError(fmt::format("{}: storage {} holds {} bytes, not {} elements of {}", path,
                                     key, size, numel, c10::toString(dtype)));
      auto t = torch::empty({numel}, torch::TensorOptions().dtype(dtype));
      if (size) std::memcpy(t.data_ptr(), data.get(), size);
      return t;
    };
    return unpickle(std::string_view(static_cast<const char*>(pickle.get()), pickle_size), load,
                    path);
  } catch (const c10::Error& e) {
    throw UsageError(fmt::format("{}: is not a readable torch.save archive ({})", path,
                                 first_line(e.what_without_backtrace())));
  }
}

}  // namespace recall
