#pragma once
// The built-in model catalog: planner/data/models/<id>.json, each an HF
// config.json plus a "_kvsight" object {id, name, source, notes}.
#include <string>
#include <vector>

namespace kvsight {

struct CatalogModel {
  std::string id;
  std::string name;
  std::string source;
  const char* config_text;
};

const std::vector<CatalogModel>& model_catalog();
// nullptr when the id is not in the catalog.
const CatalogModel* find_catalog_model(const std::string& id);

}  // namespace kvsight
