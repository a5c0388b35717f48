#pragma once
// Integer ids for cross-references inside graphs (docs/architecture.md "Conventions"): a DeviceId cannot be passed where a
// LinkId is expected.
#include <compare>
#include <cstdint>
#include <functional>

namespace trainsim {

template <class Tag>
struct StrongId {
  std::uint32_t value = 0;
  friend constexpr auto operator<=>(StrongId, StrongId) = default;
  constexpr std::size_t index() const { return value; }
};

}  // namespace trainsim

template <class Tag>
struct std::hash<trainsim::StrongId<Tag>> {
  std::size_t operator()(trainsim::StrongId<Tag> id) const noexcept { return std::hash<std::uint32_t>{}(id.value); }
};
