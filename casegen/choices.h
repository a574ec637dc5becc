// The choices every case builder makes through an Io (jax_build_case.h explains Io: a source
// overwrites a field with a value in [lo, hi], the encoder reads it), shared by the builders
// of every dialect and the production recipes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>

namespace rpa::props {

// Picks one of `options` into f (the encoder finds f among them; a value that is not
// there was not drawn by build_case and cannot be encoded).
template <class Io, class T>
void among(Io& io, T& f, std::span<const T> options) {
  const auto at = std::find(options.begin(), options.end(), f);
  if (Io::kEncodes && at == options.end()) std::abort();
  int64_t i = at == options.end() ? 0 : at - options.begin();
  io.num(i, 0, static_cast<int64_t>(options.size()) - 1, {});
  f = options[static_cast<size_t>(i)];
}

template <class Io>
void flag(Io& io, bool& f) {
  int64_t v = f ? 1 : 0;
  io.num(v, 0, 1, {});
  f = v != 0;
}

// An optional field: present or not, then its value.
template <class Io, class T, class Body>
void maybe(Io& io, std::optional<T>& f, Body body) {
  bool present = f.has_value();
  flag(io, present);
  if (!present) {
    f.reset();
    return;
  }
  if (!f) f.emplace();
  body(*f);
}

// A page pool's shuffle seed: 0 (pages in order) or a seed in [1, 0xffff].
template <class Io>
void page_shuffle_seed(Io& io, int64_t& seed) {
  bool shuffled = seed != 0;
  flag(io, shuffled);
  if (shuffled) {
    io.num(seed, 1, 0xffff, {});
  } else {
    seed = 0;
  }
}

}  // namespace rpa::props
