#!/usr/bin/env bash
# Fuzzes the core with cargo-fuzz (libFuzzer): framer, validator (raw and
# structure-aware), command encoder, large-value lifting and the host
# channel's host side (crates/bridge-host-channel), each for a bounded time.
#
#   bash scripts/fuzz.sh [seconds per target, default 60] [target ...]
#
# Seeds come from real traffic recorded from the agentlane backend
# (tests/fixtures/recorded) and the protocol's worked examples. Runs on the
# stable toolchain (`-s none`: coverage-guided, no sanitizer). Installs
# cargo-fuzz if it is missing. Prints one summary line per target:
#   fuzz <target>: <runs> runs, cov <n>, ft <n>, corpus <n>, <ok|CRASH>
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(framer validator validator_structured command lift host_channel)

if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --quiet
fi

fuzz=crates/bridge-core/fuzz
corpus="$fuzz/corpus"
# Seed corpora (regenerated each time; libFuzzer adds what it finds).
mkdir -p "$corpus"/{framer,validator,validator_structured,command,lift,host_channel}
python3 - "$corpus" <<'PY'
import glob, hashlib, json, os, sys
corpus = sys.argv[1]
def put(target, data):
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(corpus, target, name), "wb") as f:
        f.write(data)
for path in glob.glob("tests/fixtures/recorded/*.ndjson"):
    raw = open(path, "rb").read()
    put("framer", raw[:65536])
    for line in raw.split(b"\n"):
        if line and len(line) < 20000:
            put("validator", line)
            put("lift", line)
examples = json.load(open("tests/fixtures/protocol-examples.json", encoding="utf-8"))
for example in examples["valid"] + examples["invalid"]:
    put("validator", example["line"].encode())
for line in examples["encodedCommands"]:
    put("command", line.encode())
PY

cargo fuzz build --fuzz-dir "$fuzz" -s none -O >/dev/null
status=0
for target in "${targets[@]}"; do
  log=$(mktemp)
  if cargo fuzz run --fuzz-dir "$fuzz" -s none -O "$target" "$corpus/$target" -- \
      -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1; then
    verdict=ok
  else
    verdict=CRASH
    status=1
    grep -E "panicked|ERROR|Test unit written" "$log" | head -5 || true
  fi
  runs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$" | tail -1)
  line=$(grep -E "^#[0-9]+" "$log" | tail -1)
  cov=$(echo "$line" | grep -oE "cov: [0-9]+" | grep -oE "[0-9]+" || true)
  ft=$(echo "$line" | grep -oE "ft: [0-9]+" | grep -oE "[0-9]+" || true)
  size=$(ls "$corpus/$target" | wc -l)
  echo "fuzz $target: ${runs:-0} runs, cov ${cov:-?}, ft ${ft:-?}, corpus $size, $verdict"
  rm -f "$log"
done
exit $status
