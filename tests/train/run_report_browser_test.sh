#!/bin/sh
# report.html in a real browser: a short Fashion-MNIST run writes its report; headless Chromium
# renders it to a PNG (which must be the window's size) and to the DOM it built, which must hold
# every section, the embedded pictures and the charts, with no script error on the console. Then
# cnn_report compares two runs on one page. Skipped (77) without Chromium or the dataset.
# Usage: run_report_browser_test.sh CNN_TRAIN CNN_REPORT SOURCE_DIR
set -u
cnn_train=$1 cnn_report=$2 source_dir=$3
fashion=/usr/share/datasets/fashion-mnist
[ -d "$fashion" ] || { echo "skipped: $fashion is missing (Debian package dataset-fashion-mnist)"; exit 77; }
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "skipped: no Chromium (Debian package chromium) to render the report with"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

for name in first second; do
  "$cnn_train" "$source_dir/configs/fashion_mnist.ini" --set train.max_steps=30 --set log.every_steps=5 \
    --set run.dir="$work/runs" --set run.name=$name --set log.level=quiet --set train.threads=2 >"$work/$name.out" 2>&1 ||
    fail "cnn_train: $(cat "$work/$name.out")"
done
run=$(ls -d "$work"/runs/*_first)
for file in report.html samples.png confusion.png mistakes.png; do
  [ -s "$run/$file" ] || fail "the run folder has no $file"
done

render() {  # render PAGE NAME: a screenshot and the DOM, the console on stderr
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run --window-size=1280,2000 \
    --enable-logging=stderr --v=0 --screenshot="$work/$2.png" "file://$1" >"$work/$2.log" 2>&1 || fail "Chromium failed on $1"
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --dump-dom "file://$1" >"$work/$2.dom" 2>>"$work/$2.log" ||
    fail "Chromium could not dump the DOM of $1"
  if grep -E "Uncaught|CONSOLE\(" "$work/$2.log"; then fail "script errors on the console rendering $1"; fi
  size=$(python3 -c "import struct,sys; d=open(sys.argv[1],'rb').read(24); print('%dx%d' % struct.unpack('>II', d[16:24]))" "$work/$2.png")
  [ "$size" = "1280x2000" ] || fail "the screenshot of $1 is $size, not 1280x2000"
}

render "$run/report.html" single
for element in 'id="summary"' 'id="curves"' 'id="confusion-table"' 'id="per-class-table"' 'id="samples-image"' \
  'id="mistakes-image"' 'id="config"' '<svg' 'polyline'; do
  grep -q "$element" "$work/single.dom" || fail "the rendered page has no $element"
done
"$cnn_report" "$run" "$(ls -d "$work"/runs/*_second)" -o "$work/compare.html" >/dev/null || fail "cnn_report failed"
render "$work/compare.html" compare
grep -q 'id="compare"' "$work/compare.dom" || fail "the comparison page has no comparison section"
[ "$(grep -o 'class="run"' "$work/compare.dom" | wc -l)" -eq 2 ] || fail "the comparison page does not show both runs"
echo "report rendered: $(du -k "$run/report.html" | cut -f1) KiB page, screenshots 1280x2000"
