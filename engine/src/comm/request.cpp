// Request: waiting for and testing a collective (comm/request.h).
#include "comm/request.h"

#include "comm/channel.h"

namespace ringmaster {

void Request::wait() const {
  if (!state_) return;
  if (state_->help != nullptr) {
    while (state_->finished.load(std::memory_order_acquire) == 0 && state_->help(state_->channel)) {
    }
  }
  if (state_->finished.load(std::memory_order_acquire) == 0) {
    comm::start_waiting_work();
    state_->sleeping.store(true, std::memory_order_seq_cst);
    while (state_->finished.load(std::memory_order_seq_cst) == 0)
      state_->finished.wait(0, std::memory_order_seq_cst);
  }
  if (!state_->status.ok()) throw Error(state_->status);
}

bool Request::test() const {
  if (!state_) return true;
  if (state_->finished.load(std::memory_order_acquire) != 0) return true;
  if (state_->kick != nullptr) state_->kick(state_->channel);  // a caller that polls is not going to run it
  return false;
}

Status Request::status() const {
  if (!state_ || state_->finished.load(std::memory_order_acquire) == 0) return {};
  return state_->status;
}

}  // namespace ringmaster
