// A callable borrowed for the length of a call: a pointer to it and a
// function that invokes it, no allocation (a std::function holding a
// lambda that captures more than two pointers allocates on every call,
// which a small collective's step notices).
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace ringmaster {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>)
      FunctionRef(F&& f)
  noexcept  // NOLINT(google-explicit-constructor): stands in for the callable
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace ringmaster
