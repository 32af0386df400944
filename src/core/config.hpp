// Run configuration: TOML files checked against a schema. Every key must be
// known, typed and in range; a bad file is refused with a message naming the
// key, the file and line, the value and the rule ("train.lr = -1 at run.toml:5
// is out of range: must be in [0, 10]"). Values can be overridden from the
// command line with `--set section.key=value`, checked by the same rules.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace burst {

using ConfigValue = std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>, std::vector<std::string>>;

class Config {
 public:
  std::int64_t get_int(const std::string& key) const;
  double get_real(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  const std::vector<std::int64_t>& get_int_list(const std::string& key) const;
  const std::vector<std::string>& get_string_list(const std::string& key) const;
  // Where a value came from: "run.toml:12", "--set", or "default".
  const std::string& origin(const std::string& key) const;
  const std::map<std::string, ConfigValue>& values() const { return values_; }
  // key = value lines, sorted, for logs and HDF5 attributes.
  std::string dump() const;
  // The TOML file the values were read from (ConfigSchema::parse_file / load), "" if none: an input no output
  // may replace.
  const std::string& file() const { return file_; }

 private:
  friend class ConfigSchema;
  std::string file_;
  const ConfigValue& at(const std::string& key) const;
  std::map<std::string, ConfigValue> values_;
  std::map<std::string, std::string> origin_;
};

class ConfigSchema {
 public:
  enum class Type { Int, Real, Bool, String, IntList, StringList };
  struct Key {
    std::string name;
    Type type;
    ConfigValue def;
    double min = 0, max = 0;  // inclusive bounds for Int, Real and IntList elements
    std::vector<std::string> choices;  // for String and StringList elements; empty = any
    std::string doc;
  };
  // A cross-key rule: returns an empty string when the config satisfies it,
  // otherwise the message to report.
  using Rule = std::function<std::string(const Config&)>;

  ConfigSchema& integer(const std::string& name, std::int64_t def, std::int64_t min, std::int64_t max, const std::string& doc);
  ConfigSchema& real(const std::string& name, double def, double min, double max, const std::string& doc);
  ConfigSchema& boolean(const std::string& name, bool def, const std::string& doc);
  ConfigSchema& string(const std::string& name, const std::string& def, std::vector<std::string> choices, const std::string& doc);
  ConfigSchema& int_list(const std::string& name, std::vector<std::int64_t> def, std::int64_t min, std::int64_t max,
                         const std::string& doc);
  // A list of strings (may be empty; TOML ["a", "b"], or on --set also a
  // bare a,b), each one of `choices` when given.
  ConfigSchema& string_list(const std::string& name, std::vector<std::string> def, std::vector<std::string> choices,
                            const std::string& doc);
  ConfigSchema& rule(Rule r);

  Config defaults() const;
  // Parse TOML text; `source` names it in messages. Throws Error(Config).
  Config parse_string(const std::string& text, const std::string& source) const;
  Config parse_file(const std::string& path) const;
  // Apply "section.key=value" (value in TOML syntax, or a bare word for strings).
  void apply_override(Config& cfg, const std::string& assignment) const;
  // The run configuration of a command: the file (or the defaults when
  // `path` is empty), then each --set override, then the cross-key rules.
  Config load(const std::string& path, const std::vector<std::string>& overrides) const;
  // Re-check the cross-key rules (after overrides).
  void validate(const Config& cfg) const;
  // A table of keys, defaults and rules for --help.
  std::string describe() const;
  const std::vector<Key>& keys() const { return keys_; }

 private:
  const Key* find(const std::string& name) const;
  std::string suggest(const std::string& name) const;
  // A key of section `name` to show in a message ("" if `name` is no section).
  std::string section_example(const std::string& name) const;
  void check_value(const Key& k, const ConfigValue& v, const std::string& where) const;
  ConfigSchema& add(Key k);
  std::vector<Key> keys_;
  std::vector<Rule> rules_;
};

}  // namespace burst
