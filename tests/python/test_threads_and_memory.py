"""The GIL is released while rpa computes, threads get the same bits, KV pages are read in
place (no copy), and 10,000 checks leak nothing."""
import resource
import threading
import time

import numpy as np

import rpa


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def test_the_gil_is_released_during_the_kernel():
    case = rpa.workload("prefill", "float32")
    rpa.kernel(case, threads=1)  # warm up
    ticks = 0
    running = threading.Event()
    done = threading.Event()

    def spin():
        nonlocal ticks
        running.set()
        while not done.is_set():
            ticks += 1

    t = threading.Thread(target=spin)
    t.start()
    running.wait()
    start_ticks = ticks
    start = time.perf_counter()
    for _ in range(8):
        rpa.kernel(case, threads=1)
    seconds = time.perf_counter() - start
    during = ticks - start_ticks
    done.set()
    t.join()
    # Holding the GIL, the spinning thread would get a switch interval (5 ms) or two at most;
    # released, it runs all along. Rate per second of kernel time, both ways, for the log.
    assert seconds > 0.2, seconds
    spin_alone = 0
    stop = time.perf_counter() + 0.05
    while time.perf_counter() < stop:
        spin_alone += 1
    print(f"kernel {seconds:.3f} s; spinning thread {during / seconds:.0f}/s during it, "
          f"{spin_alone / 0.05:.0f}/s alone")
    assert during / seconds > 0.1 * spin_alone / 0.05


def test_threads_compute_the_same_bits_concurrently():
    cases = [rpa.gen(seed=s, profile="mixed", size=80) for s in range(1, 40)]
    cases = [c for c in cases if rpa.validate(c).valid][:3]
    want = [rpa.kernel(c, threads=1).tobytes() for c in cases]
    got = {}

    def work(i):
        for _ in range(4):
            got.setdefault(i, set()).add(rpa.kernel(cases[i % 3], threads=1).tobytes())
            assert rpa.check(cases[i % 3]).verdict == "agree"

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(got[i] == {want[i % 3]} for i in range(6))


def test_kv_pages_are_not_copied():
    # 512 MiB of pages, of which the case reads two: a copy would show in the peak RSS.
    case = rpa.gen(seed=3, profile="mixed", size=60)
    pages = (512 << 20) // case.kv_pages[0].nbytes
    big = np.ones((pages,) + case.kv_pages.shape[1:], case.kv_pages.dtype)
    big[: case.kv_pages.shape[0]] = case.kv_pages
    big_case = case.replace(kv_pages=big)
    before = rss_bytes()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out = rpa.kernel(big_case)
    ref = rpa.reference(big_case)
    result = rpa.check(big_case, out)
    peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert result.verdict == "agree" and ref.shape == out.shape
    assert out.tobytes() == rpa.kernel(case).tobytes()
    assert big.nbytes >= 500 << 20
    assert peak_after - max(peak_before, before) < 64 << 20, (peak_before, before, peak_after)


def test_ten_thousand_checks_leak_nothing():
    case = rpa.gen(seed=5, profile="decode", size=10)
    out = rpa.kernel(case)
    for _ in range(500):
        rpa.check(case, out)
    before = rss_bytes()
    for _ in range(10_000):
        result = rpa.check(case, out)
    grown = rss_bytes() - before
    print(f"RSS grew {grown} bytes over 10,000 checks")
    assert result.verdict == "agree"
    # A leak of 400 bytes a call would show as 4 MB.
    assert grown < 4 << 20, grown
