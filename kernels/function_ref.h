// A non-owning reference to a callable (what parallel_for takes): two pointers, never a
// heap allocation, unlike std::function, whose small-buffer holds 16 bytes and so
// allocated for most [&] lambdas on every kernel call. The callable must outlive the
// FunctionRef; a temporary lambda passed as an argument lives until the call returns.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace troupe::kernels {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
             std::is_invocable_r_v<R, F&, Args...>)
  FunctionRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): as std::function
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace troupe::kernels
