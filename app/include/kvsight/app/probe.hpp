#pragma once
// The figures of `kvsight probe` (info, bandwidth, attention, sweep): each probe's result as
// a FigureDoc (app/src/probe_figures.cpp). The probes themselves run in probes/
// (kvsight/probes/probes.hpp); their JSON is the result's own (to_json there).
#include <cstdint>
#include <string>
#include <vector>

#include "kvsight/app/figures.hpp"
#include "kvsight/probes/probes.hpp"

namespace kvsight::app {

FigureDoc probe_info_figures(const std::vector<probes::BackendInfo>& backends);
FigureDoc probe_bandwidth_figures(const probes::BandwidthResult& result);
FigureDoc probe_attention_figures(const probes::AttentionResult& result);
// One sweep per kernel, each over `contexts` (in that order).
FigureDoc probe_sweep_figures(const std::vector<probes::SweepResult>& results,
                              const std::vector<std::string>& kernels,
                              const std::vector<std::uint64_t>& contexts);

}  // namespace kvsight::app
