// One parser for both YAML and JSON input: a YAML document is converted to
// nlohmann::json (YAML is a superset of JSON) and every field's line is kept
// by its path ("nodes[3].gpus"), so an error found later while reading the
// JSON can still be reported as "cluster.yaml:12: nodes[3].gpus: ...".
#ifndef TIDAL_CONFIG_YAML_DOCUMENT_H_
#define TIDAL_CONFIG_YAML_DOCUMENT_H_

#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/common/status.h"

namespace tidal::config {

class YamlDocument {
 public:
  // Parses `text`; `source_name` (a file name) prefixes every error.
  static StatusOr<YamlDocument> Parse(std::string_view text, std::string source_name);
  // Parses `text` as JSON (RFC 8259, not YAML's reading of it): a syntax
  // error names the line it is on, and so does a field error Locate()
  // rewrites. Nesting deeper than kMaxJsonDepth is refused before parsing.
  static StatusOr<YamlDocument> ParseJson(std::string_view text, std::string source_name);
  // Reads and parses the file at `path`, as JSON when it ends in ".json";
  // errors name the file.
  static StatusOr<YamlDocument> Load(const std::string& path);

  const nlohmann::json& root() const { return root_; }
  const std::string& source_name() const { return source_name_; }

  // The 1-based line of the field at `path`, or of its nearest recorded
  // ancestor (a missing field is reported at its parent object).
  int LineOf(std::string_view path) const;

  // Rewrites an error whose message starts with a field path ("a.b[2]: ...")
  // into "source:line: a.b[2]: ...". OK passes through.
  Status Locate(const Status& status) const;

 private:
  nlohmann::json root_;
  std::string source_name_;
  std::map<std::string, int, std::less<>> lines_;
};

// Reads a whole file; the error names the path.
StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace tidal::config

#endif  // TIDAL_CONFIG_YAML_DOCUMENT_H_
