#pragma once
// The gate rules as data: one KernelRule per (engine, kernel, device families,
// engine-version range), each a list of Conditions that must all hold. Evaluated by
// gates.cpp; the tables live in gates_rules.cpp with the engine source of each.
#include <cstdint>
#include <string>
#include <vector>

namespace kvsight::gates_detail {

enum class Field {
  head_size,
  head_size_v,
  block_size,
  gqa_ratio,
  max_seq_len,
  sliding_window,
  q_dtype,
  kv_cache_dtype,
  alibi,
  sinks,
  padded_layout,
  compute_capability,
  family,  // for rules that never admit on a family: message in Condition::label
  env,     // an environment switch whose default is off: message in Condition::label
};

enum class Test {
  one_of,       // numbers
  in_range,     // numbers[0]..numbers[1]
  at_most,      // numbers[0]
  at_least,     // numbers[0]
  multiple_of,  // numbers[0]
  power_of_two,
  absent,            // the value is 0 / false
  str_one_of,        // strings
  never,             // always fails with `label`
  equals_head_size,  // head_size_v == head_size
  kv_types,          // kv_cache_dtype listed by an entry of Condition::kv_types for this device and version
};

// KV cache types a backend accepts on a range of devices and engine versions
// (docs/reference/gates.md "KV cache types per attention backend"). An engine version
// no entry covers was not read: the condition then holds.
struct KvTypeEntry {
  std::vector<std::string> types;
  std::int64_t min_cc = 0;                 // inclusive, 10 x major + minor; 0 also admits AMD
  std::int64_t max_cc = INT64_MAX;         // inclusive
  std::uint64_t min_version = 0;           // inclusive, parse_engine_version form
  std::uint64_t max_version = UINT64_MAX;  // exclusive
  std::string why;                         // what the device range stands for ("FlashAttention 3 on 9.x")

  bool covers_version(std::uint64_t version) const { return version >= min_version && version < max_version; }
  bool covers_device(std::int64_t cc) const { return cc >= min_cc && cc <= max_cc; }
};

struct Condition {
  Field field;
  Test test;
  std::vector<std::int64_t> numbers;
  std::vector<std::string> strings;
  std::string label;                       // optional wording for the failure message
  std::vector<KvTypeEntry> kv_types = {};  // Test::kv_types only
};

// How the kernel treats the context at decode.
enum class SplitMode {
  never,        // one program per (sequence, KV head), whole context serially
  always,       // a split-KV / partitioned kernel: fills the device
  triton_3d,    // vLLM unified attention: 3D split kernel when batch <= 128 / kv_heads
  paged_v1_v2,  // vLLM paged_attention v1 (no split) / v2 (partitions of 512)
};

struct KernelRule {
  std::string engine;
  std::string kernel;   // stable id
  std::string name;     // engine's name for it
  std::string backend;  // engine backend that runs it
  std::vector<std::string> families;
  std::uint64_t min_version = 0;           // inclusive, parse_engine_version form
  std::uint64_t max_version = UINT64_MAX;  // exclusive
  bool mla = false;                        // rule applies to MLA layers (else to standard attention)
  SplitMode split = SplitMode::never;
  std::vector<Condition> conditions;
  std::string source;  // engine file @ version, PR/issue
};

// Every rule of every engine, in each engine's priority order.
const std::vector<KernelRule>& kernel_rules();

}  // namespace kvsight::gates_detail
