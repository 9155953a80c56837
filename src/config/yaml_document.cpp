// Loading a YAML document safely. yaml-cpp turns an alias into a second reference to the anchored
// node, so `a: &x [*x]` (an alias inside its own anchor) becomes a cycle that every walk of the
// tree follows for ever, and a few nested aliases expand a small file into billions of nodes.
// One pass over the parser's events (linear in the text) refuses both, and a second document,
// before the tree is built.
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "shardwise/core/message_text.hpp"
#include "yaml_fields.hpp"

namespace shardwise::config_detail {
namespace {

std::string line_text(const YAML::Mark& mark) {
  return mark.line >= 0 ? std::to_string(mark.line + 1) : std::string("?");
}

// Counts the nodes the document expands to (an alias counts as the whole anchored node) and
// refuses an alias used inside the node it names.
class AliasCheck final : public YAML::EventHandler {
 public:
  explicit AliasCheck(std::string prefix) : prefix_(std::move(prefix)) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnAnchor(const YAML::Mark&, const std::string& name) override { pending_name_ = name; }
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    leaf(mark, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto it = anchors_.find(anchor);
    if (it != anchors_.end() && it->second.open) {
      throw ConfigError(
          str_cat(prefix_, "alias '*", printable(it->second.name), "' on line ", line_text(mark),
                  " refers to the node that contains it (anchored on "
                  "line ",
                  line_text(it->second.mark), "); recursive aliases are not allowed"));
    }
    add(it == anchors_.end() ? 1 : it->second.nodes, mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    YAML::anchor_t anchor;
    std::int64_t nodes_before;  // total_ when the container opened
  };
  struct Anchored {
    std::string name;
    YAML::Mark mark;
    std::int64_t nodes = 0;  // what the anchored node expands to, once closed
    bool open = false;       // still being read: an alias to it would be a cycle
  };

  void add(std::int64_t nodes, const YAML::Mark& mark) {
    total_ += nodes;  // both at most kMaxYamlNodes: no overflow
    SW_REQUIRE(total_ <= kMaxYamlNodes, ConfigError, prefix_,
               "aliases expand the document to more than ", kMaxYamlNodes, " nodes (at line ",
               line_text(mark), "); a training config is far smaller");
  }
  void name_anchor(YAML::anchor_t anchor, const YAML::Mark& mark, std::int64_t nodes, bool open) {
    if (anchor != YAML::NullAnchor) anchors_[anchor] = Anchored{pending_name_, mark, nodes, open};
    pending_name_.clear();
  }
  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    add(1, mark);
    name_anchor(anchor, mark, 1, false);
  }
  void open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    add(1, mark);
    name_anchor(anchor, mark, 0, true);
    open_.push_back(Open{anchor, total_ - 1});
  }
  void close() {
    const Open done = open_.back();
    open_.pop_back();
    if (done.anchor != YAML::NullAnchor) {
      Anchored& anchored = anchors_[done.anchor];
      anchored.nodes = total_ - done.nodes_before;
      anchored.open = false;
    }
  }

  std::string prefix_;
  std::vector<Open> open_;
  std::unordered_map<YAML::anchor_t, Anchored> anchors_;
  std::string pending_name_;
  std::int64_t total_ = 0;
};

// Refuses a second document as soon as it starts.
class SecondDocumentCheck final : public YAML::EventHandler {
 public:
  explicit SecondDocumentCheck(const std::string& prefix) : prefix_(prefix) {}
  void OnDocumentStart(const YAML::Mark& mark) override {
    throw ConfigError(str_cat(prefix_, "a second YAML document starts on line ", line_text(mark),
                              " ('---'); a config is one document (remove the separator or "
                              "split the file)"));
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  const std::string& prefix_;
};

}  // namespace

YAML::Node load_yaml_document(const std::string& text, std::string_view what,
                              std::string_view invalid) {
  const std::string prefix = what.empty() ? std::string() : str_cat(what, ": ");
  // yaml-cpp reads a NUL byte as an escape and blames the line after it.
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos) {
    const auto line =
        1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n');
    throw ConfigError(str_cat(prefix, invalid, ": a NUL byte on line ", line,
                              " (YAML is text; is this a binary file?)"));
  }
  std::istringstream in(text);
  YAML::Parser parser(in);
  AliasCheck check(prefix);
  try {
    parser.HandleNextDocument(check);
    SecondDocumentCheck second(prefix);
    parser.HandleNextDocument(second);
    return YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {  // its own text is "bad file"
    throw ConfigError(str_cat(prefix, invalid, ": nests deeper than ", e.depth() - 1,
                              " levels at line ", e.mark.line + 1, "; no config does"));
  } catch (const YAML::Exception& e) {
    throw ConfigError(str_cat(prefix, invalid, ": ", printable(e.what(), 200)));
  }
}

}  // namespace shardwise::config_detail
