#pragma once
// The one renderer of a use case's figures (kvsight/app/figures.hpp) per format: table,
// markdown, CSV (RFC 4180, raw numbers, units in their own column or in the header) and
// JSON. Commands hand their FigureDoc here and format nothing themselves (issue #26).
#include <string>

#include "kvsight/app/figures.hpp"
#include "output.hpp"

namespace kvsight::cli {

std::string render_figures(const app::FigureDoc& doc, Format format);

}  // namespace kvsight::cli
