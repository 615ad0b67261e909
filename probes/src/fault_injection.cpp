// Live-allocation counter and fault injection around every probe backend (see
// fault_injection.hpp and kvsight/probes/faults.hpp).
#include "fault_injection.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "kvsight/error.hpp"
#include "kvsight/probes/faults.hpp"

namespace kvsight::probes {
namespace {
std::atomic<std::uint64_t> g_live_bytes{0};
std::atomic<std::uint64_t> g_live_buffers{0};
std::mutex g_override_mutex;
std::optional<std::string> g_override;  // set_injected_fault; nullopt = read the environment
}  // namespace

std::uint64_t live_device_bytes() { return g_live_bytes.load(); }
std::uint64_t live_device_buffers() { return g_live_buffers.load(); }

void set_injected_fault(const std::string& spec) {
  if (!spec.empty()) detail::parse_fault(spec, "--inject-fault");  // validate now (exit 2)
  const std::lock_guard<std::mutex> lock(g_override_mutex);
  if (spec.empty())
    g_override.reset();
  else
    g_override = spec;
}

namespace detail {

FaultSpec parse_fault(const std::string& text, const std::string& source) {
  FaultSpec spec;
  spec.source = source;
  spec.text = text;
  if (text.empty() || text == "none") return spec;
  const std::size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const auto bad = [&](const std::string& why) {
    return InputError(source, "'" + text + "' " + why + "; allowed: alloc, kernel or verify, optionally :N " +
                                  "(fail on the Nth occurrence, N >= 1), or none (testing only)");
  };
  if (kind == "alloc")
    spec.kind = FaultKind::alloc;
  else if (kind == "kernel")
    spec.kind = FaultKind::kernel;
  else if (kind == "verify")
    spec.kind = FaultKind::verify;
  else
    throw bad("is not a fault");
  if (colon != std::string::npos) {
    const std::string count = text.substr(colon + 1);
    if (count.empty() || count.size() > 9 || count.find_first_not_of("0123456789") != std::string::npos)
      throw bad("has a bad count");
    spec.nth = std::stoull(count);
    if (spec.nth == 0) throw bad("has a bad count");
  }
  return spec;
}

FaultPlan::FaultPlan() {
  std::optional<std::string> override_spec;
  {
    const std::lock_guard<std::mutex> lock(g_override_mutex);
    override_spec = g_override;
  }
  if (override_spec) {
    spec_ = parse_fault(*override_spec, "--inject-fault");
  } else if (const char* env = std::getenv("KVSIGHT_INJECT_FAULT"); env != nullptr) {
    spec_ = parse_fault(env, "KVSIGHT_INJECT_FAULT");
  }
}

bool FaultPlan::hit(FaultKind kind) {
  if (kind != spec_.kind || spec_.kind == FaultKind::none) return false;
  return ++seen_ == spec_.nth;
}

std::string FaultPlan::note() const { return " (injected fault " + spec_.source + "=" + spec_.text + ")"; }

namespace {

// A buffer of the inner backend, counted while it lives.
class CountedBuffer final : public DeviceBuffer {
 public:
  explicit CountedBuffer(std::unique_ptr<DeviceBuffer> inner) : inner_(std::move(inner)) {
    g_live_bytes += inner_->bytes();
    ++g_live_buffers;
  }
  ~CountedBuffer() override {
    g_live_bytes -= inner_->bytes();
    --g_live_buffers;
  }
  CountedBuffer(const CountedBuffer&) = delete;
  CountedBuffer& operator=(const CountedBuffer&) = delete;
  void* data() const override { return inner_->data(); }
  std::uint64_t bytes() const override { return inner_->bytes(); }

 private:
  std::unique_ptr<DeviceBuffer> inner_;
};

class GuardedBackend final : public Backend {
 public:
  GuardedBackend(std::unique_ptr<Backend> inner, FaultPlan& plan) : inner_(std::move(inner)), plan_(plan) {}
  const DeviceInfo& info() const override { return inner_->info(); }
  std::unique_ptr<DeviceBuffer> allocate(std::uint64_t bytes) override {
    if (plan_.hit(FaultKind::alloc)) {
      throw DeviceError(name() + ": allocation of " + std::to_string(bytes) + " bytes failed" + plan_.note());
    }
    return std::make_unique<CountedBuffer>(inner_->allocate(bytes));
  }
  void upload(DeviceBuffer& destination, const void* source, std::uint64_t bytes) override {
    inner_->upload(destination, source, bytes);
  }
  void download(void* destination, const DeviceBuffer& source, std::uint64_t bytes) override {
    inner_->download(destination, source, bytes);
  }
  // The launch runs; the injected error is reported where a real one would be,
  // at the synchronisation after it.
  double time_attention(bool split, const kernels::PagedDecodeParams& params) override {
    const double us = inner_->time_attention(split, params);
    launched(split ? "paged decode (splitkv)" : "paged decode (nosplit)");
    return us;
  }
  double time_attention_batch(bool split, const std::vector<kernels::PagedDecodeParams>& launches) override {
    const double us = inner_->time_attention_batch(split, launches);
    launched(split ? "paged decode (splitkv)" : "paged decode (nosplit)");
    return us;
  }
  std::uint32_t attention_occupancy(const kernels::PagedDecodeParams& params) override {
    return inner_->attention_occupancy(params);
  }
  void flush_cache() override { inner_->flush_cache(); }
  std::uint32_t stream_read_parts() const override { return inner_->stream_read_parts(); }
  double time_stream_read(const DeviceBuffer& source, std::uint64_t bytes, DeviceBuffer& parts) override {
    const double us = inner_->time_stream_read(source, bytes, parts);
    launched("stream read");
    return us;
  }
  double time_stream_copy(const DeviceBuffer& source, DeviceBuffer& destination,
                          std::uint64_t bytes) override {
    const double us = inner_->time_stream_copy(source, destination, bytes);
    launched("stream copy");
    return us;
  }

 private:
  std::string name() const { return inner_->info().backend; }
  void launched(const std::string& kernel) {
    if (plan_.hit(FaultKind::kernel)) {
      throw DeviceError(name() + ": kernel execution failed: " + kernel + " reported an error" +
                        plan_.note());
    }
  }

  std::unique_ptr<Backend> inner_;
  FaultPlan& plan_;
};

}  // namespace

std::unique_ptr<Backend> guard_backend(std::unique_ptr<Backend> inner, FaultPlan& plan) {
  return std::make_unique<GuardedBackend>(std::move(inner), plan);
}

}  // namespace detail
}  // namespace kvsight::probes
