// Log-line templates (log_line.hpp): the parser, the printer and the linear scanner.
#include "log_line.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace kvsight::engine_detail {
namespace {

using Kind = LogPiece::Kind;
constexpr std::size_t npos = std::string_view::npos;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The number grammar the engines print (Python's f"{x:.2f}", f"{n:,}"): digits, at most one
// '.' with digits on both sides; commas in groups of three after 1-3 leading digits. A run of
// the field's characters that is not such a number ("10.5.5.5", ".", "-.81", "1,23,4") is no
// reading of the line, never a prefix of it (issue #25 class 2: "10.5.5.5 GiB" was read as 10.5).
bool well_formed(std::string_view number, Kind kind) {
  if (number.empty()) return false;
  // A count must fit 64 bits (20 digits and commas is 2^64's length), a decimal a double's
  // useful digits: a 401-digit figure read as 0 or 2^64 - 1 would be replayed as a
  // confident number (issue #25 class 2).
  if (kind == Kind::digits || kind == Kind::digits_commas) {
    std::uint64_t value = 0;
    for (char c : number)
      if (is_digit(c)) {
        if (value > (UINT64_MAX - static_cast<std::uint64_t>(c - '0')) / 10) return false;
        value = value * 10 + static_cast<std::uint64_t>(c - '0');
      }
  } else if (number.size() > 32) {
    return false;
  }
  if (kind == Kind::digits_commas && number.find(',') != std::string_view::npos) {
    const std::size_t first = number.find(',');
    if (first == 0 || first > 3) return false;
    for (std::size_t at = first; at < number.size(); at += 4) {
      if (number[at] != ',' || at + 4 > number.size()) return false;
      for (std::size_t k = at + 1; k < at + 4; ++k)
        if (!is_digit(number[k])) return false;
    }
    return true;
  }
  const std::size_t dot = number.find('.');
  if (dot == std::string_view::npos) return true;  // the field's class: digits only
  return dot > 0 && dot + 1 < number.size() && number.find('.', dot + 1) == std::string_view::npos;
}

// \s of std::regex in the "C" locale.
bool is_white(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

// Whether a field of this kind reads a value (and takes one when printed).
bool is_field(Kind kind) {
  return kind == Kind::digits || kind == Kind::digits_commas || kind == Kind::decimal ||
         kind == Kind::signed_decimal || kind == Kind::version || kind == Kind::any;
}

// Kinds that stand for a run of any length ending where the next piece's text is found.
bool is_gap(Kind kind) { return kind == Kind::any || kind == Kind::gap || kind == Kind::words; }

[[noreturn]] void bad_template(std::string_view form, const std::string& why) {
  throw std::logic_error("log line template \"" + std::string(form) + "\": " + why);
}

LogForm parse_form(std::string_view form) {
  LogForm out;
  std::vector<std::size_t> open;  // optional parts not yet closed
  bool in_text = false;           // the last piece is text that the next character extends
  auto add_text = [&](char c) {
    if (!in_text) out.pieces.push_back({Kind::text, ""});
    out.pieces.back().text += c;
    in_text = true;
  };
  for (std::size_t i = 0; i < form.size(); ++i) {
    const char c = form[i];
    if (c == '\\') {
      if (++i == form.size()) bad_template(form, "ends with '\\'");
      add_text(form[i]);
    } else if (c == '[') {
      in_text = false;
      open.push_back(out.pieces.size());
      out.pieces.push_back({Kind::optional, ""});
    } else if (c == ']') {
      in_text = false;
      if (open.empty()) bad_template(form, "']' without '['");
      out.pieces[open.back()].end = out.pieces.size();
      open.pop_back();
    } else if (c == '{') {
      in_text = false;
      const std::size_t close = form.find('}', i);
      if (close == npos) bad_template(form, "'{' without '}'");
      std::string_view body = form.substr(i + 1, close - i - 1);
      i = close;
      LogPiece piece;
      if (!body.empty() && body[0] == '*') {
        piece.kind = Kind::gap;
        piece.text = std::string(body.substr(1));
        out.pieces.push_back(std::move(piece));
        continue;
      }
      std::string name;
      if (const std::size_t colon = body.find(':'); colon != npos) {
        name = std::string(body.substr(colon + 1));
        body = body.substr(0, colon);
      }
      static const std::pair<std::string_view, Kind> kinds[] = {
          {"N", Kind::digits},          {"N,", Kind::digits_commas}, {"X", Kind::decimal},
          {"-X", Kind::signed_decimal}, {"V", Kind::version},        {"T", Kind::any},
          {"W", Kind::words},           {" ", Kind::spaces},         {"s", Kind::white},
          {"a-z_", Kind::letters}};
      const auto* kind =
          std::find_if(std::begin(kinds), std::end(kinds), [&](const auto& k) { return k.first == body; });
      if (kind == std::end(kinds)) bad_template(form, "unknown field {" + std::string(body) + "}");
      piece.kind = kind->second;
      if (is_field(piece.kind)) {
        piece.field = static_cast<int>(out.field_names.size());
        out.field_names.push_back(name);
      } else if (!name.empty()) {
        bad_template(form, "{" + std::string(body) + "} reads no value to name");
      }
      out.pieces.push_back(std::move(piece));
    } else {
      add_text(c);
    }
  }
  if (!open.empty()) bad_template(form, "'[' without ']'");
  // Print-only text at either end; regex_search found a line anywhere.
  out.read_begin = 0;
  out.read_end = out.pieces.size();
  if (out.read_end > 0 && out.pieces.front().kind == Kind::gap) out.read_begin = 1;
  if (out.read_end > out.read_begin && out.pieces.back().kind == Kind::gap) --out.read_end;
  for (std::size_t i = out.read_begin; i < out.read_end; ++i)
    if (is_gap(out.pieces[i].kind) && (i + 1 >= out.read_end || out.pieces[i + 1].kind != Kind::text))
      bad_template(form, "a {T}, {W} or {*...} inside a template must be followed by text");
  if (out.read_begin == out.read_end) bad_template(form, "reads nothing");
  if (out.pieces[out.read_begin].kind == Kind::text) out.leading_text = out.pieces[out.read_begin].text;
  return out;
}

// One read of one line with one form. match(i, pos) is whether pieces [i, read_end) match at
// pos: the recursion has one frame per piece (and per optional part), so its depth is the
// template's, never the line's.
class Scanner {
 public:
  Scanner(const LogForm& form, std::string_view line)
      : form_(form), line_(line), fields_(form.field_names.size()), memo_(form.pieces.size()) {}

  // The leftmost start where the form matches.
  std::optional<std::size_t> search() {
    const LogPiece& first = form_.pieces[form_.read_begin];
    for (std::size_t start = 0; start <= line_.size(); ++start) {
      if (first.kind == Kind::text) {  // jump to the next place the line can start
        start = line_.find(first.text, start);
        if (start == npos) return std::nullopt;
      }
      if (match(form_.read_begin, start)) return start;
    }
    return std::nullopt;
  }

  std::vector<std::optional<std::string_view>> take_fields() { return std::move(fields_); }

 private:
  // What a gap at piece i knows: every place q in [low, limit] where its following text stands
  // has been tried, and the rest of the template failed there (the rest at q does not depend
  // on where the gap began, so a later start skips them: each place is tried once).
  struct Memo {
    std::size_t limit = npos;
    std::size_t low = npos;  // npos: nothing tried yet
  };

  bool match(std::size_t i, std::size_t pos) {
    if (i == form_.read_end) return true;
    const LogPiece& piece = form_.pieces[i];
    const std::size_t n = line_.size();
    switch (piece.kind) {
      case Kind::text:
        return line_.substr(pos).starts_with(piece.text) && match(i + 1, pos + piece.text.size());
      case Kind::digits:
      case Kind::digits_commas:
      case Kind::decimal:
      case Kind::signed_decimal: {
        std::size_t end = pos;
        if (piece.kind == Kind::signed_decimal && end < n && line_[end] == '-') ++end;
        const std::size_t first_digit = end;
        const auto in_class = [&](char c) {
          return is_digit(c) || (piece.kind == Kind::digits_commas && c == ',') ||
                 ((piece.kind == Kind::decimal || piece.kind == Kind::signed_decimal) && c == '.');
        };
        while (end < n && in_class(line_[end])) ++end;
        // A sentence's full stop after the number ("... is 14.99.") is not part of it.
        if (end > first_digit + 1 && line_[end - 1] == '.' &&
            well_formed(line_.substr(first_digit, end - 1 - first_digit), piece.kind))
          --end;
        if (!well_formed(line_.substr(first_digit, end - first_digit), piece.kind)) return false;
        fields_[static_cast<std::size_t>(piece.field)] = line_.substr(pos, end - pos);
        return match(i + 1, end);
      }
      case Kind::version: {
        std::size_t end = pos;
        const auto run = [&] {
          const std::size_t from = end;
          while (end < n && is_digit(line_[end])) ++end;
          return end > from;
        };
        if (!run() || end >= n || line_[end] != '.') return false;
        ++end;
        if (!run()) return false;
        if (end + 1 < n && line_[end] == '.' && is_digit(line_[end + 1])) {
          ++end;
          run();
        }
        fields_[static_cast<std::size_t>(piece.field)] = line_.substr(pos, end - pos);
        return match(i + 1, end);
      }
      case Kind::spaces:
      case Kind::white:
      case Kind::letters: {
        std::size_t end = pos;
        const auto in_class = [&](char c) {
          if (piece.kind == Kind::spaces) return c == ' ';
          if (piece.kind == Kind::white) return is_white(c);
          return (c >= 'a' && c <= 'z') || c == '_';
        };
        while (end < n && in_class(line_[end])) ++end;
        return match(i + 1, end);
      }
      case Kind::optional: {
        // Greedy: with the part first, without it when the rest then fails.
        if (match(i + 1, pos)) return true;
        for (std::size_t j = i + 1; j < piece.end; ++j)
          if (form_.pieces[j].field >= 0) fields_[static_cast<std::size_t>(form_.pieces[j].field)].reset();
        return match(piece.end, pos);
      }
      case Kind::any:
      case Kind::gap:
      case Kind::words:
        return match_gap(i, pos);
    }
    return false;
  }

  // A gap at piece i from pos: the places of the next piece's text, rightmost first (a greedy
  // '.*' takes as much as lets the rest match). '.' stops at '\r'. {W} is (?:[^ ]+ +)*: empty
  // where pos holds a space, else it ends at pos or just after a space.
  bool match_gap(std::size_t i, std::size_t pos) {
    const LogPiece& piece = form_.pieces[i];
    const std::string& next = form_.pieces[i + 1].text;
    const bool words = piece.kind == Kind::words;
    const auto attempt = [&](std::size_t q) {
      if (piece.field >= 0) fields_[static_cast<std::size_t>(piece.field)] = line_.substr(pos, q - pos);
      return match(i + 1, q);
    };
    if (words && pos < line_.size() && line_[pos] == ' ')
      return line_.substr(pos).starts_with(next) && attempt(pos);
    const std::size_t limit = words ? line_.size() : next_carriage_return(pos);
    Memo& memo = memo_[i];
    if (memo.limit != limit) memo = {limit, npos};
    // Places in (pos, highest] not tried yet, right to left; the search stays inside the view
    // [pos, ...), so a failed search does not rescan the line before pos.
    const std::size_t highest = memo.low == npos ? limit : memo.low - 1;
    if (memo.low == npos || memo.low > pos + 1) {
      const std::string_view from_pos = line_.substr(pos);
      std::size_t q = from_pos.rfind(next, highest - pos);
      while (q != npos && q > 0) {
        if ((!words || from_pos[q - 1] == ' ') && attempt(pos + q)) return true;
        q = from_pos.rfind(next, q - 1);
      }
    }
    // pos itself: tried above by an earlier start unless {W} takes it only as its own start.
    const bool untried = memo.low == npos || pos < memo.low || (words && pos > 0 && line_[pos - 1] != ' ');
    if (untried && line_.substr(pos).starts_with(next) && attempt(pos)) return true;
    memo.low = memo.low == npos ? pos : std::min(memo.low, pos);
    return false;
  }

  // The first '\r' at or after pos (the line's size when none), from the line's '\r's found
  // once: a search per gap would read the rest of the line again each time.
  std::size_t next_carriage_return(std::size_t pos) {
    if (!carriage_returns_) {
      carriage_returns_.emplace();
      for (std::size_t i = line_.find('\r'); i != npos; i = line_.find('\r', i + 1))
        carriage_returns_->push_back(i);
    }
    const auto it = std::lower_bound(carriage_returns_->begin(), carriage_returns_->end(), pos);
    return it == carriage_returns_->end() ? line_.size() : *it;
  }

  const LogForm& form_;
  std::string_view line_;
  std::vector<std::optional<std::string_view>> fields_;
  std::vector<Memo> memo_;
  std::optional<std::vector<std::size_t>> carriage_returns_;
};

}  // namespace

std::optional<std::string_view> LogMatch::field(std::string_view name) const {
  for (std::size_t i = 0; i < form_->field_names.size(); ++i)
    if (form_->field_names[i] == name) return fields_[i];
  throw std::logic_error("log line field '" + std::string(name) + "' is not in the template");
}

std::uint64_t LogMatch::count(std::string_view name) const {
  std::uint64_t n = 0;
  for (char c : field(name).value_or(""))
    if (is_digit(c)) {
      if (n > (UINT64_MAX - 9) / 10) return UINT64_MAX;
      n = n * 10 + static_cast<std::uint64_t>(c - '0');
    }
  return n;
}

double LogMatch::number(std::string_view name) const {
  try {
    return std::stod(std::string(field(name).value_or("")));
  } catch (const std::invalid_argument&) {
    return 0.0;
  } catch (const std::out_of_range&) {
    return 0.0;
  }
}

std::string LogMatch::text(std::string_view name) const { return std::string(field(name).value_or("")); }

LogLine::LogLine(std::initializer_list<std::string_view> forms) {
  for (std::string_view form : forms) forms_.push_back(parse_form(form));
  if (forms_.empty()) throw std::logic_error("log line without a template");
  for (const LogForm& form : forms_)
    for (const std::string& name : form.field_names)
      if (!name.empty() && std::find(forms_.front().field_names.begin(), forms_.front().field_names.end(),
                                     name) == forms_.front().field_names.end())
        throw std::logic_error("log line field '" + name + "' is not in every form");
}

std::string LogLine::print_form(std::size_t index, std::initializer_list<std::string_view> values) const {
  if (index >= forms_.size())
    throw std::logic_error("log line \"" + forms_.front().leading_text + "...\" has no form " + std::to_string(index));
  const LogForm& form = forms_[index];
  if (values.size() != form.field_names.size())
    throw std::logic_error("log line \"" + form.leading_text + "...\" takes " +
                           std::to_string(form.field_names.size()) + " values, given " +
                           std::to_string(values.size()));
  std::string out;
  const std::string_view* value = values.begin();
  for (const LogPiece& piece : form.pieces) {
    if (piece.kind == Kind::text || piece.kind == Kind::gap) out += piece.text;
    if (piece.field >= 0) out += *value++;
  }
  return out;
}

std::optional<LogMatch> LogLine::read(std::string_view line) const {
  std::optional<LogMatch> best;
  std::size_t best_start = npos;
  for (const LogForm& form : forms_) {
    Scanner scanner(form, line);
    const std::optional<std::size_t> start = scanner.search();
    if (start && (!best || *start < best_start)) {
      best.emplace(line, form, scanner.take_fields());
      best_start = *start;
    }
  }
  return best;
}

bool LogLine::starts(std::string_view line) const { return line.starts_with(forms_.front().leading_text); }

}  // namespace kvsight::engine_detail
