// unroll<N>(f): compile-time unrolled loops for the register-blocked CPU kernels. No
// intrinsics here, so any kernel file may include it whatever its -m flags (each
// instantiation takes a lambda of its own file, so none is shared across flags).
#pragma once

#include <type_traits>
#include <utility>

namespace troupe::kernels::cpu {

// Calls f(integral_constant<int, i>) for i = 0..N-1, unrolled at compile time.
// Register-blocked kernels index their accumulator arrays through it: when such
// a loop is left to the optimizer, GCC 12 keeps the array in memory and stores
// every accumulator on each iteration, which halved the attention kernels' speed.
template <int N, class F>
inline void unroll(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    (f(std::integral_constant<int, I>{}), ...);
  }
  (std::make_integer_sequence<int, N>{});
}

}  // namespace troupe::kernels::cpu
