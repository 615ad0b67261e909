#pragma once
// Everything about models: the ModelSpec types (kvsight/model_spec.hpp) and the readers
// that build one (kvsight/model_resolver.hpp). A header that needs the types only includes
// model_spec.hpp.
#include "kvsight/model_resolver.hpp"
#include "kvsight/model_spec.hpp"
