// for_each_worker (probes/src/parallel.hpp): the host-thread split the probes use for
// their inputs and float64 reference. A worker's exception must reach the caller after
// every worker has joined, never std::terminate (issue #14: "no crash").
#include <gtest/gtest.h>

#include <atomic>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

#include "../probes/src/parallel.hpp"

namespace kvsight::probes::detail {
namespace {

TEST(ForEachWorker, EveryWorkerRunsOnceWithTheSameCount) {
  const unsigned expected = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::atomic<int>> runs(expected);
  std::atomic<unsigned> seen_count{0};
  for_each_worker([&](unsigned worker, unsigned workers) {
    runs.at(worker).fetch_add(1);
    seen_count.store(workers);
  });
  EXPECT_EQ(seen_count.load(), expected);
  for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
}

TEST(ForEachWorker, AWorkersExceptionReachesTheCallerAfterAllJoined) {
  std::atomic<unsigned> finished{0};
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_THROW(for_each_worker([&](unsigned worker, unsigned) {
                 if (worker == 0) throw std::bad_alloc();  // what std::vector<double>(context) throws
                 finished.fetch_add(1);
               }),
               std::bad_alloc);
  // Every other worker ran to the end before the rethrow (all joined).
  EXPECT_EQ(finished.load(), workers - 1);
}

TEST(ForEachWorker, OnlyTheFirstOfSeveralExceptionsIsRethrown) {
  EXPECT_THROW(for_each_worker([](unsigned, unsigned) { throw std::runtime_error("each worker fails"); }),
               std::runtime_error);
}

}  // namespace
}  // namespace kvsight::probes::detail
