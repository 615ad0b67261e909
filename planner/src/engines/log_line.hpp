#pragma once
// One line an engine prints at start-up, written once as a template beside the code that prints
// it: kvsight's plan prints the line from the template (print) and explain reads the engine's own
// log back with the same template (read), so the format of a line is defined once (issue #26
// item 4). Each engine's reader (Engine::log_reader) turns the fields it reads into
// EngineLogFigures.
//
// A template is the line's text with fields in braces:
//   {N}   digits, [0-9]+                 {N,}  digits and thousands commas, [0-9,]+ (f"{n:,}")
//   {X}   a decimal, [0-9.]+             {-X}  a signed decimal, -?[0-9.]+
//   {V}   a version, [0-9]+.[0-9]+ and optionally .[0-9]+
//   {T}   any text (.*)
// each optionally named ({N:tokens}) for the reader to ask for it by name; print takes one value
// per field, in template order, already formatted as the engine formats it ("%.2f", "%6u").
// Read only, printed as nothing:
//   { }   any spaces ( *)                {s}   any white space (\s*)
//   {a-z_} lower-case letters and '_' ([a-z_]*)
//   {W}   words, each followed by spaces ((?:[^ ]+ +)*), only after spaces or at a line's start
//   {*text} any text (.*), printed as `text`; at either end of a template it is printed only
//         (the reader finds a line anywhere in a log line, as regex_search did)
// [...] is an optional part (printed always); \{ \} \[ \] \\ stand for the characters.
// A {T}, {W} or {*text} inside a template is followed by literal text.
//
// Reading is a linear scanner, not std::regex (issue #25: std::regex backtracks recursively and
// overflowed the stack on one 20,000-65,000 character line). It keeps regex_search's ECMAScript
// semantics for the same pattern, so a line reads as it did: the leftmost match (the first form
// at equal starts), numbers as long as they go, optional parts and any-text fields as long as the
// rest still matches ('.' stops at '\r'). Its recursion is as deep as the template, never the
// line, and each gap remembers where the rest failed, so a line costs time linear in its length.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvsight::engine_detail {

// One piece of a parsed template.
struct LogPiece {
  enum class Kind : unsigned char {
    text,            // literal text
    digits,          // {N}
    digits_commas,   // {N,}
    decimal,         // {X}
    signed_decimal,  // {-X}
    version,         // {V}
    any,             // {T}
    gap,             // {*text}
    words,           // {W}
    spaces,          // { }
    white,           // {s}
    letters,         // {a-z_}
    optional,        // [ ... ]: the pieces up to `end` are the optional part
  };
  Kind kind = Kind::text;
  std::string text;     // text: the characters; gap: what print writes
  int field = -1;       // the field's index (a value or {T})
  std::size_t end = 0;  // optional: the index of the first piece after the part
};

// One way a line is written (a template, parsed).
struct LogForm {
  std::vector<LogPiece> pieces;
  std::vector<std::string> field_names;      // one per field, "" when unnamed
  std::size_t read_begin = 0, read_end = 0;  // pieces read (print-only gaps at either end left out)
  std::string leading_text;                  // the literal text the read starts with
};

// The fields of one line that matched a LogLine. It views that line (string_views into it):
// keep the line alive while the match is used (ASan caught a test reading a temporary's).
class LogMatch {
 public:
  LogMatch(std::string_view line, const LogForm& form, std::vector<std::optional<std::string_view>> fields)
      : line_(line), form_(&form), fields_(std::move(fields)) {}
  // Whether the field was read (false: in an optional part the line lacks).
  bool has(std::string_view name) const { return field(name).has_value(); }
  // {N} / {N,}: the digits as a count (commas skipped; saturates at UINT64_MAX: a log figure
  // never needs 20 digits).
  std::uint64_t count(std::string_view name) const;
  // {X} / {-X}: the number std::stod reads from the field's text (0 when it reads none).
  double number(std::string_view name) const;
  // Any field's text.
  std::string text(std::string_view name) const;

 private:
  // Throws std::logic_error for a name the template lacks (a mistake in the engine's code).
  std::optional<std::string_view> field(std::string_view name) const;

  std::string_view line_;
  const LogForm* form_;
  std::vector<std::optional<std::string_view>> fields_;
};

class LogLine {
 public:
  // One or more forms of the same line (e.g. before and after a rename), each a template; print
  // writes the first, read takes the leftmost match of any. Throws std::logic_error for a
  // template it cannot parse.
  LogLine(std::initializer_list<std::string_view> forms);

  // The line, the first form written with `values` (one per field). Throws std::logic_error for
  // a count of values other than the fields'.
  std::string print(std::initializer_list<std::string_view> values) const { return print_form(0, values); }
  // The same with form `index` (0 = the first), for a release that prints an older form. Throws
  // std::logic_error for an index past the forms.
  std::string print_form(std::size_t index, std::initializer_list<std::string_view> values) const;
  // The fields of the line's leftmost match, if the line holds one.
  std::optional<LogMatch> read(std::string_view line) const;
  // take(match) when the line holds one; whether it did.
  template <typename Take>
  bool read(std::string_view line, const Take& take) const {
    const std::optional<LogMatch> match = read(line);
    if (match) take(*match);
    return match.has_value();
  }
  // Whether `line` starts with the literal text the first form's read starts with.
  bool starts(std::string_view line) const;

 private:
  std::vector<LogForm> forms_;
};

}  // namespace kvsight::engine_detail
