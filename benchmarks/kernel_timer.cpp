// make bench's "arr C++" column: a built kernel's entry point called `calls` times in a
// row from C (benchmarks/kernels.py, kernel_only), its buffers made once beforehand; before
// each call a dense destination is zeroed, after it a handed-back output is freed (as
// numpy's last array over it would).  No Python, no ctypes and no conversion between calls.
#include <cstdint>
#include <cstring>

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
