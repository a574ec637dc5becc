// Flushes float32 subnormals to zero on this thread while alive (FTZ | DAZ), as TPUs do and
// as XLA's CPU backend runs TPU interpret mode. Besides matching them, it keeps x86 out of
// microcode assists: a few subnormal softmax weights (exp(s - m) for s - m < -87) slow a
// whole kernel by an order of magnitude.
#pragma once

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace rpa {

class FlushSubnormals {
 public:
#if defined(__SSE__)
  FlushSubnormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040); }  // FTZ | DAZ
  ~FlushSubnormals() { _mm_setcsr(saved_); }
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
  unsigned saved_;
#endif
};

}  // namespace rpa
