#pragma once
// The cpu backend's threads (cpu_backend.cpp), started once when it opens (not
// per launch, so a timed launch holds no thread creation) and joined by the
// destructor. run(count, work) runs work(i) for i in [0, count) on the workers
// and the calling thread (dynamic assignment). If the OS refuses a thread
// (EAGAIN under a process or address-space limit), the constructor joins the
// ones it started and throws: a pool is never destroyed with running threads
// (issue #14 item 6: std::terminate before). Short-lived work splits that are
// not timed use for_each_worker (parallel.hpp) instead.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace kvsight::probes::detail {

class ThreadPool {
 public:
  // Throws DeviceError naming --threads when the OS refuses a thread.
  explicit ThreadPool(std::uint32_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  std::uint32_t size() const { return static_cast<std::uint32_t>(workers_.size()) + 1; }

  template <typename Work>
  void run(long long count, const Work& work) {
    if (workers_.empty() || count <= 1) {
      for (long long i = 0; i < count; ++i) work(i);
      return;
    }
    const std::function<void(long long)> job = [&work](long long i) { work(i); };
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      count_ = count;
      next_.store(0);
      busy_ = workers_.size();
      ++generation_;
    }
    wake_.notify_all();
    drain(job, count);
    std::exception_ptr failure;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return busy_ == 0; });
      job_ = nullptr;
      failure = std::exchange(failure_, nullptr);
    }
    if (failure) std::rethrow_exception(failure);
  }

 private:
  void drain(const std::function<void(long long)>& job, long long count);
  void serve();
  void stop();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(long long)>* job_ = nullptr;
  long long count_ = 0;
  std::atomic<long long> next_{0};
  std::size_t busy_ = 0;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr failure_;
};

}  // namespace kvsight::probes::detail
