// The bits of a tensor's elements, held at a width of 1, 2 or 4 bytes each. A
// tensor generated or downloaded is held at its dtype's storage width, byte
// for byte what the device holds (a bf16 matrix in 2 bytes an element, not
// 4, and its upload needs no packed copy); one built element by element
// (tests, small intermediates) may be held at 4 bytes whatever its dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <vector>

namespace ulpcheck {

class PackedBits {
 public:
  /// Element i, as a reference that reads and writes its bits.
  class Element {
   public:
    Element(PackedBits& owner, size_t i) : owner_(owner), i_(i) {}
    operator uint32_t() const { return owner_.get(i_); }
    Element& operator=(uint32_t bits) {
      owner_.set(i_, bits);
      return *this;
    }
    Element& operator=(const Element& other) { return *this = uint32_t(other); }

   private:
    PackedBits& owner_;
    size_t i_;
  };

  /// Reads the elements in order.
  class const_iterator {
   public:
    using value_type = uint32_t;
    using difference_type = std::ptrdiff_t;
    using reference = uint32_t;
    using pointer = void;
    using iterator_category = std::input_iterator_tag;
    const_iterator(const PackedBits& owner, size_t i) : owner_(&owner), i_(i) {}
    uint32_t operator*() const { return owner_->get(i_); }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_ && owner_ == o.owner_; }
    bool operator!=(const const_iterator& o) const { return !(*this == o); }

   private:
    const PackedBits* owner_;
    size_t i_;
  };
  using iterator = const_iterator;

  /// Empty, 4 bytes an element.
  PackedBits() = default;
  /// `n` elements of `fill` at `width` bytes (1, 2: the low 8 or 16 bits are kept).
  PackedBits(int width, size_t n, uint32_t fill = 0)
      : width_(width == 1 || width == 2 ? width : 4), bytes_(n * size_t(width_)) {
    const uint8_t byte = static_cast<uint8_t>(fill);
    const uint16_t half = static_cast<uint16_t>(fill);
    const void* one = width_ == 1   ? static_cast<const void*>(&byte)
                      : width_ == 2 ? static_cast<const void*>(&half)
                                    : static_cast<const void*>(&fill);
    for (size_t i = 0; i < n; ++i) std::memcpy(bytes_.data() + i * size_t(width_), one, size_t(width_));
  }
  /// Elements built one uint32 each: 4 bytes an element.
  PackedBits(std::initializer_list<uint32_t> bits) : PackedBits(std::vector<uint32_t>(bits)) {}
  explicit PackedBits(const std::vector<uint32_t>& bits) : bytes_(bits.size() * 4) {
    if (!bits.empty()) std::memcpy(bytes_.data(), bits.data(), bytes_.size());
  }
  /// Storage bytes as a device holds them (little endian), taken over.
  static PackedBits fromBytes(int width, std::vector<uint8_t> bytes) {
    PackedBits p;
    p.width_ = width;
    p.bytes_ = std::move(bytes);
    return p;
  }

  uint32_t operator[](size_t i) const { return get(i); }
  Element operator[](size_t i) { return Element(*this, i); }
  void push_back(uint32_t bits) {
    bytes_.resize(bytes_.size() + size_t(width_));
    set(size() - 1, bits);
  }

  const_iterator begin() const { return const_iterator(*this, 0); }
  const_iterator end() const { return const_iterator(*this, size()); }
  /// The same elements at the same width.
  bool operator==(const PackedBits& o) const { return width_ == o.width_ && bytes_ == o.bytes_; }

  size_t size() const { return bytes_.size() / size_t(width_); }
  bool empty() const { return bytes_.empty(); }
  int width() const { return width_; }
  /// The elements' bytes at width() each.
  const std::vector<uint8_t>& bytes() const { return bytes_; }

  uint32_t get(size_t i) const {
    if (width_ == 1) return bytes_[i];
    if (width_ == 2) {
      uint16_t h;
      std::memcpy(&h, bytes_.data() + 2 * i, 2);
      return h;
    }
    uint32_t w;
    std::memcpy(&w, bytes_.data() + 4 * i, 4);
    return w;
  }
  void set(size_t i, uint32_t bits) {
    if (width_ == 1) {
      bytes_[i] = static_cast<uint8_t>(bits);
    } else if (width_ == 2) {
      const uint16_t h = static_cast<uint16_t>(bits);
      std::memcpy(bytes_.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(bytes_.data() + 4 * i, &bits, 4);
    }
  }

 private:
  int width_ = 4;
  std::vector<uint8_t> bytes_;
};

}  // namespace ulpcheck
