// make bench's "arr C++" column: a built kernel's entry point called `calls` times in a
// row from C (benchmarks/kernels.py, kernel_only), its buffers made once beforehand; before
// each call a dense destination is zeroed, after it a handed-back output is freed (as
// numpy's last array over it would).  No Python, no ctypes and no conversion between calls.
// And the host's cores (sdql_spin): how much two threads do at once, for the threads column.
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

using entry = int (*)(void* const* data, const std::int64_t* lens, void* status, void** out);
using release = void (*)(void* out);

extern "C" int sdql_time_calls(entry f, void* const* data, const std::int64_t* lens,
                               void* status, release free_output, void* dest,
                               std::int64_t dest_bytes, std::int64_t calls) {
  for (std::int64_t i = 0; i < calls; i++) {
    if (dest_bytes > 0) std::memset(dest, 0, std::size_t(dest_bytes));
    void* out = nullptr;
    const int code = f(data, lens, status, &out);
    if (out != nullptr) free_output(out);
    if (code != 0) return code;  // (the status says what)
  }
  return 0;
}

// `steps` steps of a chain of arithmetic (no memory: the core alone) on each of `threads`
// threads at once; the sum of their ends, so that no step is left out.
extern "C" double sdql_spin(std::int64_t threads, std::int64_t steps) {
  std::vector<double> ends(std::size_t(threads), 0.0);
  std::vector<std::thread> running;
  for (std::int64_t t = 0; t < threads; t++)
    running.emplace_back([&ends, t, steps] {
      double x = 1.0 + double(t);
      for (std::int64_t i = 0; i < steps; i++) x = x * 0.9999999 + 1e-7;
      ends[std::size_t(t)] = x;
    });
  for (auto& r : running) r.join();
  double sum = 0;
  for (const double e : ends) sum += e;
  return sum;
}
