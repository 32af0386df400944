#include "core/config.hpp"

#include "core/error.hpp"
#include "core/suggest.hpp"
#include "core/text_file.hpp"

#define TOML_HEADER_ONLY 1
#define TOML_ENABLE_FORMATTERS 0
// toml++ 3.x states some checks of the input as TOML_ASSERT_ASSUME: an
// assert in debug builds (it aborts on "[|x]", found by scripts/fuzz.sh,
// kept in tests/fuzz/regressions/config/) and an optimizer assumption under
// NDEBUG (undefined behaviour on such input). The parser reports that input
// itself right after the check, so the checks become no-ops: a parse error
// for the user whatever the build type.
#pragma push_macro("NDEBUG")
#undef NDEBUG
#define TOML_ASSERT(expr) static_cast<void>(0)
#include <toml++/toml.h>
#pragma pop_macro("NDEBUG")

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace burst {

// ---------------------------------------------------------------- Config

const ConfigValue& Config::at(const std::string& key) const {
  auto it = values_.find(key);
  BURST_ASSERT(it != values_.end(), "config key '", key, "' is not in the schema");
  return it->second;
}

template <class T> static const T& typed(const ConfigValue& v, const std::string& key, const char* want) {
  const T* p = std::get_if<T>(&v);
  BURST_ASSERT(p != nullptr, "config key '", key, "' is not of type ", want);
  return *p;
}

std::int64_t Config::get_int(const std::string& key) const { return typed<std::int64_t>(at(key), key, "integer"); }
double Config::get_real(const std::string& key) const { return typed<double>(at(key), key, "real"); }
bool Config::get_bool(const std::string& key) const { return typed<bool>(at(key), key, "boolean"); }
const std::string& Config::get_string(const std::string& key) const { return typed<std::string>(at(key), key, "string"); }
const std::vector<std::int64_t>& Config::get_int_list(const std::string& key) const {
  return typed<std::vector<std::int64_t>>(at(key), key, "integer list");
}
const std::vector<std::string>& Config::get_string_list(const std::string& key) const {
  return typed<std::vector<std::string>>(at(key), key, "string list");
}
const std::string& Config::origin(const std::string& key) const {
  static const std::string none = "default";
  auto it = origin_.find(key);
  return it == origin_.end() ? none : it->second;
}

static std::string value_text(const ConfigValue& v) {
  std::ostringstream os;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) os << '"' << x << '"';
        else if constexpr (std::is_same_v<T, bool>) os << (x ? "true" : "false");
        else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
          os << '[';
          for (size_t i = 0; i < x.size(); ++i) os << (i ? ", " : "") << x[i];
          os << ']';
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          os << '[';
          for (size_t i = 0; i < x.size(); ++i) os << (i ? ", " : "") << '"' << x[i] << '"';
          os << ']';
        } else os << x;
      },
      v);
  return os.str();
}

std::string Config::dump() const {
  std::string out;
  for (auto& [k, v] : values_) out += k + " = " + value_text(v) + "\n";
  return out;
}

// ---------------------------------------------------------------- schema

ConfigSchema& ConfigSchema::add(Key k) {
  BURST_ASSERT(find(k.name) == nullptr, "schema key '", k.name, "' declared twice");
  keys_.push_back(std::move(k));
  return *this;
}
ConfigSchema& ConfigSchema::integer(const std::string& n, std::int64_t d, std::int64_t lo, std::int64_t hi, const std::string& doc) {
  return add({n, Type::Int, d, double(lo), double(hi), {}, doc});
}
ConfigSchema& ConfigSchema::real(const std::string& n, double d, double lo, double hi, const std::string& doc) {
  return add({n, Type::Real, d, lo, hi, {}, doc});
}
ConfigSchema& ConfigSchema::boolean(const std::string& n, bool d, const std::string& doc) {
  return add({n, Type::Bool, d, 0, 0, {}, doc});
}
ConfigSchema& ConfigSchema::string(const std::string& n, const std::string& d, std::vector<std::string> choices, const std::string& doc) {
  return add({n, Type::String, d, 0, 0, std::move(choices), doc});
}
ConfigSchema& ConfigSchema::int_list(const std::string& n, std::vector<std::int64_t> d, std::int64_t lo, std::int64_t hi,
                                     const std::string& doc) {
  return add({n, Type::IntList, std::move(d), double(lo), double(hi), {}, doc});
}
ConfigSchema& ConfigSchema::string_list(const std::string& n, std::vector<std::string> d, std::vector<std::string> choices,
                                        const std::string& doc) {
  return add({n, Type::StringList, std::move(d), 0, 0, std::move(choices), doc});
}
ConfigSchema& ConfigSchema::rule(Rule r) {
  rules_.push_back(std::move(r));
  return *this;
}

const ConfigSchema::Key* ConfigSchema::find(const std::string& name) const {
  for (auto& k : keys_)
    if (k.name == name) return &k;
  return nullptr;
}

static size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates) {
  // Suggest only close matches: at most half the name wrong, and 1 to 3 edits.
  size_t bd = std::max<size_t>(1, std::min<size_t>(3, name.size() / 2)) + 1;
  std::string best_name;
  for (auto& cand : candidates) {
    size_t d = edit_distance(name, cand);
    if (d < bd) bd = d, best_name = cand;
  }
  return best_name.empty() ? "" : "; did you mean '" + best_name + "'?";
}

std::string ConfigSchema::section_example(const std::string& name) const {
  // The first key of section `name` ("train" -> "train.steps"), or "" when
  // `name` is not a section (no key starts with "name.").
  for (auto& k : keys_)
    if (k.name.rfind(name + ".", 0) == 0) return k.name;
  return "";
}

std::string ConfigSchema::suggest(const std::string& name) const {
  // The key's last part under another section ("train.checkpoint_every" ->
  // "io.checkpoint_every"): the full name may be too far off for an edit.
  const size_t last_dot = name.rfind('.');
  if (last_dot != std::string::npos) {
    const std::string leaf = name.substr(last_dot);
    std::vector<std::string> same_leaf;
    for (auto& k : keys_)
      if (k.name.size() > leaf.size() && k.name.compare(k.name.size() - leaf.size(), leaf.size(), leaf) == 0)
        same_leaf.push_back(k.name);
    if (same_leaf.size() == 1) return "; did you mean '" + same_leaf[0] + "'?";
  }
  std::vector<std::string> names;
  for (auto& k : keys_) {
    names.push_back(k.name);
    // Sections too: every dotted prefix of a key ("model" of "model.heads").
    for (size_t dot = k.name.find('.'); dot != std::string::npos; dot = k.name.find('.', dot + 1))
      names.push_back(k.name.substr(0, dot));
  }
  return did_you_mean(name, names);
}

static const char* type_name(ConfigSchema::Type t) {
  switch (t) {
    case ConfigSchema::Type::Int: return "an integer";
    case ConfigSchema::Type::Real: return "a number";
    case ConfigSchema::Type::Bool: return "true or false";
    case ConfigSchema::Type::String: return "a string";
    case ConfigSchema::Type::IntList: return "a list of integers";
    case ConfigSchema::Type::StringList: return "a list of strings";
  }
  return "?";
}

// A bound as written: whole numbers in full ([1, 1073741824], not 1.07374e+09).
static std::string bound_text(double v) {
  std::ostringstream os;
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.007199254740992e15)
    os << std::int64_t(v);
  else
    os << v;
  return os.str();
}

void ConfigSchema::check_value(const Key& k, const ConfigValue& v, const std::string& where) const {
  auto out_of_range = [&](double x) { return !(x >= k.min && x <= k.max); };
  const std::string head = k.name + " = " + value_text(v) + " at " + where;
  switch (k.type) {
    case Type::Int:
      BURST_CHECK_CONFIG(!out_of_range(double(std::get<std::int64_t>(v))), head, " is out of range: must be in [",
                         bound_text(k.min), ", ", bound_text(k.max), "]");
      break;
    case Type::Real: {
      double x = std::get<double>(v);
      BURST_CHECK_CONFIG(std::isfinite(x), head, " is not a finite number");
      BURST_CHECK_CONFIG(!out_of_range(x), head, " is out of range: must be in [", bound_text(k.min), ", ",
                         bound_text(k.max), "]");
      break;
    }
    case Type::IntList: {
      auto& xs = std::get<std::vector<std::int64_t>>(v);
      BURST_CHECK_CONFIG(!xs.empty(), head, " is empty: give at least one value");
      for (auto x : xs)
        BURST_CHECK_CONFIG(!out_of_range(double(x)), head, ": element ", x, " is out of range: must be in [",
                           bound_text(k.min), ", ", bound_text(k.max), "]");
      break;
    }
    case Type::String: {
      if (k.choices.empty()) break;
      auto& s = std::get<std::string>(v);
      if (std::find(k.choices.begin(), k.choices.end(), s) != k.choices.end()) break;
      std::string list;
      for (auto& c : k.choices) list += (list.empty() ? "" : ", ") + c;
      BURST_FAIL(ErrorKind::Config, head, " is not allowed: must be one of ", list);
    }
    case Type::StringList: {
      if (k.choices.empty()) break;
      for (auto& s : std::get<std::vector<std::string>>(v)) {
        if (std::find(k.choices.begin(), k.choices.end(), s) != k.choices.end()) continue;
        std::string list;
        for (auto& c : k.choices) list += (list.empty() ? "" : ", ") + c;
        BURST_FAIL(ErrorKind::Config, head, ": element \"", s, "\" is not allowed: must be one of ", list);
      }
      break;
    }
    case Type::Bool: break;
  }
}

// Convert one TOML node to the key's type, or fail naming what was expected.
static ConfigValue convert(const ConfigSchema::Key& k, const toml::node& n, const std::string& where) {
  auto wrong = [&]() -> ConfigValue {
    BURST_FAIL(ErrorKind::Config, k.name, " at ", where, " must be ", type_name(k.type), ", got a TOML ",
               toml::impl::node_type_friendly_names[static_cast<int>(n.type())]);
  };
  switch (k.type) {
    case ConfigSchema::Type::Int:
      if (n.is_integer()) return n.value<std::int64_t>().value();
      return wrong();
    case ConfigSchema::Type::Real:
      if (n.is_floating_point()) return n.value<double>().value();
      if (n.is_integer()) return double(n.value<std::int64_t>().value());
      return wrong();
    case ConfigSchema::Type::Bool:
      if (n.is_boolean()) return n.value<bool>().value();
      return wrong();
    case ConfigSchema::Type::String:
      if (n.is_string()) return n.value<std::string>().value();
      return wrong();
    case ConfigSchema::Type::IntList: {
      if (n.is_integer()) return std::vector<std::int64_t>{n.value<std::int64_t>().value()};
      if (!n.is_array()) return wrong();
      std::vector<std::int64_t> xs;
      for (auto& e : *n.as_array()) {
        BURST_CHECK_CONFIG(e.is_integer(), k.name, " at ", where, " must be a list of integers, but an element is a TOML ",
                           toml::impl::node_type_friendly_names[static_cast<int>(e.type())]);
        xs.push_back(e.value<std::int64_t>().value());
      }
      return xs;
    }
    case ConfigSchema::Type::StringList: {
      if (n.is_string()) return std::vector<std::string>{n.value<std::string>().value()};
      if (!n.is_array()) return wrong();
      std::vector<std::string> xs;
      for (auto& e : *n.as_array()) {
        BURST_CHECK_CONFIG(e.is_string(), k.name, " at ", where, " must be a list of strings, but an element is a TOML ",
                           toml::impl::node_type_friendly_names[static_cast<int>(e.type())]);
        xs.push_back(e.value<std::string>().value());
      }
      return xs;
    }
  }
  return wrong();
}

Config ConfigSchema::defaults() const {
  Config c;
  for (auto& k : keys_) c.values_[k.name] = k.def;
  return c;
}

// toml++ 3.x has undefined behaviour (__builtin_unreachable in its
// non-ASCII whitespace test, found by scripts/fuzz.sh) when a non-ASCII
// character appears where it looks for whitespace: anywhere outside strings
// and comments, and after a line-ending backslash in a """ string. TOML
// allows non-ASCII nowhere else, so such text is refused here, before the
// parser sees it. Returns "" or the position and the reason.
static std::string non_ascii_outside_strings(const std::string& text) {
  enum { Normal, Comment, Basic, Literal, MultiBasic, MultiLiteral } st = Normal;
  long line = 1, col = 0;
  auto at = [&](const char* what) { return std::to_string(line) + ":" + std::to_string(col) + ": " + what; };
  auto ws = [&](size_t i) { return i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n'); };
  auto starts = [&](size_t i, const char* q) { return text.compare(i, 3, q) == 0; };
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    ++col;
    if (c == '\n') line += 1, col = 0;
    switch (st) {
      case Normal:
        if (c >= 0x80) return at("a non-ASCII character outside a string or comment");
        if (c == '#') st = Comment;
        else if (c == '"') st = starts(i, "\"\"\"") ? (i += 2, col += 2, MultiBasic) : Basic;
        else if (c == '\'') st = starts(i, "'''") ? (i += 2, col += 2, MultiLiteral) : Literal;
        break;
      case Comment:
        if (c == '\n') st = Normal;
        break;
      case Basic:
        if (c == '\\') ++i, ++col;
        else if (c == '"' || c == '\n') st = Normal;
        break;
      case Literal:
        if (c == '\'' || c == '\n') st = Normal;
        break;
      case MultiBasic:
        if (c == '\\' && ws(i + 1)) {
          // A line-ending backslash: the parser skips the whitespace after it.
          while (ws(i + 1)) {
            ++i, ++col;
            if (text[i] == '\n') line += 1, col = 0;
          }
          if (i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80)
            return at("a non-ASCII character after a line-ending backslash");
        } else if (c == '\\') {
          ++i, ++col;
        } else if (starts(i, "\"\"\"")) {
          st = Normal, i += 2, col += 2;
        }
        break;
      case MultiLiteral:
        if (starts(i, "'''")) st = Normal, i += 2, col += 2;
        break;
    }
  }
  return "";
}

static std::string location(const std::string& source, const toml::source_region& r) {
  return source + ":" + std::to_string(r.begin.line);
}

Config ConfigSchema::parse_string(const std::string& text, const std::string& source) const {
  toml::table root;
  const std::string bad = non_ascii_outside_strings(text);
  BURST_CHECK_CONFIG(bad.empty(), "cannot parse ", source, ":", bad);
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    BURST_FAIL(ErrorKind::Config, "cannot parse ", source, ":", e.source().begin.line, ":", e.source().begin.column,
               ": ", std::string(e.description()));
  }
  Config cfg = defaults();
  std::function<void(const toml::table&, const std::string&)> walk = [&](const toml::table& t, const std::string& prefix) {
    for (auto&& [key, node] : t) {
      std::string name = prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
      const std::string where = location(source, node.source());
      const Key* k = find(name);
      if (node.is_table() && k == nullptr) {
        bool known_section = std::any_of(keys_.begin(), keys_.end(),
                                         [&](const Key& x) { return x.name.rfind(name + ".", 0) == 0; });
        BURST_CHECK_CONFIG(known_section, "unknown section [", name, "] at ", where, suggest(name));
        walk(*node.as_table(), name);
        continue;
      }
      if (k == nullptr) {
        // A section's name given a value ("train = 5") or as an array of
        // tables ("[[train]]"): not an unknown key, and no suggestion of itself.
        const std::string example = section_example(name);
        BURST_CHECK_CONFIG(example.empty(), "'", name, "' at ", where, " is a section, not a key: write [", name,
                           "] (a table, not ", node.is_array() ? "an array of tables [[" + name + "]]" : "a value",
                           ") with its keys under it, e.g. ", example.substr(name.size() + 1), " = ...");
      }
      BURST_CHECK_CONFIG(k != nullptr, "unknown key '", name, "' at ", where, suggest(name));
      ConfigValue v = convert(*k, node, where);
      check_value(*k, v, where);
      cfg.values_[name] = std::move(v);
      cfg.origin_[name] = where;
    }
  };
  walk(root, "");
  validate(cfg);
  return cfg;
}

Config ConfigSchema::parse_file(const std::string& path) const {
  Config cfg = parse_string(read_text_file("config file", path, ErrorKind::Config), path);
  cfg.file_ = path;
  return cfg;
}

void ConfigSchema::apply_override(Config& cfg, const std::string& assignment) const {
  auto eq = assignment.find('=');
  BURST_CHECK_CONFIG(eq != std::string::npos && eq > 0, "--set '", assignment, "' must have the form section.key=value");
  std::string name = assignment.substr(0, eq);
  std::string value = assignment.substr(eq + 1);
  name.erase(name.find_last_not_of(" \t") + 1);
  const Key* k = find(name);
  if (k == nullptr) {
    const std::string example = section_example(name);
    BURST_CHECK_CONFIG(example.empty(), "--set: '", name, "' is a section, not a key: set one of its keys, e.g. --set ",
                       example, "=...");
  }
  BURST_CHECK_CONFIG(k != nullptr, "--set: unknown key '", name, "'", suggest(name));
  ConfigValue v;
  toml::table t;
  bool parsed = true;
  try {
    // Text toml++ cannot take safely is not TOML: then a bare word.
    parsed = non_ascii_outside_strings("v = " + value).empty();
    if (parsed) t = toml::parse("v = " + value, std::string("--set"));
  } catch (const toml::parse_error&) {
    parsed = false;
  }
  if (!parsed && (k->type == Type::Int || k->type == Type::IntList)) {
    // Digits toml++ refused: a whole number beyond 64 bits, not "not an integer".
    std::string d = value;
    d.erase(0, d.find_first_not_of(" \t"));
    d.erase(d.find_last_not_of(" \t") + 1);
    if (!d.empty() && (d[0] == '+' || d[0] == '-')) d.erase(0, 1);
    // digits alone (toml++ refuses leading zeros and stray underscores too: those stay "not an integer")
    d.erase(0, std::min(d.find_first_not_of('0'), d.size()));
    const bool beyond = d.size() > 18 && d.find_first_not_of("0123456789") == std::string::npos &&
                        (d.size() > 19 || d > "9223372036854775807");
    BURST_CHECK_CONFIG(!beyond, "--set ", name, "=", value, ": '", value, "' is out of range: must be in [", bound_text(k->min),
                       ", ", bound_text(k->max), "]");
  }
  if (!parsed || (k->type == Type::String && !t["v"].is_string())) {
    BURST_CHECK_CONFIG(k->type == Type::String || k->type == Type::StringList, "--set ", name, "=", value, ": '", value,
                       "' is not ", type_name(k->type));
    if (k->type == Type::String) {
      v = value;  // a bare word for a string key
    } else {  // bare words a,b for a string list
      std::vector<std::string> xs;
      std::stringstream ss(value);
      for (std::string w; std::getline(ss, w, ',');)
        if (!w.empty()) xs.push_back(w);
      v = xs;
    }
  } else {
    v = convert(*k, *t.get("v"), "--set");
  }
  check_value(*k, v, "--set");
  cfg.values_[name] = std::move(v);
  cfg.origin_[name] = "--set";
}

Config ConfigSchema::load(const std::string& path, const std::vector<std::string>& overrides) const {
  Config cfg = path.empty() ? defaults() : parse_file(path);
  for (auto& o : overrides) apply_override(cfg, o);
  validate(cfg);
  return cfg;
}

void ConfigSchema::validate(const Config& cfg) const {
  for (auto& r : rules_) {
    std::string msg = r(cfg);
    BURST_CHECK_CONFIG(msg.empty(), msg);
  }
}

std::string ConfigSchema::describe() const {
  std::string out;
  for (auto& k : keys_) {
    out += "  " + k.name + " (" + type_name(k.type) + ", default " + value_text(k.def);
    if (k.type == Type::Int || k.type == Type::Real || k.type == Type::IntList)
      out += ", in [" + bound_text(k.min) + ", " + bound_text(k.max) + "]";
    if (!k.choices.empty()) {
      out += ", one of";
      for (auto& c : k.choices) out += " " + c;
    }
    out += "): " + k.doc + "\n";
  }
  return out;
}

}  // namespace burst
