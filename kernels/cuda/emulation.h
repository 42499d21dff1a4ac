// Host emulation of the small CUDA vocabulary the project's custom kernels are written in, in the
// spirit of nvcc's old device-emulation mode. Compiling a kernel file with the host compiler and
// CNN_CUDA_EMULATION defined makes:
//   - each CUDA thread of a block a std::thread of a persistent pool (so ThreadSanitizer sees real
//     concurrency, without paying for thread creation on every block),
//   - __syncthreads() a barrier over the threads of the block (mutex + condition variable, which
//     ThreadSanitizer understands as synchronisation),
//   - __shared__ a static variable (blocks run one at a time, so one copy per kernel suffices),
//   - atomicAdd a std::atomic_ref fetch_add,
//   - "device memory" ordinary host memory.
// Kernels launch through CNN_LAUNCH (launch.cuh), which calls emu::launch here.
#pragma once
#ifndef CNN_CUDA_EMULATION
#error "emulation.h is only for host-emulated builds of CUDA kernels"
#endif

#include <atomic>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace cnn::emu {

// A reusable barrier for the threads of one block.
class BlockBarrier {
 public:
  explicit BlockBarrier(unsigned count) : count_(count) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  unsigned count_;
  unsigned arrived_ = 0;
  uint64_t generation_ = 0;
};

inline thread_local BlockBarrier* current_barrier = nullptr;

// Persistent worker threads: run(count, body) executes body(0) ... body(count - 1) on count
// distinct threads and returns when all have finished.
class WorkerPool {
 public:
  static WorkerPool& instance() {
    static WorkerPool pool;
    return pool;
  }

  void run(unsigned count, const std::function<void(unsigned)>& body) {
    std::unique_lock<std::mutex> lock(mutex_);
    while (workers_.size() < count) {
      const unsigned index = static_cast<unsigned>(workers_.size());
      workers_.emplace_back([this, index] { work(index); });
    }
    body_ = &body;
    active_ = count;
    remaining_ = count;
    ++generation_;
    start_.notify_all();
    done_.wait(lock, [&] { return remaining_ == 0; });
    body_ = nullptr;
  }

  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      ++generation_;
    }
    start_.notify_all();
    for (auto& w : workers_) w.join();
  }

 private:
  void work(unsigned index) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      start_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (stop_) return;
      if (index >= active_) continue;
      const std::function<void(unsigned)>* body = body_;
      lock.unlock();
      (*body)(index);
      lock.lock();
      if (--remaining_ == 0) done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable start_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(unsigned)>* body_ = nullptr;
  unsigned active_ = 0, remaining_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

// Runs kernel(args...) over grid x block threads: blocks one after another, the threads of a block
// concurrently.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, Args... args) {
  const unsigned threads = block.x * block.y * block.z;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        BlockBarrier barrier(threads);
        WorkerPool::instance().run(threads, [&](unsigned t) {
          threadIdx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
          blockIdx = dim3(bx, by, bz);
          blockDim = block;
          gridDim = grid;
          current_barrier = &barrier;
          kernel(static_cast<Params>(args)...);
        });
      }
}

}  // namespace cnn::emu

inline void __syncthreads() { cnn::emu::current_barrier->arrive_and_wait(); }

template <class T>
inline T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}
