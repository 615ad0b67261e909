// compressed-tensors module patterns (module_pattern.hpp).
#include "module_pattern.hpp"

#include <utility>

namespace kvsight::hf_config {

// Recursive descent over the pattern, building NFA fragments (Thompson's construction): each
// fragment is a start state and the successor slots left open, patched to what follows.
class PatternCompiler {
 public:
  using State = ModulePattern::State;
  explicit PatternCompiler(std::string_view p, std::vector<State>& states) : p_(p), s_(states) {}

  struct Frag {
    int start = -1;
    std::vector<std::pair<int, int>> outs;  // (state, 0 = out / 1 = out2)
  };

  std::optional<Frag> compile() {
    if (pos_ < p_.size() && p_[pos_] == '^') ++pos_;  // re.match anchors at the start anyway
    std::optional<Frag> f = alternation();
    if (!f || pos_ != p_.size()) return std::nullopt;
    return f;
  }

 private:
  int add(State st) {
    s_.push_back(std::move(st));
    return static_cast<int>(s_.size()) - 1;
  }
  void patch(const Frag& f, int to) {
    for (auto [state, which] : f.outs) (which == 0 ? s_[state].out : s_[state].out2) = to;
  }
  static Frag single(int state) { return {state, {{state, 0}}}; }

  std::optional<Frag> alternation() {
    std::optional<Frag> left = concatenation();
    if (!left) return std::nullopt;
    while (pos_ < p_.size() && p_[pos_] == '|') {
      ++pos_;
      std::optional<Frag> right = concatenation();
      if (!right) return std::nullopt;
      State split;
      split.kind = State::Kind::split;
      split.out = left->start;
      split.out2 = right->start;
      Frag both{add(split), left->outs};
      both.outs.insert(both.outs.end(), right->outs.begin(), right->outs.end());
      left = both;
    }
    return left;
  }

  std::optional<Frag> concatenation() {
    std::optional<Frag> whole;
    while (pos_ < p_.size() && p_[pos_] != '|' && p_[pos_] != ')') {
      std::optional<Frag> next = repeat();
      if (!next) return std::nullopt;
      if (!whole) {
        whole = next;
      } else {
        patch(*whole, next->start);
        whole->outs = next->outs;
      }
    }
    if (!whole) {  // an empty branch: a jump that matches nothing
      State jump;
      jump.kind = State::Kind::jump;
      whole = single(add(jump));
    }
    return whole;
  }

  std::optional<Frag> repeat() {
    std::optional<Frag> f = atom();
    if (!f) return std::nullopt;
    while (pos_ < p_.size() && (p_[pos_] == '*' || p_[pos_] == '+' || p_[pos_] == '?')) {
      const char q = p_[pos_++];
      if (pos_ < p_.size() && p_[pos_] == '?') ++pos_;  // lazy: the same set of matches
      State split;
      split.kind = State::Kind::split;
      split.out = f->start;
      const int s = add(split);
      if (q == '*') {
        patch(*f, s);
        f = Frag{s, {{s, 1}}};
      } else if (q == '+') {
        patch(*f, s);
        f = Frag{f->start, {{s, 1}}};
      } else {
        Frag opt{s, f->outs};
        opt.outs.push_back({s, 1});
        f = opt;
      }
    }
    if (pos_ < p_.size() && p_[pos_] == '{') return std::nullopt;  // counted repeats: not read
    return f;
  }

  bool escape_class(char e, State& st) {
    auto add_range = [&](char a, char b) { st.ranges.push_back({a, b}); };
    switch (e) {
      case 'd':
      case 'D':
        add_range('0', '9');
        break;
      case 'w':
      case 'W':
        add_range('a', 'z');
        add_range('A', 'Z');
        add_range('0', '9');
        add_range('_', '_');
        break;
      case 's':
      case 'S':
        add_range(' ', ' ');
        add_range('\t', '\r');
        break;
      default:
        return false;
    }
    if (e == 'D' || e == 'W' || e == 'S') st.negated = true;
    return true;
  }

  std::optional<Frag> atom() {
    const char c = p_[pos_++];
    State st;
    switch (c) {
      case '(': {
        if (p_.substr(pos_, 2) == "?:") pos_ += 2;
        else if (pos_ < p_.size() && p_[pos_] == '?') return std::nullopt;  // lookarounds, flags
        std::optional<Frag> inner = alternation();
        if (!inner || pos_ >= p_.size() || p_[pos_] != ')') return std::nullopt;
        ++pos_;
        return inner;
      }
      case '[':
        return klass();
      case '.':
        st.kind = State::Kind::any;
        return single(add(st));
      case '$':
        st.kind = State::Kind::end_anchor;
        return single(add(st));
      case '\\': {
        if (pos_ >= p_.size()) return std::nullopt;
        const char e = p_[pos_++];
        st.kind = State::Kind::klass;
        if (escape_class(e, st)) return single(add(st));
        if (std::string_view(".[]()|*+?{}^$\\-/_:").find(e) == std::string_view::npos) return std::nullopt;
        st.kind = State::Kind::character;
        st.c = e;
        return single(add(st));
      }
      case '*':
      case '+':
      case '?':
      case '{':
      case '^':
        return std::nullopt;
      default:
        st.kind = State::Kind::character;
        st.c = c;
        return single(add(st));
    }
  }

  std::optional<Frag> klass() {
    State st;
    st.kind = State::Kind::klass;
    if (pos_ < p_.size() && p_[pos_] == '^') {
      st.negated = true;
      ++pos_;
    }
    bool first = true;
    while (pos_ < p_.size() && (p_[pos_] != ']' || first)) {
      first = false;
      char a = p_[pos_++];
      if (a == '\\') {
        if (pos_ >= p_.size()) return std::nullopt;
        const char e = p_[pos_++];
        State sub;
        if (escape_class(e, sub)) {
          if (sub.negated) return std::nullopt;
          st.ranges.insert(st.ranges.end(), sub.ranges.begin(), sub.ranges.end());
          continue;
        }
        a = e;
      }
      char b = a;
      if (pos_ + 1 < p_.size() && p_[pos_] == '-' && p_[pos_ + 1] != ']') {
        b = p_[pos_ + 1];
        pos_ += 2;
        if (b == '\\') return std::nullopt;
      }
      st.ranges.push_back({a, b});
    }
    if (pos_ >= p_.size()) return std::nullopt;  // no closing ]
    ++pos_;
    return single(add(st));
  }

  std::string_view p_;
  std::size_t pos_ = 0;
  std::vector<State>& s_;
};

std::optional<ModulePattern> ModulePattern::parse(std::string_view entry) {
  ModulePattern m;
  if (entry.substr(0, 3) != "re:") {
    m.literal_ = std::string(entry);
    return m;
  }
  const std::string_view re = entry.substr(3);
  if (re.size() > kMaxPatternChars) return std::nullopt;
  m.regex_ = true;
  PatternCompiler compiler(re, m.states_);
  std::optional<PatternCompiler::Frag> f = compiler.compile();
  if (!f) return std::nullopt;
  State done;
  done.kind = State::Kind::match;
  m.states_.push_back(done);
  for (auto [state, which] : f->outs)
    (which == 0 ? m.states_[state].out : m.states_[state].out2) = static_cast<int>(m.states_.size()) - 1;
  m.start_ = f->start;
  return m;
}

bool ModulePattern::matches(std::string_view name) const {
  if (!regex_) return name == literal_;
  const std::size_t n = states_.size();
  std::vector<char> current(n, 0), next(n, 0);
  std::vector<int> stack;
  // The states reachable from `from` without reading, at input position `at`.
  auto close = [&](std::vector<char>& set, int from, std::size_t at) {
    stack.push_back(from);
    while (!stack.empty()) {
      const int s = stack.back();
      stack.pop_back();
      if (s < 0 || set[static_cast<std::size_t>(s)]) continue;
      set[static_cast<std::size_t>(s)] = 1;
      const State& st = states_[static_cast<std::size_t>(s)];
      if (st.kind == State::Kind::split) {
        stack.push_back(st.out);
        stack.push_back(st.out2);
      } else if (st.kind == State::Kind::jump || (st.kind == State::Kind::end_anchor && at == name.size())) {
        stack.push_back(st.out);
      }
    }
  };
  auto accepts = [&](const std::vector<char>& set) {
    for (std::size_t s = 0; s < n; ++s)
      if (set[s] && states_[s].kind == State::Kind::match) return true;
    return false;
  };
  close(current, start_, 0);
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (accepts(current)) return true;  // re.match: a prefix suffices
    std::fill(next.begin(), next.end(), 0);
    const char c = name[i];
    for (std::size_t s = 0; s < n; ++s) {
      if (!current[s]) continue;
      const State& st = states_[s];
      bool take = false;
      if (st.kind == State::Kind::character) take = st.c == c;
      else if (st.kind == State::Kind::any) take = c != '\n';
      else if (st.kind == State::Kind::klass) {
        bool in = false;
        for (auto [a, b] : st.ranges) in = in || (c >= a && c <= b);
        take = in != st.negated;
      }
      if (take) close(next, st.out, i + 1);
    }
    std::swap(current, next);
  }
  return accepts(current);
}

}  // namespace kvsight::hf_config
