// A FIFO queue on a growing ring buffer (boost::circular_buffer): the worker's per-item queues (received items
// staged and admitted, sent items held until acknowledged). std::deque allocates and frees a block every few
// dozen items as they flow through; a ring reuses its memory and only grows (doubling) when it is full.
#pragma once

#include <algorithm>
#include <boost/circular_buffer.hpp>
#include <cstddef>
#include <span>

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
  // Drop the first n (n <= size()) at once: O(1) for trivially destructible T.
  void pop_front(std::size_t n) { buf_.erase_begin(n); }
  // The longest run of elements stored contiguously from position `from` on, at most n of them (a ring wraps once,
  // so two calls cover any range): lets a batch be handed to the network without copying it first.
  std::span<const T> contiguous(std::size_t from, std::size_t n) const {
    const auto one = buf_.array_one();
    if (from < one.second) return {one.first + from, std::min(n, one.second - from)};
    const auto two = buf_.array_two();
    from -= one.second;
    return {two.first + from, std::min(n, two.second - from)};
  }
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
