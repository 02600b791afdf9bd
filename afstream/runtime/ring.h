// A FIFO queue on a growing ring buffer (boost::circular_buffer): the worker's per-item queues (received items
// staged and admitted, sent items held until acknowledged). std::deque allocates and frees a block every few
// dozen items as they flow through; a ring reuses its memory and only grows (doubling) when it is full.
#pragma once

#include <algorithm>
#include <boost/circular_buffer.hpp>
#include <cstddef>

namespace afs {

template <typename T>
class Ring {
 public:
  using iterator = typename boost::circular_buffer<T>::iterator;
  using const_iterator = typename boost::circular_buffer<T>::const_iterator;

  void push_back(const T& v) {
    if (buf_.full()) buf_.set_capacity(std::max<std::size_t>(64, 2 * buf_.capacity()));
    buf_.push_back(v);
  }
  void pop_front() { buf_.pop_front(); }
  const T& front() const { return buf_.front(); }
  T& front() { return buf_.front(); }
  const T& operator[](std::size_t i) const { return buf_[i]; }
  bool empty() const { return buf_.empty(); }
  std::size_t size() const { return buf_.size(); }
  void clear() { buf_.clear(); }
  iterator begin() { return buf_.begin(); }
  iterator end() { return buf_.end(); }
  const_iterator begin() const { return buf_.begin(); }
  const_iterator end() const { return buf_.end(); }

 private:
  boost::circular_buffer<T> buf_;
};

}  // namespace afs
