#pragma once
// Work split over short-lived host threads (filling inputs, the float64 reference), without
// the two ways a bare std::vector<std::thread> ends the process: an exception escaping a
// thread's function calls std::terminate, and so does destroying a joinable thread when a
// later std::thread constructor throws (std::system_error: the system refused a thread, e.g.
// under RLIMIT_NPROC). Here every worker's exception is caught and the first is rethrown on
// the calling thread after all have joined; a refused thread's share runs on the calling
// thread instead (same result, less parallel).
#include <algorithm>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace kvsight::probes::detail {

// body(worker, workers) for worker in [0, workers); workers = hardware threads (at least 1).
template <class Body>
void for_each_worker(Body&& body) {
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  std::exception_ptr first;
  std::mutex first_mutex;
  auto guarded = [&](unsigned worker) {
    try {
      body(worker, workers);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(first_mutex);
      if (!first) first = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers);  // may throw bad_alloc before any thread exists: nothing to join
  unsigned started = 0;
  try {
    for (; started < workers; ++started) pool.emplace_back(guarded, started);
  } catch (const std::system_error&) {
    // fewer threads than asked: the rest run below
  }
  for (unsigned worker = started; worker < workers; ++worker) guarded(worker);
  for (std::thread& thread : pool) thread.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace kvsight::probes::detail
