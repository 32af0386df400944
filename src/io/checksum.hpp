// FNV-1a 64 over bytes: the per-dataset checksum of checkpoints. Not a
// cryptographic hash; it catches torn writes, bit rot and truncation, and is
// simple enough to recompute anywhere (h5py: see README, "Reliability").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace burst::io {

constexpr std::uint64_t kFnv1a64Offset = 0xcbf29ce484222325ull;

// Continue a running hash over n more bytes (start from kFnv1a64Offset).
std::uint64_t fnv1a64(const void* data, std::size_t n, std::uint64_t h = kFnv1a64Offset);

// 16 lowercase hex digits: stored as a string attribute, because HDF5 has
// no unsigned 64-bit attribute our layer reads back without conversion.
std::string hex64(std::uint64_t h);

}  // namespace burst::io
