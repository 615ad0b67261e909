#pragma once
// The launchers of the engines (kvsight/launcher.hpp, issue #22): each engine's file
// <engine>_launch.cpp defines its launcher (rules for the memory-relevant flags, cited), over
// the list of every flag of its parser in <engine>_parser_flags.cpp, generated from the
// engine's source by scripts/extract-launch-flags.py.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvsight/launcher.hpp"

namespace kvsight::engine_detail {

const std::vector<ParserFlag>& vllm_parser_flags();
const std::vector<ParserFlag>& sglang_parser_flags();
const std::vector<ParserFlag>& llamacpp_parser_flags();
const std::vector<ParserFlag>& trtllm_parser_flags();

// The three kinds of rule each launcher file writes, defined once.
inline LaunchRule apply_rule(std::string name, OptionField field, ValueGrammar grammar) {
  return {std::move(name), FlagUse::apply, field, grammar, ""};
}
inline LaunchRule refuse_rule(std::string name, std::string why) {
  return {std::move(name), FlagUse::refuse, std::nullopt, ValueGrammar::text, std::move(why)};
}
// Applied with no option to set: the flag's effect is stated, not modelled by an option.
inline LaunchRule note_rule(std::string name, std::string why) {
  return {std::move(name), FlagUse::apply, std::nullopt, ValueGrammar::text, std::move(why)};
}

const Launcher& vllm_launcher();
const Launcher& sglang_launcher();
const Launcher& llamacpp_launcher();
const Launcher& trtllm_launcher();

}  // namespace kvsight::engine_detail
