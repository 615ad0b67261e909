// Engine resolution and the shared checks (kvsight/app/engine_setup.hpp).
#include "kvsight/app/engine_setup.hpp"

#include "kvsight/error.hpp"

namespace kvsight::app {

EngineSetup setup_engine(EngineOptions options) {
  EngineSetup setup;
  setup.engine = make_engine(options.engine);
  options.engine = setup.engine->name();
  setup.engine->check_options(options);
  // The draft model of --speculative-config is read like --model (catalog id, config path,
  // HF cache), once, here: the engine plans with the spec, not a name.
  if (auto& spec = options.vllm.speculative; spec && spec->kind == DraftKind::draft_model && !spec->draft) {
    try {
      spec->draft = std::make_shared<const ModelSpec>(resolve_model(spec->model));
    } catch (const InputError& e) {
      throw InputError("speculative_config.model",
                       "'" + spec->model + "' could not be read (" + e.what() + ")");
    }
  }
  setup.options = std::move(options);
  return setup;
}

}  // namespace kvsight::app
