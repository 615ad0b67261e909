#pragma once
// `kvsight models` and `kvsight gpus`: the built-in catalogs as figures.
#include "kvsight/app/figures.hpp"

namespace kvsight::app {

FigureDoc model_catalog_figures();
FigureDoc gpu_catalog_figures();

}  // namespace kvsight::app
