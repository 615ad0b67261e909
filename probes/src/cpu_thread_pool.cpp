// The cpu backend's thread pool (cpu_thread_pool.hpp).
#include "cpu_thread_pool.hpp"

#include <algorithm>
#include <string>
#include <system_error>

#include "kvsight/error.hpp"

namespace kvsight::probes::detail {

ThreadPool::ThreadPool(std::uint32_t threads) {
  workers_.reserve(threads - 1);
  for (std::uint32_t i = 1; i < threads; ++i) {
    try {
      workers_.emplace_back([this] { serve(); });
    } catch (const std::system_error& error) {
      stop();
      throw DeviceError("cpu: could not start thread " + std::to_string(i + 1) + " of " +
                        std::to_string(threads) + " (" + error.what() +
                        "); lower --threads (this machine has " +
                        std::to_string(std::max(1u, std::thread::hardware_concurrency())) +
                        " hardware threads) or raise the process's thread / address-space limit");
    }
  }
}

ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::drain(const std::function<void(long long)>& job, long long count) {
  for (long long i = next_.fetch_add(1); i < count; i = next_.fetch_add(1)) job(i);
}

void ThreadPool::serve() {
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(long long)>* job = nullptr;
    long long count = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
      count = count_;
    }
    std::exception_ptr failure;
    try {
      drain(*job, count);
    } catch (...) {
      failure = std::current_exception();
      next_.store(count);  // the others stop taking work
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure && !failure_) failure_ = failure;
    if (--busy_ == 0) done_.notify_one();
  }
}

void ThreadPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
  workers_.clear();
}

}  // namespace kvsight::probes::detail
