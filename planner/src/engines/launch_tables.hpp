#pragma once
// The launchers of the engines (kvsight/launcher.hpp, issue #22): each engine's file
// <engine>_launch.cpp defines its launcher (rules for the memory-relevant flags, cited), over
// the list of every flag of its parser in <engine>_parser_flags.cpp, generated from the
// engine's source by scripts/extract-launch-flags.py.
#include <vector>

#include "kvsight/launcher.hpp"

namespace kvsight::engine_detail {

const std::vector<ParserFlag>& vllm_parser_flags();
const std::vector<ParserFlag>& sglang_parser_flags();
const std::vector<ParserFlag>& llamacpp_parser_flags();
const std::vector<ParserFlag>& trtllm_parser_flags();

const Launcher& vllm_launcher();
const Launcher& sglang_launcher();
const Launcher& llamacpp_launcher();
const Launcher& trtllm_launcher();

}  // namespace kvsight::engine_detail
