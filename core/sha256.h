// SHA-256 (FIPS 180-4), for provenance: a result names the exact plugin file
// that produced it, checkable with `sha256sum`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ulpcheck {

/// Lower-case hex digest of `data`.
std::string sha256Hex(std::string_view data);
/// Lower-case hex digest of a file's bytes; throws std::runtime_error if it cannot be read.
std::string sha256File(const std::string& path);

}  // namespace ulpcheck
