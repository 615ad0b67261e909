#pragma once
// The inspect use case: what kvsight derived from a model's config, as figures.
#include <string>

#include "kvsight/app/figures.hpp"

namespace kvsight::app {

// Resolves the model (catalog id, HF id, config.json, directory) and describes it.
FigureDoc inspect_model(const std::string& model);

}  // namespace kvsight::app
