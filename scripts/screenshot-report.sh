#!/usr/bin/env bash
# Screenshots an HTML report of accgraph (python -m accgraph.torch --html, or compare --html) in
# headless Chromium, as the README's pictures are made and the browser test checks them.
#
#   scripts/screenshot-report.sh REPORT.html OUT.png [QUERY]
#     QUERY: what the page's URL gets after it, e.g. '?zoom=GPT/h.0', '?q=attn',
#            '?sort=delta' (Note [HTML report] in bindings/python/accgraph/torch/_html.py)
#   ACCGRAPH_SCREENSHOT_SIZE=1400,1000   the window (default 1200,900); the picture is the window
#
# Needs Debian's chromium (scripts/ensure-packages.sh chromium installs it).
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 REPORT.html OUT.png [QUERY]   e.g. $0 diff.html diff.png '?zoom=GPT/h.0'" >&2
  exit 2
fi
report="$1" out="$2" query="${3:-}"
size="${ACCGRAPH_SCREENSHOT_SIZE:-1200,900}"
if [ ! -f "$report" ]; then
  echo "$0: $report: no such file (give the HTML file that --html wrote)" >&2
  exit 2
fi
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
  echo "$0: chromium is not installed: run scripts/ensure-packages.sh chromium" >&2
  exit 2
fi
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
out_abs="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
rm -f "$out_abs"
# --virtual-time-budget: the page's script runs to its end (body[data-ready]) before the shot.
"$browser" --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions \
  --hide-scrollbars --user-data-dir="$profile" --window-size="$size" \
  --virtual-time-budget=10000 --screenshot="$out_abs" \
  "file://$(cd "$(dirname "$report")" && pwd)/$(basename "$report")$query" 2>/dev/null
if [ ! -s "$out_abs" ]; then
  echo "$0: chromium wrote no picture to $out" >&2
  exit 1
fi
echo "wrote $out ($size)"
