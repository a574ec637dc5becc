// Read-only zeros that cost no memory: one process-wide anonymous mapping (PROT_READ), whose
// pages all read as the kernel's zero page. A tensor borrowed from it (Tensor::shared_zeros)
// holds a call's q or cache for a caller that reads only shapes, the validators: a 256 MiB
// production call then allocates nothing for its data, under ASan too (whose allocator would
// map and poison a large block's shadow on every call). The first write copies the tensor
// into owned storage, as for any borrowed tensor, so a mutation that writes still works.
#pragma once

#include <cstddef>

namespace rpa {

// The address of n readable zero bytes, valid until the process exits. A request larger than
// any before maps a larger region (earlier ones stay mapped, so their pointers stay valid).
// Thread-safe. Throws std::bad_alloc when the mapping fails.
const std::byte* shared_zeros(size_t n);

}  // namespace rpa
