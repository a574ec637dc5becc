#!/usr/bin/env python3
"""`rpa campaign --report DIR` writes DIR/report.html: a self-contained page that renders.

A short campaign's page and report_fixture's page (a report whose run found things) are
checked three ways: the HTML itself (no script, nothing fetched), the DOM Chromium builds
(--dump-dom: one histogram per q/kv pair of the run with its counts, every rule in the
coverage table with the unreached ones highlighted, the findings with their replay commands
and case files), and a screenshot (decoded here: the bars' colour and the highlight's are on
the page). Chromium missing is a failure, not a skip.

Usage: cli_report_test.py RPA_BINARY REPO_ROOT REPORT_FIXTURE CHROMIUM
"""
import html.parser
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

from cli_harness import check, finish, rpa

FIXTURE, CHROMIUM = sys.argv[3], sys.argv[4]
BAR = (0x33, 0x66, 0xCC)        # rect.bar
UNREACHED = (0xFF, 0xD6, 0xD6)  # td.unreached


def chromium(*args):
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                               "--hide-scrollbars", "--no-first-run", f"--user-data-dir={profile}",
                               *args], capture_output=True, text=True, timeout=120)


def png_pixels(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB or RGBA PNG, non-interlaced."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        kind, cur = line[0], bytearray(line[1:])
        for i in range(stride):
            a = cur[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if kind == 1:
                cur[i] = (cur[i] + a) & 255
            elif kind == 2:
                cur[i] = (cur[i] + b) & 255
            elif kind == 3:
                cur[i] = (cur[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(cur)
        prev = cur
    return width, height, rows, channels


def colour_count(path, rgb):
    _, _, rows, channels = png_pixels(path)
    want = bytes(rgb)
    return sum(sum(1 for x in range(0, len(r), channels) if r[x:x + 3] == want) for r in rows)


class Dom(html.parser.HTMLParser):
    """The elements the checks read, from Chromium's serialized DOM."""

    def __init__(self):
        super().__init__()
        self.svgs, self.bars, self.cells, self.links, self.codes = [], [], [], [], []
        self.rows, self.row = [], None  # each <tr>'s cell texts
        self.table, self.tables = None, {}  # table id -> its rows with cells
        self.in_td, self.in_code, self.text = None, False, ""
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag == "svg":
            self.svgs.append(a.get("data-pair"))
        if tag == "rect" and "bar" in a.get("class", ""):
            self.bars.append((self.svgs[-1], a.get("data-bin"), int(a["data-count"]),
                              float(a["height"])))
        if tag == "table":
            self.table = a.get("id")
        if tag == "tr":
            self.row = []
        if tag == "td":
            self.in_td, self.text = a.get("class", ""), ""
        if tag == "code":
            self.in_code, self.code = True, ""
        if tag == "a":
            self.links.append(a.get("href"))

    def handle_endtag(self, tag):
        if tag == "td" and self.in_td is not None:
            self.cells.append((self.in_td, self.text.strip()))
            if self.row is not None:
                self.row.append(self.text.strip())
            self.in_td = None
        if tag == "tr" and self.row is not None:
            self.rows.append(self.row)
            if self.table and self.row:
                self.tables.setdefault(self.table, []).append(self.row)
            self.row = None
        if tag == "table":
            self.table = None
        if tag == "code":
            self.in_code = False
            self.codes.append(self.code)

    def handle_data(self, data):
        if self.in_td is not None:
            self.text += data
        if self.in_code:
            self.code += data


def dom_of(page):
    p = chromium("--dump-dom", "file://" + page)
    check("chromium --dump-dom ran", p.returncode == 0 and "</html>" in p.stdout,
          f"exit {p.returncode}: {p.stderr[-400:]}")
    d = Dom()
    d.feed(p.stdout)
    return d


def screenshot(page, png):
    p = chromium("--window-size=1200,3000", f"--screenshot={png}", "file://" + page)
    check("chromium --screenshot ran", p.returncode == 0 and os.path.getsize(png) > 10000,
          f"exit {p.returncode}: {p.stderr[-400:]}")


def self_contained(page):
    with open(page) as f:
        text = f.read()
    check(f"{page}: no script", "<script" not in text.lower())
    check(f"{page}: nothing fetched", not re.search(r"https?:|<link|<img|<iframe|url\(|@import",
                                                  text, re.I))


def campaign_page(work):
    out = os.path.join(work, "run")
    junit = os.path.join(work, "campaign.xml")
    p = rpa("campaign", "--seconds", "3", "--seed", "5", "--report", out, "--junit", junit)
    check("campaign exit 0", p.returncode == 0, p.stdout[-500:] + p.stderr[-500:])
    check("campaign names report.html", f"{out}/report.html" in p.stdout, p.stdout[-300:])
    page = os.path.join(out, "report.html")
    summary = json.load(open(os.path.join(out, "summary.json")))
    self_contained(page)
    d = dom_of(page)
    check("no script in the DOM", d.scripts == 0)
    pairs = summary["kernel_checks_per_pair"]
    v3_pairs = summary["v3"]["kernel_checks_per_pair"]
    jax_svgs = [p for p in d.svgs if p not in v3_pairs]
    check("one histogram per q/kv pair", sorted(jax_svgs) == sorted(pairs), f"{d.svgs} {pairs}")
    # And one per v3 dialect and pair (issue 47), its bars summary.json's histogram.
    check("one v3 histogram per dialect and q/kv pair",
          sorted(p for p in d.svgs if p in v3_pairs) == sorted(v3_pairs) and v3_pairs,
          f"{d.svgs} {v3_pairs}")
    for key, n in v3_pairs.items():
        bars = [b for b in d.bars if b[0] == key]
        check(f"{key}: 13 bars counting its checks", len(bars) == 13 and sum(b[2] for b in bars) == n,
              f"{bars} vs {n}")
        check(f"{key}: the bars are summary.json's histogram",
              [b[2] for b in bars] == list(summary["v3"]["tolerance_histogram"][key].values()),
              f"{bars} {summary['v3']['tolerance_histogram'].get(key)}")
    # The v3 cases with named mutations reach rules in both modes of both dialects, each
    # verdict the spec model's (the run has no findings).
    for dialect in ("tpu_inference_v3", "tpu_inference_v3_hd64"):
        check(f"{dialect}: cases with named mutations", summary["v3"]["mutated_cases"].get(dialect, 0) > 0,
              str(summary["v3"]["mutated_cases"]))
        for mode in ("native", "strict"):
            rules = [r for r in summary["v3"][f"{mode}_verdicts"].get(dialect, {}) if r != "valid"]
            check(f"{dialect} {mode}: verdicts other than valid", len(rules) > 0, str(rules))
    html = open(page, encoding="utf-8").read()
    for pair, k in summary["min_detectable_key_weight"].items():
        check(f"{pair}: the heading gives the least dropped key caught",
              f"least dropped key weight caught, median / largest: {k['median']:.2g} / "
              f"{k['largest']:.2g}" in html, pair)
    for pair, n in pairs.items():
        bars = [b for b in d.bars if b[0] == pair]
        check(f"{pair}: 13 bars", len(bars) == 13, str(len(bars)))
        check(f"{pair}: the bars count its checks", sum(b[2] for b in bars) == n,
              f"{sum(b[2] for b in bars)} vs {n}")
        tallest = max(b[2] for b in bars)
        check(f"{pair}: bar heights follow the counts",
              all((b[3] == 0) == (b[2] == 0) for b in bars) and
              all(b[3] == 120 for b in bars if b[2] == tallest), str(bars))
    # Coverage: every cell of a count the run saw 0 of is highlighted, and only those.
    numeric = [(cls, text) for cls, text in d.cells if "n" in cls.split()]
    check("coverage table has counts", len(numeric) > 40, str(len(numeric)))
    check("zero counts are highlighted",
          all(("unreached" in cls) == (text == "0") for cls, text in numeric), str(numeric))
    unreached = sum(1 for cls, _ in numeric if "unreached" in cls)
    # The jax table's rows have 3 cells (rule, strict, jax), the v3 table's 5 (rule, then
    # native and strict of each v3 dialect).
    v3_coverage = d.tables.get("rules-v3-table", [])
    jax_unreached = sum(1 for r in d.rows if len(r) == 3 for c in r[1:] if c == "0")
    v3_unreached = sum(1 for r in v3_coverage for c in r[1:] if c == "0")
    with open(page) as f:
        text = f.read()
    check("the page says how many", f"{jax_unreached} (rule, mode) pairs never reached" in text
          and f"{v3_unreached} (rule, dialect, mode) triples never reached" in text
          and jax_unreached + v3_unreached == unreached, f"{jax_unreached} + {v3_unreached}")
    # The v3 coverage: per dialect and mode as summary.json's v3 verdicts have it.
    v3 = summary["v3"]
    v3_rows = {r[0]: r[1:] for r in v3_coverage}
    check("v3 coverage: valid and the v3 rules", "valid" in v3_rows and len(v3_rows) > 40
          and "decode_q_len_not_one" in v3_rows, str(sorted(v3_rows))[:300])
    columns = [(dialect, mode) for dialect in ("tpu_inference_v3", "tpu_inference_v3_hd64")
               for mode in ("native", "strict")]
    for rule, cells in v3_rows.items():
        for (dialect, mode), cell in zip(columns, cells):
            want = str(v3[f"{mode}_verdicts"].get(dialect, {}).get(rule, 0))
            check(f"v3 coverage {rule} {dialect} {mode}",
                  cell == want or (cell == "\u2014" and want == "0"), f"{cell!r} vs {want}")
    check("v3 coverage: the dialects' own rules only", v3_rows["sink_rank"][0] == "\u2014"
          and v3_rows["kv_cache_shape"][2] == "\u2014" and v3_rows["dtype_pair"][0] == "\u2014"
          and v3_rows["dtype_pair"][1] != "\u2014", str(v3_rows.get("sink_rank")))
    v3_kernel = {r[0]: r[1:] for r in d.tables.get("v3-kernel", [])}
    check("v3 kernel table: one row per dialect and dtype pair with its cases",
          {k: int(v[0]) for k, v in v3_kernel.items()} == v3["kernel_checks_per_pair"],
          str(v3_kernel)[:300])
    # The v3 checks' power, as the jax histograms' headings give it: the least dropped key
    # weight caught per dialect and dtype pair (median / largest), and the checks an all-zero
    # output would pass.
    weights = v3.get("min_detectable_key_weight", {})
    check("v3 kernel table: the least dropped key weight caught per dialect and dtype pair",
          weights and set(weights) <= set(v3_kernel) and all(
              v3_kernel[k][3] == f"{w['median']:.2g} / {w['largest']:.2g}"
              for k, w in weights.items()) and all(
              v[3] == "-" for k, v in v3_kernel.items() if k not in weights),
          f"{v3_kernel} {weights}"[:600])
    check("the page says how many v3 checks could not reject zero",
          f"{v3['could_not_reject_zero']} v3 kernel-semantics checks could not have rejected "
          "an all-zero output" in html, str(v3.get("could_not_reject_zero")))
    past = v3.get("past_float32", {})
    check("the page says how many (row, head) pairs were left out past float32's range",
          f"{past.get('checks')} kernel checks left out {past.get('pairs')} (row, head) pairs "
          "where a float32 kernel&apos;s logits may leave float32&apos;s range (finding 28)"
          in html, str(past))
    # Each coverage row: the rule's count in each mode as summary.json has it (0 if absent),
    # or a dash where the rule is not one of that mode's.
    coverage = {r[0]: r[1:] for r in d.rows if len(r) == 3}
    check("coverage: valid and every rule the run reached, in both modes",
          set(summary["strict_verdicts"]) | set(summary["jax_verdicts"]) <= set(coverage) and
          len(coverage) > 40, str(sorted(coverage))[:300])
    for rule, (strict, jax) in coverage.items():
        for mode, cell in (("strict", strict), ("jax", jax)):
            want = str(summary[f"{mode}_verdicts"].get(rule, 0))
            check(f"coverage {rule} {mode}", cell == want or (cell == "\u2014" and want == "0"),
                  f"{cell!r} vs {want}")
    png = os.path.join(work, "run.png")
    screenshot(page, png)
    check("the bars rendered", colour_count(png, BAR) > 2000, str(colour_count(png, BAR)))
    if unreached:  # (the fixture's page, below, always has unreached rules)
        check("the highlight rendered", colour_count(png, UNREACHED) > 200)
    tree = ET.parse(junit).getroot()
    suite = tree.find("testsuite")
    check("campaign junit: check classes, no failures",
          suite is not None and int(suite.get("tests")) >= 7 and suite.get("failures") == "0",
          ET.tostring(tree)[:300])


def findings_page(work):
    out = os.path.join(work, "fixture")
    p = subprocess.run([FIXTURE, out], capture_output=True, text=True)
    check("report_fixture ran", p.returncode == 0, p.stderr)
    page = os.path.join(out, "report.html")
    self_contained(page)
    d = dom_of(page)
    check("findings link their case files",
          d.links == ["finding-1.npz", "finding-2.bin", "finding-3.npz"], str(d.links))
    for link in d.links:
        check(f"{link} written next to the page", os.path.getsize(os.path.join(out, link)) > 0)
    replays = [c for c in d.codes if c.startswith(("rpa ", "build/"))]
    check("each finding has its replay command", len(replays) == 4, str(d.codes))
    check("the case finding replays the written file",
          any(c == f"rpa check {out}/finding-1.npz" for c in replays), str(replays))
    q = rpa("check", os.path.join(out, "finding-1.npz"))
    check("the written case is a valid case rpa check reads", q.returncode == 0,
          q.stdout + q.stderr)
    check("the v3 finding replays the written file",
          any(c == f"rpa check {out}/finding-3.npz" for c in replays), str(replays))
    q = rpa("check", os.path.join(out, "finding-3.npz"), "--json")
    check("the written v3 case is a tpu_inference_v3 case rpa check reads",
          q.returncode == 0 and json.loads(q.stdout).get("dialect") == "tpu_inference_v3",
          q.stdout + q.stderr)
    check("the raw finding replays through fuzz_raw_inputs",
          any(c.endswith(f"fuzz_raw_inputs {out}/finding-2.bin") for c in replays), str(replays))
    png = os.path.join(work, "fixture.png")
    screenshot(page, png)
    check("the fixture's bar rendered (red past the tolerance)",
          colour_count(png, (0xCC, 0x33, 0x33)) > 200)
    check("the fixture's v3 row gives the least dropped key weight caught (median / largest)",
          d.tables.get("v3-kernel") == [["tpu_inference_v3 float32/float32", "1", "2", "1e-06",
                                         "0.0031 / 0.02"]], str(d.tables.get("v3-kernel")))
    check("the fixture's page: 1 v3 check could not reject zero", "1 v3 kernel-semantics checks "
          "could not have rejected an all-zero output" in open(page, encoding="utf-8").read())
    check("the fixture's page: 1 v3 check left 6 pairs out past float32's range",
          "1 kernel checks left out 6 (row, head) pairs where a float32 kernel&apos;s logits may "
          "leave float32&apos;s range (finding 28)." in open(page, encoding="utf-8").read())
    unreached = sum(1 for cls, _ in d.cells if "unreached" in cls.split())
    check("the fixture's page has unreached rules", unreached > 40, str(unreached))
    check("the highlight rendered", colour_count(png, UNREACHED) > 200 * 40,
          str(colour_count(png, UNREACHED)))


def main():
    check("chromium exists", os.access(CHROMIUM, os.X_OK), CHROMIUM)
    with tempfile.TemporaryDirectory() as work:
        campaign_page(work)
        findings_page(work)
    return finish("cli_report")


if __name__ == "__main__":
    sys.exit(main())
